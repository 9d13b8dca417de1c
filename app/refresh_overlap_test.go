package app

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// posted is a delivery's id and the handler's answer to it.
type posted struct {
	id  string
	rec *httptest.ResponseRecorder
}

// postAsync posts a delivery from its own goroutine and sends the answer on out.
func postAsync(t *testing.T, h *harness, event, id string, body []byte, out chan<- posted) {
	t.Helper()
	go func() { out <- posted{id, h.post(t, event, id, body)} }()
}

// recordedIntents is which of ids env has recorded.
func recordedIntents(t *testing.T, auth *authority.Authority, env string, ids []string) []string {
	t.Helper()
	recs, err := auth.Intents(context.Background(), env, ids)
	if err != nil {
		t.Fatalf("intents of %s: %v", env, err)
	}
	var got []string
	for id := range recs {
		got = append(got, id)
	}
	slices.Sort(got)
	return got
}

// Overlapping deliveries for one repository at one commit share one read of its configuration:
// none is refused because another is reading it, and GitHub is asked once.
func TestOverlappingDeliveriesShareOneConfigRead(t *testing.T) {
	t.Parallel()
	const n = 8
	gh := githubtest.New(t)
	stubConfig(t, gh, ownFile) // answers exactly one read
	held, hold := newHeldClient(t, gh)
	src, auth, _ := newConfigSource(t, &fixedInstallations{c: held})
	joined := make(chan struct{}, n)
	src.Joined = func() { joined <- struct{}{} }
	h := newHarness(t, commentConfig, func(o *Options) { o.Authority, o.Config = auth, trustedOver(t, src) })
	body := fixture(t, "push.json")

	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("d-%d", i)
	}
	answers := make(chan posted, n)
	postAsync(t, h, "push", ids[0], body, answers)
	<-hold.entered // the first delivery's read is at GitHub, its answer held back
	for _, id := range ids[1:] {
		postAsync(t, h, "push", id, body, answers)
	}
	// Each other delivery either waits for the read in flight or has been answered without it.
	var early []posted
	for range n - 1 {
		select {
		case <-joined:
		case p := <-answers:
			early = append(early, p)
		}
	}
	close(hold.release)
	all := early
	for len(all) < n {
		all = append(all, <-answers)
	}
	for _, p := range early {
		t.Errorf("%s was answered while the read was in flight: %d %s", p.id, p.rec.Code, p.rec.Body)
	}
	for _, p := range all {
		if p.rec.Code != http.StatusOK {
			t.Errorf("%s: %d %s, want 200", p.id, p.rec.Code, p.rec.Body)
		}
	}
	if got := recordedIntents(t, auth, "staging", ids); !slices.Equal(got, ids) {
		t.Errorf("intents recorded %v, want all of %v", got, ids)
	}
	if n := len(gh.Requests()); n != 1 {
		t.Errorf("%d GitHub reads, want 1", n)
	}
}

// A push and the pull_request it triggers overlap: both read the repository's configuration, at
// two commits, under the one refresh lease of the repository. Neither is refused.
func TestOverlappingPushAndPullRequestAreBothRecorded(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	stubConfig(t, gh, ownFile).Times(2) // the push's commit and the pull request's base
	held, hold := newHeldClient(t, gh)
	src, auth, _ := newConfigSource(t, &fixedInstallations{c: held})
	h := newHarness(t, commentConfig, func(o *Options) { o.Authority, o.Config = auth, trustedOver(t, src) })

	push := make(chan posted, 1)
	postAsync(t, h, "push", "d-push", fixture(t, "push.json"), push)
	<-hold.entered // the push's read holds config-refresh/codertocat/hello-world
	rec := h.post(t, "pull_request", "d-pr", fixture(t, "pull_request.opened.json"))
	if rec.Code != http.StatusOK {
		t.Errorf("pull_request during the push's read: %d %s, want 200", rec.Code, rec.Body)
	}
	close(hold.release)
	if p := <-push; p.rec.Code != http.StatusOK {
		t.Errorf("push: %d %s, want 200", p.rec.Code, p.rec.Body)
	}
	if got := recordedIntents(t, auth, "staging", []string{"d-push"}); len(got) != 1 {
		t.Errorf("push intent not recorded in staging")
	}
	if got := recordedIntents(t, auth, "preview/pr-2", []string{"d-pr"}); len(got) != 1 {
		t.Errorf("pull request intent not recorded in preview/pr-2")
	}
	var refs []string
	for _, r := range gh.Requests() {
		refs = append(refs, r.Query.Get("ref"))
	}
	slices.Sort(refs)
	if want := []string{pushSha, "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"}; !slices.Equal(refs, want) {
		t.Errorf("read at %v, want %v (the push's commit and the pull request's base)", refs, want)
	}
}

// Two processes (two Apps, each with its own Authority, over one store) take deliveries for one
// repository at once: the second finds the first's refresh lease held and no copy of its own, so it
// reads the configuration itself. Both deliveries are recorded.
func TestOverlappingDeliveriesInTwoProcessesAreBothRecorded(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	stubConfig(t, gh, ownFile).Times(2) // one read per process: they share no cache
	held, hold := newHeldClient(t, gh)
	st := memory.New()
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	process := func(c *githubapp.Client) (*harness, *authority.Authority) {
		auth := authority.New(st, authority.WithClock(clock))
		src, err := ghadapter.NewFiles(&fixedInstallations{c: c}, auth, time.Minute, nil)
		if err != nil {
			t.Fatal(err)
		}
		return newHarness(t, commentConfig, func(o *Options) { o.Authority, o.Config = auth, trustedOver(t, src) }), auth
	}
	first, auth := process(held)
	second, _ := process(githubapp.New(gh.Client))
	body := fixture(t, "push.json")

	answer := make(chan posted, 1)
	postAsync(t, first, "push", "d-first", body, answer)
	<-hold.entered // the first process's read holds the repository's refresh lease
	rec := second.post(t, "push", "d-second", body)
	if rec.Code != http.StatusOK {
		t.Errorf("second process during the first's read: %d %s, want 200", rec.Code, rec.Body)
	}
	close(hold.release)
	if p := <-answer; p.rec.Code != http.StatusOK {
		t.Errorf("first process: %d %s, want 200", p.rec.Code, p.rec.Body)
	}
	ids := []string{"d-first", "d-second"}
	if got := recordedIntents(t, auth, "staging", ids); !slices.Equal(got, ids) {
		t.Errorf("intents recorded %v, want %v", got, ids)
	}
}
