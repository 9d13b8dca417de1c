package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/testutil/oidctest"
	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

// apiWorld is `latestwins serve` (its handler, in-process) on 127.0.0.1 with a bolt store, taking
// tokens of a fake OIDC issuer with the audience "deploys", and the environment of a GitHub
// Actions job whose runner hands out tokens of Codertocat/Hello-World.
type apiWorld struct {
	t    *testing.T
	dir  string
	url  string
	iss  *oidctest.Issuer
	vars map[string]string // every CLI run's environment: the API, no store
}

func newAPIWorld(t *testing.T) *apiWorld {
	t.Helper()
	return newAPIWorldOf(t, serveConfig)
}

// newAPIWorldOf is newAPIWorld with the configuration yml.
func newAPIWorldOf(t *testing.T, yml string) *apiWorld {
	t.Helper()
	dir := t.TempDir()
	iss := oidctest.NewIssuer(t)
	cfg := writeServeConfig(t, dir, yml)
	serveVars := map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret, "LATESTWINS_STORE": "bolt://" + filepath.Join(dir, "app.db")}
	var stderr syncbuf.Buffer
	c := &cmdEnv{io: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return serveVars[k] }},
		log: slog.New(slog.DiscardHandler)}
	handler, _, err := c.serveHandler(context.Background(), []string{"--config", cfg, "--oidc-issuer", iss.URL, "--oidc-audience", "deploys"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.done)
	if want := "API /v1 takes OIDC tokens of " + iss.URL + " with audience deploys"; !strings.Contains(stderr.String(), want) {
		t.Errorf("serve did not say %q:\n%s", want, stderr.String())
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	tokenURL, bearer, _ := iss.TokenEndpoint(t, func(aud string) jwt.MapClaims { return iss.Claims("Codertocat/Hello-World", aud, time.Now()) })
	return &apiWorld{t: t, dir: dir, url: srv.URL, iss: iss, vars: map[string]string{
		"LATESTWINS_API": srv.URL, "LATESTWINS_API_AUDIENCE": "deploys",
		"ACTIONS_ID_TOKEN_REQUEST_URL": tokenURL, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": bearer,
	}}
}

// run runs the CLI with the world's environment plus extra variables.
func (w *apiWorld) run(extra map[string]string, args ...string) outcome {
	w.t.Helper()
	vars := map[string]string{}
	for k, v := range w.vars {
		vars[k] = v
	}
	for k, v := range extra {
		vars[k] = v
	}
	var out, errb syncbuf.Buffer
	pio := IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }}
	code := Main(context.Background(), args, pio)
	return outcome{code: code, stdout: out.String(), stderr: errb.String()}
}

// racePass plays two passes racing for staging/api and a third and fourth contending for its lease,
// through run (claim, gate, run, complete and status as separate commands), and records each step's
// exit code and what it said.
func racePass(t *testing.T, dir string, run func(args ...string) outcome) []string {
	t.Helper()
	st := func(name string) string { return filepath.Join(dir, name+".json") }
	var got []string
	step := func(name string, args ...string) outcome {
		o := run(args...)
		got = append(got, fmt.Sprintf("%s: exit %d", name, o.code))
		return o
	}
	said := func(name string, o outcome, want string) {
		if !strings.Contains(o.stdout+o.stderr, want) {
			t.Errorf("%s did not say %q\nstdout:\n%s\nstderr:\n%s", name, want, o.stdout, o.stderr)
		}
	}
	claim := func(name, sha string) outcome {
		return step("claim "+name, "claim", "--environment", "staging", "--scopes", "api", "--sha", sha, "--ref", "refs/heads/master",
			"--intent-id", "run-"+name, "--holder", "run-"+name, "--state", st(name))
	}

	said("claim A", claim("A", "aaaa111000000000000000000000000000000000"), "generation 1")
	step("gate A build", "gate", "--state", st("A"), "--phase", "build")
	said("claim B", claim("B", "bbbb222000000000000000000000000000000000"), "claimed api")
	said("gate A deploy", step("gate A deploy", "gate", "--state", st("A"), "--phase", "deploy"), "superseded")
	o := step("run B", "run", "--state", st("B"), "--", "sh", "-c", `echo "deployed $LATESTWINS_GENERATION $LATESTWINS_FENCING_TOKEN"`)
	said("run B", o, "deployed 2 1")
	said("run B", o, "staging/api: deployed")

	claim("C", "cccc333000000000000000000000000000000000")
	o = step("gate C deploy", "gate", "--state", st("C"), "--json")
	var grant struct{ Tokens map[string]int64 }
	if err := json.Unmarshal([]byte(o.stdout), &grant); err != nil || grant.Tokens["api"] != 2 {
		t.Errorf("gate C --json: %q (%v), want token 2", o.stdout, err)
	}
	claim("D", "dddd444000000000000000000000000000000000")
	said("gate D deploy", step("gate D deploy", "gate", "--state", st("D"), "--wait", "0s"), "run-C (deploy, generation 3)")
	step("complete C", "complete", "--state", st("C"))
	step("gate D deploy again", "gate", "--state", st("D"))
	step("complete D", "complete", "--state", st("D"), "--outcome", "success")

	o = step("status", "status", "staging", "--json")
	var status map[string]any
	if err := json.Unmarshal([]byte(o.stdout), &status); err != nil {
		t.Fatalf("status --json: %v\n%s", err, o.stdout)
	}
	live, _ := scopeField(status, "api", "live").(map[string]any)
	got = append(got, fmt.Sprintf("status: desired %v observed %v settled %v live %v", status["desired_generation"], status["observed_generation"], status["settled"], live["sha"]))
	said("status text", step("status text", "status", "staging"), "dddd444")
	step("gate without generation", "gate", "--environment", "staging", "--scopes", "api")
	return got
}

// TestVerbsThroughAPI: claim, gate, run, complete and status through `--api` to the App give the
// same outcomes and exit codes as on a store.
func TestVerbsThroughAPI(t *testing.T) {
	t.Parallel()
	want := []string{
		"claim A: exit 0",
		"gate A build: exit 0",
		"claim B: exit 0",
		"gate A deploy: exit 3", // superseded
		"run B: exit 0",
		"claim C: exit 0",
		"gate C deploy: exit 0",
		"claim D: exit 0",
		"gate D deploy: exit 4", // locked: C holds the lease and D gave up at once
		"complete C: exit 0",    // superseded while it deployed under its lease: what it deployed is live
		"gate D deploy again: exit 0",
		"complete D: exit 0",
		"status: exit 0",
		"status: desired 4 observed 4 settled true live dddd444000000000000000000000000000000000",
		"status text: exit 0",
		"gate without generation: exit 2",
	}

	h := newHarness(t)
	onStore := racePass(t, h.dir, func(args ...string) outcome { return h.run(context.Background(), args...) })
	if diff := cmp.Diff(want, onStore); diff != "" {
		t.Errorf("on a store (-want +got):\n%s", diff)
	}
	w := newAPIWorld(t)
	throughAPI := racePass(t, w.dir, func(args ...string) outcome { return w.run(nil, args...) })
	if diff := cmp.Diff(onStore, throughAPI); diff != "" {
		t.Errorf("through the API vs on a store (-store +api):\n%s", diff)
	}
	// The App's own store holds the passes: its status page shows D live.
	resp, err := http.Get(w.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(page), `<code title="dddd444000000000000000000000000000000000">dddd444</code>`) {
		t.Errorf("the App's status page does not show dddd444 live:\n%s", page)
	}
}

// TestAPIFlagRefusals: what --api needs, said when it is missing, each bad input exit 2.
func TestAPIFlagRefusals(t *testing.T) {
	t.Parallel()
	w := newAPIWorld(t)
	noRunner := map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": "", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": ""}
	withToken := func(tok string) map[string]string {
		return map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": "", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "", "LATESTWINS_API_TOKEN": tok}
	}
	other := w.iss.Sign(t, w.iss.Claims("acme/web", "deploys", time.Now()))
	wrongAudience := w.iss.Sign(t, w.iss.Claims("Codertocat/Hello-World", "latestwins", time.Now()))
	claim := []string{"claim", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "i-1"}
	tests := []struct {
		name  string
		extra map[string]string
		args  []string
		code  int
		says  string
	}{
		{"unknown environment (before any claim)", nil, []string{"status", "staging"}, ExitUsage, "(looked in the App at " + w.url + ")"},
		{"store and api", map[string]string{"LATESTWINS_STORE": "memory://"}, claim, ExitUsage, "both --api and --store (or LATESTWINS_STORE) are given"},
		{"store flag and api", nil, append([]string{"status", "--store", "memory://"}, "staging"), ExitUsage, "both --api and --store"},
		{"no token", noRunner, claim, ExitUsage, "--api needs a token: run in a GitHub Actions job with `permissions: id-token: write`, or give --api-token"},
		{"runner without its request token", map[string]string{"ACTIONS_ID_TOKEN_REQUEST_TOKEN": ""}, claim, ExitUsage, "permissions: id-token: write"},
		{"plain http to a remote host", map[string]string{"LATESTWINS_API": "http://latestwins.example"}, claim, ExitUsage, "use https"},
		{"repository not allowed", withToken(other), claim, ExitUsage, "acme/web may not act on staging"},
		{"audience not the App's", withToken(wrongAudience), claim, ExitUsage, `audience ["latestwins"] is not "deploys"`},
		{"a given token", withToken(" " + w.iss.Sign(t, w.iss.Claims("Codertocat/Hello-World", "deploys", time.Now())) + "\n"), claim, ExitOK, "claimed api"},
		{"unlock has no API", nil, []string{"unlock", "staging/api", "--reason", "x", "--api", w.url}, ExitUsage, "flag provided but not defined: -api"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := w.run(tt.extra, tt.args...)
			if o.code != tt.code || !strings.Contains(o.stdout+o.stderr, tt.says) {
				t.Errorf("exit %d, want %d saying %q\nstdout:\n%s\nstderr:\n%s", o.code, tt.code, tt.says, o.stdout, o.stderr)
			}
		})
	}
}

// TestRollbackThroughAPI: rollback and unfreeze with --api behave as on a store: the older commit
// goes ahead, a newer run is held by the freeze (its refusal says so) until unfreeze, and repeats
// of a request change nothing. The App here has no credentials, so it dispatches nothing and says
// how to deploy the rollback's generation.
func TestRollbackThroughAPI(t *testing.T) {
	t.Parallel()
	w := newAPIWorld(t)
	must := func(code int, args ...string) outcome {
		t.Helper()
		o := w.run(nil, args...)
		if o.code != code {
			t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, o.code, code, o.stdout, o.stderr)
		}
		return o
	}
	must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a", "--", "true")
	must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "b", "--", "true")
	o := must(ExitOK, "rollback", "staging/api", "--reason", "bbbb222 breaks checkout", "--request", "r1")
	for _, want := range []string{"rolled staging/api back to aaaa111 at generation 3", "the App dispatched no workflow", "--generation 3", "staging/api is frozen"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("rollback did not say %q:\n%s", want, o.stdout)
		}
	}
	if o := must(ExitOK, "rollback", "staging/api", "--reason", "again", "--request", "r1"); !strings.Contains(o.stdout, "already answered: the rollback of staging/api is generation 3") {
		t.Errorf("a repeated request said:\n%s", o.stdout)
	}
	must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--generation", "3", "--", "true")
	held := must(ExitLocked, "run", "--environment", "staging", "--scopes", "api", "--sha", "cccc333000000000000000000000000000000000", "--intent-id", "c", "--wait", "0s", "--", "true")
	if !strings.Contains(held.stderr, "held by a freeze: rolled back to aaaa111 by Codertocat (bbbb222 breaks checkout)") {
		t.Errorf("a run while frozen said:\n%s", held.stderr)
	}
	if o := must(ExitUsage, "unfreeze", "staging/api", "--freeze", "2", "--reason", "fixed forward"); !strings.Contains(o.stderr, "latestwins unfreeze staging/api --api ") ||
		!strings.Contains(o.stderr, "--freeze 3 --reason TEXT") {
		t.Errorf("unfreeze naming no current freeze said:\n%s", o.stderr)
	}
	if o := must(ExitOK, "unfreeze", "staging/api", "--freeze", "3", "--reason", "fixed forward"); !strings.Contains(o.stdout, "unfroze staging/api") {
		t.Errorf("unfreeze said:\n%s", o.stdout)
	}
	if o := must(ExitOK, "unfreeze", "staging/api", "--freeze", "3", "--reason", "again"); !strings.Contains(o.stdout, "is not frozen") {
		t.Errorf("a second unfreeze said:\n%s", o.stdout)
	}
	must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "cccc333000000000000000000000000000000000", "--intent-id", "c", "--", "true")
	if o := must(ExitOK, "status", "staging", "--json"); !strings.Contains(o.stdout, `"sha":"cccc333000000000000000000000000000000000"`) && !strings.Contains(o.stdout, `"sha": "cccc333000000000000000000000000000000000"`) {
		t.Errorf("status after unfreeze:\n%s", o.stdout)
	}
}

// TestPromoteThroughAPI: promote with --api takes the commit live in the environment production
// requires (no --from: the App picks the first), once per request; the App here has no credentials,
// so it dispatches nothing and says how to deploy the generation, whose deploy gate then passes.
// An environment that requires nothing has nothing to promote from.
func TestPromoteThroughAPI(t *testing.T) {
	t.Parallel()
	w := newAPIWorldOf(t, serveConfig+`  production:
    requires: [staging]
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
`)
	must := func(code int, args ...string) outcome {
		t.Helper()
		o := w.run(nil, args...)
		if o.code != code {
			t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, o.code, code, o.stdout, o.stderr)
		}
		return o
	}
	must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a", "--", "true")
	o := must(ExitOK, "promote", "production/api", "--request", "p1")
	for _, want := range []string{"promoted aaaa111 (live in staging/api) to production at generation 1", "the App dispatched no workflow", "--generation 1"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("promote did not say %q:\n%s", want, o.stdout)
		}
	}
	if o := must(ExitOK, "promote", "production/api", "--request", "p1"); !strings.Contains(o.stdout, "already answered: aaaa111 of staging is generation 1 in production") {
		t.Errorf("a repeated request said:\n%s", o.stdout)
	}
	must(ExitOK, "run", "--environment", "production", "--scopes", "api", "--generation", "1", "--", "true")
	o = must(ExitOK, "status")
	if !strings.Contains(o.stdout, "SCOPE") || strings.Count(o.stdout, "aaaa111") != 2 {
		t.Errorf("status --api without an environment does not show aaaa111 live in both environments:\n%s", o.stdout)
	}
	if o := must(ExitUsage, "promote", "staging/api"); !strings.Contains(o.stderr, "staging requires no environment") {
		t.Errorf("promote into an environment that requires nothing said:\n%s", o.stderr)
	}
}
