package storetest

import (
	"errors"
	"fmt"
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
		{"HolderNameReusedAcrossGenerations", testHolderReused},
		{"RegrantFencesTheOlderGrant", testRegrant},
		{"UnlockOnceForARequest", testUnlockOnce},
	}
}

// testHolderReused: two generations whose passes use the same holder name (an explicit --holder,
// or whatever an API client sends) are two passes. The newer one waits for the older one's live
// lease, and once it holds the lease nothing the older one sends, with any token, renews,
// completes or frees it.
func testHolderReused(t *testing.T, h *harness) {
	a, b := h.process(), h.process()
	const holder = "deployer"
	gen1 := h.accept(a, push("staging", "run-1", sha("a", 1), "api"), true).Generation
	old := h.gate(a, "staging", gen1, holder, "api")
	gen2 := h.accept(b, push("staging", "run-2", sha("b", 2), "api"), false).Generation

	// Generation 2 claims; its gate with the same holder name waits for generation 1's live lease.
	h.claim(b, "staging", gen2, "api")
	_, err := b.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: gen2, Scopes: []string{"api"}, Phase: "deploy", Holder: holder, LeaseTTL: testTTL})
	wantHeld(t, err, holder, "deploy", testTTL+h.skew)

	// Generation 1's lease expires; generation 2 takes it over with a greater token.
	h.clock.Advance(testTTL + h.skew)
	cur := h.gate(b, "staging", gen2, holder, "api")
	if cur.Tokens["api"] <= old.Tokens["api"] {
		t.Fatalf("generation %d got token %d after generation %d's token %d; want a greater one", gen2, cur.Tokens["api"], gen1, old.Tokens["api"])
	}
	if n := countEvents(h.env("staging"), authority.EventTookOver, func(e authority.Event) bool { return e.Generation == gen2 }); n != 1 {
		t.Fatalf("%d took-over events for generation %d; want 1 (it recovered generation %d's lease)", n, gen2, gen1)
	}
	before := h.doc(authority.EnvKey("staging"))

	// Generation 1, under the same holder name, with its own token or with generation 2's, can
	// neither renew, release nor complete.
	for _, tokens := range []map[string]int64{old.Tokens, cur.Tokens} {
		stale := &authority.Grant{Environment: "staging", Generation: gen1, Phase: "deploy", Holder: holder, Tokens: tokens}
		if err := a.Renew(h.ctx, stale, testTTL); !errors.Is(err, authority.ErrLeaseLost) {
			t.Fatalf("renew by generation %d with tokens %v: %v; want ErrLeaseLost", gen1, tokens, err)
		}
		if err := a.Release(h.ctx, stale); !errors.Is(err, authority.ErrLeaseLost) {
			t.Fatalf("release by generation %d with tokens %v: %v; want ErrLeaseLost", gen1, tokens, err)
		}
		for _, o := range []authority.Outcome{authority.OutcomeSuccess, authority.OutcomeFailure, authority.OutcomeInvalid, authority.OutcomeInterrupted, authority.OutcomeLost} {
			_, _ = a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: gen1, Scopes: []string{"api"},
				Holder: holder, Tokens: tokens, Outcome: o, Attempt: 3, MaxAttempts: 3, Message: "stale"})
		}
		after := h.doc(authority.EnvKey("staging"))
		if diff := cmp.Diff(before.Env.Scopes, after.Env.Scopes); diff != "" {
			t.Fatalf("generation %d's calls with tokens %v changed the scopes (-before +after):\n%s", gen1, tokens, diff)
		}
	}
	// Without any token, generation 1's endings cannot overrule the pass that holds the lease now.
	_, err = a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: gen1, Scopes: []string{"api"},
		Holder: holder, Outcome: authority.OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "stale"})
	if !errors.Is(err, authority.ErrLeaseHeld) {
		t.Fatalf("an unfenced failure by generation %d while generation %d holds the lease: %v; want ErrLeaseHeld", gen1, gen2, err)
	}
	if diff := cmp.Diff(before.Env.Scopes, h.env("staging").Scopes); diff != "" {
		t.Fatalf("an unfenced failure by generation %d changed the scopes (-before +after):\n%s", gen1, diff)
	}
	// Generation 2 still holds its lease and deploys.
	if err := b.Renew(h.ctx, cur, testTTL); err != nil {
		t.Fatalf("renew by generation %d: %v", gen2, err)
	}
	h.complete(b, cur, authority.OutcomeSuccess, "run-2")
	if l := h.scope("staging", "api").Live; l == nil || l.Generation != gen2 || l.Token != cur.Tokens["api"] {
		t.Fatalf("api live %+v; want generation %d with token %d", l, gen2, cur.Tokens["api"])
	}
}

// testRegrant: a pass asking again for a lease it holds gets a new, greater token; the older grant
// (a stale step of the same pass, an answer that was lost) can no longer act on the lease.
func testRegrant(t *testing.T, h *harness) {
	a := h.process()
	gen := h.accept(a, push("staging", "run-1", sha("a", 1), "api"), true).Generation
	first := h.gate(a, "staging", gen, "run-1/1", "api")
	second := h.gate(h.process(), "staging", gen, "run-1/1", "api")
	if second.Tokens["api"] <= first.Tokens["api"] {
		t.Fatalf("the second grant got token %d after %d; want a greater one", second.Tokens["api"], first.Tokens["api"])
	}
	if err := a.Renew(h.ctx, first, testTTL); !errors.Is(err, authority.ErrLeaseLost) {
		t.Fatalf("renew with the older grant: %v; want ErrLeaseLost", err)
	}
	if err := a.Release(h.ctx, first); !errors.Is(err, authority.ErrLeaseLost) {
		t.Fatalf("release with the older grant: %v; want ErrLeaseLost", err)
	}
	if l := h.scope("staging", "api").Lease; l.Holder != "run-1/1" || l.Token != second.Tokens["api"] {
		t.Fatalf("lease %+v; want the second grant's token %d", l, second.Tokens["api"])
	}
	h.complete(a, second, authority.OutcomeSuccess, "run-1")
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

// testUnlockOnce: an unlock made for a request (a comment command's delivery) is carried out once;
// the same request again, after a newer pass took the lease and hundreds of other writes, frees
// nothing.
func testUnlockOnce(t *testing.T, h *harness) {
	a := h.process()
	gen := h.accept(a, push("staging", "run-1", sha("a", 1), "api"), true).Generation
	h.gate(a, "staging", gen, "run-1/1", "api")
	if _, err := a.Unlock(h.ctx, "staging/api", "stuck", "octocat", authority.UnlockOnce("delivery-7")); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	for i := range rounds(120, 30) {
		h.accept(a, push("staging", fmt.Sprintf("other-%d", i), sha("o", i), "web"), false)
	}
	cur := h.gate(h.process(), "staging", gen, "run-1/2", "api")
	_, err := h.process().Unlock(h.ctx, "staging/api", "stuck", "octocat", authority.UnlockOnce("delivery-7"))
	if !errors.Is(err, authority.ErrRepeated) {
		t.Fatalf("the same unlock request again: %v; want ErrRepeated", err)
	}
	if l := h.scope("staging", "api").Lease; l.Holder != cur.Holder || l.Token != cur.Tokens["api"] {
		t.Fatalf("lease %+v after a repeated unlock request; want the newer grant kept", l)
	}
	// Another request unlocks.
	if _, err := a.Unlock(h.ctx, "staging/api", "stuck again", "octocat", authority.UnlockOnce("delivery-8")); err != nil {
		t.Fatalf("another unlock request: %v", err)
	}
	// A request that found the lease free is remembered too: after a pass takes the lease, the same
	// request again frees nothing.
	web := h.accept(a, push("staging", "run-web", sha("w", 1), "web"), true).Generation
	if _, err := a.Unlock(h.ctx, "staging/web", "stuck", "octocat", authority.UnlockOnce("delivery-9")); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("unlock request of a free lease: %v; want ErrNotFound", err)
	}
	g := h.gate(h.process(), "staging", web, "run-web/1", "web")
	if _, err := h.process().Unlock(h.ctx, "staging/web", "stuck", "octocat", authority.UnlockOnce("delivery-9")); !errors.Is(err, authority.ErrRepeated) {
		t.Fatalf("the same request again after a pass took the lease: %v; want ErrRepeated", err)
	}
	if l := h.scope("staging", "web").Lease; l.Holder != g.Holder || l.Token != g.Tokens["web"] {
		t.Fatalf("lease %+v after a repeated request; want the pass's grant kept", l)
	}
}
