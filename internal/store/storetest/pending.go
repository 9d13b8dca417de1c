package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 5: observed is the highest G such that every intent up to G has its outcome, equals
// desired when the mailbox is empty, and never decreases (the property test checks it after every
// step). Guarantee 14's index: Pending lists an environment while it has mailbox work.
func observedCases() []testCase {
	return []testCase{
		{"Settles", testObservedSettles},
	}
}

func pendingCases() []testCase {
	return []testCase{
		{"ListsWhileWorkIsPending", testPendingLifecycle},
	}
}

func testObservedSettles(t *testing.T, h *harness) {
	a := h.process()
	want := func(observed, desired int64) {
		t.Helper()
		if e := h.env("staging"); e.Observed != observed || e.Desired != desired {
			t.Fatalf("%d/%d; want %d/%d", e.Observed, e.Desired, observed, desired)
		}
	}
	h.accept(a, push("staging", "d1", sha("a", 1), "api"), false)
	want(0, 1)
	h.accept(a, push("staging", "d2", sha("b", 2), "web"), false)
	h.accept(a, push("staging", "d3", sha("a", 3), "api"), false) // supersedes d1
	want(1, 3)                                                    // d1 has its outcome; d2 is pending
	h.deploy(a, "staging", 2, "run-2", "run-2", "web")
	want(2, 3)
	h.deploy(a, "staging", 3, "run-3", "run-3", "api")
	want(3, 3) // settled: "3/3"
	h.accept(a, push("staging", "d4", sha("a", 4), "api"), false)
	want(3, 4)
}

func testPendingLifecycle(t *testing.T, h *harness) {
	a := h.process()
	wantPending := func(want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if diff := cmp.Diff(want, h.pending()); diff != "" {
			t.Fatalf("store Pending (-want +got):\n%s", diff)
		}
		got, err := h.process().Pending(h.ctx)
		if err != nil {
			t.Fatalf("authority Pending: %v", err)
		}
		if diff := cmp.Diff(want, sortedCopy(got)); diff != "" {
			t.Fatalf("authority Pending (-want +got):\n%s", diff)
		}
	}
	wantPending()
	h.accept(a, push("staging", "d1", sha("a", 1), "api", "web"), false)
	wantPending("staging")
	h.accept(a, push("preview/pr-803", "d1", sha("a", 1), "api"), false)
	wantPending("preview/pr-803", "staging")

	// Partly deployed: still pending.
	h.deploy(a, "staging", 1, "run-1", "run-1", "api")
	wantPending("preview/pr-803", "staging")
	// A retryable outcome keeps it pending.
	h.claim(a, "staging", 1, "web")
	g := h.gate(a, "staging", 1, "run-1", "web")
	h.complete(a, g, authority.OutcomeLost, "run-1")
	wantPending("preview/pr-803", "staging")
	// Settled: dropped.
	g = h.gate(a, "staging", 1, "run-1b", "web")
	h.complete(a, g, authority.OutcomeSuccess, "run-1b")
	wantPending("preview/pr-803")
	// A terminal failure settles too.
	gen := h.env("preview/pr-803").Desired
	h.claim(a, "preview/pr-803", gen, "api")
	g = h.gate(a, "preview/pr-803", gen, "run-p", "api")
	if _, err := a.Complete(h.ctx, authority.Completion{Environment: "preview/pr-803", Generation: gen, Scopes: []string{"api"}, Holder: g.Holder,
		Tokens: g.Tokens, Outcome: authority.OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "boom"}); err != nil {
		t.Fatalf("complete: %v", err)
	}
	wantPending()
	// New work lists it again.
	h.accept(a, push("staging", "d2", sha("a", 2), "web"), false)
	wantPending("staging")
}
