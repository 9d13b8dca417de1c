package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latestwins/latestwins/internal/authority"
)

// Enter: a claim that enters the deploy phase in its own write (authority.EnterDeploy, what
// latestwins run does) ends as the claim and then the gate end, in every situation a gate
// decides on, and saves the gate's write when the pass may go at once.
func enterCases() []testCase {
	return []testCase{
		{"AsClaimThenGate", testEnterAsClaimThenGate},
		{"OnlyWithAClaim", testEnterOnlyWithAClaim},
		{"MeetsARace", testEnterMeetsARace},
	}
}

// testEnterMeetsARace: an older pass takes the lease between the claim's read and its write.
// The claim's write loses that race, and its retry decides again: it claims, and enters nothing,
// since the older pass holds the lease; the lease stays the older pass's.
func testEnterMeetsARace(t *testing.T, h *harness) {
	const env = "enter-race"
	older := h.accept(h.process(), push(env, "older", sha("o", 1), "api"), true)
	var once sync.Once
	raced := false
	racer := &hookStore{Store: h.store, afterAdd: func() {}, beforePut: func(key string) {
		if key != authority.EnvKey(env) && key != authority.ScopeKey(env, "api") {
			return
		}
		once.Do(func() { h.gate(h.process(), env, older.Generation, "run-older", "api"); raced = true })
	}}
	res, err := h.authority(racer).Accept(h.ctx, push(env, "new", sha("n", 2), "api"), true, authority.EnterDeploy("run-new", testTTL))
	if err != nil {
		t.Fatal(err)
	}
	if !raced {
		t.Fatal("the claim wrote nothing of api's, so nothing raced it")
	}
	if res.Claim == nil || len(res.Claim.Claimed) != 1 || res.Entered != nil {
		t.Fatalf("the claim that lost its race to the older pass's gate: claim %+v, entered %+v; want it claimed, and not entered", res.Claim, res.Entered)
	}
	if l := h.scope(env, "api").Lease; l.Holder != "run-older" || l.Generation != older.Generation {
		t.Fatalf("api's lease after the race: %+v; want the older pass's", l)
	}
}

// enterSituation prepares env the way a gate has to decide on, and gives the push the pass
// then makes.
type enterSituation struct {
	name    string
	prepare func(h *harness, a *authority.Authority, env string)
	advance time.Duration // the clock moves on so long once both environments are prepared
	push    func(env string) authority.Intent
	enters  bool // the claim's own write grants the leases
	// oneDoc: it enters only where its write is one document; in the per-scope layout an intent
	// of several scopes, or one that switches the policy, leaves the gate to Gate.
	oneDoc bool
}

var enterSituations = []enterSituation{
	{name: "free", push: enterPush, enters: true},
	{name: "free, two scopes", enters: true, oneDoc: true, push: func(env string) authority.Intent {
		return push(env, "new", sha("n", 9), "api", "web")
	}},
	{name: "switches the policy", enters: true, oneDoc: true,
		prepare: func(h *harness, a *authority.Authority, env string) {
			in := push(env, "older", sha("o", 1), "api", "web")
			in.Policy = authority.PolicyQueue
			h.accept(a, in, false)
		}, push: func(env string) authority.Intent {
			in := enterPush(env)
			in.Policy = authority.PolicyLatest
			return in
		}},
	{name: "an older pass holds the lease", enters: false,
		prepare: func(h *harness, a *authority.Authority, env string) {
			res := h.accept(a, push(env, "older", sha("o", 1), "api"), true)
			h.gate(a, env, res.Generation, "run-older", "api")
		}, push: enterPush},
	{name: "an older pass's lease ran out", enters: true,
		prepare: func(h *harness, a *authority.Authority, env string) {
			res := h.accept(a, push(env, "older", sha("o", 1), "api"), true)
			h.gate(a, env, res.Generation, "run-older", "api")
		}, advance: testTTL + testSkew, push: enterPush},
	{name: "an older intent is queued ahead", enters: false,
		prepare: func(h *harness, a *authority.Authority, env string) {
			in := push(env, "older", sha("o", 1), "api")
			in.Policy = authority.PolicyQueue
			h.accept(a, in, false)
		}, push: enterPush},
	{name: "frozen by a rollback", enters: false,
		prepare: func(h *harness, a *authority.Authority, env string) {
			h.live(a, env, "a", sha("a", 1), "api")
			h.live(a, env, "b", sha("b", 2), "api")
			if _, err := a.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", To: sha("a", 1), Actor: "oncall", Reason: "b breaks checkout"}); err != nil {
				h.t.Fatal(err)
			}
		}, push: enterPush},
	{name: "approvals outstanding", enters: false, push: func(env string) authority.Intent {
		in := enterPush(env)
		in.Gates = &authority.Gates{Approvals: &authority.ApprovalRule{Count: 1}}
		return in
	}},
	{name: "outside the change window", enters: false, push: func(env string) authority.Intent {
		in := enterPush(env)
		in.Gates = &authority.Gates{Windows: workdays}
		return in
	}},
	// The gate reads the required environment's live commits; the claim's write does not, so
	// it leaves the decision to the gate, which lets the pass go.
	{name: "requires an environment where it is live", enters: false,
		prepare: func(h *harness, a *authority.Authority, env string) {
			h.live(a, env+"-up", "up", sha("n", 9), "api")
		}, push: func(env string) authority.Intent {
			in := enterPush(env)
			in.Requires = &authority.Requirements{Environments: []string{env + "-up"}}
			return in
		}},
}

func enterPush(env string) authority.Intent { return push(env, "new", sha("n", 9), "api") }

// testEnterAsClaimThenGate: in every situation, one environment gets the claim that enters
// (then the gate, when it did not), another the claim and then the gate. Both end with the same
// generation, the same answer (the same tokens and expiry, or the same refusal), the same state
// of the scope and the same timeline; the claim that enters records nothing of a gate that
// refuses (the gate records it); it grants exactly where the pass may go at once, with the
// leases stored, in as many conditional writes as the claim alone; and its tokens complete the
// deploy.
func testEnterAsClaimThenGate(t *testing.T, h *harness) {
	for i, s := range enterSituations {
		envs := [2]string{fmt.Sprintf("enter-%d", i), fmt.Sprintf("claim-%d", i)}
		type ending struct {
			res    *authority.AcceptResult
			grant  *authority.Grant
			held   *authority.HeldError
			puts   int64
			before []string // the timeline right after the claim
		}
		var ends [2]ending
		for _, env := range envs {
			if s.prepare != nil {
				s.prepare(h, h.process(), env)
			}
		}
		h.clock.Advance(s.advance)
		for k, env := range envs {
			var opts []authority.AcceptOption
			if k == 0 {
				opts = append(opts, authority.EnterDeploy("run-new", testTTL))
			}
			_, puts := h.store.requests()
			res, err := h.process().Accept(h.ctx, s.push(env), true, opts...)
			if err != nil {
				t.Fatalf("%s: claim in %s: %v", s.name, env, err)
			}
			_, after := h.store.requests()
			e := ending{res: res, puts: after - puts, before: readTimeline(h, env)}
			e.grant = res.Entered
			if e.grant == nil && res.Claim != nil {
				g, err := h.process().Gate(h.ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: res.Claim.Scopes(),
					Phase: "deploy", Holder: "run-new", LeaseTTL: testTTL})
				if err != nil && !errors.As(err, &e.held) {
					t.Fatalf("%s: gate in %s: %v", s.name, env, err)
				}
				e.grant = g
			}
			ends[k] = e
		}
		enter, apart := ends[0], ends[1]
		if s.oneDoc && h.split {
			s.enters = false
		}
		if got := enter.res.Entered != nil; got != s.enters {
			t.Fatalf("%s: the claim entered the deploy phase: %v; want %v (the gate alone: %v)", s.name, got, s.enters, apart.held)
		}
		if enter.res.Generation != apart.res.Generation || !cmp.Equal(enter.res.Claim, apart.res.Claim) {
			t.Fatalf("%s: the claim that enters gave generation %d, %+v; the claim alone %d, %+v", s.name,
				enter.res.Generation, enter.res.Claim, apart.res.Generation, apart.res.Claim)
		}
		if enter.puts != apart.puts {
			t.Fatalf("%s: the claim that enters made %d conditional writes; the claim alone %d", s.name, enter.puts, apart.puts)
		}
		if enter.res.Entered == nil && !cmp.Equal(enter.before, apart.before) {
			t.Fatalf("%s: a claim whose gate would refuse recorded more than the claim alone:\n%s", s.name, cmp.Diff(apart.before, enter.before))
		}
		switch {
		case (enter.grant == nil) != (apart.grant == nil):
			t.Fatalf("%s: the claim that enters ended with %+v (%v); the claim and the gate with %+v (%v)", s.name, enter.grant, enter.held, apart.grant, apart.held)
		case enter.grant == nil && enter.held.Reason != apart.held.Reason:
			t.Fatalf("%s: refused for %s; the gate alone refuses for %s", s.name, enter.held.Reason, apart.held.Reason)
		case enter.grant != nil && (!cmp.Equal(enter.grant.Tokens, apart.grant.Tokens) || !enter.grant.ExpiresAt.Equal(apart.grant.ExpiresAt) ||
			!cmp.Equal(enter.grant.TookOver, apart.grant.TookOver) || enter.grant.Holder != apart.grant.Holder || enter.grant.Phase != "deploy"):
			t.Fatalf("%s: the claim that enters granted %+v; the gate alone %+v", s.name, enter.grant, apart.grant)
		}
		for _, name := range s.push(envs[0]).Scopes {
			if d := cmp.Diff(h.scope(envs[1], name), h.scope(envs[0], name), cmpopts.EquateEmpty(),
				cmpopts.IgnoreFields(authority.Ref{}, "IntentID")); d != "" { // a rollback's id names its environment
				t.Fatalf("%s: %s after the claim that enters differs from %s after the claim and the gate (-apart +enter):\n%s", s.name, name, name, d)
			}
		}
		if d := cmp.Diff(readTimeline(h, envs[1]), readTimeline(h, envs[0])); d != "" {
			t.Fatalf("%s: the timelines differ (-apart +enter):\n%s", s.name, d)
		}
		if enter.grant == nil {
			continue
		}
		for name, token := range enter.grant.Tokens {
			if l := h.scope(envs[0], name).Lease; l.Holder != "run-new" || l.Token != token {
				t.Fatalf("%s: the claim granted %s token %d, but its lease is %+v", s.name, name, token, l)
			}
		}
		if len(enter.grant.Tokens) != len(enter.res.Claim.Claimed) {
			t.Fatalf("%s: the claim entered %v; it claimed %+v", s.name, enter.grant.Tokens, enter.res.Claim.Claimed)
		}
		out := h.complete(h.process(), enter.grant, authority.OutcomeSuccess, "run-new")
		if out.Overall() != authority.ResultDeployed {
			t.Fatalf("%s: the deploy under the claim's leases completed as %s", s.name, out.Overall())
		}
	}
}

// readTimeline is env's timeline as a user reads it, without its numbers, and with env's name
// as ENV.
func readTimeline(h *harness, env string) []string {
	var out []string
	for _, ev := range h.history(env) {
		out = append(out, strings.ReplaceAll(fmt.Sprintf("%s %s g%d t%d %s", ev.Kind, ev.Scope, ev.Generation, ev.Token, ev.Message), env, "ENV"))
	}
	return out
}

// testEnterOnlyWithAClaim: entering the deploy phase is asked of an accept that claims, with a
// holder and a TTL; anything else is refused before anything is written.
func testEnterOnlyWithAClaim(t *testing.T, h *harness) {
	a := h.process()
	for _, c := range []struct {
		claim  bool
		holder string
		ttl    time.Duration
	}{{false, "run-1", testTTL}, {true, "", testTTL}, {true, "run-1", 0}} {
		_, err := a.Accept(h.ctx, push("staging", "p", sha("p", 1), "api"), c.claim, authority.EnterDeploy(c.holder, c.ttl))
		var in *authority.InputError
		if !errors.As(err, &in) || in.Fix == "" {
			t.Fatalf("accept (claim %v) entering as %q for %s: %v; want an input error that says what to fix", c.claim, c.holder, c.ttl, err)
		}
	}
	if _, err := h.store.inner.Get(h.ctx, authority.EnvKey("staging")); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("after refused accepts, staging reads %v; want nothing stored", err)
	}
}
