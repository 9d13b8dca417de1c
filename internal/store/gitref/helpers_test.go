package gitref

import (
	"net/http/cgi"
	"net/http/httptest"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latestwins/latestwins/internal/testutil"
)

// needGit skips (or, under CI, fails) a test that needs the git programs.
func needGit(t testing.TB) {
	t.Helper()
	if _, err := osexec.LookPath("git"); err != nil {
		testutil.MissingTool(t, "git is not on the PATH: the gitref tests run git's own receive-pack")
	}
}

func exec(name string, args ...string) (string, error) {
	out, err := osexec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func git(t testing.TB, args ...string) string {
	t.Helper()
	out, err := osexec.Command("git", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// newRepo makes an empty bare repository in dir and returns its path; pushes over HTTP are allowed
// and nothing runs in the background of a push.
func newRepo(t testing.TB, dir string) string {
	t.Helper()
	needGit(t)
	path := filepath.Join(dir, "state.git")
	git(t, "init", "--bare", "-q", path)
	for _, kv := range [][2]string{{"http.receivepack", "true"}, {"receive.autogc", "false"}, {"gc.auto", "0"}, {"core.fsync", "none"}} {
		git(t, "-C", path, "config", kv[0], kv[1])
	}
	return path
}

// fileStore is a Store on a new bare repository reached through git's programs.
func fileStore(t testing.TB) (*Store, string) {
	t.Helper()
	path := newRepo(t, t.TempDir())
	tr, err := NewFileTransport(path)
	if err != nil {
		t.Fatal(err)
	}
	return New(tr), path
}

// gitServer is git's own smart HTTP server (git http-backend behind net/http/cgi) on loopback,
// serving the bare repositories in root.
type gitServer struct {
	*httptest.Server
	root string
	n    atomic.Int64
}

func newGitServer(t testing.TB) *gitServer {
	t.Helper()
	needGit(t)
	root := t.TempDir()
	backend := filepath.Join(git(t, "--exec-path"), "git-http-backend")
	srv := &gitServer{root: root}
	srv.Server = httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	t.Cleanup(srv.Close)
	return srv
}

// repo makes a new repository on the server and returns its URL.
func (g *gitServer) repo(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(g.root, "r"+strconv.FormatInt(g.n.Add(1), 10))
	path := newRepo(t, dir)
	rel, _ := filepath.Rel(g.root, path)
	return g.URL + "/" + filepath.ToSlash(rel)
}

// httpStore is a Store on a new repository of the server.
func (g *gitServer) store(t testing.TB) *Store {
	t.Helper()
	tr, err := NewHTTPTransport(g.repo(t), "", g.Client())
	if err != nil {
		t.Fatal(err)
	}
	return New(tr)
}
