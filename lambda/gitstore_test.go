package lambda_test

import (
	"context"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/testutil"
	"github.com/latestwins/latestwins/lambda"
)

// TestBuildOnAGitHubStore: the function keeps its state in a GitHub repository's refs
// (github://OWNER/REPO) on the host of LATESTWINS_GITHUB_URL, here git http-backend on loopback,
// pushing with its git token as GitHub takes one (basic auth, user x-access-token).
func TestBuildOnAGitHubStore(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		testutil.MissingTool(t, "git is not on the PATH: the test serves a repository with git http-backend")
	}
	root := t.TempDir()
	repo := filepath.Join(root, "octo-org", "state.git")
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "--bare", "-q", repo)
	git("-C", repo, "config", "http.receivepack", "true")
	token := "github_pat_" + strings.Repeat("z", 30)
	backend := &cgi.Handler{Path: filepath.Join(git("--exec-path"), "git-http-backend"), Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	var refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "x-access-token" || pass != token {
			refused.Add(1)
			http.Error(w, "Invalid username or token.", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()

	s := &lambda.Settings{Store: "github://octo-org/state", GitToken: token, GitServerURL: srv.URL, Config: testdata(t, "lambda", "latestwins.yml"),
		WebhookSecret: testSecret, GitHubAPIURL: "https://api.github.com/", MaxBodyBytes: app.DefaultMaxBodyBytes, Stall: lambda.DefaultStall, MaxAttempts: 3}
	h, err := lambda.Build(context.Background(), s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := invokeHTTP(t, h, fixture(t, "function-url-push.json")); res.StatusCode != 200 || !strings.Contains(res.Body, `"outcome":"accepted"`) {
		t.Fatalf("push: %d %s", res.StatusCode, res.Body)
	}
	if refs := git("-C", repo, "for-each-ref", "--format=%(refname)", "refs/latestwins/"); !strings.Contains(refs, "refs/latestwins/docs/") {
		t.Fatalf("refs in the repository: %q; want the state under refs/latestwins/", refs)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests without the git token as x-access-token's password", n)
	}
}
