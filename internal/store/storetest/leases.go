package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 6: at most one holder; an expired lease is taken over at once by exactly one of any
// number of racers, and the takeover is recorded; only the holder renews or releases; a refusal
// says who holds it, for what, and how many whole seconds to wait; different resources never block
// each other.
func leaseCases() []testCase {
	return []testCase{
		{"ExpiredRace", testExpiredLeaseRace},
		{"NamedExpiredRace", testNamedLeaseRace},
		{"RetryAfter", testRetryAfter},
		{"HolderOnly", testHolderOnly},
		{"Independent", testLeasesIndependent},
		{"NamedLifecycle", testNamedLifecycle},
		{"AlarmKept", testAlarmKeptWithItsLease},
		{"GateOfSeveralScopesMeetsARace", testGateMeetsARace},
	}
}

// testGateMeetsARace: in the per-scope layout a deploy gate of several scopes writes their
// leases one by one. When a push naming one of them alone lands between those writes, the
// gate's retry refuses (that scope is superseded), and the lease its first attempt granted on
// the other is given back at once: the pass got no grant, and a newer pass there does not wait
// for that lease's TTL.
func testGateMeetsARace(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document grants every scope of a gate in one write")
	}
	const env = "staging"
	first := h.accept(h.process(), push(env, "pass", sha("p", 1), "api", "web"), true)
	paused := newPutPausing(h.store, authority.ScopeKey(env, "web"))
	a := h.authority(paused)
	done := make(chan error, 1)
	go func() {
		_, err := a.Gate(h.ctx, authority.GateRequest{Environment: env, Generation: first.Generation, Scopes: []string{"api", "web"},
			Phase: "deploy", Holder: "run-1", LeaseTTL: testTTL})
		done <- err
	}()
	<-paused.paused // api's lease is written, web's not yet
	newer := h.accept(h.process(), push(env, "newer", sha("n", 1), "web"), true)
	close(paused.resumed)
	if err := <-done; !errors.Is(err, authority.ErrSuperseded) {
		t.Fatalf("gate of api and web after a push on web landed between its writes: %v; want superseded", err)
	}
	if l := h.scope(env, "api").Lease; l.Holder != "" {
		t.Fatalf("api leased to %s (token %d, generation %d) by a gate that was refused; want it given back", l.Holder, l.Token, l.Generation)
	}
	// The newer intent deploys on web at once, and a newer pass on api gets its lease.
	h.deploy(h.process(), env, newer.Generation, "run-2", "run-2", "web")
	again := h.accept(h.process(), push(env, "again", sha("a", 1), "api"), true)
	h.deploy(h.process(), env, again.Generation, "run-3", "run-3", "api")
}

// wantHeld fails the test unless err is a *HeldError naming holder, with a whole number of seconds
// (at least one) to wait, equal to want when want > 0.
func wantHeld(t *testing.T, err error, holder, purpose string, want time.Duration) *authority.HeldError {
	t.Helper()
	var held *authority.HeldError
	if !errors.As(err, &held) || !errors.Is(err, authority.ErrLeaseHeld) {
		t.Fatalf("got %v; want a *HeldError matching ErrLeaseHeld", err)
	}
	if held.Holder != holder || held.Purpose != purpose {
		t.Fatalf("refusal names %q (%s); want %q (%s)", held.Holder, held.Purpose, holder, purpose)
	}
	if held.RetryAfter < time.Second || held.RetryAfter%time.Second != 0 || (want > 0 && held.RetryAfter != want) {
		t.Fatalf("retry after %v; want %v, whole seconds and at least 1s", held.RetryAfter, want)
	}
	if !strings.Contains(err.Error(), holder) {
		t.Fatalf("refusal %q does not say who holds the lease", err)
	}
	return held
}

// testExpiredLeaseRace: each round the deploy lease of a scope has expired, and 16 racers (re-runs
// of the pass that owns the scope) want it at the same instant. Exactly one wins, with a token
// greater than every earlier one; every other gets a refusal naming the winner; the takeover is in
// the timeline. (The environment document is the largest the domain writes, so this race runs
// fewer rounds than the one on a named lease below.)
func testExpiredLeaseRace(t *testing.T, h *harness) {
	const racers = 16
	const env = "race"
	n := rounds(100, 25)
	a := h.process()
	gen := h.accept(a, push(env, "run-1", sha("a", 1), "api"), true).Generation
	last := h.gate(a, env, gen, "runner-0", "api")
	lastHolder := "runner-0"
	procs := make([]*authority.Authority, racers)
	for i := range procs {
		procs[i] = h.process()
	}
	for round := 1; round <= n; round++ {
		h.clock.Advance(testTTL + h.skew) // exactly at expiry plus skew: free to take over
		now := h.clock.Now()
		grants := make([]*authority.Grant, racers)
		errs := make([]error, racers)
		begin := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-begin
				grants[i], errs[i] = procs[i].Gate(h.ctx, authority.GateRequest{Environment: env, Generation: gen, Scopes: []string{"api"},
					Phase: "deploy", Holder: fmt.Sprintf("runner-%d-%d", round, i), LeaseTTL: testTTL})
			})
		}
		close(begin)
		wg.Wait()

		winner := -1
		for i := range racers {
			if errs[i] == nil {
				if winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both got the lease", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody took over the expired lease: %v", round, errs[0])
		}
		g := grants[winner]
		if g.Tokens["api"] <= last.Tokens["api"] {
			t.Fatalf("round %d: token %d after %d; want strictly greater", round, g.Tokens["api"], last.Tokens["api"])
		}
		if len(g.TookOver) != 1 || g.TookOver[0] != "api" {
			t.Fatalf("round %d: the winner's grant does not report the takeover: %+v", round, g)
		}
		wantWait := ceilSeconds(g.ExpiresAt.Add(h.skew).Sub(now))
		for i := range racers {
			if i != winner {
				wantHeld(t, errs[i], g.Holder, "deploy", wantWait)
			}
		}
		e := h.env(env)
		if l := e.Scopes["api"].Lease; l.Holder != g.Holder || l.Token != g.Tokens["api"] {
			t.Fatalf("round %d: stored lease %+v; want the winner %s with token %d", round, l, g.Holder, g.Tokens["api"])
		}
		took := countEvents(e, authority.EventTookOver, func(ev authority.Event) bool {
			return ev.Holder == g.Holder && ev.Token == g.Tokens["api"] &&
				strings.Contains(ev.Message, "Recovered an interrupted operation (Interrupted: deploy)") && strings.Contains(ev.Message, lastHolder)
		})
		if took != 1 {
			t.Fatalf("round %d: %d takeover events for %s; want one naming the interrupted holder %s", round, took, g.Holder, lastHolder)
		}
		last, lastHolder = g, g.Holder
	}
}

// testNamedLeaseRace is the same race, for 500 rounds, on a named lease held for a deploy.
func testNamedLeaseRace(t *testing.T, h *harness) {
	const racers = 16
	const name = "deploy: example/app to staging"
	n := rounds(500, 60)
	first, err := h.process().Acquire(h.ctx, name, "host-0", "deploy", testTTL)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	lastToken, lastHolder := first.Tokens[name], "host-0"
	procs := make([]*authority.Authority, racers)
	for i := range procs {
		procs[i] = h.process()
	}
	for round := 1; round <= n; round++ {
		h.clock.Advance(testTTL + h.skew)
		now := h.clock.Now()
		grants := make([]*authority.Grant, racers)
		errs := make([]error, racers)
		begin := make(chan struct{})
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() {
				<-begin
				grants[i], errs[i] = procs[i].Acquire(h.ctx, name, fmt.Sprintf("host-%d-%d", round, i), "deploy", testTTL)
			})
		}
		close(begin)
		wg.Wait()
		winner := -1
		for i := range racers {
			if errs[i] == nil {
				if winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both got the lease", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody took over the expired lease: %v", round, errs[0])
		}
		g := grants[winner]
		if g.Tokens[name] <= lastToken {
			t.Fatalf("round %d: token %d after %d; want strictly greater", round, g.Tokens[name], lastToken)
		}
		wantWait := ceilSeconds(g.ExpiresAt.Add(h.skew).Sub(now))
		for i := range racers {
			if i != winner {
				wantHeld(t, errs[i], g.Holder, "deploy", wantWait)
			}
		}
		nl, err := h.process().LeaseStatus(h.ctx, name)
		if err != nil {
			t.Fatalf("lease status: %v", err)
		}
		if nl.Lease.Holder != g.Holder || nl.Lease.Token != g.Tokens[name] {
			t.Fatalf("round %d: stored lease %+v; want %s with token %d", round, nl.Lease, g.Holder, g.Tokens[name])
		}
		if ev := nl.Events[len(nl.Events)-1]; ev.Kind != authority.EventTookOver || ev.Holder != g.Holder ||
			!strings.Contains(ev.Message, "Recovered an interrupted operation (Interrupted: deploy)") || !strings.Contains(ev.Message, lastHolder) {
			t.Fatalf("round %d: newest event %+v; want the takeover by %s from %s", round, ev, g.Holder, lastHolder)
		}
		lastToken, lastHolder = g.Tokens[name], g.Holder
	}
}

// testRetryAfter: retry_after is the whole seconds until expiry plus skew, rounded up, at least 1;
// at expiry plus skew the lease is taken over at once.
func testRetryAfter(t *testing.T, h *harness) {
	a := h.process()
	gen := h.accept(a, push("staging", "run-1", sha("a", 1), "api"), true).Generation
	g := h.gate(a, "staging", gen, "run-1/1", "api")
	deadline := g.ExpiresAt.Add(h.skew)
	other := h.process()
	for _, at := range []time.Duration{0, 10*time.Second + 300*time.Millisecond, testTTL, testTTL + time.Second + time.Nanosecond, testTTL + h.skew - time.Nanosecond} {
		elapsed := h.clock.Now().Sub(start)
		h.clock.Advance(at - elapsed)
		_, err := other.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1/2", LeaseTTL: testTTL})
		held := wantHeld(t, err, "run-1/1", "deploy", ceilSeconds(deadline.Sub(h.clock.Now())))
		if held.Generation != gen || held.Resource != "staging/api" {
			t.Fatalf("refusal %+v; want it to name staging/api and generation %d", held, gen)
		}
	}
	// Still refused one nanosecond before expiry plus skew (one second to wait), taken over at it.
	h.clock.Advance(time.Nanosecond)
	g2, err := other.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1/2", LeaseTTL: testTTL})
	if err != nil {
		t.Fatalf("gate at expiry plus skew: %v; want the lease", err)
	}
	if g2.Tokens["api"] <= g.Tokens["api"] {
		t.Fatalf("takeover token %d after %d", g2.Tokens["api"], g.Tokens["api"])
	}

	// Named leases follow the same rule.
	nl, err := a.Acquire(h.ctx, "refresh", "host-1", "refresh", testTTL)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	h.clock.Advance(2500 * time.Millisecond)
	_, err = other.Acquire(h.ctx, "refresh", "host-2", "refresh", testTTL)
	wantHeld(t, err, "host-1", "refresh", ceilSeconds(nl.ExpiresAt.Add(h.skew).Sub(h.clock.Now())))
}

// testHolderOnly: only the holder renews, releases or completes; a renewed lease is not taken over.
func testHolderOnly(t *testing.T, h *harness) {
	a, b := h.process(), h.process()
	gen := h.accept(a, push("staging", "run-1", sha("a", 1), "api"), true).Generation
	g := h.gate(a, "staging", gen, "run-1/1", "api")
	forged := &authority.Grant{Environment: "staging", Generation: gen, Phase: "deploy", Holder: "run-1/2", Tokens: g.Tokens}
	wrongToken := &authority.Grant{Environment: "staging", Generation: gen, Phase: "deploy", Holder: "run-1/1", Tokens: map[string]int64{"api": g.Tokens["api"] + 1}}
	before := h.doc(authority.EnvKey("staging"))

	for _, other := range []*authority.Grant{forged, wrongToken} {
		wantLost := func(what string, err error) {
			t.Helper()
			var lost *authority.LostError
			if !errors.As(err, &lost) || !errors.Is(err, authority.ErrLeaseLost) {
				t.Fatalf("%s by %s with token %d: %v; want a *LostError matching ErrLeaseLost", what, other.Holder, other.Tokens["api"], err)
			}
			if lost.Holder != "run-1/1" || lost.Current != g.Tokens["api"] {
				t.Fatalf("%s: %+v; want it to name the holder run-1/1 and token %d", what, lost, g.Tokens["api"])
			}
		}
		wantLost("renew", b.Renew(h.ctx, other, testTTL))
		wantLost("release", b.Release(h.ctx, other))
		_, err := b.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: gen, Scopes: []string{"api"},
			Holder: other.Holder, Tokens: other.Tokens, Outcome: authority.OutcomeSuccess})
		wantLost("complete", err)
	}
	if diff := cmp.Diff(before, h.doc(authority.EnvKey("staging"))); diff != "" {
		t.Fatalf("refused renewals, releases and completions changed the environment (-before +after):\n%s", diff)
	}

	// The holder renews two thirds into its TTL; past the original expiry plus skew it still holds.
	h.clock.Advance(testTTL * 2 / 3)
	if err := a.Renew(h.ctx, g, testTTL); err != nil {
		t.Fatalf("renew by the holder: %v", err)
	}
	h.clock.Advance(testTTL/3 + h.skew + time.Second)
	_, err := b.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1/2", LeaseTTL: testTTL})
	wantHeld(t, err, "run-1/1", "deploy", ceilSeconds(g.ExpiresAt.Add(h.skew).Sub(h.clock.Now())))

	// After the holder releases, the next grant is not a takeover, and the old grant is dead.
	if err := a.Release(h.ctx, g); err != nil {
		t.Fatalf("release by the holder: %v", err)
	}
	g2, err := b.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1/2", LeaseTTL: testTTL})
	if err != nil || len(g2.TookOver) != 0 {
		t.Fatalf("gate after release: %+v, %v; want a grant that is not a takeover", g2, err)
	}
	if err := a.Renew(h.ctx, g, testTTL); !errors.Is(err, authority.ErrLeaseLost) {
		t.Fatalf("renew of a released lease: %v; want ErrLeaseLost", err)
	}
	if err := a.Release(h.ctx, g); !errors.Is(err, authority.ErrLeaseLost) {
		t.Fatalf("release of a lease now held by another: %v; want ErrLeaseLost", err)
	}
	if l := h.scope("staging", "api").Lease; l.Holder != "run-1/2" || l.Token != g2.Tokens["api"] {
		t.Fatalf("lease %+v; want run-1/2 with token %d", l, g2.Tokens["api"])
	}
}

// testLeasesIndependent: leases on different scopes, environments and names never block each
// other; a gate over several scopes is granted whole or not at all.
func testLeasesIndependent(t *testing.T, h *harness) {
	a := h.process()
	gen := h.accept(a, push("staging", "run-1", sha("a", 1), "api", "web", "db"), true).Generation
	prodGen := h.accept(a, push("prod", "run-1", sha("a", 1), "api"), true).Generation
	ga := h.gate(a, "staging", gen, "holder-a", "api")
	if _, err := h.process().Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{"web"}, Phase: "deploy", Holder: "holder-b", LeaseTTL: testTTL}); err != nil {
		t.Fatalf("a lease on staging/web while staging/api is held: %v", err)
	}
	if _, err := h.process().Gate(h.ctx, authority.GateRequest{Environment: "prod", Generation: prodGen, Scopes: []string{"api"}, Phase: "deploy", Holder: "holder-c", LeaseTTL: testTTL}); err != nil {
		t.Fatalf("a lease on prod/api while staging/api is held: %v", err)
	}
	for _, name := range []string{"refresh: config", "staging"} {
		if _, err := h.process().Acquire(h.ctx, name, "holder-d", "refresh", testTTL); err != nil {
			t.Fatalf("named lease %q while scope leases are held: %v", name, err)
		}
	}
	if _, err := h.process().Acquire(h.ctx, "refresh: other", "holder-e", "refresh", testTTL); err != nil {
		t.Fatalf("named lease while another named lease is held: %v", err)
	}
	// A named lease does not block a scope's lease either.
	if _, err := h.process().Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{"db"}, Phase: "build", Holder: "holder-f", LeaseTTL: testTTL}); err != nil {
		t.Fatalf("a lease on staging/db while named leases are held: %v", err)
	}

	// api held by holder-a: a gate over api and a free scope gets neither.
	h.accept(a, push("staging", "run-2", sha("a", 2), "api", "worker"), false)
	gen2 := h.env("staging").Desired
	h.claim(a, "staging", gen2, "api", "worker")
	_, err := h.process().Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: gen2, Scopes: []string{"worker", "api"}, Phase: "deploy", Holder: "holder-g", LeaseTTL: testTTL})
	wantHeld(t, err, ga.Holder, "deploy", 0)
	if l := h.scope("staging", "worker").Lease; l.Holder != "" || l.Token != 0 {
		t.Fatalf("a refused gate over two scopes leased one of them: %+v", l)
	}
}

// testNamedLifecycle: a named lease is renewed and released only by its holder, keeps its token
// when free, and its timeline records takeovers.
func testNamedLifecycle(t *testing.T, h *harness) {
	const name = "refresh: config"
	a, b := h.process(), h.process()
	g, err := a.Acquire(h.ctx, name, "host-1", "refresh", testTTL)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	forged := &authority.Grant{Holder: "host-2", Tokens: g.Tokens}
	if err := b.RenewNamed(h.ctx, forged, testTTL); !errors.Is(err, authority.ErrLeaseLost) {
		t.Fatalf("renew by a non-holder: %v; want ErrLeaseLost", err)
	}
	if err := b.ReleaseNamed(h.ctx, forged); !errors.Is(err, authority.ErrLeaseLost) {
		t.Fatalf("release by a non-holder: %v; want ErrLeaseLost", err)
	}
	h.clock.Advance(testTTL)
	if err := a.RenewNamed(h.ctx, g, testTTL); err != nil {
		t.Fatalf("renew by the holder: %v", err)
	}
	h.clock.Advance(testTTL)
	_, err = b.Acquire(h.ctx, name, "host-2", "refresh", testTTL)
	wantHeld(t, err, "host-1", "refresh", ceilSeconds(h.skew))
	if err := a.ReleaseNamed(h.ctx, g); err != nil {
		t.Fatalf("release by the holder: %v", err)
	}
	nl, err := b.LeaseStatus(h.ctx, name)
	if err != nil || nl.Lease.Holder != "" || nl.Lease.Token != g.Tokens[name] {
		t.Fatalf("released lease: %+v, %v; want free, keeping token %d", nl, err, g.Tokens[name])
	}
	g2, err := b.Acquire(h.ctx, name, "host-2", "refresh", testTTL)
	if err != nil || g2.Tokens[name] <= g.Tokens[name] {
		t.Fatalf("acquire after release: %+v, %v; want a token above %d", g2, err, g.Tokens[name])
	}
	if nl, _ := b.LeaseStatus(h.ctx, name); countNamedEvents(nl, authority.EventTookOver) != 0 {
		t.Fatalf("a grant after a release was recorded as a takeover: %+v", nl.Events)
	}
}

func countNamedEvents(nl *authority.NamedLease, kind authority.EventKind) int {
	n := 0
	for _, ev := range nl.Events {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}
