package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 7: every grant's token is strictly greater than every earlier token of the resource,
// also after release and unlock; a write fenced by a stale token is refused and changes nothing.
func fencingCases() []testCase {
	return []testCase{
		{"TokensAcrossReleaseAndUnlock", testTokensIncrease},
		{"NamedTokensAcrossReleaseAndUnlock", testNamedTokensIncrease},
		{"StaleTokenRefused", testStaleToken},
	}
}

func testTokensIncrease(t *testing.T, h *harness) {
	a := h.process()
	gen := h.accept(a, push("staging", "run-1", sha("a", 1), "api"), true).Generation
	var tokens []int64
	gate := func(holder string) *authority.Grant {
		t.Helper()
		g := h.gate(h.process(), "staging", gen, holder, "api")
		if n := len(tokens); n > 0 && g.Tokens["api"] <= tokens[n-1] {
			t.Fatalf("%s got token %d after tokens %v; want a greater one", holder, g.Tokens["api"], tokens)
		}
		tokens = append(tokens, g.Tokens["api"])
		return g
	}
	g := gate("holder-1")
	if err := a.Release(h.ctx, g); err != nil {
		t.Fatalf("release: %v", err)
	}
	if l := h.scope("staging", "api").Lease; l.Holder != "" || l.Token != g.Tokens["api"] {
		t.Fatalf("released lease %+v; want free, keeping token %d", l, g.Tokens["api"])
	}
	g = gate("holder-2")
	was, err := a.Unlock(h.ctx, "staging/api", "runner died", "octocat")
	if err != nil || was.Holder != "holder-2" || was.Token != g.Tokens["api"] {
		t.Fatalf("unlock: %+v, %v; want holder-2's lease with token %d", was, err, g.Tokens["api"])
	}
	if _, err := a.Unlock(h.ctx, "staging/api", "again", "octocat"); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("unlock of a free lease: %v; want ErrNotFound", err)
	}
	gate("holder-3")
	h.clock.Advance(testTTL + h.skew)
	gate("holder-4") // a takeover
	h.clock.Advance(testTTL + h.skew)
	g = gate("holder-1") // the first holder again, taking over
	if err := a.Release(h.ctx, g); err != nil {
		t.Fatalf("release: %v", err)
	}
	gate("holder-1") // and again after its own release
}

func testNamedTokensIncrease(t *testing.T, h *harness) {
	const name = "refresh: config"
	a := h.process()
	var last int64
	acquire := func(holder string) *authority.Grant {
		t.Helper()
		g, err := h.process().Acquire(h.ctx, name, holder, "refresh", testTTL)
		if err != nil {
			t.Fatalf("acquire by %s: %v", holder, err)
		}
		if g.Tokens[name] <= last {
			t.Fatalf("%s got token %d after %d; want a greater one", holder, g.Tokens[name], last)
		}
		last = g.Tokens[name]
		return g
	}
	g := acquire("host-1")
	if err := a.ReleaseNamed(h.ctx, g); err != nil {
		t.Fatalf("release: %v", err)
	}
	acquire("host-2")
	if was, err := a.Unlock(h.ctx, name, "stuck", "octocat"); err != nil || was.Holder != "host-2" {
		t.Fatalf("unlock: %+v, %v", was, err)
	}
	acquire("host-1")
	h.clock.Advance(testTTL + h.skew)
	acquire("host-3")
}

// testStaleToken: a pass whose lease was taken over while it worked cannot record anything with
// its stale token; reporting the loss is allowed and leaves the new holder's lease alone.
func testStaleToken(t *testing.T, h *harness) {
	a, b := h.process(), h.process()
	gen := h.accept(a, push("staging", "run-1", sha("a", 1), "api", "web"), true).Generation
	old := h.gate(a, "staging", gen, "run-1/1", "api", "web")
	h.clock.Advance(testTTL + h.skew)
	cur := h.gate(b, "staging", gen, "run-1/2", "api", "web")
	before := h.doc(authority.EnvKey("staging"))

	for _, c := range []authority.Completion{
		{Outcome: authority.OutcomeSuccess},
		{Outcome: authority.OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "boom"},
		{Outcome: authority.OutcomeInvalid, Message: "bad config"},
		{Outcome: authority.OutcomeInterrupted},
	} {
		c.Environment, c.Generation, c.Scopes, c.Holder, c.Tokens = "staging", gen, []string{"api", "web"}, old.Holder, old.Tokens
		_, err := a.Complete(h.ctx, c)
		var lost *authority.LostError
		if !errors.As(err, &lost) || !errors.Is(err, authority.ErrLeaseLost) || lost.Holder != cur.Holder || lost.Current <= lost.Token {
			t.Fatalf("complete %s with a stale token: %v; want a *LostError naming %s and a newer token", c.Outcome, err, cur.Holder)
		}
		if diff := cmp.Diff(before, h.doc(authority.EnvKey("staging"))); diff != "" {
			t.Fatalf("complete %s with a stale token changed the environment (-before +after):\n%s", c.Outcome, diff)
		}
	}
	if err := a.Renew(h.ctx, old, testTTL); !errors.Is(err, authority.ErrLeaseLost) {
		t.Fatalf("renew with a stale token: %v; want ErrLeaseLost", err)
	}

	// The old pass reports its loss: retryable, and the new holder keeps its lease.
	res, err := a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: gen, Scopes: []string{"api", "web"},
		Holder: old.Holder, Tokens: old.Tokens, Outcome: authority.OutcomeLost})
	if err != nil || res.Overall() != authority.ResultRetry {
		t.Fatalf("complete lost with a stale token: %+v, %v; want retry", res, err)
	}
	for _, s := range []string{"api", "web"} {
		sc := h.scope("staging", s)
		if sc.Lease.Holder != cur.Holder || sc.Lease.Token != cur.Tokens[s] || sc.Live != nil || sc.Mailbox == nil {
			t.Fatalf("%s after the old pass reported its loss: %+v", s, sc)
		}
	}
	// The current holder publishes, and live records its token.
	h.complete(b, cur, authority.OutcomeSuccess, "run-1/2")
	for _, s := range []string{"api", "web"} {
		if l := h.scope("staging", s).Live; l == nil || l.Token != cur.Tokens[s] || l.Sha != sha("a", 1) {
			t.Fatalf("%s live %+v; want %s with token %d", s, l, sha("a", 1), cur.Tokens[s])
		}
	}
}
