package cli

import (
	"bytes"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latestwins/latestwins/internal/testutil"
)

// TestGitStore: the commands work on a store on git refs named by its URL, and a malformed one is
// bad configuration.
func TestGitStore(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testutil.MissingTool(t, "git is not on the PATH: a git+file:// store runs git's receive-pack")
	}
	h := newHarness(t)
	repo := filepath.Join(h.dir, "state.git")
	if out, err := exec.Command("git", "init", "--bare", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	h.store = "git+file://" + repo
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("a", 40))
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("b", 40))
	if got := h.status("staging")["desired_generation"]; got != float64(2) {
		t.Fatalf("desired = %v, want 2", got)
	}
	for _, bad := range []string{"git+file://relative/state.git", "git+ssh://host/x.git", "git+https://user:pw@host/x.git",
		"github://octo-org", "github://octo-org/state/x", "github://octo-org/state"} {
		h.store = bad
		if o := h.run(t.Context(), "status", "staging"); o.code != ExitUsage {
			t.Errorf("store %s: exit %d, want %d; stderr %q", bad, o.code, ExitUsage, o.stderr)
		}
	}
	// github:// without a token says what to set.
	h.store = "github://octo-org/state"
	if o := h.run(t.Context(), "status", "staging"); !strings.Contains(o.stderr, "LATESTWINS_GIT_TOKEN") || !strings.Contains(o.stderr, "GITHUB_TOKEN") {
		t.Errorf("github:// without a token: stderr %q does not say to set LATESTWINS_GIT_TOKEN or GITHUB_TOKEN", o.stderr)
	}
}

// TestActionDefaultStoreOnGitHub: the Action given neither store nor api-url keeps the state in the
// workflow's repository on GITHUB_SERVER_URL's git host (here git http-backend on loopback, which
// takes only the github-token input, sent as GitHub takes a token over git), and the job summary
// names that store. A token that may only read fails the step with an error naming the permission.
func TestActionDefaultStoreOnGitHub(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testutil.MissingTool(t, "git is not on the PATH: the test serves a repository with git http-backend")
	}
	root := t.TempDir()
	repo := filepath.Join(root, "Codertocat", "Hello-World.git")
	for _, args := range [][]string{{"init", "--bare", "-q", repo}, {"-C", repo, "config", "http.receivepack", "true"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatal(err)
	}
	token, readOnly := "ghs_"+strings.Repeat("k", 36), "ghs_"+strings.Repeat("r", 36)
	backend := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	var refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if ok && user == "x-access-token" && pass == readOnly {
			if r.URL.Query().Get("service") == "git-receive-pack" || strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
				http.Error(w, "Permission to Codertocat/Hello-World.git denied to github-actions[bot].", http.StatusForbidden)
				return
			}
			backend.ServeHTTP(w, r)
			return
		}
		if !ok || user != "x-access-token" || pass != token {
			refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()

	dir := t.TempDir()
	summary := filepath.Join(dir, "summary")
	vars := map[string]string{
		"GITHUB_ACTIONS": "true", "GITHUB_REPOSITORY": "Codertocat/Hello-World", "GITHUB_RUN_ID": "7", "GITHUB_RUN_ATTEMPT": "1",
		"GITHUB_JOB": "deploy", "GITHUB_ACTOR": "Codertocat", "GITHUB_SHA": strings.Repeat("a", 40), "GITHUB_REF": "refs/heads/main",
		"GITHUB_EVENT_NAME": "workflow_dispatch", "GITHUB_SERVER_URL": srv.URL, "GITHUB_API_URL": srv.URL + "/api/v3",
		"GITHUB_WORKFLOW_REF": "Codertocat/Hello-World/.github/workflows/deploy.yml@refs/heads/main",
		"GITHUB_STEP_SUMMARY": summary, "GITHUB_OUTPUT": filepath.Join(dir, "output"), "RUNNER_TEMP": dir,
		"INPUT_COMMAND": "claim", "INPUT_ENVIRONMENT": "staging", "INPUT_SCOPES": "api", "INPUT_GITHUB-TOKEN": token,
		"INPUT_COMMENT": "false", "INPUT_CHECK-RUN": "false",
	}
	var out, errb bytes.Buffer
	code := Main(t.Context(), []string{"action"}, IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }})
	if code != ExitOK {
		t.Fatalf("action: exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	refs, err := exec.Command("git", "-C", repo, "for-each-ref", "--format=%(refname)", "refs/latestwins/").Output()
	if err != nil || !strings.Contains(string(refs), "refs/latestwins/docs/") {
		t.Fatalf("refs in the workflow's repository: %q (%v); want the state under refs/latestwins/", refs, err)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests without the github-token input as x-access-token's password", n)
	}
	b, _ := os.ReadFile(summary)
	if want := "State: `github://Codertocat/Hello-World`"; !strings.Contains(string(b), want) || !strings.Contains(string(b), "contents: write") {
		t.Errorf("job summary does not name the store (%q) and its permission:\n%s", want, b)
	}
	if strings.Contains(out.String()+errb.String()+string(b), token) {
		t.Error("the token appears in the step's output or summary")
	}

	out.Reset()
	errb.Reset()
	vars["INPUT_GITHUB-TOKEN"], vars["GITHUB_RUN_ID"], vars["INPUT_SHA"] = readOnly, "8", strings.Repeat("b", 40)
	code = Main(t.Context(), []string{"action"}, IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }})
	if code == ExitOK || !strings.Contains(out.String(), "::error::") || !strings.Contains(out.String(), "contents: write") ||
		strings.Contains(out.String(), "retryable") || strings.Contains(out.String()+errb.String(), readOnly) {
		t.Errorf("a read-only token: exit %d; want an error annotation naming contents: write, not retryable, without the token:\n%s\n%s", code, out.String(), errb.String())
	}
}
