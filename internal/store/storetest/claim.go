package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 3: a pass at G claims S iff mailbox[S].generation <= G and owner[S] < G (owner == G is
// an idempotent re-claim); claiming moves owner[S] to G; accept and claim by one pass is one write.
func claimCases() []testCase {
	return []testCase{
		{"Rule", testClaimRule},
		{"Idle", testClaimIdle},
		{"AllPending", testClaimAllPending},
		{"AcceptAndClaimOneWrite", testAcceptClaimOneWrite},
	}
}

// testClaimRule tries every combination of mailbox generation m, owner o and pass generation G in
// a five-generation environment, each in an environment of its own.
func testClaimRule(t *testing.T, h *harness) {
	const desired = 5
	const s = "api"
	a := h.process()
	for m := int64(1); m <= 4; m++ {
		for o := int64(0); o <= desired; o++ {
			for g := int64(1); g <= desired; g++ {
				env := fmt.Sprintf("claim/m%d-o%d-g%d", m, o, g)
				// Build mailbox[api] = m and owner[api] = o: api's intent at generation m (and, when
				// o < m, an older one at generation 1 that the pass at o claims), the rest on "filler".
				for gen := int64(1); gen <= desired; gen++ {
					scope := "filler"
					if gen == m || (o > 0 && o < m && gen == 1) {
						scope = s
					}
					h.accept(a, push(env, fmt.Sprintf("d%d", gen), sha("g", int(gen)), scope), false)
					if gen == o {
						h.claim(a, env, o, s)
					}
				}
				before := h.doc(authority.EnvKey(env))
				if sc := before.Env.Scopes[s]; sc.Mailbox.Generation != m || sc.Owner != o {
					t.Fatalf("%s: setup gave mailbox %d, owner %d", env, sc.Mailbox.Generation, sc.Owner)
				}

				res, err := h.process().Claim(h.ctx, env, g, []string{s})
				if err != nil {
					t.Fatalf("%s: claim: %v", env, err)
				}
				after := h.doc(authority.EnvKey(env))
				if m <= g && o <= g {
					want := []authority.ClaimedScope{{Scope: s, Sha: sha("g", int(m)), Ref: "refs/heads/main", IntentGen: m, IntentID: fmt.Sprintf("d%d", m)}}
					if diff := cmp.Diff(want, res.Claimed); diff != "" || len(res.Superseded) != 0 {
						t.Fatalf("%s: claim should succeed; superseded %v, claimed (-want +got):\n%s", env, res.Superseded, diff)
					}
					if after.Env.Scopes[s].Owner != g {
						t.Fatalf("%s: owner %d after the claim, want %d", env, after.Env.Scopes[s].Owner, g)
					}
					if o == g {
						if diff := cmp.Diff(before, after); diff != "" {
							t.Fatalf("%s: an idempotent re-claim changed the environment (-before +after):\n%s", env, diff)
						}
					} else if countEvents(after.Env, authority.EventClaimed, func(e authority.Event) bool { return e.Generation == g && e.Scope == s }) != 1 {
						t.Fatalf("%s: the claim is not in the timeline", env)
					}
					continue
				}
				wantBy := o
				if m > g {
					wantBy = m
				}
				if len(res.Claimed) != 0 || len(res.Superseded) != 1 {
					t.Fatalf("%s: claim should be refused; claimed %v, superseded %v", env, res.Claimed, res.Superseded)
				}
				sup := res.Superseded[0]
				if sup.Scope != s || sup.Generation != g || sup.By != wantBy || sup.BySha != sha("g", int(m)) || !errors.Is(sup, authority.ErrSuperseded) {
					t.Fatalf("%s: refusal %+v; want scope %s, generation %d, by %d (%s)", env, sup, s, g, wantBy, sha("g", int(m)))
				}
				if diff := cmp.Diff(before, after); diff != "" {
					t.Fatalf("%s: a refused claim changed the environment (-before +after):\n%s", env, diff)
				}
			}
		}
	}
}

func testClaimIdle(t *testing.T, h *harness) {
	a := h.process()
	h.accept(a, push("staging", "d1", sha("a", 1), "api"), false)
	h.deploy(a, "staging", 1, "run-1", "run-1", "api")
	h.accept(a, push("staging", "d2", sha("a", 2), "web"), false)
	before := h.doc(authority.EnvKey("staging"))
	res, err := h.process().Claim(h.ctx, "staging", 2, []string{"api"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(res.Claimed) != 0 || len(res.Superseded) != 0 || !slices.Equal(res.Idle, []string{"api"}) {
		t.Fatalf("claiming a scope with nothing pending: %+v; want it idle", res)
	}
	if diff := cmp.Diff(before.Env.Scopes["api"], h.scope("staging", "api")); diff != "" {
		t.Fatalf("an idle claim changed the scope (-before +after):\n%s", diff)
	}
}

func testClaimAllPending(t *testing.T, h *harness) {
	a := h.process()
	for i, s := range []string{"api", "web", "worker"} {
		h.accept(a, push("staging", fmt.Sprintf("d%d", i+1), sha("a", i+1), s), false)
	}
	// The pass at 2 may claim what was accepted up to 2, and not worker's intent at 3.
	res, err := h.process().Claim(h.ctx, "staging", 2, nil)
	if err != nil {
		t.Fatalf("claim all at 2: %v", err)
	}
	if !slices.Equal(res.Scopes(), []string{"api", "web"}) || len(res.Superseded) != 1 || res.Superseded[0].Scope != "worker" || res.Superseded[0].By != 3 {
		t.Fatalf("claim all at 2: claimed %v, superseded %v; want api and web, worker superseded by 3", res.Scopes(), res.Superseded)
	}
	// The pass at 3 takes all three, api and web from the pass at 2.
	res, err = h.process().Claim(h.ctx, "staging", 3, nil)
	if err != nil || !slices.Equal(res.Scopes(), []string{"api", "web", "worker"}) {
		t.Fatalf("claim all at 3: %+v, %v; want api, web and worker", res, err)
	}
	for _, s := range []string{"api", "web", "worker"} {
		if o := h.scope("staging", s).Owner; o != 3 {
			t.Fatalf("%s: owner %d, want 3", s, o)
		}
	}
	// Settled scopes are not part of "every pending one".
	g := h.gate(a, "staging", 3, "run-3", "api")
	h.complete(a, g, authority.OutcomeSuccess, "run-3")
	h.accept(a, push("staging", "d4", sha("a", 4), "db"), false)
	res, err = h.process().Claim(h.ctx, "staging", 4, nil)
	if err != nil || !slices.Equal(res.Scopes(), []string{"db", "web", "worker"}) || len(res.Idle) != 0 {
		t.Fatalf("claim all at 4: %+v, %v; want db, web and worker (api is deployed)", res, err)
	}
}

// testAcceptClaimOneWrite: accept+claim is one write, and an uncontended pass that goes on in the
// same process gates and completes with one request each (spec section 8).
func testAcceptClaimOneWrite(t *testing.T, h *harness) {
	h.singleDocument("one conditional write for accept and claim")
	a := h.process()
	gets0, puts0 := h.store.requests()
	res := h.accept(a, push("staging", "run-7/1", sha("a", 7), "api", "web"), true)
	gets1, puts1 := h.store.requests()
	if puts1-puts0 != 1 {
		t.Fatalf("accept+claim wrote %d times, want 1", puts1-puts0)
	}
	if res.Claim == nil || !slices.Equal(res.Claim.Scopes(), []string{"api", "web"}) {
		t.Fatalf("accept+claim: claim %+v; want api and web", res.Claim)
	}
	e := h.env("staging")
	for _, s := range []string{"api", "web"} {
		if e.Scopes[s].Owner != res.Generation || e.Scopes[s].Mailbox.Generation != res.Generation {
			t.Fatalf("%s after accept+claim: owner %d, mailbox %d; want both %d", s, e.Scopes[s].Owner, e.Scopes[s].Mailbox.Generation, res.Generation)
		}
	}
	gets2, puts2 := h.store.requests()
	g := h.gate(a, "staging", res.Generation, "run-7/1", "api", "web")
	gets3, puts3 := h.store.requests()
	h.complete(a, g, authority.OutcomeSuccess, "run-7/1")
	gets4, puts4 := h.store.requests()
	if got := (gets3 - gets2) + (puts3 - puts2); got != 1 {
		t.Errorf("gate with a lease made %d store requests, want 1", got)
	}
	if got := (gets4 - gets3) + (puts4 - puts3); got != 1 {
		t.Errorf("complete with release made %d store requests, want 1", got)
	}
	t.Logf("accept+claim: %d get, %d put", gets1-gets0, puts1-puts0)
}
