package app

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

var helloWorld = RepoRef{Owner: "Codertocat", Name: "Hello-World"}

// holdingTransport holds the first request until release is closed, after saying so on entered.
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
		<-h.release
	}
	return http.DefaultTransport.RoundTrip(r)
}

func newConfigSource(t *testing.T, inst Installations) (*GitHubConfig, *authority.Authority, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	auth := authority.New(memory.New(), authority.WithClock(clock))
	src, err := NewGitHubConfig(inst, auth, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src, auth, clock
}

func TestGitHubConfigReadsOncePerTTL(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubConfig(t, gh, commentConfig).Times(2)
	src, _, clock := newConfigSource(t, inst)
	ctx := context.Background()
	for i, advance := range []time.Duration{0, 30 * time.Second, 31 * time.Second} {
		clock.Advance(advance)
		cfg, err := src.Config(ctx, 7, helloWorld, "main")
		if err != nil || len(cfg.Environments) != 2 {
			t.Fatalf("read %d: %v, %v", i, cfg, err)
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

// Spec guarantee 10: two overlapping refreshes of one repository make one GitHub call; the second
// returns the cached copy with a retryable "refresh in progress".
func TestGitHubConfigOverlappingRefreshesCallGitHubOnce(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	stubConfig(t, gh, commentConfig).Times(2) // the first read, then one refresh
	hold := &holdingTransport{entered: make(chan struct{}), release: make(chan struct{}), first: make(chan struct{})}
	base, err := url.Parse(gh.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	plain := githubapp.New(gh.Client)
	held := github.NewClient(&http.Client{Transport: hold})
	held.BaseURL, held.UploadURL = base, base
	inst := &fixedInstallations{c: plain}
	src, _, clock := newConfigSource(t, inst)
	ctx := context.Background()

	first, err := src.Config(ctx, 1, helloWorld, "")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute) // the copy is stale: the next two reads both want a refresh
	inst.c = githubapp.New(held)

	type answer struct {
		cfg *config.Config
		err error
	}
	slow := make(chan answer, 1)
	go func() {
		cfg, err := src.Config(ctx, 1, helloWorld, "")
		slow <- answer{cfg, err}
	}()
	<-hold.entered // the first refresh is at GitHub, holding config-refresh/codertocat/hello-world

	cfg, err := src.Config(ctx, 1, helloWorld, "")
	var refreshing *RefreshingError
	if !errors.As(err, &refreshing) || !errors.Is(err, ErrRefreshInProgress) || refreshing.RetryAfter < time.Second {
		t.Errorf("overlapping refresh: error %v, want a *RefreshingError with a retry-after", err)
	}
	if cfg != first {
		t.Errorf("overlapping refresh returned %p, want the cached copy %p", cfg, first)
	}
	close(hold.release)
	got := <-slow
	if got.err != nil || got.cfg == nil || got.cfg == first {
		t.Errorf("the refresh: %v, %v; want a fresh copy", got.cfg, got.err)
	}
	if n := len(gh.Requests()); n != 2 {
		t.Errorf("%d GitHub calls, want 2 (the first read and one refresh)", n)
	}
}

// Another process refreshing a repository whose configuration this one has never read: a retryable
// 503 with Retry-After, and no GitHub call.
func TestGitHubConfigRefreshElsewhereWithoutCopyIs503(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	src, auth, _ := newConfigSource(t, inst)
	h := newHarness(t, commentConfig, func(o *Options) { o.Authority, o.Config = auth, src })
	if _, err := auth.Acquire(context.Background(), "config-refresh/codertocat/hello-world", "other-process", "config refresh", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	rec := h.post(t, "push", "d-push", fixture(t, "push.json"))
	retry, _ := strconv.Atoi(rec.Header().Get("Retry-After"))
	if rec.Code != http.StatusServiceUnavailable || retry < 30 || retry > 30+int(auth.Skew().Seconds()) ||
		!strings.Contains(rec.Body.String(), "configuration of Codertocat/Hello-World at "+pushSha+": refresh in progress (by other-process)") {
		t.Errorf("%d Retry-After %q %s; want 503, Retry-After the lease's time left and who is refreshing", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if n := len(gh.Requests()); n != 0 {
		t.Errorf("%d GitHub calls, want none", n)
	}
}

func TestGitHubConfigMissingAndInvalidAre422(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		stub func(t *testing.T, gh *githubtest.Server)
		want string
	}{
		{"missing", func(t *testing.T, gh *githubtest.Server) {
			gh.On("GET", fixtureRepo+"/contents/.github/latestwins.yml", http.StatusNotFound, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)
		}, "Codertocat/Hello-World has no .github/latestwins.yml at " + pushSha + ": add one (see docs/config.md)"},
		{"invalid", func(t *testing.T, gh *githubtest.Server) {
			stubConfig(t, gh, "environments:\n  staging:\n    scopes:\n      api:\n        repo: x\n")
		}, "configuration of Codertocat/Hello-World at " + pushSha + ": .github/latestwins.yml is invalid: line 5: unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			tt.stub(t, gh)
			src, auth, _ := newConfigSource(t, inst)
			h := newHarness(t, commentConfig, func(o *Options) { o.Authority, o.Config = auth, src })
			for _, id := range []string{"d1", "d2"} { // the second is answered from the cache
				rec := h.post(t, "push", id, fixture(t, "push.json"))
				if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), tt.want) {
					t.Errorf("%s: %d %s; want 422 saying %q", id, rec.Code, rec.Body, tt.want)
				}
			}
			if n := len(gh.Requests()); n != 1 {
				t.Errorf("%d GitHub calls, want 1", n)
			}
			if _, err := auth.Status(context.Background(), "staging"); !errors.Is(err, authority.ErrInvalidInput) {
				t.Errorf("staging has state after a bad configuration: %v", err)
			}
		})
	}
}

// Each ref has its own cached configuration: one branch's file is never served for another, and
// results older than the TTL are dropped as new ones come in.
func TestGitHubConfigCachesPerRef(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubRef := func(ref, yaml string) {
		file := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/contents/{path}", http.StatusOK, "response-if-content-is-a-file")
		file["content"] = base64.StdEncoding.EncodeToString([]byte(yaml))
		file["path"] = config.Path
		gh.On("GET", fixtureRepo+"/contents/.github/latestwins.yml?ref="+ref, http.StatusOK, file)
	}
	stubRef("main", commentConfig)
	stubRef("feature", "environments:\n  feature:\n    scopes:\n      api:\n        repository: Codertocat/Hello-World\n        branch: feature\n")
	stubRef("later", commentConfig)
	src, _, clock := newConfigSource(t, inst)
	ctx := context.Background()
	envs := func(ref string) []string {
		t.Helper()
		cfg, err := src.Config(ctx, 1, helloWorld, ref)
		if err != nil {
			t.Fatalf("config at %s: %v", ref, err)
		}
		var names []string
		for _, e := range cfg.Environments {
			names = append(names, e.Name)
		}
		return names
	}
	mainEnvs := envs("main")
	if diff := cmp.Diff(mainEnvs, envs("main")); diff != "" { // from the cache
		t.Errorf("cached main (-first +second):\n%s", diff)
	}
	featureEnvs := envs("feature")
	if cmp.Equal(mainEnvs, featureEnvs) {
		t.Errorf("feature got main's environments %v", featureEnvs)
	}
	if n := len(gh.Requests()); n != 2 {
		t.Errorf("%d GitHub calls, want one per ref", n)
	}
	clock.Advance(2 * time.Minute)
	envs("later")
	if n := src.cachedEntries(); n != 1 {
		t.Errorf("%d cached results after the TTL passed, want only the fresh one", n)
	}
}
