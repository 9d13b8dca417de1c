package e2e

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// gitHost is GitHub's git host as a workflow job meets it, on loopback: git's own smart HTTP server
// (git http-backend behind net/http/cgi) serving one bare repository at /OWNER/REPO.git, the path a
// github://OWNER/REPO store asks GITHUB_SERVER_URL for. Like GitHub it takes the workflow's token
// as basic auth with the user x-access-token, and answers 401 without it. Anything but that
// repository (the REST API under /api/v3, another repository) is answered 404 and recorded, so
// that a test can tell that its runs reached nothing else.
type gitHost struct {
	*httptest.Server
	token string
	bare  string // the repository on disk

	mu      sync.Mutex
	refused []string // requests without the token
	strays  []string // requests for anything but the repository
	pushed  []string // receive-pack posts that reached the backend
}

// newGitHost serves an empty bare repository for owner/repo, which takes pushes.
func newGitHost(t *testing.T, owner, repo string) *gitHost {
	t.Helper()
	requireTool(t, "git", "", "install git: the test serves a repository with git http-backend")
	root := t.TempDir()
	h := &gitHost{token: "ghs_" + strings.Repeat("E", 36), bare: filepath.Join(root, owner, repo+".git")}
	git(t, root, "init", "--bare", "-q", h.bare)
	for _, kv := range [][2]string{{"http.receivepack", "true"}, {"receive.autogc", "false"}, {"gc.auto", "0"}} {
		git(t, h.bare, "config", kv[0], kv[1])
	}
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	prefix := "/" + owner + "/" + repo + ".git/"
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		what := r.Method + " " + r.URL.RequestURI()
		user, pass, ok := r.BasicAuth()
		switch {
		case !strings.HasPrefix(r.URL.Path, prefix):
			h.record(&h.strays, what)
			http.NotFound(w, r)
		case !ok || user != "x-access-token" || pass != h.token:
			h.record(&h.refused, what)
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token. Password authentication is not supported for Git operations.", http.StatusUnauthorized)
		default:
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
				h.record(&h.pushed, what)
			}
			backend.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *gitHost) record(list *[]string, what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*list = append(*list, what)
}

// seen is what the host was asked: the requests it refused or had nothing for, and the pushes.
func (h *gitHost) seen() (refused, strays []string, pushes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.refused), slices.Clone(h.strays), len(h.pushed)
}
