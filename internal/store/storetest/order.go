package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 11: a push older than the commit a scope has pending or live on its branch, by the
// facts of the pushes (the before/after chain, repository.pushed_at, forced, commit times), does not
// replace it and is recorded as arrived out of order; in every arrival order; a redeploy bypasses
// the guard; other branches are not compared. Guarantee 1: intent ids are kept for the retention.
func outOfOrderCases() []testCase {
	return []testCase{
		{"LateDeliveries", testLateDeliveries},
		{"BehindLive", testBehindLive},
		{"EveryArrivalOrder", testEveryArrivalOrder},
		{"RedeliveryAfterThousandsOfIntents", testRedeliveryAfterMany},
		{"IntentIDWithAnotherCommit", testIntentIDReused},
		{"AfterTheRetention", testAfterRetention},
	}
}

// commitPush is push number n of commit sha on top of before: pushed n seconds after start.
func commitPush(id, commit, before string, n int) authority.Intent {
	in := push("staging", id, commit, "api")
	in.Before = before
	in.Order.PushedAt = start.Add(time.Duration(n) * time.Second).Truncate(time.Second)
	return in
}

// wantStale fails the test unless res says the intent was held back as older than generation by,
// and the mailbox entry is still want.
func wantStale(t *testing.T, h *harness, res *authority.AcceptResult, by int64, want *authority.Ref) {
	t.Helper()
	if res.Duplicate || len(res.Accepted) != 0 || res.Stale["api"] != by {
		t.Fatalf("late push: %+v; want it held back as older than generation %d", res, by)
	}
	e := h.env("staging")
	if diff := cmp.Diff(want, e.Scopes["api"].Mailbox); diff != "" {
		t.Fatalf("a late push changed the mailbox entry (-before +after):\n%s", diff)
	}
	if n := countEvents(e, authority.EventSuperseded, func(ev authority.Event) bool {
		return ev.Generation == res.Generation && ev.Scope == "api" && strings.HasPrefix(ev.Message, "Arrived out of order")
	}); n != 1 {
		t.Fatalf("the late push (generation %d) has %d 'arrived out of order' events, want 1", res.Generation, n)
	}
	if res.Generation != e.Desired {
		t.Fatalf("the late push got generation %d, desired is %d: it still takes a generation", res.Generation, e.Desired)
	}
}

func testLateDeliveries(t *testing.T, h *harness) {
	a := h.process()
	c := func(i int) string { return sha("c", i) }
	h.accept(a, commitPush("push-1", c(1), c(0), 1), false)
	newest := h.accept(a, commitPush("push-2", c(2), c(1), 2), false)
	entry := h.scope("staging", "api").Mailbox
	if entry.Sha != c(2) || entry.Before != c(1) || !entry.Order.PushedAt.Equal(start.Add(2*time.Second).Truncate(time.Second)) {
		t.Fatalf("mailbox entry %+v; want %s on %s with its push time", entry, c(2), c(1))
	}

	// The push of the entry's parent arrives again, late, under another delivery id.
	wantStale(t, h, h.accept(a, commitPush("push-1-late", c(1), c(0), 1), false), newest.Generation, entry)
	// An older commit, not adjacent, through another process: its push time tells.
	wantStale(t, h, h.accept(h.process(), commitPush("push-0-late", c(0), "", 0), false), newest.Generation, entry)
	// The parent without any push time: the chain tells.
	bare := commitPush("push-1-bare", c(1), c(0), 0)
	bare.Order = authority.Order{}
	wantStale(t, h, h.accept(h.process(), bare, false), newest.Generation, entry)
	// The entry's own commit, asked for again (the dispatched workflow's claim): it joins the
	// pending generation instead of taking a new one, and changes nothing else.
	if joined := h.accept(a, commitPush("push-2-again", c(2), c(1), 2), true); !joined.Joined || joined.Generation != newest.Generation ||
		joined.Claim == nil || len(joined.Claim.Claimed) != 1 {
		t.Fatalf("the pending commit asked for again: %+v; want it joined to generation %d and claimed", joined, newest.Generation)
	}
	if got := h.scope("staging", "api").Mailbox; !cmp.Equal(got, entry) {
		t.Fatalf("mailbox after the join %+v; want %+v", got, entry)
	}
	e := h.env("staging")
	if e.Observed != newest.Generation-1 {
		t.Fatalf("observed %d; want %d (only the entry is pending)", e.Observed, newest.Generation-1)
	}

	// The same commits on another branch are not behind anything there.
	other := commitPush("push-other", c(1), c(0), 1)
	other.Ref = "refs/heads/release"
	if res := h.accept(a, other, false); len(res.Accepted) != 1 {
		t.Fatalf("push to another branch: %+v; want it accepted", res)
	}
	// A push on top of the entry replaces it, even in the same second.
	next := h.accept(a, commitPush("push-3", c(3), c(2), 2), false)
	if len(next.Accepted) != 1 || h.scope("staging", "api").Mailbox.Sha != c(3) {
		t.Fatalf("push of a new commit: %+v; want it accepted", next)
	}
	// A forced push in the same second as the entry is newer by definition.
	forced := commitPush("push-forced", c(9), c(5), 2)
	forced.Order.Forced = true
	if res := h.accept(a, forced, false); len(res.Accepted) != 1 || h.scope("staging", "api").Mailbox.Sha != c(9) {
		t.Fatalf("forced push: %+v; want it accepted", res)
	}
	// A redeploy of an old commit bypasses the guard.
	redeploy := commitPush("redeploy-0", c(0), "", 0)
	redeploy.Redeploy = true
	res := h.accept(a, redeploy, false)
	if len(res.Accepted) != 1 || h.scope("staging", "api").Mailbox.Sha != c(0) {
		t.Fatalf("redeploy of an old commit: %+v; want it accepted", res)
	}
}

// testBehindLive: with the mailbox empty, a late push older than the live commit is held back too,
// and the environment stays settled.
func testBehindLive(t *testing.T, h *harness) {
	a := h.process()
	c := func(i int) string { return sha("c", i) }
	h.accept(a, commitPush("push-1", c(1), c(0), 1), false)
	res := h.accept(a, commitPush("push-2", c(2), c(1), 2), false)
	h.deploy(a, "staging", res.Generation, "run-2", "run-2", "api")
	if l := h.scope("staging", "api").Live; l.Sha != c(2) || l.Before != c(1) || l.Order.PushedAt.IsZero() {
		t.Fatalf("live %+v; want %s on %s with its push time", l, c(2), c(1))
	}
	for i, late := range []authority.Intent{commitPush("push-1-late", c(1), c(0), 1), commitPush("push-0-late", c(0), "", 0)} {
		got := h.accept(h.process(), late, true)
		wantStale(t, h, got, res.Generation, nil)
		if got.Claim != nil && len(got.Claim.Claimed) != 0 {
			t.Fatalf("late push %d claimed %v", i, got.Claim.Scopes())
		}
	}
	e := h.env("staging")
	if e.Observed != e.Desired || e.Scopes["api"].Live.Sha != c(2) {
		t.Fatalf("after late pushes: %d/%d, live %+v; want settled with %s live", e.Observed, e.Desired, e.Scopes["api"].Live, c(2))
	}
	if slices.Contains(h.pending(), "staging") {
		t.Fatalf("pending lists staging after late pushes held back")
	}
	// A push on top of the live commit is accepted.
	if res := h.accept(a, commitPush("push-3", c(3), c(2), 3), false); len(res.Accepted) != 1 {
		t.Fatalf("push on top of live: %+v; want it accepted", res)
	}
}

// testEveryArrivalOrder: the pushes of a chain (each on the previous one, pushed a second later)
// delivered in every order, each by a process of its own, end with the newest pending and every
// other one superseded or arrived out of order: all 6 orders of three pushes and all 120 of five.
func testEveryArrivalOrder(t *testing.T, h *harness) {
	round := 0
	for _, n := range []int{3, rounds(5, 4)} {
		pushes := make([]authority.Intent, n)
		for i := range pushes {
			pushes[i] = commitPush(fmt.Sprintf("p%d", i), sha("c", i+1), sha("c", i), i)
		}
		Permutations(n, func(order []int) {
			round++
			env := fmt.Sprintf("order-%d", round)
			for _, k := range order {
				in := pushes[k]
				in.Environment = env
				h.accept(h.process(), in, false)
			}
			e := h.env(env)
			if m := e.Scopes["api"].Mailbox; m == nil || m.Sha != pushes[n-1].Sha {
				t.Fatalf("arrival order %v: pending %+v; want the newest push %s", order, m, pushes[n-1].Sha)
			}
			for _, in := range pushes[:n-1] {
				if c := countEvents(e, authority.EventSuperseded, func(ev authority.Event) bool { return ev.Sha == in.Sha }); c != 1 {
					t.Fatalf("arrival order %v: %s has %d superseded events; want exactly one outcome", order, in.ID, c)
				}
			}
		})
	}
	t.Logf("%d arrival orders", round)
}

// Permutations calls f with every permutation of 0..n-1 (Heap's algorithm): every arrival order of
// n deliveries.
func Permutations(n int, f func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var gen func(k int)
	gen = func(k int) {
		if k <= 1 {
			f(slices.Clone(p))
			return
		}
		for i := range k {
			gen(k - 1)
			if k%2 == 0 {
				p[i], p[k-1] = p[k-1], p[i]
			} else {
				p[0], p[k-1] = p[k-1], p[0]
			}
		}
	}
	gen(n)
}

// testRedeliveryAfterMany: a delivery re-sent after a thousand newer intents (GitHub's Redeliver
// button, a re-run of an old workflow run) is a repeat: the same generation, and nothing changes.
func testRedeliveryAfterMany(t *testing.T, h *harness) {
	a := h.process()
	first := h.accept(a, push("staging", "delivery-0", sha("r", 0), "api"), false)
	n := rounds(1000, 300)
	for i := 1; i <= n; i++ {
		h.accept(a, push("staging", fmt.Sprintf("delivery-%d", i), sha("r", i), "api"), false)
	}
	before := h.doc(authority.EnvKey("staging"))
	for _, p := range []*authority.Authority{a, h.process()} {
		res := h.accept(p, push("staging", "delivery-0", sha("r", 0), "api"), true)
		if !res.Duplicate || res.Generation != first.Generation || len(res.Accepted) != 0 {
			t.Fatalf("re-delivery after %d newer intents: %+v; want a repeat of generation %d, nothing pending for it", n, res, first.Generation)
		}
	}
	if diff := cmp.Diff(before, h.doc(authority.EnvKey("staging"))); diff != "" {
		t.Fatalf("a re-delivery changed the environment (-before +after):\n%s", diff)
	}
	if m := h.scope("staging", "api").Mailbox; m.Sha != sha("r", n) {
		t.Fatalf("pending %s; want the newest commit", m.Sha)
	}
}

// testIntentIDReused: an intent id that comes back with another commit or scopes it was not
// accepted for is not a repeat: it is bad input that names what the id was accepted for, and nothing
// changes, also once the intent's record left the document. A repeat naming some of its scopes (a
// later job of the same run) is a repeat, for those scopes only.
func testIntentIDReused(t *testing.T, h *harness) {
	a := h.process()
	first := h.accept(a, push("staging", "run-7", sha("a", 1), "api", "web"), false)
	for i := range 3 { // later writes move run-7 out of the document's outbox into its record
		h.accept(a, push("staging", fmt.Sprintf("other-%d", i), sha("o", i), "db"), false)
	}
	if res := h.accept(h.process(), push("staging", "run-7", sha("a", 1), "web"), true); !res.Duplicate || res.Generation != first.Generation ||
		!slices.Equal(res.Accepted, []string{"web"}) || res.Claim == nil || !slices.Equal(res.Claim.Scopes(), []string{"web"}) {
		t.Fatalf("a later job of run-7 for web: %+v; want a repeat of generation %d claiming web only", res, first.Generation)
	}
	testIntentIDRefused(t, h, a)
}

func testIntentIDRefused(t *testing.T, h *harness, a *authority.Authority) {
	t.Helper()
	before := h.doc(authority.EnvKey("staging"))
	for _, in := range []authority.Intent{push("staging", "run-7", sha("b", 2), "api", "web"), push("staging", "run-7", sha("a", 1), "api", "db")} {
		for _, p := range []*authority.Authority{a, h.process()} {
			_, err := p.Accept(h.ctx, in, true)
			var ie *authority.InputError
			if !errors.As(err, &ie) || !strings.Contains(ie.Fix, "intent run-7 was accepted for") {
				t.Fatalf("run-7 again with %s %v: %v; want bad input saying what run-7 was accepted for", in.Sha[:7], in.Scopes, err)
			}
		}
	}
	if diff := cmp.Diff(before, h.doc(authority.EnvKey("staging"))); diff != "" {
		t.Fatalf("a refused intent changed the environment (-before +after):\n%s", diff)
	}
}

// testAfterRetention: past the retention an intent id is forgotten, but its commit, older than what
// the scope has, is still never pending again.
func testAfterRetention(t *testing.T, h *harness) {
	a := h.process()
	old := h.accept(a, commitPush("push-1", sha("c", 1), sha("c", 0), 1), false)
	newest := h.accept(a, commitPush("push-2", sha("c", 2), sha("c", 1), 2), false)
	h.clock.Advance(authority.DefaultRetention + time.Hour)
	res := h.accept(h.process(), commitPush("push-1", sha("c", 1), sha("c", 0), 1), false)
	if res.Duplicate || res.Generation == old.Generation {
		t.Fatalf("an intent past the retention: %+v; want it no longer remembered", res)
	}
	wantStale(t, h, res, newest.Generation, h.scope("staging", "api").Mailbox)
	// The forgotten id left the outbox in the write that took it again: one record per id, so a
	// batch of them never names one key twice (DynamoDB refuses such a batch).
	n := 0
	for _, in := range h.doc(authority.EnvKey("staging")).Env.Accepts {
		if in.ID == "push-1" {
			n++
		}
	}
	if n > 1 {
		t.Fatalf("the outbox holds push-1 %d times after it was accepted again past the retention; want once", n)
	}
}
