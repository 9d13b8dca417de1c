package app

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app/internal/configsource"
	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

var helloWorld = core.RepoRef{Owner: "Codertocat", Name: "Hello-World"}

// holdingTransport holds the first request until release is closed or the request's context ends,
// after saying so on entered.
type holdingTransport struct {
	entered chan struct{}
	release chan struct{}
	first   chan struct{} // closed by the first request
}

func (h *holdingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-h.first:
	default:
		close(h.first)
		close(h.entered)
		select {
		case <-h.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

func newConfigSource(t *testing.T, inst ghadapter.Installations) (*ghadapter.Files, *authority.Authority, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	auth := authority.New(memory.New(), authority.WithClock(clock))
	src, err := ghadapter.NewFiles(inst, auth, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src, auth, clock
}

// ownFile is a repository's own .github/latestwins.yml that narrows nothing.
const ownFile = "version: 1\n"

// trustedOver is the App's configuration source for tests of reading repositories' own files: the
// trusted file is commentConfig on disk, allowing overrides, and each repository's own file is read
// through files.
func trustedOver(t testing.TB, files *ghadapter.Files) *configsource.Trusted {
	t.Helper()
	path := filepath.Join(t.TempDir(), "latestwins.yml")
	// Overrides allowed, so that each repository's own file is read.
	if err := os.WriteFile(path, []byte("allowed-overrides: [paths, workflow]\n"+commentConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := configsource.NewTrusted(configsource.TrustedOptions{Path: path, Files: files})
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestGitHubFilesReadsOncePerTTL(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubConfig(t, gh, commentConfig).Times(2)
	src, _, clock := newConfigSource(t, inst)
	ctx := context.Background()
	for i, advance := range []time.Duration{0, 30 * time.Second, 31 * time.Second} {
		clock.Advance(advance)
		body, err := src.File(ctx, 7, helloWorld, "main")
		if err != nil || string(body) != commentConfig {
			t.Fatalf("read %d: %q, %v", i, body, err)
		}
	}
	if n := len(gh.Requests()); n != 2 {
		t.Errorf("%d GitHub calls for three reads over 61s with a one-minute TTL, want 2", n)
	}
	if got := gh.Requests()[0].Query.Get("ref"); got != "main" {
		t.Errorf("ref = %q, want main", got)
	}
	for _, id := range inst.asked() {
		if id != 7 {
			t.Errorf("read as installation %d, want the delivery's installation 7", id)
		}
	}
}

// newHeldClient is a client on the fake whose first request waits, once it has said so on entered,
// until release is closed.
func newHeldClient(t *testing.T, gh *githubtest.Server) (*githubapp.Client, *holdingTransport) {
	t.Helper()
	hold := &holdingTransport{entered: make(chan struct{}), release: make(chan struct{}), first: make(chan struct{})}
	base, err := url.Parse(gh.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	held := github.NewClient(&http.Client{Transport: hold})
	held.BaseURL, held.UploadURL = base, base
	return githubapp.New(held), hold
}

// Spec guarantee 10, within a process: a refresh overlapping another of the same repository and
// ref makes no GitHub call of its own but waits for the one in flight and gets its fresh copy.
func TestGitHubFilesOverlappingRefreshesCallGitHubOnce(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	stubConfig(t, gh, commentConfig).Times(2) // the first read, then one refresh
	inst := &fixedInstallations{c: githubapp.New(gh.Client)}
	src, _, clock := newConfigSource(t, inst)
	joined := make(chan struct{}, 1)
	src.Joined = func() { joined <- struct{}{} }
	ctx := context.Background()

	first, err := src.File(ctx, 1, helloWorld, "")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute) // the copy is stale: the next two reads both want a refresh
	held, hold := newHeldClient(t, gh)
	inst.c = held

	type answer struct {
		body []byte
		err  error
	}
	answers := make(chan answer, 2)
	ask := func() {
		body, err := src.File(ctx, 1, helloWorld, "")
		answers <- answer{body, err}
	}
	go ask()
	<-hold.entered // the first refresh is at GitHub
	go ask()
	select {
	case <-joined: // the second waits for it
	case early := <-answers:
		t.Errorf("the overlapping refresh was answered while the first was in flight: %v, %v", early.body, early.err)
		answers <- early
	}
	close(hold.release)
	a, b := <-answers, <-answers
	if a.err != nil || b.err != nil || a.body == nil || &a.body[0] == &first[0] || &b.body[0] != &a.body[0] {
		t.Errorf("overlapping refreshes: (%p, %v) and (%p, %v); want both the one fresh copy, not the stale %p", a.body, a.err, b.body, b.err, first)
	}
	if n := len(gh.Requests()); n != 2 {
		t.Errorf("%d GitHub calls, want 2 (the first read and one refresh)", n)
	}
}

// Spec guarantee 10, across processes: while another process refreshes the repository, a delivery
// is served from this process's stale copy, with no GitHub call.
func TestGitHubFilesRefreshElsewhereServesTheCachedCopy(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubConfig(t, gh, ownFile) // the first read only
	src, auth, clock := newConfigSource(t, inst)
	h := newHarness(t, commentConfig, func(o *Options) { o.Authority, o.Config = auth, trustedOver(t, src) })
	if rec := h.post(t, "push", "d-first", fixture(t, "push.json")); rec.Code != http.StatusOK {
		t.Fatalf("first push: %d %s", rec.Code, rec.Body)
	}
	clock.Advance(2 * time.Minute)
	if _, err := auth.Acquire(context.Background(), "config-refresh/codertocat/hello-world", "other-process", "config refresh", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	cfg, err := src.File(context.Background(), 1, helloWorld, pushSha)
	var refreshing *core.RefreshingError
	if cfg == nil || !errors.As(err, &refreshing) || !errors.Is(err, core.ErrRefreshInProgress) || refreshing.Holder != "other-process" || refreshing.RetryAfter < time.Second {
		t.Errorf("refresh elsewhere: %v, %v; want the cached copy with a *RefreshingError naming other-process", cfg, err)
	}
	if rec := h.post(t, "push", "d-again", fixture(t, "push.json")); rec.Code != http.StatusOK {
		t.Errorf("push during a refresh elsewhere: %d %s, want 200 from the cached copy", rec.Code, rec.Body)
	}
	if n := len(gh.Requests()); n != 1 {
		t.Errorf("%d GitHub calls, want 1 (the first read)", n)
	}
}

// Another process refreshing a repository whose configuration this one has never read: there is
// no copy to serve and none to wait for, so this process reads it itself and the delivery is accepted.
func TestGitHubFilesRefreshElsewhereWithoutCopyReadsIt(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubConfig(t, gh, ownFile)
	src, auth, _ := newConfigSource(t, inst)
	h := newHarness(t, commentConfig, func(o *Options) { o.Authority, o.Config = auth, trustedOver(t, src) })
	if _, err := auth.Acquire(context.Background(), "config-refresh/codertocat/hello-world", "other-process", "config refresh", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	rec := h.post(t, "push", "d-push", fixture(t, "push.json"))
	if rec.Code != http.StatusOK {
		t.Errorf("push during a refresh elsewhere, no copy here: %d %s; want 200", rec.Code, rec.Body)
	}
	if n := len(gh.Requests()); n != 1 {
		t.Errorf("%d GitHub calls, want 1", n)
	}
	if got, err := auth.Intents(context.Background(), "staging", []string{"d-push"}); err != nil || len(got) != 1 {
		t.Errorf("intent d-push: %v, %v; want it recorded", got, err)
	}
}

// A configuration GitHub does not give is a retryable 503 that says so, and is not cached: the next
// delivery reads again.
func TestGitHubFilesUnavailableIs503(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	gh.On("GET", fixtureRepo+"/contents/.github/latestwins.yml", http.StatusServiceUnavailable,
		`{"message":"Service Unavailable","documentation_url":"https://docs.github.com/rest"}`)
	stubConfig(t, gh, ownFile)
	src, auth, _ := newConfigSource(t, inst)
	h := newHarness(t, commentConfig, func(o *Options) { o.Authority, o.Config = auth, trustedOver(t, src) })
	rec := h.post(t, "push", "d1", fixture(t, "push.json"))
	if rec.Code != http.StatusServiceUnavailable ||
		!strings.Contains(rec.Body.String(), "configuration of Codertocat/Hello-World at "+pushSha+": GitHub did not give .github/latestwins.yml") {
		t.Errorf("GitHub unavailable: %d %s; want 503 saying GitHub did not give the configuration", rec.Code, rec.Body)
	}
	if rec := h.post(t, "push", "d1", fixture(t, "push.json")); rec.Code != http.StatusOK {
		t.Errorf("redelivery once GitHub answers: %d %s; want 200", rec.Code, rec.Body)
	}
}

// A caller whose context ends stops waiting for the read, even the caller that started it: the read
// goes on for the others, and its result is cached.
func TestGitHubFilesCallerLeavesWithItsContext(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	stubConfig(t, gh, commentConfig)
	held, hold := newHeldClient(t, gh)
	src, _, _ := newConfigSource(t, &fixedInstallations{c: held})
	joined := make(chan struct{}, 1)
	src.Joined = func() { joined <- struct{}{} }

	ctx, cancel := context.WithCancel(context.Background())
	left := make(chan error, 1)
	go func() {
		_, err := src.File(ctx, 1, helloWorld, "main")
		left <- err
	}()
	<-hold.entered
	stayed := make(chan error, 1)
	go func() {
		cfg, err := src.File(context.Background(), 1, helloWorld, "main")
		if err == nil && cfg == nil {
			err = errors.New("no configuration")
		}
		stayed <- err
	}()
	select {
	case <-joined:
	case err := <-stayed:
		t.Errorf("the second caller was answered while the read was in flight: %v", err)
		stayed <- err
	}
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Errorf("the caller whose context ended: %v, want context.Canceled", err)
	}
	close(hold.release)
	if err := <-stayed; err != nil {
		t.Errorf("the caller still waiting: %v, want the configuration", err)
	}
	if cfg, err := src.File(context.Background(), 1, helloWorld, "main"); err != nil || cfg == nil {
		t.Errorf("after the read: %v, %v; want the cached copy", cfg, err)
	}
	if n := len(gh.Requests()); n != 1 {
		t.Errorf("%d GitHub calls, want 1", n)
	}
}

func TestRepositoryFileMissingOrRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		stub   func(t *testing.T, gh *githubtest.Server)
		status int
		want   string
	}{
		{"missing: the trusted file alone", func(t *testing.T, gh *githubtest.Server) {
			gh.On("GET", fixtureRepo+"/contents/.github/latestwins.yml", http.StatusNotFound, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)
		}, http.StatusOK, ""},
		{"refused", func(t *testing.T, gh *githubtest.Server) {
			stubConfig(t, gh, "environments:\n  staging:\n    scopes:\n      api:\n        repo: x\n")
		}, http.StatusUnprocessableEntity, "configuration of Codertocat/Hello-World at " + pushSha + ": Codertocat/Hello-World's .github/latestwins.yml is refused: " +
			`line 5: scope \"api\" of environment \"staging\": \"repo\" may only be set in the trusted file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			tt.stub(t, gh)
			src, auth, _ := newConfigSource(t, inst)
			h := newHarness(t, commentConfig, func(o *Options) { o.Authority, o.Config = auth, trustedOver(t, src) })
			for _, id := range []string{"d1", "d2"} { // the second is answered from the cache
				rec := h.post(t, "push", id, fixture(t, "push.json"))
				if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
					t.Errorf("%s: %d %s; want %d saying %q", id, rec.Code, rec.Body, tt.status, tt.want)
				}
			}
			if n := len(gh.Requests()); n != 1 {
				t.Errorf("%d GitHub calls, want 1", n)
			}
			_, err := auth.Status(context.Background(), "staging")
			if accepted := err == nil; accepted != (tt.status == http.StatusOK) {
				t.Errorf("staging accepted=%v (%v) with a %d answer", accepted, err, tt.status)
			}
		})
	}
}
