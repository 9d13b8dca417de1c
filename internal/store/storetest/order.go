package storetest

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 11: a push whose commit the mailbox entry already builds on (its sha is the entry's
// Before, or in the entry's lineage), or that the live commit builds on, does not replace the entry
// and is recorded as superseded; a redeploy bypasses the guard; other branches are not compared.
func outOfOrderCases() []testCase {
	return []testCase{
		{"LateDeliveries", testLateDeliveries},
		{"BehindLive", testBehindLive},
	}
}

// commitPush is a push of commit sha on top of before.
func commitPush(id, commit, before string) authority.Intent {
	in := push("staging", id, commit, "api")
	in.Before = before
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
	if n := countEvents(e, authority.EventSuperseded, func(ev authority.Event) bool { return ev.Generation == res.Generation && ev.Scope == "api" }); n != 1 {
		t.Fatalf("the late push (generation %d) has %d superseded events, want 1", res.Generation, n)
	}
	if res.Generation != e.Desired {
		t.Fatalf("the late push got generation %d, desired is %d: it still takes a generation", res.Generation, e.Desired)
	}
}

func testLateDeliveries(t *testing.T, h *harness) {
	a := h.process()
	c := func(i int) string { return sha("c", i) }
	h.accept(a, commitPush("push-1", c(1), c(0)), false)
	newest := h.accept(a, commitPush("push-2", c(2), c(1)), false)
	entry := h.scope("staging", "api").Mailbox
	if entry.Sha != c(2) || !slices.Equal(entry.Lineage, []string{c(1), c(0)}) {
		t.Fatalf("mailbox entry %+v; want %s building on %s and %s", entry, c(2), c(1), c(0))
	}

	// The push of the entry's parent (its Before) arrives again, late, under another delivery id.
	wantStale(t, h, h.accept(a, commitPush("push-1-late", c(1), c(0)), false), newest.Generation, entry)
	// An older commit of its lineage.
	wantStale(t, h, h.accept(h.process(), commitPush("push-0-late", c(0), ""), false), newest.Generation, entry)
	// The entry's own commit, asked for again (the dispatched workflow's claim): it joins the
	// pending generation instead of taking a new one, and changes nothing else.
	if joined := h.accept(a, commitPush("push-2-again", c(2), c(1)), true); !joined.Joined || joined.Generation != newest.Generation ||
		joined.Claim == nil || len(joined.Claim.Claimed) != 1 {
		t.Fatalf("the pending commit asked for again: %+v; want it joined to generation %d and claimed", joined, newest.Generation)
	}
	if got := h.scope("staging", "api").Mailbox; !slices.Equal(got.Lineage, entry.Lineage) || got.Sha != entry.Sha || got.Generation != entry.Generation {
		t.Fatalf("mailbox after the join %+v; want %+v", got, entry)
	}
	e := h.env("staging")
	if e.Observed != newest.Generation-1 {
		t.Fatalf("observed %d; want %d (only the entry is pending)", e.Observed, newest.Generation-1)
	}

	// The same commits on another branch are not behind anything there.
	other := commitPush("push-other", c(1), c(0))
	other.Ref = "refs/heads/release"
	if res := h.accept(a, other, false); len(res.Accepted) != 1 {
		t.Fatalf("push to another branch: %+v; want it accepted", res)
	}
	// A push on top of the entry replaces it.
	next := h.accept(a, commitPush("push-3", c(3), c(1)), false)
	if len(next.Accepted) != 1 || h.scope("staging", "api").Mailbox.Sha != c(3) {
		t.Fatalf("push of a new commit: %+v; want it accepted", next)
	}
	// A redeploy of an old commit bypasses the guard.
	redeploy := commitPush("redeploy-0", c(0), "")
	redeploy.Redeploy = true
	res := h.accept(a, redeploy, false)
	if len(res.Accepted) != 1 || h.scope("staging", "api").Mailbox.Sha != c(0) {
		t.Fatalf("redeploy of an old commit: %+v; want it accepted", res)
	}
}

// testBehindLive: with the mailbox empty, a late push of a commit the live one builds on is held
// back too, and the environment stays settled.
func testBehindLive(t *testing.T, h *harness) {
	a := h.process()
	c := func(i int) string { return sha("c", i) }
	h.accept(a, commitPush("push-1", c(1), c(0)), false)
	res := h.accept(a, commitPush("push-2", c(2), c(1)), false)
	h.deploy(a, "staging", res.Generation, "run-2", "run-2", "api")
	if l := h.scope("staging", "api").Live; l.Sha != c(2) || !slices.Contains(l.Lineage, c(1)) {
		t.Fatalf("live %+v; want %s building on %s", l, c(2), c(1))
	}
	late := h.accept(a, commitPush("push-1-late", c(1), c(0)), true)
	wantStale(t, h, late, res.Generation, nil)
	if late.Claim != nil && len(late.Claim.Claimed) != 0 {
		t.Fatalf("a late push claimed %v", late.Claim.Scopes())
	}
	e := h.env("staging")
	if e.Observed != e.Desired || e.Scopes["api"].Live.Sha != c(2) {
		t.Fatalf("after a late push: %d/%d, live %+v; want settled with %s live", e.Observed, e.Desired, e.Scopes["api"].Live, c(2))
	}
	if slices.Contains(h.pending(), "staging") {
		t.Fatalf("pending lists staging after a late push held back")
	}
	// A push on top of the live commit is accepted.
	if res := h.accept(a, commitPush("push-3", c(3), c(2)), false); len(res.Accepted) != 1 {
		t.Fatalf("push on top of live: %+v; want it accepted", res)
	}
	if l := h.scope("staging", "api").Mailbox.Lineage; !slices.Equal(l[:2], []string{c(2), c(1)}) {
		t.Fatalf("lineage %v; want it to continue the live commit's", l)
	}
}
