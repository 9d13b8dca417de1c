package action

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sethvargo/go-githubactions"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

// Real payloads from GitHub's published examples (npm @octokit/webhooks-examples), copied into the
// repository's testdata by scripts/gen-webhook-fixtures.
const (
	pushEvent = "../../testdata/webhooks/push.json"
	syncEvent = "../../testdata/webhooks/pull_request.synchronize.json"
)

// world is one store that several workflow runs share: opened by each step (store input), or
// behind the App's API (api-url).
type world struct {
	t     *testing.T
	dir   string
	store string
	// api is set when the steps go through the App's API: the variables each job gets, and the
	// Authority behind the App.
	api  map[string]string
	auth *authority.Authority
}

// status reads an environment's state from the world's store.
func (w *world) status(env string) *authority.Env {
	w.t.Helper()
	auth := w.auth
	if auth == nil {
		st, closeFn, err := openBolt(context.Background(), w.store)
		if err != nil {
			w.t.Fatal(err)
		}
		defer closeFn()
		auth = authority.New(st)
	}
	e, err := auth.Status(context.Background(), env)
	if err != nil {
		w.t.Fatal(err)
	}
	return e
}

func newWorld(t *testing.T) *world {
	t.Helper()
	dir := t.TempDir()
	return &world{t: t, dir: dir, store: "bolt://" + filepath.Join(dir, "latestwins.db")}
}

func openBolt(_ context.Context, raw string) (authority.Store, func() error, error) {
	st, err := bolt.Open(strings.TrimPrefix(raw, "bolt://"))
	if err != nil {
		return nil, nil, err
	}
	return st, st.Close, nil
}

// job is one job of one workflow run: its variables and its RUNNER_TEMP, shared by its steps.
type job struct {
	w     *world
	name  string
	vars  map[string]string
	steps int
}

// job starts a job of run runID triggered by the event in eventFile (a copy is edited by edit).
func (w *world) job(name string, runID string, eventName, eventFile string, edit func(map[string]any)) *job {
	w.t.Helper()
	dir := filepath.Join(w.dir, name)
	if err := os.MkdirAll(filepath.Join(dir, "temp"), 0o755); err != nil {
		w.t.Fatal(err)
	}
	raw, err := os.ReadFile(eventFile)
	if err != nil {
		w.t.Fatal(err)
	}
	var payload map[string]any
	if err := json.Unmarshal(raw, &payload); err != nil {
		w.t.Fatal(err)
	}
	if edit != nil {
		edit(payload)
	}
	b, _ := json.Marshal(payload)
	event := filepath.Join(dir, "event.json")
	if err := os.WriteFile(event, b, 0o644); err != nil {
		w.t.Fatal(err)
	}
	j := &job{w: w, name: name, vars: map[string]string{
		"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "Codertocat/Hello-World", "GITHUB_RUN_ID": runID,
		"GITHUB_RUN_ATTEMPT": "1", "GITHUB_JOB": "deploy", "GITHUB_ACTOR": "Codertocat", "GITHUB_SHA": "ffffffffffffffffffffffffffffffffffffffff",
		"GITHUB_REF": "refs/heads/other", "GITHUB_EVENT_NAME": eventName, "GITHUB_EVENT_PATH": event,
		"GITHUB_SERVER_URL": "https://github.com", "GITHUB_API_URL": "https://api.github.com",
		"RUNNER_TEMP": filepath.Join(dir, "temp"), "INPUT_STORE": w.store,
	}}
	if w.api != nil {
		delete(j.vars, "INPUT_STORE")
		for k, v := range w.api {
			j.vars[k] = v
		}
	}
	return j
}

// stepResult is what one step of the Action left behind.
type stepResult struct {
	err     error
	outputs map[string]string
	log     string // the workflow commands and the command's output
	summary string
}

// step runs the Action once with the inputs given (name: value, as in a workflow's with:).
func (j *job) step(inputs map[string]string, deps ...Deps) stepResult {
	j.w.t.Helper()
	j.steps++
	stepDir := filepath.Join(j.w.dir, j.name, fmt.Sprintf("step%d", j.steps))
	if err := os.MkdirAll(stepDir, 0o755); err != nil {
		j.w.t.Fatal(err)
	}
	vars := map[string]string{}
	for k, v := range j.vars {
		vars[k] = v
	}
	vars["GITHUB_OUTPUT"] = filepath.Join(stepDir, "output")
	vars["GITHUB_STEP_SUMMARY"] = filepath.Join(stepDir, "summary")
	for k, v := range inputs {
		vars["INPUT_"+strings.ToUpper(strings.ReplaceAll(k, " ", "_"))] = v
	}
	log := &syncbuf.Buffer{}
	a := githubactions.New(githubactions.WithGetenv(func(k string) string { return vars[k] }), githubactions.WithWriter(log))
	d := Deps{}
	if len(deps) > 0 {
		d = deps[0]
	}
	if d.OpenStore == nil {
		d.OpenStore = openBolt
	}
	d.Stdout, d.Stderr, d.Stdin = log, log, strings.NewReader("")
	err := Run(context.Background(), a, d)
	out, _ := os.ReadFile(vars["GITHUB_OUTPUT"])
	sum, _ := os.ReadFile(vars["GITHUB_STEP_SUMMARY"])
	return stepResult{err: err, outputs: parseOutputs(j.w.t, string(out)), log: log.String(), summary: string(sum)}
}

// parseOutputs reads a GITHUB_OUTPUT file: name<<DELIMITER, the value, DELIMITER.
func parseOutputs(t *testing.T, s string) map[string]string {
	t.Helper()
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		name, delim, ok := strings.Cut(sc.Text(), "<<")
		if !ok {
			t.Fatalf("malformed output line %q", sc.Text())
		}
		var val []string
		for sc.Scan() && sc.Text() != delim {
			val = append(val, sc.Text())
		}
		out[name] = strings.Join(val, "\n")
	}
	return out
}

func sha(c byte) string { return strings.Repeat(string(c), 40) }

// pushOf edits the push example into a push of after on top of before.
func pushOf(before, after string) func(map[string]any) {
	return func(p map[string]any) { p["before"], p["after"] = before, after }
}

func outputsOf(gen, authorized, by, token, scopes, outcome, sha string) map[string]string {
	return map[string]string{"generation": gen, "authorized": authorized, "superseded-by": by, "token": token, "scopes": scopes, "outcome": outcome, "sha": sha}
}

// TestRaceThroughTheActionVerbs is the forced A -> B -> C race: A and B claim and build, C is pushed
// later and deploys; then A and B reach their deploy gate, stop cleanly (exit 0, authorized=false,
// a notice, no error) and deploy nothing. It runs once on a store the steps open and once through
// the App's API (api-url), and both give the same outputs step by step.
func TestRaceThroughTheActionVerbs(t *testing.T) {
	t.Parallel()
	paths := []struct {
		name  string
		world func(t *testing.T) *world
	}{
		{"store", newWorld},
		{"api-url", newAPIWorld},
	}
	outputs := make([][]map[string]string, len(paths))
	for i, p := range paths {
		t.Run(p.name, func(t *testing.T) { outputs[i] = race(t, p.world(t)) })
	}
	if diff := cmp.Diff(outputs[0], outputs[1]); diff != "" {
		t.Errorf("outputs through the store and through api-url differ (-store +api-url):\n%s", diff)
	}
}

// race runs the A -> B -> C race in w and returns every step's outputs.
func race(t *testing.T, w *world) []map[string]string {
	var all []map[string]string
	a := w.job("A", "101", "push", pushEvent, pushOf(sha('0'), sha('a')))
	b := w.job("B", "102", "push", pushEvent, pushOf(sha('a'), sha('b')))
	c := w.job("C", "103", "push", pushEvent, pushOf(sha('b'), sha('c')))
	claim := map[string]string{"command": "claim", "environment": "staging", "scopes": "api"}

	for i, j := range []*job{a, b} {
		r := j.step(claim)
		all = append(all, r.outputs)
		if r.err != nil {
			t.Fatalf("%s claim: %v\n%s", j.name, r.err, r.log)
		}
		gen := string(rune('1' + i))
		if diff := cmp.Diff(outputsOf(gen, "true", "", "", `["api"]`, "claimed", sha(byte('a'+i))), r.outputs); diff != "" {
			t.Errorf("%s claim outputs (-want +got):\n%s", j.name, diff)
		}
		// Each enters its build phase while it still owns the scope.
		r = j.step(map[string]string{"command": "gate", "environment": "staging", "phase": "build"})
		all = append(all, r.outputs)
		if r.err != nil || r.outputs["authorized"] != "true" {
			t.Fatalf("%s build gate: %v %v\n%s", j.name, r.err, r.outputs, r.log)
		}
	}
	marker := filepath.Join(w.dir, "deployed")
	r := c.step(map[string]string{"command": "run", "environment": "staging", "scopes": "api",
		"run": `echo "$LATESTWINS_GENERATION $LATESTWINS_FENCING_TOKEN $LATESTWINS_SCOPES" >> ` + marker})
	all = append(all, r.outputs)
	if r.err != nil {
		t.Fatalf("C run: %v\n%s", r.err, r.log)
	}
	if diff := cmp.Diff(outputsOf("3", "true", "", "1", `["api"]`, "deployed", sha('c')), r.outputs); diff != "" {
		t.Errorf("C run outputs (-want +got):\n%s", diff)
	}
	if !strings.Contains(r.summary, "Generation 3 deployed api.") || !strings.Contains(r.summary, "| api | `ccccccc` | 3 |") {
		t.Errorf("C's job summary does not show the store's state:\n%s", r.summary)
	}

	for _, j := range []*job{a, b} {
		r := j.step(map[string]string{"command": "run", "environment": "staging", "run": "echo stale >> " + marker})
		all = append(all, r.outputs)
		if r.err != nil {
			t.Fatalf("%s: a superseded pass with on-superseded skip must end the step cleanly, got %v\n%s", j.name, r.err, r.log)
		}
		if r.outputs["authorized"] != "false" || r.outputs["outcome"] != "superseded" || r.outputs["superseded-by"] == "" {
			t.Errorf("%s outputs: %v", j.name, r.outputs)
		}
		if !strings.Contains(r.log, "::notice::Superseded by generation") || strings.Contains(r.log, "::error") {
			t.Errorf("%s: want a notice and no error annotation:\n%s", j.name, r.log)
		}
	}
	got, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("3 1 api\n", string(got)); diff != "" {
		t.Errorf("deploys (-want +got):\n%s", diff)
	}
	e := w.status("staging")
	if live := e.Scopes["api"].Live; live == nil || live.Sha != sha('c') || live.Generation != 3 || live.Run != "https://github.com/Codertocat/Hello-World/actions/runs/103" {
		t.Errorf("live: %+v", live)
	}
	if e.Observed != 3 || e.Desired != 3 {
		t.Errorf("observed/desired %d/%d, want 3/3", e.Observed, e.Desired)
	}
	return all
}

// TestEventSetsTheIntent: the commit, ref and parent come from the real event payloads.
func TestEventSetsTheIntent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, event, file string
		inputs            map[string]string
		want              authority.Ref
	}{
		{"push", "push", pushEvent, nil, authority.Ref{Sha: "6113728f27ae82c7b1a177c8d03f9e96e0adf246", Ref: "refs/heads/master",
			Order:  authority.Order{PushedAt: time.Unix(1557933657, 0).UTC(), CommittedAt: time.Date(2019, 5, 15, 15, 19, 25, 0, time.UTC)},
			Source: "github-actions push", Actor: "Codertocat", IntentID: "gha:Codertocat/Hello-World/7", Generation: 1}},
		{"pull request synchronize", "pull_request", syncEvent, nil, authority.Ref{Sha: "ec26c3e57ca3a959ca5aad62de7213c562f8c821",
			Ref: "refs/pull/2/head", Before: "f95f852bd8fca8fcc58a9a2d6c842781e32a215e", Source: "github-actions pull_request #2",
			Actor: "Codertocat", IntentID: "gha:Codertocat/Hello-World/7", Generation: 1}},
		{"inputs win", "push", pushEvent, map[string]string{"sha": sha('d'), "ref": "refs/heads/release"}, authority.Ref{Sha: sha('d'),
			Ref: "refs/heads/release", Source: "github-actions push", Actor: "Codertocat", IntentID: "gha:Codertocat/Hello-World/7", Generation: 1}},
		{"an uppercase sha is the same commit", "push", pushEvent, map[string]string{"sha": strings.ToUpper(sha('d'))}, authority.Ref{Sha: sha('d'),
			Ref: "refs/heads/master", Source: "github-actions push", Actor: "Codertocat", IntentID: "gha:Codertocat/Hello-World/7", Generation: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			in := map[string]string{"command": "claim", "environment": "preview/pr-2", "scopes": "api"}
			for k, v := range tt.inputs {
				in[k] = v
			}
			if r := w.job("j", "7", tt.event, tt.file, nil).step(in); r.err != nil {
				t.Fatalf("claim: %v\n%s", r.err, r.log)
			}
			st, closeFn, _ := openBolt(context.Background(), w.store)
			defer closeFn()
			e, err := authority.New(st).Status(context.Background(), "preview/pr-2")
			if err != nil {
				t.Fatal(err)
			}
			got := *e.Scopes["api"].Mailbox
			got.At = tt.want.At
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("mailbox (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStepsOfOneJobShareThePass: claim, gate and complete in one job need no generation threaded by hand.
func TestStepsOfOneJobShareThePass(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j := w.job("j", "9", "push", pushEvent, nil)
	base := map[string]string{"environment": "prod", "scopes": "api,web"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	if r := j.step(with("command", "claim")); r.err != nil {
		t.Fatalf("claim: %v\n%s", r.err, r.log)
	}
	r := j.step(map[string]string{"command": "gate", "environment": "prod"})
	if r.err != nil {
		t.Fatalf("gate: %v\n%s", r.err, r.log)
	}
	if diff := cmp.Diff(outputsOf("1", "true", "", `{"api":1,"web":1}`, `["api","web"]`, "authorized", "6113728f27ae82c7b1a177c8d03f9e96e0adf246"), r.outputs); diff != "" {
		t.Errorf("gate outputs (-want +got):\n%s", diff)
	}
	var scopes []string
	if err := json.Unmarshal([]byte(r.outputs["scopes"]), &scopes); err != nil {
		t.Errorf("scopes output is not a JSON array for fromJSON: %v", err)
	}
	r = j.step(map[string]string{"command": "complete", "environment": "prod"})
	if r.err != nil {
		t.Fatalf("complete: %v\n%s", r.err, r.log)
	}
	if r.outputs["outcome"] != "deployed" || !strings.Contains(r.summary, "**1/1** settled") {
		t.Errorf("complete: outputs %v, summary:\n%s", r.outputs, r.summary)
	}
	r = w.job("k", "9", "push", pushEvent, nil).step(with("command", "status"))
	if r.err != nil || !strings.Contains(r.summary, "**1/1** settled") {
		t.Errorf("status: %v\n%s", r.err, r.summary)
	}
	// A re-run of the deployed run is the same intent: nothing pending, nothing run, exit 0.
	rerun := w.job("rerun", "9", "push", pushEvent, nil)
	rerun.vars["GITHUB_RUN_ATTEMPT"] = "2"
	marker := filepath.Join(w.dir, "ran")
	r = rerun.step(with("run", "touch "+marker))
	if r.err != nil {
		t.Fatalf("re-run: %v\n%s", r.err, r.log)
	}
	if diff := cmp.Diff(outputsOf("1", "false", "", "", "[]", "idle", ""), r.outputs); diff != "" {
		t.Errorf("re-run outputs (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the re-run ran the command although its work was done")
	}
}

// TestRunAttemptDrivesMaxAttempts: a failing command is retryable (warning, no error annotation)
// until GitHub's run attempt reaches max-attempts; then one terminal error is recorded.
func TestRunAttemptDrivesMaxAttempts(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	in := map[string]string{"environment": "staging", "scopes": "api", "run": "echo building; exit 1", "max-attempts": "2"}
	first := w.job("one", "5", "push", pushEvent, nil)
	r := first.step(in)
	if !errors.Is(r.err, ErrRetry) || r.outputs["outcome"] != "retry" || strings.Contains(r.log, "::error") || !strings.Contains(r.log, "::warning::") {
		t.Fatalf("attempt 1: err %v outputs %v\n%s", r.err, r.outputs, r.log)
	}
	second := w.job("two", "5", "push", pushEvent, nil)
	second.vars["GITHUB_RUN_ATTEMPT"] = "2"
	r = second.step(in)
	if !errors.Is(r.err, ErrFailed) || r.outputs["outcome"] != "failed" || !strings.Contains(r.log, "::error::") {
		t.Fatalf("attempt 2: err %v outputs %v\n%s", r.err, r.outputs, r.log)
	}
	if r.outputs["generation"] != "1" {
		t.Errorf("a re-run is the same intent: generation %q, want 1", r.outputs["generation"])
	}
	if !strings.Contains(r.summary, "**error** (generation 1)") {
		t.Errorf("summary does not show the terminal error:\n%s", r.summary)
	}
}

type fakeCanceler struct {
	calls []string
	err   error
}

func (f *fakeCanceler) CancelRun(_ context.Context, owner, repo string, runID int64) error {
	f.calls = append(f.calls, fmt.Sprintf("%s/%s#%d", owner, repo, runID))
	return f.err
}

// TestOnSuperseded: skip ends cleanly, fail exits with the superseded category, cancel asks GitHub
// to cancel this run and then ends cleanly.
func TestOnSuperseded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		policy    string
		cancelErr error
		wantErr   error
		wantCalls []string
	}{
		{"skip", nil, nil, nil},
		{"fail", nil, authority.ErrSuperseded, nil},
		{"cancel", nil, nil, []string{"Codertocat/Hello-World#201"}},
		{"cancel", errors.New("403 Resource not accessible by integration"), errors.New("any"), []string{"Codertocat/Hello-World#201"}},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			old := w.job("old", "201", "push", pushEvent, pushOf(sha('0'), sha('a')))
			if r := old.step(map[string]string{"command": "claim", "environment": "e", "scopes": "api"}); r.err != nil {
				t.Fatal(r.err)
			}
			if r := w.job("new", "202", "push", pushEvent, pushOf(sha('a'), sha('b'))).step(map[string]string{"command": "claim", "environment": "e", "scopes": "api"}); r.err != nil {
				t.Fatal(r.err)
			}
			fc := &fakeCanceler{err: tt.cancelErr}
			r := old.step(map[string]string{"command": "gate", "environment": "e", "on-superseded": tt.policy}, Deps{Canceler: fc})
			switch {
			case tt.wantErr == nil && r.err != nil:
				t.Errorf("err = %v, want none", r.err)
			case tt.wantErr != nil && r.err == nil:
				t.Errorf("no error, want %v", tt.wantErr)
			case tt.wantErr == authority.ErrSuperseded && !errors.Is(r.err, authority.ErrSuperseded):
				t.Errorf("err = %v, want superseded", r.err)
			}
			if diff := cmp.Diff(tt.wantCalls, fc.calls); diff != "" {
				t.Errorf("cancel calls (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(outputsOf("1", "false", "2", "", `["api"]`, "superseded", sha('a')), r.outputs); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLockedWarnsAndGivesUp: a held lease and no time to wait: locked, with a warning naming the holder.
func TestLockedWarnsAndGivesUp(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	holder := w.job("holder", "301", "push", pushEvent, nil)
	if r := holder.step(map[string]string{"command": "gate", "environment": "e", "scopes": "api"}); r.err != nil {
		t.Fatal(r.err, r.log)
	}
	// The same run's other job (another job name) wants the lease the first job holds.
	other := w.job("other", "301", "push", pushEvent, nil)
	other.vars["GITHUB_JOB"] = "deploy-again"
	r := other.step(map[string]string{"command": "gate", "environment": "e", "scopes": "api", "wait": "0s"})
	if !errors.Is(r.err, authority.ErrLeaseHeld) || r.outputs["outcome"] != "locked" {
		t.Fatalf("err %v outputs %v\n%s", r.err, r.outputs, r.log)
	}
	if !strings.Contains(r.log, "::warning::gave up waiting") || !strings.Contains(r.log, "gha:Codertocat/Hello-World/301/1/deploy") || strings.Contains(r.log, "::error") {
		t.Errorf("want one warning naming the holder and no error:\n%s", r.log)
	}
}

// TestBadInputSaysWhatToFix: every bad input is terminal (ErrInvalidInput), with an error
// annotation naming the input.
func TestBadInputSaysWhatToFix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		inputs map[string]string
		want   string
	}{
		{"no environment", map[string]string{"scopes": "api", "run": "true"}, "set the environment input"},
		{"bad environment", map[string]string{"environment": "-x", "run": "true"}, "environment"},
		{"unknown command", map[string]string{"environment": "e", "command": "deploy"}, "use claim, gate, run, complete or status"},
		{"unknown policy", map[string]string{"environment": "e", "run": "true", "on-superseded": "ignore"}, "use skip, fail or cancel"},
		{"run without run", map[string]string{"environment": "e", "scopes": "api"}, "give the command to run"},
		{"bad lease-ttl", map[string]string{"environment": "e", "run": "true", "lease-ttl": "soon"}, "give a duration"},
		{"short lease-ttl", map[string]string{"environment": "e", "run": "true", "lease-ttl": "1s"}, "from 5s to 24h0m0s"},
		{"bad max-attempts", map[string]string{"environment": "e", "run": "true", "max-attempts": "0"}, "1 or more"},
		{"bad comment", map[string]string{"environment": "e", "run": "true", "comment": "maybe"}, "use true or false"},
		{"api-url and store", map[string]string{"environment": "e", "run": "true", "api-url": "https://latestwins.example"}, "not both"},
		{"api-url without id-token", map[string]string{"environment": "e", "run": "true", "store": "", "api-url": "https://latestwins.example"}, "permissions: id-token: write"},
		{"no store outside a workflow", map[string]string{"environment": "e", "run": "true", "store": ""}, "set the store input: github://OWNER/REPO"},
		{"claim without scopes", map[string]string{"environment": "e", "command": "claim"}, "set the scopes input"},
		{"complete without a pass", map[string]string{"environment": "e", "command": "complete"}, "run the Action with command: claim or gate earlier"},
		{"abbreviated sha", map[string]string{"environment": "e", "scopes": "api", "run": "true", "sha": "abc1234"},
			`invalid sha "abc1234": give the full commit sha, 40 hex digits (64 in a SHA-256 repository), e.g. from ` + "`git rev-parse HEAD`" + ` or ${{ github.sha }}, or leave it empty`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			j := w.job("j", "1", "push", pushEvent, nil)
			if v, ok := tt.inputs["store"]; ok && v == "" {
				delete(j.vars, "INPUT_STORE")
				if tt.inputs["api-url"] == "" {
					delete(j.vars, "GITHUB_REPOSITORY") // else the workflow's repository is the store
				}
			}
			r := j.step(tt.inputs)
			if !errors.Is(r.err, authority.ErrInvalidInput) {
				t.Fatalf("err = %v, want invalid input", r.err)
			}
			if !strings.Contains(r.err.Error(), tt.want) || !strings.Contains(r.log, "::error::") {
				t.Errorf("err %q should say %q, with an error annotation:\n%s", r.err, tt.want, r.log)
			}
			if r.outputs["outcome"] != "invalid" {
				t.Errorf("outcome %q, want invalid", r.outputs["outcome"])
			}
		})
	}
}

// TestDefaultStoreIsTheRepository: given neither store nor api-url, the Action keeps the state in
// the workflow's own repository (github://GITHUB_REPOSITORY), says so in the job summary with the
// permission it needs, and records the workflow as the intent's origin, for a sweep to dispatch it
// again.
func TestDefaultStoreIsTheRepository(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j := w.job("j", "7", "push", pushEvent, pushOf(sha('a'), sha('b')))
	delete(j.vars, "INPUT_STORE")
	workflow := "Codertocat/Hello-World/.github/workflows/deploy.yml@refs/heads/main"
	j.vars["GITHUB_WORKFLOW_REF"] = workflow
	var opened []string
	open := func(ctx context.Context, raw string) (authority.Store, func() error, error) {
		opened = append(opened, raw)
		return openBolt(ctx, w.store)
	}
	r := j.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "api"}, Deps{OpenStore: open})
	if r.err != nil {
		t.Fatalf("claim: %v\n%s", r.err, r.log)
	}
	if len(opened) != 1 || opened[0] != "github://Codertocat/Hello-World" {
		t.Fatalf("opened %v, want github://Codertocat/Hello-World", opened)
	}
	line := "State: `github://Codertocat/Hello-World`, the refs under `refs/latestwins/` of this repository (no store or api-url given). The job needs `permissions: contents: write`."
	if !strings.Contains(r.summary, line) {
		t.Errorf("summary does not say which store and what permission (%q):\n%s", line, r.summary)
	}
	if !strings.Contains(r.summary, "### latestwins: staging") {
		t.Errorf("summary lost the environment's state:\n%s", r.summary)
	}
	m := w.status("staging").Scopes["api"].Mailbox
	if m == nil || m.Origin != OriginPrefix+workflow {
		t.Fatalf("pending intent %+v; want origin %s", m, OriginPrefix+workflow)
	}

	// A workflow ref too long to record leaves the origin out and still accepts the intent.
	j2 := w.job("j2", "8", "push", pushEvent, pushOf(sha('b'), sha('c')))
	delete(j2.vars, "INPUT_STORE")
	j2.vars["GITHUB_WORKFLOW_REF"] = "Codertocat/Hello-World/.github/workflows/" + strings.Repeat("d", authority.MaxFieldLen) + ".yml@refs/heads/main"
	if r := j2.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "api"}, Deps{OpenStore: open}); r.err != nil {
		t.Fatalf("claim with a long workflow ref: %v\n%s", r.err, r.log)
	}
	if m := w.status("staging").Scopes["api"].Mailbox; m == nil || m.Origin != "" || m.Sha != sha('c') {
		t.Fatalf("pending intent %+v; want %s without an origin", m, sha('c'))
	}
}

// deniedStore is a store whose server refuses every write, as GitHub refuses a token without
// contents: write.
type deniedStore struct{ authority.Store }

type deniedError struct{}

func (deniedError) Error() string {
	return "the token in GITHUB_TOKEN may not write to Codertocat/Hello-World: give the job permissions: contents: write"
}
func (deniedError) AccessDenied() bool { return true }

func (deniedStore) Put(context.Context, *authority.Doc) (int64, error) {
	return 0, fmt.Errorf("put: not written: %w", deniedError{})
}

// TestAccessDeniedIsAnError: a store that refuses the job's token fails the step with an error
// annotation that says what to change, not a warning that calls it retryable.
func TestAccessDeniedIsAnError(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j := w.job("j", "7", "push", pushEvent, pushOf(sha('a'), sha('b')))
	delete(j.vars, "INPUT_STORE")
	open := func(ctx context.Context, raw string) (authority.Store, func() error, error) {
		st, closeFn, err := openBolt(ctx, w.store)
		return deniedStore{st}, closeFn, err
	}
	r := j.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "api"}, Deps{OpenStore: open})
	if r.err == nil || r.outputs["outcome"] != "error" {
		t.Fatalf("claim on a store that refuses the token: %v, outcome %q; want an error", r.err, r.outputs["outcome"])
	}
	if !strings.Contains(r.log, "::error::") || !strings.Contains(r.log, "contents: write") || strings.Contains(r.log, "retryable") {
		t.Errorf("want an error annotation naming contents: write, not a retryable warning:\n%s", r.log)
	}
}
