package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/gitref"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// run is one act run of the race workflow: one push, one workflow run.
type run struct {
	name   string // A, B or C
	id     int64  // GITHUB_RUN_ID
	sha    string
	before string
	log    string // act's --json log
	ready  *fifo  // the build step writes here once it builds
	goOn   *fifo  // and waits here until the test lets it go on
	proc   *process
}

// raceHarness runs act for the race workflow against one store.
type raceHarness struct {
	act      string
	repo     string
	signals  string
	cache    string
	workflow string   // the workflow file, under .github/workflows
	args     []string // act's --env and --secret flags
	// state is the store the runs keep the state in, opened by the test to read what they left.
	state authority.Store
}

// raceVariant is what a store adds to the race: the workflow, the job's variables and secrets
// (act --env, --secret), and the store the test reads the end state from.
type raceVariant struct {
	workflow string
	text     []byte
	vars     map[string]string
	secrets  map[string]string
	state    authority.Store
}

func newRaceHarness(t *testing.T, v raceVariant) *raceHarness {
	t.Helper()
	h := &raceHarness{
		act:      requireTool(t, "act", actEnvVar, "Run the test command (scripts/test), which installs act, or `go install github.com/nektos/act@v0.2.89`, or set "+actEnvVar),
		signals:  t.TempDir(),
		cache:    t.TempDir(),
		workflow: v.workflow,
		state:    v.state,
	}
	requireTool(t, "go", "", "the action builds latestwins from source with Go")
	h.repo = scratchRepo(t, map[string][]byte{v.workflow: v.text})
	vars := map[string]string{"E2E_SIGNALS": h.signals, "GOTOOLCHAIN": "local"}
	for k, val := range goEnv(t, "GOCACHE", "GOMODCACHE", "GOPROXY") {
		if val != "" {
			vars[k] = val
		}
	}
	// The overlay a mutant is built with is already in the copy the runs build from.
	if _, flags := buildOverlay(t); flags != "" {
		vars["GOFLAGS"] = flags
	}
	maps.Copy(vars, v.vars)
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		h.args = append(h.args, "--env", k+"="+vars[k])
	}
	for _, k := range slices.Sorted(maps.Keys(v.secrets)) {
		h.args = append(h.args, "--secret", k+"="+v.secrets[k])
	}
	return h
}

// dynaliteRace is the race with the state in a dynalite table, named by the store input.
func dynaliteRace(t *testing.T) raceVariant {
	t.Helper()
	ep := dynalitetest.Endpoint(t)
	table := dynalitetest.TableName(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := dynamo.New(dynalitetest.Client(t), table)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	return raceVariant{workflow: "race.yml", text: testdataFile(t, "race.yml"), state: st, vars: map[string]string{
		"LW_STORE":                  fmt.Sprintf("dynamodb://%s?region=us-east-1&endpoint=%s", table, ep),
		"AWS_ACCESS_KEY_ID":         "test",
		"AWS_SECRET_ACCESS_KEY":     "test",
		"AWS_REGION":                "us-east-1",
		"AWS_EC2_METADATA_DISABLED": "true",
	}}
}

// repositoryWorkflow is the race workflow as a user of the default store writes it: race.yml
// without its store inputs, and with the permission that store needs.
func repositoryWorkflow(t *testing.T) []byte {
	t.Helper()
	s := string(testdataFile(t, "race.yml"))
	const storeInput, perm = "          store: ${{ env.LW_STORE }}\n", "  contents: read\n"
	if strings.Count(s, storeInput) != 2 || strings.Count(s, perm) != 1 {
		t.Fatalf("race.yml no longer has two store inputs %q and the permission %q: update repositoryWorkflow", storeInput, perm)
	}
	s = strings.ReplaceAll(s, storeInput, "")
	return []byte(strings.Replace(s, perm, "  contents: write\n", 1))
}

// repositoryRace is the race with neither store nor api-url given: the Action keeps the state in
// the workflow's repository (github://OWNER/REPO, OWNER/REPO from the checkout's origin), pushed
// with the workflow's token to GITHUB_SERVER_URL's git host, here host. GITHUB_API_URL points at
// the same host, so that a call to GitHub's API would be seen there rather than leave loopback.
func repositoryRace(t *testing.T, host *gitHost) raceVariant {
	t.Helper()
	tr, err := gitref.NewFileTransport(host.bare)
	if err != nil {
		t.Fatal(err)
	}
	return raceVariant{workflow: "race-in-the-repository.yml", text: repositoryWorkflow(t), state: gitref.New(tr),
		vars:    map[string]string{"GITHUB_SERVER_URL": host.URL, "GITHUB_API_URL": host.URL + "/api/v3"},
		secrets: map[string]string{"GITHUB_TOKEN": host.token}}
}

// start starts act for r and returns once the process runs.
func (h *raceHarness) start(ctx context.Context, t *testing.T, r *run) {
	t.Helper()
	r.log = filepath.Join(h.signals, "act-"+r.name+".log")
	r.ready = newFifo(t, filepath.Join(h.signals, fmt.Sprintf("ready-%d", r.id)))
	r.goOn = newFifo(t, filepath.Join(h.signals, fmt.Sprintf("go-%d", r.id)))
	event := pushEvent(t, h.signals, r.name, r.sha, r.before)
	args := []string{"push", "--json", "-W", ".github/workflows/" + h.workflow,
		"-P", "ubuntu-latest=-self-hosted", "--no-cache-server", "--action-cache-path", h.cache,
		"-e", event, "--env", fmt.Sprintf("GITHUB_RUN_ID=%d", r.id)}
	args = append(args, h.args...)
	logf, err := os.Create(r.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logf.Close() })
	cmd := exec.CommandContext(ctx, h.act, args...)
	cmd.Dir = h.repo
	cmd.Stdout, cmd.Stderr = logf, logf
	if r.proc, err = startProcess(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Let a step still waiting on its pipe fail, end act, and wait for it.
		_ = r.goOn.f.Close()
		<-r.proc.done
	})
}

// building waits until r's build step runs, and returns what it wrote.
func (h *raceHarness) building(ctx context.Context, t *testing.T, r *run) string {
	t.Helper()
	s, err := r.ready.readLine(ctx, r.proc)
	if err != nil {
		t.Fatalf("run %s never reached its build step: %v\n%s", r.name, err, readActLog(t, r.log).tail(40))
	}
	return s
}

// finish lets r's build step go on and waits for the run to end.
func (h *raceHarness) finish(ctx context.Context, t *testing.T, r *run) {
	t.Helper()
	if err := r.goOn.writeLine("go"); err != nil {
		t.Fatalf("release run %s: %v", r.name, err)
	}
	select {
	case <-r.proc.done:
	case <-ctx.Done():
		t.Fatalf("run %s did not end: %v\n%s", r.name, ctx.Err(), readActLog(t, r.log).tail(40))
	}
}

// runResult is what a run did, as users see it: the job's and steps' results, the outputs a later
// step recorded, and the deploy command's own record of running.
type runResult struct {
	Job      string
	Steps    map[string]string
	Building string
	Outputs  map[string]string
	Deployed []string
}

// TestRaceThroughAct is the A -> B -> C race of three pushes, each a workflow run through act with the
// action built from source: A and B are held in their build while C claims, builds and deploys;
// then A and B reach their deploy step superseded and end cleanly with authorized=false. The state
// is in a dynalite table (store: dynamodb://).
func TestRaceThroughAct(t *testing.T) {
	h := newRaceHarness(t, dynaliteRace(t))
	race(t, h, nil)
}

// TestRaceThroughActInTheRepository is the same race with nothing set up: the workflow gives neither
// store nor api-url, only permissions: contents: write, so the Action keeps the state as refs of the
// workflow's own repository, pushed with the workflow's token, as on GitHub's hosted runners. The
// repository is a bare one on a loopback git host (gitHost) that GITHUB_SERVER_URL points at; the
// test reads the end state from it with the git store, and checks that every request carried the
// token and none went anywhere but the repository.
func TestRaceThroughActInTheRepository(t *testing.T) {
	host := newGitHost(t, "latestwins", "e2e")
	h := newRaceHarness(t, repositoryRace(t, host))
	race(t, h, []string{"State: `github://latestwins/e2e`, the refs under `refs/latestwins/` of this repository (no store or api-url given)."})

	refused, strays, pushes := host.seen()
	if len(refused) > 0 || len(strays) > 0 {
		t.Errorf("the git host refused requests without the workflow's token: %q; and had nothing for %q", refused, strays)
	}
	// Three claims and three deploy steps each write the state.
	if pushes < 6 {
		t.Errorf("the git host took %d pushes; want at least one per claim and deploy step", pushes)
	}
	if out, err := exec.Command("git", "-C", host.bare, "for-each-ref", "--format=%(refname)", "refs/").Output(); err != nil ||
		!strings.Contains(string(out), "refs/latestwins/") || strings.Contains(string(out), "refs/heads/") {
		t.Errorf("refs of the repository: %q (%v); want the state under refs/latestwins/ and no branch", out, err)
	}
}

// race runs the race on h and checks what users see and what the store holds; the job summary of
// every step of the action must also hold each of summary's lines.
func race(t *testing.T, h *raceHarness, summary []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	sha := func(c string) string { return strings.Repeat(c, 40) }
	a := &run{name: "A", id: 9101, sha: sha("a"), before: sha("0")}
	b := &run{name: "B", id: 9102, sha: sha("b"), before: a.sha}
	c := &run{name: "C", id: 9103, sha: sha("c"), before: b.sha}
	building := map[string]string{}

	start := time.Now()
	for _, r := range []*run{a, b, c} {
		h.start(ctx, t, r)
		building[r.name] = h.building(ctx, t, r)
		t.Logf("run %s is building (%s) after %s", r.name, building[r.name], time.Since(start).Round(time.Millisecond))
	}
	h.finish(ctx, t, c)
	t.Logf("run C ended after %s", time.Since(start).Round(time.Millisecond))
	h.finish(ctx, t, a)
	h.finish(ctx, t, b)
	t.Logf("runs A and B ended after %s", time.Since(start).Round(time.Millisecond))

	env, err := authority.New(h.state).Status(ctx, "staging")
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	api := env.Scopes["api"]
	if api == nil || api.Live == nil {
		t.Fatalf("status has nothing live in api: %+v", env)
	}
	if got, want := fmt.Sprintf("%d/%d live=%s generation=%d", env.Observed, env.Desired, api.Live.Sha, api.Live.Generation),
		fmt.Sprintf("3/3 live=%s generation=3", c.sha); got != want {
		t.Errorf("status: got %s, want %s", got, want)
	}

	steps := map[string]string{"0": "success", "claim": "success", "build": "success", "deploy": "success", "record": "success"}
	superseded := func(gen, by string) map[string]string {
		return map[string]string{"claim.authorized": "true", "claim.generation": gen, "deploy.authorized": "false",
			"deploy.outcome": "superseded", "deploy.superseded-by": by}
	}
	want := map[string]runResult{
		"A": {Job: "success", Steps: steps, Building: "generation 1", Outputs: superseded("1", "3")},
		"B": {Job: "success", Steps: steps, Building: "generation 2", Outputs: superseded("2", "3")},
		"C": {Job: "success", Steps: steps, Building: "generation 3",
			Outputs: map[string]string{"claim.authorized": "true", "claim.generation": "3", "deploy.authorized": "true",
				"deploy.outcome": "deployed", "deploy.superseded-by": ""},
			Deployed: []string{fmt.Sprintf("3 %d", api.Live.Token)}},
	}
	got := map[string]runResult{}
	logs := map[string]actLog{}
	for _, r := range []*run{a, b, c} {
		l := readActLog(t, r.log)
		logs[r.name] = l
		got[r.name] = runResult{Job: l.Job, Steps: l.Steps, Building: building[r.name],
			Outputs:  readKV(t, filepath.Join(h.signals, fmt.Sprintf("outputs-%d", r.id))),
			Deployed: readLines(t, filepath.Join(h.signals, fmt.Sprintf("deployed-%d", r.id)))}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		for name, l := range logs {
			t.Logf("act log of run %s:\n%s", name, l.tail(60))
		}
		t.Fatalf("runs (-want +got):\n%s", diff)
	}

	// Every step of the action wrote the environment's status table to the job summary; the deploy
	// step's, read after C deployed, shows C live in every run.
	liveRow := fmt.Sprintf("| api | `%s` | 3 |", c.sha[:7])
	headlines := map[string]string{"A": "Generation 1 was superseded", "B": "Generation 2 was superseded", "C": "Generation 3 deployed api."}
	for name, l := range logs {
		for _, step := range []string{"claim", "deploy"} {
			s, ok := l.Summaries[step]
			if !ok {
				t.Errorf("run %s: step %s wrote no job summary", name, step)
				continue
			}
			for _, part := range append([]string{"### latestwins: staging", "| scope | live | generation | deployed | pending | owner | lease |"}, summary...) {
				if !strings.Contains(s, part) {
					t.Errorf("run %s: the job summary of step %s lacks %q:\n%s", name, step, part, s)
				}
			}
		}
		s := l.Summaries["deploy"]
		for _, part := range []string{headlines[name], "**3/3**", liveRow} {
			if !strings.Contains(s, part) {
				t.Errorf("run %s: the deploy step's job summary lacks %q:\n%s", name, part, s)
			}
		}
	}
}
