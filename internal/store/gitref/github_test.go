package gitref

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

func TestGitHubRepoNames(t *testing.T) {
	t.Parallel()
	for raw, want := range map[string]string{
		"github://octo-org/deploy-state":             "octo-org/deploy-state",
		"github://Octo/state.git":                    "Octo/state",
		"github://a/b/":                              "a/b",
		"github://user_corp/.github":                 "user_corp/.github",
		"github://o1/repo_name-2.x":                  "o1/repo_name-2.x",
		"github://" + strings.Repeat("a", 39) + "/r": strings.Repeat("a", 39) + "/r",
	} {
		owner, repo, err := GitHubRepo(raw)
		if err != nil || owner+"/"+repo != want {
			t.Errorf("GitHubRepo(%q) = %s/%s, %v; want %s", raw, owner, repo, err, want)
		}
	}
	for raw, why := range map[string]string{
		"github://octo-org":                          "names no repository",
		"github:///state":                            "names no repository",
		"github://octo-org/":                         "names no repository",
		"github://octo-org/state/extra":              "not a path",
		"github://-octo/state":                       "not a GitHub account name",
		"github://octo-/state":                       "not a GitHub account name",
		"github://oc--to/state":                      "not a GitHub account name",
		"github://oc.to/state":                       "not a GitHub account name",
		"github://" + strings.Repeat("a", 40) + "/r": "at most 39",
		"github://octo/st ate":                       "not a GitHub repository name",
		"github://octo/..":                           "not a GitHub repository name",
		"github://octo/" + strings.Repeat("r", 101):  "at most 100",
		"github://x-access-token:t@octo/state":       "no query, credentials",
		"github://octo/state?ref=main":               "no query, credentials",
	} {
		_, _, err := GitHubRepo(raw)
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "github://OWNER/REPO") {
			t.Errorf("GitHubRepo(%q) = %v; want ErrBadURL saying %q and the form to give", raw, err, why)
		}
	}
}

// fakeGitHub is git http-backend on loopback behind what GitHub's git host does with a token: it
// takes basic auth with the user x-access-token and the token as password, answers 401 to a
// request without it, and 403 to a push with a token that may only read. Repositories live at
// /OWNER/REPO.git.
type fakeGitHub struct {
	*httptest.Server
	root     string
	token    string // may read and write
	readOnly string // may read only
	mu       sync.Mutex
	users    map[string]int // basic auth users seen
	pushes   atomic.Int64   // receive-pack posts that reached the backend
	// answer, when set, replaces the answer to each push the backend took: it gets the ref the
	// push named and the backend's answer, and writes its own.
	answer func(w http.ResponseWriter, ref string, real *httptest.ResponseRecorder)
	// skip, when set, answers each push with answer without sending it to the backend.
	skip bool
}

func newFakeGitHub(t *testing.T) *fakeGitHub {
	t.Helper()
	needGit(t)
	g := &fakeGitHub{root: t.TempDir(), token: "ghs_" + strings.Repeat("T", 36), readOnly: "ghs_" + strings.Repeat("R", 36), users: map[string]int{}}
	backend := &cgi.Handler{Path: filepath.Join(git(t, "--exec-path"), "git-http-backend"), Env: []string{"GIT_PROJECT_ROOT=" + g.root, "GIT_HTTP_EXPORT_ALL=1"}}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		g.mu.Lock()
		g.users[user]++
		g.mu.Unlock()
		push := r.URL.Query().Get("service") == "git-receive-pack" || strings.HasSuffix(r.URL.Path, "/git-receive-pack")
		switch {
		case !ok || user != "x-access-token" || pass != g.token && pass != g.readOnly:
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Invalid username or token. Password authentication is not supported for Git operations.", http.StatusUnauthorized)
			return
		case push && pass == g.readOnly:
			http.Error(w, "Permission to repository denied to github-actions[bot].", http.StatusForbidden)
			return
		}
		g.mu.Lock()
		answer, skip := g.answer, g.skip
		g.mu.Unlock()
		if r.Method != http.MethodPost || !push || answer == nil {
			backend.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ref := pushedRef(body)
		real := httptest.NewRecorder()
		if !skip {
			r.Body = io.NopCloser(bytes.NewReader(body))
			backend.ServeHTTP(real, r)
			g.pushes.Add(1)
		}
		answer(w, ref, real)
	}))
	t.Cleanup(g.Close)
	return g
}

// pushedRef is the ref of a push request's first command ("OLD NEW REF\0caps").
func pushedRef(body []byte) string {
	if len(body) < 4 {
		return ""
	}
	n, err := strconv.ParseUint(string(body[:4]), 16, 16)
	if err != nil || int(n) > len(body) || n < 4 {
		return ""
	}
	line, _, _ := strings.Cut(string(body[4:n]), "\x00")
	f := strings.Fields(line)
	if len(f) != 3 {
		return ""
	}
	return f[2]
}

// refusal answers a push as refused, in words no git server is known to use.
func refusal(w http.ResponseWriter, ref string, _ *httptest.ResponseRecorder) {
	w.Header().Set("Content-Type", "application/x-git-receive-pack-result")
	for _, l := range []string{"unpack ok\n", "ng " + ref + " the swap did not happen, in words of our own\n"} {
		fmt.Fprintf(w, "%04x%s", len(l)+4, l)
	}
	io.WriteString(w, "0000")
}

// repo makes OWNER/state on the server and returns its path.
func (g *fakeGitHub) repo(t *testing.T, owner string) string {
	t.Helper()
	return newRepo(t, filepath.Join(g.root, owner))
}

// answerPushes sets how pushes are answered (see answer and skip).
func (g *fakeGitHub) answerPushes(answer func(http.ResponseWriter, string, *httptest.ResponseRecorder), skip bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.answer, g.skip = answer, skip
}

func (g *fakeGitHub) env(vars ...string) func(string) string {
	m := map[string]string{ServerURLVar: g.URL}
	for i := 0; i+1 < len(vars); i += 2 {
		m[vars[i]] = vars[i+1]
	}
	return func(k string) string { return m[k] }
}

func (g *fakeGitHub) open(t *testing.T, getenv func(string) string) *Store {
	t.Helper()
	s, err := Open("github://octo-org/state", getenv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestGitHubStore: github://OWNER/REPO reaches the repository on the git host of
// GITHUB_SERVER_URL, sends the token as GitHub takes it (basic auth, user x-access-token), and
// keeps the compare-and-swap: a stale write loses.
func TestGitHubStore(t *testing.T) {
	t.Parallel()
	g := newFakeGitHub(t)
	path := g.repo(t, "octo-org")
	ctx := t.Context()
	key := authority.EnvKey("prod")

	a := g.open(t, g.env(GitHubTokenVar, g.token))
	b := g.open(t, g.env(TokenVar, g.token, GitHubTokenVar, "not-this-one"))
	mustPut(t, a, envDoc("prod", 0, 1, false))
	if d, err := b.Get(ctx, key); err != nil || d.Rev != 1 {
		t.Fatalf("Get through %s = %+v, %v; want revision 1 (it wins over %s)", TokenVar, d, err, GitHubTokenVar)
	}
	mustPut(t, a, envDoc("prod", 1, 2, true))
	if _, err := b.Put(ctx, envDoc("prod", 1, 3, false)); !errors.Is(err, authority.ErrConflict) {
		t.Fatalf("stale Put = %v, want ErrConflict", err)
	}
	ref, _ := docRef(key)
	if got := refAt(t, path, ref); got == "" || len(got) != 40 {
		t.Fatalf("ref %s in %s = %q, want a commit", ref, path, got)
	}
	if p, err := b.Pending(ctx); err != nil || len(p) != 1 || p[0] != "prod" {
		t.Fatalf("Pending = %v, %v; want [prod]", p, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.users) != 1 || g.users["x-access-token"] == 0 {
		t.Fatalf("basic auth users %v, want only x-access-token", g.users)
	}
}

// TestGitHubTokens: without a token, or with one GitHub refuses, the error says what to set, and
// never holds the token.
func TestGitHubTokens(t *testing.T) {
	t.Parallel()
	g := newFakeGitHub(t)
	g.repo(t, "octo-org")
	ctx := t.Context()

	_, err := Open("github://octo-org/state", g.env())
	if !errors.Is(err, ErrNoToken) {
		t.Fatalf("Open without a token = %v, want ErrNoToken", err)
	}
	for _, want := range []string{TokenVar, GitHubTokenVar, "contents: write", "octo-org/state"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("no-token error %q does not say %q", err, want)
		}
	}

	wrong := "ghs_" + strings.Repeat("W", 36)
	_, err = g.open(t, g.env(GitHubTokenVar, wrong)).Get(ctx, authority.EnvKey("prod"))
	if err == nil || !strings.Contains(err.Error(), "refused the token in "+GitHubTokenVar) || strings.Contains(err.Error(), wrong) {
		t.Fatalf("Get with a refused token = %v; want it to say the token in %s was refused, without the token", err, GitHubTokenVar)
	}

	before := g.pushes.Load()
	_, err = g.open(t, g.env(TokenVar, g.readOnly)).Put(ctx, envDoc("prod", 0, 1, false))
	if err == nil || errors.Is(err, authority.ErrConflict) || !strings.Contains(err.Error(), "may not write to octo-org/state") ||
		!strings.Contains(err.Error(), "contents: write") || strings.Contains(err.Error(), g.readOnly) {
		t.Fatalf("Put with a read-only token = %v; want it to say the job needs contents: write, without the token", err)
	}
	if g.pushes.Load() != before {
		t.Fatal("a push refused at the door was sent again")
	}
	var denied interface{ AccessDenied() bool }
	if !errors.As(err, &denied) || !denied.AccessDenied() {
		t.Errorf("Put with a read-only token = %v; want an error that says access was denied (AccessDenied)", err)
	}

	for _, server := range []string{"ftp://example.com", "github.com", "https://user:pw@example.com"} {
		_, err := Open("github://octo-org/state", func(k string) string {
			return map[string]string{ServerURLVar: server, GitHubTokenVar: g.token}[k]
		})
		if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), ServerURLVar) || strings.Contains(err.Error(), g.token) {
			t.Errorf("%s=%s: %v; want ErrBadURL naming %s", ServerURLVar, server, err, ServerURLVar)
		}
	}
}

// TestGitHubRefusedSwap: a push the server refuses, in whatever words, is settled by reading the
// ref again: a conflict when another write is stored, success when the server applied it after
// all, and a plain failure (neither) when the ref did not move.
func TestGitHubRefusedSwap(t *testing.T) {
	t.Parallel()
	key := authority.EnvKey("prod")
	setup := func(t *testing.T) (*fakeGitHub, *Store, *Store) {
		g := newFakeGitHub(t)
		g.repo(t, "octo-org")
		env := g.env(GitHubTokenVar, g.token)
		return g, g.open(t, env), g.open(t, env)
	}
	t.Run("stale", func(t *testing.T) {
		t.Parallel()
		g, a, b := setup(t)
		mustPut(t, a, envDoc("prod", 0, 1, false))
		if _, err := b.Get(t.Context(), key); err != nil {
			t.Fatal(err)
		}
		mustPut(t, a, envDoc("prod", 1, 2, false))
		g.answerPushes(refusal, false)
		if _, err := b.Put(t.Context(), envDoc("prod", 1, 3, false)); !errors.Is(err, authority.ErrConflict) {
			t.Fatalf("stale Put refused in unknown words = %v, want ErrConflict", err)
		}
	})
	t.Run("applied", func(t *testing.T) {
		t.Parallel()
		g, a, b := setup(t)
		g.answerPushes(refusal, false)
		if rev, err := a.Put(t.Context(), envDoc("prod", 0, 1, false)); err != nil || rev != 1 {
			t.Fatalf("Put the server applied but called refused = %d, %v; want 1, nil", rev, err)
		}
		if d, err := b.Get(t.Context(), key); err != nil || d.Rev != 1 {
			t.Fatalf("Get = %+v, %v; want revision 1", d, err)
		}
	})
	t.Run("unchanged", func(t *testing.T) {
		t.Parallel()
		g, a, b := setup(t)
		mustPut(t, a, envDoc("prod", 0, 1, false))
		g.answerPushes(refusal, true)
		_, err := a.Put(t.Context(), envDoc("prod", 1, 2, false))
		if err == nil || errors.Is(err, authority.ErrConflict) || !strings.Contains(err.Error(), "not written, the ref is unchanged") {
			t.Fatalf("Put refused with the ref unchanged = %v, want a not-written error (neither success nor conflict)", err)
		}
		if d, err := b.Get(t.Context(), key); err != nil || d.Rev != 1 {
			t.Fatalf("Get = %+v, %v; want revision 1", d, err)
		}
	})
}
