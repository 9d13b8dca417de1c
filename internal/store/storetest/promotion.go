package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Promotion: an environment that requires another deploys a commit only once that commit is live,
// deployed with a success outcome, in the same scope of the required environment (or, when a
// descendant counts, a commit the comparer says builds on it). Until then its deploy gate refuses
// with a retryable reason, and the recovery sweep leaves the waiting head alone; once the commit is
// live there, the gate passes and the sweep re-drives the head.
func promotionCases() []testCase {
	return []testCase{
		{"WaitsUntilLiveInTheRequiredEnvironment", testPromotionWaits},
		{"DescendantCountsOnlyWhenTheComparerSaysSo", testPromotionAncestor},
		{"SweepLeavesAWaitingHeadThenRedrivesIt", testPromotionSweep},
		{"RequirementChangeIsRecorded", testPromotionRecorded},
		{"RollbackIsNotHeld", testPromotionRollback},
		{"ComparerAskedOncePerPair", testPromotionAskedOnce},
		{"RepeatedRequestAfterTheSourceMoved", testPromotionRepeat},
	}
}

// live deploys commit in env's scopes with a whole pass of its own.
func (h *harness) live(a *authority.Authority, env, id, commit string, scopes ...string) {
	h.t.Helper()
	res := h.accept(a, push(env, id, commit, scopes...), false)
	h.deploy(a, env, res.Generation, "run-"+id, "run-"+id, scopes...)
}

var requiresStaging = &authority.Requirements{Environments: []string{"staging"}}

// prodPush is a push to prod whose maker's configuration says prod requires req.
func prodPush(id, commit string, req *authority.Requirements) authority.Intent {
	in := push("prod", id, commit, "api")
	in.Requires = req
	return in
}

// wantPromotionWait checks that the deploy of the pass at gen in prod is refused for want of
// commit in staging, retryably, with the words the check run and comments show.
func (h *harness) wantPromotionWait(a *authority.Authority, gen int64, commit, live string) {
	h.t.Helper()
	held, err := h.tryDeploy(a, "prod", gen, fmt.Sprintf("run-%d", gen), "api")
	if err != nil {
		h.t.Fatal(err)
	}
	if held == nil {
		h.t.Fatalf("prod deployed generation %d (%s) although staging does not have it live", gen, commit[:7])
	}
	want := fmt.Sprintf("waiting for staging: %s is not live there yet", commit[:7])
	if live != "" {
		want += fmt.Sprintf(" (%s is", live[:7])
	}
	if held.Promotion == nil || held.Promotion.Environment != "staging" || held.Promotion.Sha != commit ||
		!strings.Contains(authority.WaitText(held), want) || !strings.Contains(held.Error(), want) || held.RetryAfter <= 0 ||
		!errors.Is(held, authority.ErrLeaseHeld) {
		h.t.Fatalf("prod's deploy gate for %s: %v (wait %q, promotion %+v); want a retryable refusal saying %q", commit[:7], held, authority.WaitText(held), held.Promotion, want)
	}
}

func testPromotionWaits(t *testing.T, h *harness) {
	h.singleDocument("the reads of a gate on one document")
	x, y := sha("x", 1), sha("y", 1)
	a := h.process()
	res := h.accept(a, prodPush("p-x", x, requiresStaging), true)
	// Nothing ever accepted in staging.
	h.wantPromotionWait(a, res.Generation, x, "")

	// staging runs another commit, then has x live in another scope only, then fails x in api.
	s := h.process()
	h.live(s, "staging", "s-y", y, "api")
	h.live(s, "staging", "s-x-web", x, "web")
	h.wantPromotionWait(a, res.Generation, x, y)
	sres := h.accept(s, push("staging", "s-x", x, "api"), true)
	g := h.gate(s, "staging", sres.Generation, "stage-x", "api")
	if _, err := s.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: sres.Generation, Scopes: []string{"api"},
		Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "smoke test failed"}); err != nil {
		t.Fatal(err)
	}
	h.wantPromotionWait(a, res.Generation, x, y)
	if m := h.scope("prod", "api").Mailbox; m == nil || m.Sha != x || h.scope("prod", "api").Live != nil {
		t.Fatalf("prod while it waits: pending %+v, live %+v; want x pending and nothing live", m, h.scope("prod", "api").Live)
	}

	// x live in staging's api: prod's gate passes, and costs one read of staging's document.
	h.live(s, "staging", "s-x-again", x, "api")
	gets, puts := h.store.requests()
	g = h.gate(a, "prod", res.Generation, "run-prod", "api")
	gets2, puts2 := h.store.requests()
	if gets2-gets != 1 || puts2-puts != 1 {
		t.Fatalf("prod's deploy gate made %d reads and %d writes; want 1 read (staging's document) and 1 write", gets2-gets, puts2-puts)
	}
	h.complete(a, g, authority.OutcomeSuccess, "run-prod")
	if l := h.scope("prod", "api").Live; l == nil || l.Sha != x {
		t.Fatalf("prod after staging has x live: %+v; want x live", l)
	}
}

// fakeComparer answers from a table of "base..head" pairs; anything else is diverged.
type fakeComparer struct {
	answers map[string]authority.CommitOrder
}

func (f fakeComparer) Compare(_ context.Context, in authority.Intent, base, head string) (authority.CommitOrder, error) {
	if in.Sha != base {
		return "", fmt.Errorf("asked about %s for an intent of %s", base, in.Sha)
	}
	if o, ok := f.answers[base+".."+head]; ok {
		return o, nil
	}
	return authority.Diverged, nil
}

func testPromotionAncestor(t *testing.T, h *harness) {
	x, y, z := sha("x", 2), sha("y", 2), sha("z", 2)
	anc := &authority.Requirements{Environments: []string{"staging"}, Ancestor: true}
	comparer := fakeComparer{answers: map[string]authority.CommitOrder{x + ".." + y: authority.Ahead}}
	withComparer := func() *authority.Authority {
		return h.authority(h.store, authority.WithPromotionComparer(comparer))
	}
	s := h.process()
	h.live(s, "staging", "s-z", z, "api") // z does not build on x

	res := h.accept(h.process(), prodPush("p-x", x, anc), true)
	h.wantPromotionWait(withComparer(), res.Generation, x, z)

	h.live(s, "staging", "s-y", y, "api") // y builds on x
	// Without a comparer only x itself counts.
	h.wantPromotionWait(h.process(), res.Generation, x, y)
	// Where the environment does not accept descendants, the comparer is not asked.
	exact := h.process()
	h.accept(exact, prodPush("p-exact", x, requiresStaging), false) // joins x's pending generation
	if e := h.env("prod"); e.Requires == nil || e.Requires.Ancestor {
		t.Fatalf("prod's requirement after a push that names it without descendants: %+v", e.Requires)
	}
	h.wantPromotionWait(withComparer(), res.Generation, x, y)
	h.accept(exact, prodPush("p-anc", x, anc), false)
	if held, err := h.tryDeploy(withComparer(), "prod", res.Generation, "run-prod", "api"); err != nil || held != nil {
		t.Fatalf("prod's deploy of x with its descendant y live in staging: held %v, %v; want it deployed", held, err)
	}
}

func testPromotionSweep(t *testing.T, h *harness) {
	const stall = 10 * time.Minute
	x := sha("x", 3)
	a := h.process()
	res := h.accept(a, prodPush("p-x", x, requiresStaging), true)
	h.wantPromotionWait(a, res.Generation, x, "")
	h.clock.Advance(stall + testTTL + h.skew) // the pass gave up waiting

	var redriven []authority.StalledWork
	sweep := func() {
		t.Helper()
		rep, err := h.process().Sweep(h.ctx, stall, 3, func(_ context.Context, w authority.StalledWork) error {
			redriven = append(redriven, w)
			return nil
		})
		if err != nil || len(rep.Failed) > 0 {
			t.Fatalf("sweep: %+v, %v", rep, err)
		}
	}
	for range 3 { // more rounds than attempts: waiting uses none
		sweep()
		h.clock.Advance(stall)
	}
	if len(redriven) != 0 {
		t.Fatalf("the sweep re-drove %+v while staging does not have x; want the waiting head left alone", redriven)
	}
	if m := h.scope("prod", "api").Mailbox; m == nil || m.Attempt != 0 || m.Failed || h.scope("prod", "api").Failure != nil {
		t.Fatalf("prod's head after sweeps while it waits: %+v, failure %+v; want it pending with no attempt used", m, h.scope("prod", "api").Failure)
	}

	h.live(h.process(), "staging", "s-x", x, "api")
	sweep()
	if len(redriven) != 1 || redriven[0].Environment != "prod" || redriven[0].Generation != res.Generation || redriven[0].Attempt != 1 {
		t.Fatalf("re-driven once staging has x live: %+v; want prod generation %d, attempt 1", redriven, res.Generation)
	}
	if held, err := h.tryDeploy(h.process(), "prod", res.Generation, "redriven", "api"); err != nil || held != nil {
		t.Fatalf("the re-driven pass: held %v, %v; want it deployed", held, err)
	}
}

func testPromotionRecorded(t *testing.T, h *harness) {
	h.singleDocument("the newest event by one event counter")
	x := sha("x", 4)
	a := h.process()
	res := h.accept(a, prodPush("p-1", x, requiresStaging), true)
	h.accept(a, prodPush("p-2", x, &authority.Requirements{Environments: []string{"staging", "staging"}}), false) // the same, written otherwise
	var changes []authority.Event
	for _, ev := range h.history("prod") {
		if ev.Kind == authority.EventRequires {
			changes = append(changes, ev)
		}
	}
	if len(changes) != 1 || !strings.Contains(changes[0].Message, "from none to staging by octocat") {
		t.Fatalf("requirement events: %+v; want one, from none to staging by octocat", changes)
	}
	h.wantPromotionWait(a, res.Generation, x, "")

	changed, err := a.SetRequires(h.ctx, "prod", authority.Requirements{}, "ops")
	if err != nil || !changed {
		t.Fatalf("dropping the requirement: changed %v, %v", changed, err)
	}
	evs := h.history("prod")
	if last := evs[len(evs)-1]; last.Kind != authority.EventRequires || !strings.Contains(last.Message, "from staging to none by ops") {
		t.Fatalf("newest event after dropping the requirement: %+v", last)
	}
	if e := h.env("prod"); e.Requires != nil {
		t.Fatalf("prod requires %+v after dropping it", e.Requires)
	}
	if held, err := h.tryDeploy(a, "prod", res.Generation, "run", "api"); err != nil || held != nil {
		t.Fatalf("prod without a requirement: held %v, %v; want it deployed", held, err)
	}
	if changed, err := a.SetRequires(h.ctx, "prod", authority.Requirements{Environments: []string{"prod"}}, "ops"); changed || !errors.Is(err, authority.ErrInvalidInput) {
		t.Fatalf("prod requiring itself: changed %v, %v; want invalid input", changed, err)
	}
}

// A rollback is the way back from a bad deploy: it deploys at once, whatever staging runs.
func testPromotionRollback(t *testing.T, h *harness) {
	x, y := sha("x", 5), sha("y", 5)
	a := h.process()
	h.live(a, "staging", "s-x", x, "api")
	h.live(a, "prod", "p-x", x, "api")
	if _, err := a.SetRequires(h.ctx, "prod", *requiresStaging, "ops"); err != nil {
		t.Fatal(err)
	}
	h.live(a, "staging", "s-y", y, "api")
	res, err := a.Rollback(h.ctx, authority.RollbackRequest{Environment: "prod", Scope: "api", To: sha("old", 5), Actor: "oncall", Reason: "x breaks checkout"})
	if err != nil {
		t.Fatal(err)
	}
	if held, err := h.tryDeploy(a, "prod", res.Generation, "rollback", "api"); err != nil || held != nil {
		t.Fatalf("the rollback's deploy in prod: held %v, %v; want it deployed at once", held, err)
	}
}

// countingComparer counts the questions; every pair diverges.
type countingComparer struct{ calls atomic.Int64 }

func (c *countingComparer) Compare(context.Context, authority.Intent, string, string) (authority.CommitOrder, error) {
	c.calls.Add(1)
	return authority.Diverged, nil
}

// How two commits relate never changes: a process asks about a pair once, however many gates and
// sweep rounds need the answer.
func testPromotionAskedOnce(t *testing.T, h *harness) {
	x, z := sha("x", 5), sha("z", 5)
	c := &countingComparer{}
	a := h.authority(h.store, authority.WithPromotionComparer(c))
	h.live(h.process(), "staging", "s-z", z, "api")
	res := h.accept(a, prodPush("p-x", x, &authority.Requirements{Environments: []string{"staging"}, Ancestor: true}), true)
	for range 3 {
		h.wantPromotionWait(a, res.Generation, x, z)
	}
	if n := c.calls.Load(); n != 1 {
		t.Fatalf("the comparer was asked %d times about one pair; want once", n)
	}
}

// A promote request delivered again (a comment re-delivered) after the source deployed another
// commit answers as the first time: the same generation and commit, a duplicate, nothing changed.
func testPromotionRepeat(t *testing.T, h *harness) {
	s := h.process()
	h.live(s, "staging", "s-x", sha("x", 7), "api")
	r := authority.PromoteRequest{Environment: "prod", Scope: "api", From: "staging", Actor: "octocat", Request: "delivery-1"}
	first, err := s.Promote(h.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	h.live(s, "staging", "s-y", sha("y", 7), "api")
	before := h.doc(authority.EnvKey("prod"))
	again, err := h.process().Promote(h.ctx, r)
	if err != nil || !again.Duplicate || again.Generation != first.Generation || again.Sha != sha("x", 7) {
		t.Fatalf("the request again: %+v, %v; want generation %d, %.7s, a duplicate", again, err, first.Generation, sha("x", 7))
	}
	h.wantDoc(before)
}
