package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

type harness struct {
	t     *testing.T
	dir   string
	store string
	vars  map[string]string
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	dir := t.TempDir()
	return &harness{t: t, dir: dir, store: "bolt://" + filepath.Join(dir, "lw.db"), vars: map[string]string{}}
}

type outcome struct {
	code           int
	stdout, stderr string
}

func (h *harness) run(ctx context.Context, args ...string) outcome {
	h.t.Helper()
	var out, errb syncbuf.Buffer
	vars := map[string]string{"LATESTWINS_STORE": h.store}
	for k, v := range h.vars {
		vars[k] = v
	}
	pio := IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }}
	code := Main(ctx, args, pio)
	return outcome{code: code, stdout: out.String(), stderr: errb.String()}
}

func (h *harness) must(code int, args ...string) outcome {
	h.t.Helper()
	o := h.run(context.Background(), args...)
	if o.code != code {
		h.t.Fatalf("latestwins %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), o.code, code, o.stdout, o.stderr)
	}
	return o
}

func (h *harness) authority() (*authority.Authority, func()) {
	h.t.Helper()
	st, err := bolt.Open(strings.TrimPrefix(h.store, "bolt://"))
	if err != nil {
		h.t.Fatal(err)
	}
	return authority.New(st, authority.WithSkew(time.Millisecond)), func() { st.Close() }
}

func (h *harness) status(env string) map[string]any {
	h.t.Helper()
	o := h.must(ExitOK, "status", env, "--json")
	var m map[string]any
	if err := json.Unmarshal([]byte(o.stdout), &m); err != nil {
		h.t.Fatalf("status --json is not JSON: %v\n%s", err, o.stdout)
	}
	return m
}

func scopeField(m map[string]any, scope, field string) any {
	s, _ := m["scopes"].(map[string]any)[scope].(map[string]any)
	return s[field]
}

func TestStepsShareStateAndDeploy(t *testing.T) {
	h := newHarness(t)
	state := filepath.Join(h.dir, "pass.json")
	o := h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api,web", "--sha", "abc1234000000000000000000000000000000000", "--ref", "refs/heads/main",
		"--intent-id", "push-1", "--state", state)
	if !strings.Contains(o.stdout, "generation 1") || !strings.Contains(o.stdout, "claimed api,web") {
		t.Fatalf("claim output: %q", o.stdout)
	}
	// A repeated claim of the same intent returns the same generation and changes nothing.
	o = h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api,web", "--sha", "abc1234000000000000000000000000000000000", "--intent-id", "push-1", "--json")
	var res authority.AcceptResult
	if err := json.Unmarshal([]byte(o.stdout), &res); err != nil || res.Generation != 1 || !res.Duplicate {
		t.Fatalf("repeat claim: %+v (%v)", res, err)
	}
	h.must(ExitOK, "gate", "--state", state, "--phase", "build")
	o = h.must(ExitOK, "gate", "--state", state, "--phase", "deploy", "--json")
	var g authority.Grant
	if err := json.Unmarshal([]byte(o.stdout), &g); err != nil || g.Tokens["api"] != 1 || g.Tokens["web"] != 1 {
		t.Fatalf("gate deploy grant: %+v (%v)", g, err)
	}
	h.must(ExitOK, "complete", "--state", state, "--outcome", "success")
	st := h.status("staging")
	if st["observed_generation"] != float64(1) || st["settled"] != true {
		t.Fatalf("status after complete: %v", st)
	}
	for _, s := range []string{"api", "web"} {
		live := scopeField(st, s, "live").(map[string]any)
		if live["sha"] != "abc1234000000000000000000000000000000000" || live["generation"] != float64(1) {
			t.Fatalf("%s live: %v", s, live)
		}
	}
}

func TestSupersededPassStopsWithItsOwnExitCode(t *testing.T) {
	h := newHarness(t)
	old := filepath.Join(h.dir, "old.json")
	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a", "--state", old)
	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "b")
	o := h.must(ExitSuperseded, "gate", "--state", old, "--phase", "deploy")
	if !strings.Contains(o.stderr, "superseded by generation 2 (bbbb222)") {
		t.Fatalf("gate stderr: %q", o.stderr)
	}
	marker := filepath.Join(h.dir, "ran")
	h.must(ExitSuperseded, "run", "--state", old, "--", "touch", marker)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a superseded run started its command")
	}
}

func TestLockedGivesUpWithRetryAfter(t *testing.T) {
	h := newHarness(t)
	state := filepath.Join(h.dir, "s.json")
	h.must(ExitOK, "claim", "--environment", "qa", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a", "--state", state)
	h.must(ExitOK, "gate", "--state", state, "--holder", "first", "--lease-ttl", "1m")
	o := h.must(ExitLocked, "gate", "--state", state, "--holder", "second", "--wait", "0s", "--json")
	var refusal map[string]any
	if err := json.Unmarshal([]byte(o.stdout), &refusal); err != nil {
		t.Fatal(err)
	}
	if refusal["error"] != "locked" || refusal["holder"] != "first" || refusal["retry_after"].(float64) < 1 {
		t.Fatalf("refusal: %v", refusal)
	}
	if !strings.Contains(o.stderr, "locked by first") {
		t.Fatalf("stderr: %q", o.stderr)
	}
}

func TestBadInputIsTerminalAndSaysWhatToFix(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000")
	cases := []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"invalid environment", nil, []string{"claim", "--environment", "bad env", "--scopes", "api", "--sha", shaA}, "invalid environment"},
		{"missing environment", nil, []string{"claim", "--scopes", "api", "--sha", shaA}, "name the environment"},
		{"invalid scope", nil, []string{"claim", "--environment", "e", "--scopes", "a/b", "--sha", shaA}, "invalid scope"},
		{"missing sha", nil, []string{"claim", "--environment", "e", "--scopes", "api"}, "invalid sha"},
		{"unknown environment", nil, []string{"status", "nowhere"}, "unknown environment: nothing was ever accepted for it; check the name (looked in bolt://"},
		{"malformed variable", map[string]string{"LATESTWINS_LEASE_TTL": "soon"}, []string{"gate", "--environment", "e", "--generation", "1", "--scopes", "api"}, "LATESTWINS_LEASE_TTL"},
		{"bad store", map[string]string{"LATESTWINS_STORE": "redis://x"}, []string{"status", "e"}, "unknown scheme"},
		{"unknown command", nil, []string{"deploy"}, "unknown command"},
		{"bad outcome", nil, []string{"complete", "--environment", "e", "--generation", "1", "--scopes", "api", "--outcome", "meh"}, "invalid outcome"},
		{"run without command", nil, []string{"run", "--environment", "e", "--scopes", "api", "--sha", shaA}, "give the command"},
		{"unlock without reason", nil, []string{"unlock", "e/api"}, "--reason"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h.vars = tc.vars
			o := h.run(context.Background(), tc.args...)
			if o.code != ExitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", o.code, ExitUsage, o.stderr)
			}
			if !strings.Contains(o.stderr, tc.want) {
				t.Fatalf("stderr %q does not say %q", o.stderr, tc.want)
			}
		})
	}
}

func TestRunGivesTheCommandItsFencingAndCountsAttempts(t *testing.T) {
	h := newHarness(t)
	envFile := filepath.Join(h.dir, "env.txt")
	h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "one", "--",
		"sh", "-c", `echo "$LATESTWINS_GENERATION $LATESTWINS_FENCING_TOKEN $LATESTWINS_FENCING_TOKENS" > "$0"`, envFile)
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != `1 1 {"api":1}` {
		t.Fatalf("command saw %q", got)
	}
	// A failing command: retryable on attempts 1 and 2, terminal on the third; the intent is the same.
	for attempt, want := range map[string]int{"1": ExitRetry, "2": ExitRetry} {
		h.must(want, "run", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "two", "--attempt", attempt, "--", "false")
		if f := scopeField(h.status("staging"), "api", "failure"); f != nil {
			t.Fatalf("a non-final attempt published a failure: %v", f)
		}
	}
	h.must(ExitFailed, "run", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "two", "--attempt", "3", "--", "false")
	st := h.status("staging")
	if f, _ := scopeField(st, "api", "failure").(map[string]any); f == nil || f["generation"] != float64(2) {
		t.Fatalf("final attempt: failure %v", scopeField(st, "api", "failure"))
	}
	if st["observed_generation"] != float64(2) || scopeField(st, "api", "pending") != nil {
		t.Fatalf("observed did not move past the terminal error: %v", st)
	}
	if live := scopeField(st, "api", "live").(map[string]any); live["sha"] != "aaaa111000000000000000000000000000000000" {
		t.Fatalf("live changed by a failed pass: %v", live)
	}
}

// fifo makes a named pipe the command writes to once it is running, so the test waits on the
// command itself rather than on time.
func fifo(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "started")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitStarted returns once the command wrote into the pipe p, and fails the test if the run ends
// (done) before its command started.
func waitStarted(t *testing.T, p string, done <-chan outcome) {
	t.Helper()
	started := make(chan error, 1)
	go func() {
		f, err := os.Open(p) // blocks until the command opens it for writing
		if err != nil {
			started <- err
			return
		}
		defer f.Close()
		_, err = f.Read(make([]byte, 16))
		started <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			t.Fatal(err)
		}
	case o := <-done:
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close() // unblock the reader
		}
		t.Fatalf("the run ended (exit %d) before its command started\nstdout:\n%s\nstderr:\n%s", o.code, o.stdout, o.stderr)
	}
}

func TestRunStopsTheCommandWhenTheLeaseIsLost(t *testing.T) {
	h := newHarness(t)
	started := fifo(t, h.dir)
	stopped := filepath.Join(h.dir, "stopped")
	done := make(chan outcome, 1)
	go func() {
		done <- h.run(context.Background(), "run", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "one",
			"--lease-ttl", "6s", "--grace", "2s", "--", "sh", "-c", `trap 'touch "$1"; exit 143' TERM; echo up > "$0"; while :; do sleep 0.1; done`, started, stopped)
	}()
	waitStarted(t, started, done)
	a, closeStore := h.authority()
	if _, err := a.Unlock(context.Background(), "staging/api", "test takes the lease away", "tester"); err != nil {
		t.Fatal(err)
	}
	closeStore()
	o := <-done
	if o.code != ExitLeaseLost {
		t.Fatalf("exit %d, want %d (lease lost); stderr %q", o.code, ExitLeaseLost, o.stderr)
	}
	if _, err := os.Stat(stopped); err != nil {
		t.Fatal("the command was not sent SIGTERM when the lease was lost")
	}
	st := h.status("staging")
	if scopeField(st, "api", "failure") != nil || scopeField(st, "api", "pending") == nil {
		t.Fatalf("lease loss must keep the intent pending and publish no failure: %v", st)
	}
}

func TestRunForwardsSignalsAndReleases(t *testing.T) {
	h := newHarness(t)
	started := fifo(t, h.dir)
	got := filepath.Join(h.dir, "signal")
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan outcome, 1)
	go func() {
		done <- h.run(ctx, "run", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "one", "--",
			"sh", "-c", `trap 'echo INT > "$1"; exit 130' INT; echo up > "$0"; while :; do sleep 0.1; done`, started, got)
	}()
	waitStarted(t, started, done)
	cancel(&SignalCause{Signal: syscall.SIGINT})
	o := <-done
	if o.code != ExitInterrupted {
		t.Fatalf("exit %d, want %d; stderr %q", o.code, ExitInterrupted, o.stderr)
	}
	if b, err := os.ReadFile(got); err != nil || strings.TrimSpace(string(b)) != "INT" {
		t.Fatalf("the command did not get SIGINT: %q %v", b, err)
	}
	lease := scopeField(h.status("staging"), "api", "lease").(map[string]any)
	if lease["holder"] != nil && lease["holder"] != "" {
		t.Fatalf("lease not released after the interruption: %v", lease)
	}
}

func TestRunTakesOverAnExpiredLeaseAndRecordsTheRecovery(t *testing.T) {
	h := newHarness(t)
	a, closeStore := h.authority()
	ctx := context.Background()
	res, err := a.Accept(ctx, authority.Intent{ID: "crashed", Environment: "staging", Scopes: []string{"api"}, Sha: "aaaa111000000000000000000000000000000000"}, true)
	if err != nil {
		t.Fatal(err)
	}
	// A pass that took the lease and died: it never renews.
	if _, err := a.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"api"},
		Phase: "deploy", Holder: "crashed-runner", LeaseTTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	closeStore()
	o := h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "next",
		"--wait", "30s", "--lease-skew", "1ms", "--", "true")
	if !strings.Contains(o.stderr, "waiting: staging/api is locked by crashed-runner") {
		t.Fatalf("no progress while waiting: %q", o.stderr)
	}
	hist := h.must(ExitOK, "history", "staging", "--limit", "0").stdout
	if !strings.Contains(hist, "Recovered an interrupted operation (Interrupted: deploy)") {
		t.Fatalf("history lacks the recovery:\n%s", hist)
	}
	live := scopeField(h.status("staging"), "api", "live").(map[string]any)
	if live["sha"] != "bbbb222000000000000000000000000000000000" || live["token"] != float64(2) {
		t.Fatalf("live after takeover: %v", live)
	}
}

func TestDemoHoldsEveryGuarantee(t *testing.T) {
	h := newHarness(t)
	o := h.must(ExitOK, "demo", "--store", h.store, "--build", "100ms", "--deploy", "50ms")
	if !strings.Contains(o.stdout, "All guarantees held") {
		t.Fatalf("demo output:\n%s", o.stdout)
	}
}

func TestSweepListsThenRedrivesStalledWork(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "one")
	o := h.must(ExitOK, "sweep", "--stall", "1ns")
	if !strings.Contains(o.stdout, "would re-drive staging generation 1 (api), attempt 1") || !strings.Contains(o.stdout, "dry run") {
		t.Fatalf("dry run output: %q", o.stdout)
	}
	if m := scopeField(h.status("staging"), "api", "pending").(map[string]any); m["attempt"] != nil {
		t.Fatalf("a dry run changed the attempt: %v", m)
	}
	got := filepath.Join(h.dir, "redrive.txt")
	h.must(ExitOK, "sweep", "--stall", "1ns", "--", "sh", "-c", `echo "$LATESTWINS_ENVIRONMENT $LATESTWINS_GENERATION $LATESTWINS_SCOPES $LATESTWINS_ATTEMPT" > "$0"`, got)
	if b, err := os.ReadFile(got); err != nil || strings.TrimSpace(string(b)) != "staging 1 api 1" {
		t.Fatalf("re-drive command saw %q (%v)", b, err)
	}
	// A failing dispatch is reported, exits non-zero, and costs no attempt.
	o = h.must(ExitError, "sweep", "--stall", "1ns", "--", "false")
	if !strings.Contains(o.stdout, "staging") {
		t.Fatalf("failed re-drive not reported: %q", o.stdout)
	}
	if m := scopeField(h.status("staging"), "api", "pending").(map[string]any); m["attempt"] != float64(1) {
		t.Fatalf("after a failed dispatch the attempt is %v; want 1", m["attempt"])
	}
	if hist := h.must(ExitOK, "history", "staging").stdout; !strings.Contains(hist, "re-driven as generation 1, attempt 1 of 3") {
		t.Fatalf("history lacks the re-drive:\n%s", hist)
	}
}

// The App accepts a push and dispatches its workflow; the run then claims the same commit. It joins
// the App's generation and deploys, instead of being held back as its own stale duplicate.
func TestRunJoinsTheCommitTheAppAccepted(t *testing.T) {
	h := newHarness(t)
	a, closeStore := h.authority()
	if _, err := a.Accept(context.Background(), authority.Intent{ID: "delivery-1", Environment: "staging", Scopes: []string{"api"},
		Sha: "aaaa111000000000000000000000000000000000", Ref: "refs/heads/main", Source: "push acme/api"}, false); err != nil {
		t.Fatal(err)
	}
	closeStore()
	o := h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--ref", "refs/heads/main",
		"--intent-id", "gha:acme/api/77", "--", "true")
	if !strings.Contains(o.stdout, "deployed") {
		t.Fatalf("run output: %q", o.stdout)
	}
	st := h.status("staging")
	if st["desired_generation"] != float64(1) || st["observed_generation"] != float64(1) {
		t.Fatalf("the run took a generation of its own or left work pending: %v", st)
	}
	if live := scopeField(st, "api", "live").(map[string]any); live["sha"] != "aaaa111000000000000000000000000000000000" || live["generation"] != float64(1) {
		t.Fatalf("live after the joined run: %v", live)
	}
}

func TestCompleteKeepsTheExitCodesOfRetryableEndings(t *testing.T) {
	h := newHarness(t)
	for outcome, want := range map[string]int{"lost": ExitLeaseLost, "interrupted": ExitInterrupted, "failure": ExitRetry} {
		state := filepath.Join(h.dir, outcome+".json")
		h.must(ExitOK, "claim", "--environment", "env-"+outcome, "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", outcome, "--state", state)
		h.must(ExitOK, "gate", "--state", state, "--phase", "deploy")
		h.must(want, "complete", "--state", state, "--outcome", outcome, "--attempt", "1")
	}
}

func TestUnlockOfAMistypedLeaseIsBadInput(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "one")
	if o := h.must(ExitUsage, "unlock", "stagng/api", "--reason", "stuck"); !strings.Contains(o.stderr, "no such lease") {
		t.Fatalf("stderr %q", o.stderr)
	}
	if o := h.must(ExitOK, "unlock", "staging/api", "--reason", "stuck"); !strings.Contains(o.stdout, "not locked") {
		t.Fatalf("stdout %q", o.stdout)
	}
}

// A secret given by its variable never shows in help or usage: -h prints flag defaults, and a
// default read from the environment would print the secret itself.
func TestHelpNeverShowsSecrets(t *testing.T) {
	const secret = "s3cr3t-value-that-must-not-leak"
	h := newHarness(t)
	for _, v := range []string{"LATESTWINS_API_TOKEN", "LATESTWINS_WEBHOOK_SECRET", "LATESTWINS_APP_PRIVATE_KEY", "LATESTWINS_APP_CLIENT_SECRET", "LATESTWINS_SESSION_KEY"} {
		h.vars[v] = secret
	}
	for _, args := range [][]string{{"status", "-h"}, {"serve", "-h"}, {"status", "--no-such-flag"}, {"claim", "-h"}} {
		o := h.run(t.Context(), args...)
		if strings.Contains(o.stdout+o.stderr, secret) {
			t.Errorf("latestwins %s printed a secret:\n%s%s", strings.Join(args, " "), o.stdout, o.stderr)
		}
	}
}

// LATESTWINS_RETENTION sets how long events and intent ids are kept; one too short to keep a
// re-delivery from being accepted twice is refused before any store is opened.
func TestRetentionSetting(t *testing.T) {
	h := newHarness(t)
	h.vars["LATESTWINS_RETENTION"] = "5m"
	o := h.must(2, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("a", 40), "--intent-id", "i-1")
	if !strings.Contains(o.stderr, "LATESTWINS_RETENTION") || !strings.Contains(o.stderr, "at least a day") {
		t.Errorf("a retention of 5m: %q; want it refused, naming the variable", o.stderr)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "lw.db")); !os.IsNotExist(err) {
		t.Errorf("the store was created for a refused setting: %v", err)
	}
	h.vars["LATESTWINS_RETENTION"] = "30d"
	h.must(0, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("a", 40), "--intent-id", "i-1")
}

// TestSweepGivesTheOrigin: the re-drive command gets the origin the intent's maker recorded (the
// Action's: the workflow that claimed it), so that it can dispatch that workflow again.
func TestSweepGivesTheOrigin(t *testing.T) {
	h := newHarness(t)
	st, err := bolt.Open(strings.TrimPrefix(h.store, "bolt://"))
	if err != nil {
		t.Fatal(err)
	}
	origin := "gha:Codertocat/Hello-World/.github/workflows/deploy.yml@refs/heads/main"
	in := authority.Intent{ID: "gha:Codertocat/Hello-World/7", Environment: "staging", Scopes: []string{"api", "web"},
		Sha: "aaaa111000000000000000000000000000000000", Origin: origin}
	if _, err := authority.New(st).Accept(context.Background(), in, false); err != nil {
		t.Fatal(err)
	}
	st.Close()
	got := filepath.Join(h.dir, "redrive.txt")
	h.must(ExitOK, "sweep", "--stall", "1ns", "--", "sh", "-c", `echo "$LATESTWINS_SCOPES $LATESTWINS_ORIGIN" > "$0"`, got)
	if b, err := os.ReadFile(got); err != nil || strings.TrimSpace(string(b)) != "api,web "+origin {
		t.Fatalf("re-drive command saw %q (%v); want the scopes and %s", b, err, origin)
	}
}
