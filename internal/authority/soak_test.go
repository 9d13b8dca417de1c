package authority_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// soakStart is the clock's first reading in the soak tests: a whole minute, so that the gate's
// words can be checked to the minute.
var soakStart = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

// soakWorld is a store, a fake clock and what a test needs to deploy through the Authority.
type soakWorld struct {
	t        *testing.T
	ctx      context.Context
	store    authority.Store
	clock    *storetest.Clock
	comparer authority.Comparer
	n        int
}

func newSoakWorld(t *testing.T) *soakWorld {
	return &soakWorld{t: t, ctx: t.Context(), store: memory.New(), clock: storetest.NewClock(soakStart)}
}

// process is a new Authority over the world's store: a separate process, with nothing remembered.
func (w *soakWorld) process() *authority.Authority {
	opts := []authority.Option{authority.WithClock(w.clock)}
	if w.comparer != nil {
		opts = append(opts, authority.WithPromotionComparer(w.comparer))
	}
	return authority.New(w.store, opts...)
}

// live deploys commit in env's api scope with a whole pass of its own.
func (w *soakWorld) live(env, commit string) {
	w.t.Helper()
	w.n++
	in := authority.Intent{ID: fmt.Sprintf("%s-%d", env, w.n), Environment: env, Scopes: []string{"api"}, Sha: commit, Ref: "refs/heads/main", Redeploy: true}
	res, err := w.process().Accept(w.ctx, in, true)
	if err != nil {
		w.t.Fatalf("accept %s in %s: %v", commit[:7], env, err)
	}
	if held := w.tryDeploy(env, res.Generation); held != nil {
		w.t.Fatalf("deploy %s in %s: %v", commit[:7], env, held)
	}
}

// prod accepts commit in prod, which requires staging and every environment soak names (with
// requires-ancestor when ancestor) and soaks there for soak; it returns the generation of its pass.
func (w *soakWorld) prod(commit string, soak authority.Soak, ancestor bool) int64 {
	w.t.Helper()
	w.n++
	in := authority.Intent{ID: fmt.Sprintf("prod-%d", w.n), Environment: "prod", Scopes: []string{"api"}, Sha: commit, Ref: "refs/heads/main",
		Requires: &authority.Requirements{Environments: []string{"staging"}, Ancestor: ancestor}, Gates: &authority.Gates{Soak: &soak}}
	for env := range soak.Environments {
		if env != "staging" {
			in.Requires.Environments = append(in.Requires.Environments, env)
		}
	}
	res, err := w.process().Accept(w.ctx, in, true)
	if err != nil {
		w.t.Fatalf("accept %s in prod: %v", commit[:7], err)
	}
	return res.Generation
}

// tryDeploy asks env's deploy gate for the pass at gen in a fresh process and, when it passes,
// completes the deploy with success; it returns the refusal, nil when the commit deployed.
func (w *soakWorld) tryDeploy(env string, gen int64) *authority.HeldError {
	w.t.Helper()
	a := w.process()
	g, err := a.Gate(w.ctx, authority.GateRequest{Environment: env, Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: fmt.Sprintf("run-%d", gen), LeaseTTL: time.Minute})
	if held, ok := errors.AsType[*authority.HeldError](err); ok {
		return held
	}
	if err != nil {
		w.t.Fatalf("deploy gate of %d in %s: %v", gen, env, err)
	}
	res, err := a.Complete(w.ctx, authority.Completion{Environment: env, Generation: gen, Scopes: []string{"api"}, Holder: g.Holder, Tokens: g.Tokens,
		Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3, Run: g.Holder})
	if err != nil || res.Results["api"] != authority.ResultDeployed {
		w.t.Fatalf("complete %d in %s: %+v, %v", gen, env, res, err)
	}
	return nil
}

// wantSoaking checks that prod's deploy gate holds the pass at gen for its soak in env, with words
// and a retry-after a user reads.
func (w *soakWorld) wantSoaking(gen int64, env, text string, retry time.Duration) {
	w.t.Helper()
	held := w.tryDeploy("prod", gen)
	if held == nil {
		w.t.Fatalf("prod deployed generation %d at %s; want it held soaking in %s", gen, w.clock.Now().Format(time.TimeOnly), env)
	}
	if held.Why() != authority.ReasonSoaking || held.Soak == nil || held.Soak.Environment != env {
		w.t.Fatalf("prod's gate at %s: %v (reason %s); want soaking in %s", w.clock.Now().Format(time.TimeOnly), held, held.Why(), env)
	}
	if got := authority.WaitText(held); got != text {
		w.t.Fatalf("prod's gate at %s says %q; want %q", w.clock.Now().Format(time.TimeOnly), got, text)
	}
	if !strings.Contains(held.Error(), text) {
		w.t.Fatalf("prod's gate error %q does not say %q", held.Error(), text)
	}
	if held.RetryAfter != retry {
		w.t.Fatalf("prod's gate at %s: retry after %s; want %s (when the soak ends)", w.clock.Now().Format(time.TimeOnly), held.RetryAfter, retry)
	}
}

func (w *soakWorld) liveIn(env string) *authority.Live {
	w.t.Helper()
	d, err := w.store.Get(w.ctx, authority.EnvKey(env))
	if err != nil {
		w.t.Fatal(err)
	}
	return d.Env.Scopes["api"].Live
}

func soakSha(prefix string, i int) string {
	return fmt.Sprintf("%s%0*d", prefix, 40-len(prefix), i)
}

// A commit live in staging is held in prod until it has been live there for the soak, told how
// long so far and when it ends, and deploys at exactly the end.
func TestSoakHoldsUntilItsEnd(t *testing.T) {
	w := newSoakWorld(t)
	x := soakSha("a1", 1)
	w.live("staging", x)
	gen := w.prod(x, authority.Soak{For: 30 * time.Minute}, false)

	w.wantSoaking(gen, "staging", "soaking in staging: 0s of 30m; ends 14:30 UTC", 30*time.Minute)
	// Retry after: whole seconds until the end, rounded up, at least one.
	w.clock.Advance(12*time.Minute + 20*time.Second + 500*time.Millisecond)
	w.wantSoaking(gen, "staging", "soaking in staging: 12m of 30m; ends 14:30 UTC", 17*time.Minute+40*time.Second)
	w.clock.Advance(17*time.Minute + 39*time.Second + 250*time.Millisecond)
	w.wantSoaking(gen, "staging", "soaking in staging: 29m of 30m; ends 14:30 UTC", time.Second)
	w.clock.Advance(250 * time.Millisecond)
	if held := w.tryDeploy("prod", gen); held != nil {
		t.Fatalf("prod at the soak's end: %v; want it deployed", held)
	}
	if l := w.liveIn("prod"); l == nil || l.Sha != x {
		t.Fatalf("prod live after the soak: %+v; want %s", l, x[:7])
	}
}

// A deploy of the same commit again in staging does not restart its soak; another commit going
// live there does (without requires-ancestor the commit soaks while it stays live).
func TestSoakRedeployKeepsItsStart(t *testing.T) {
	w := newSoakWorld(t)
	x, y := soakSha("b1", 1), soakSha("b2", 2)
	w.live("staging", x)
	gen := w.prod(x, authority.Soak{For: 30 * time.Minute}, false)
	w.clock.Advance(20 * time.Minute)
	w.live("staging", x) // redeployed
	if l := w.liveIn("staging"); !l.At.Equal(soakStart.Add(20*time.Minute)) || !l.Since.Equal(soakStart) {
		t.Fatalf("staging live after a redeploy: at %s, since %s; want at 14:20, since 14:00", l.At, l.Since)
	}
	w.wantSoaking(gen, "staging", "soaking in staging: 20m of 30m; ends 14:30 UTC", 10*time.Minute)

	// Another commit live in staging, then x again at 14:25: x soaks anew, until 14:55.
	w.clock.Advance(2 * time.Minute)
	w.live("staging", y)
	w.clock.Advance(3 * time.Minute)
	w.live("staging", x)
	w.clock.Advance(5 * time.Minute) // 14:30: the first soak's end is no longer it
	w.wantSoaking(gen, "staging", "soaking in staging: 5m of 30m; ends 14:55 UTC", 25*time.Minute)
	w.clock.Advance(25 * time.Minute)
	if held := w.tryDeploy("prod", gen); held != nil {
		t.Fatalf("prod at the second soak's end: %v; want it deployed", held)
	}
}

// descendants says that every commit of its list descends from the one waiting in prod.
type descendants map[string]bool

func (d descendants) Compare(_ context.Context, _ authority.Intent, base, head string) (authority.CommitOrder, error) {
	if d[base+".."+head] {
		return authority.Ahead, nil
	}
	return authority.Diverged, nil
}

// With requires-ancestor, a staging that deploys a newer descendant every few minutes does not
// starve prod: the soak counts from when prod's gate first saw a descendant live there (from when
// that one went live), not from the newest.
func TestSoakBusyStagingDoesNotStarveAncestorMode(t *testing.T) {
	w := newSoakWorld(t)
	x := soakSha("c0", 0)
	comparer := descendants{}
	w.comparer = comparer
	next := func(i int) string {
		d := soakSha("c1", i)
		comparer[x+".."+d] = true
		return d
	}
	w.live("staging", next(1)) // 14:00
	gen := w.prod(x, authority.Soak{For: 30 * time.Minute}, true)
	w.clock.Advance(time.Minute)
	w.wantSoaking(gen, "staging", "soaking in staging: 1m of 30m; ends 14:30 UTC", 29*time.Minute)
	for i := 2; i <= 6; i++ {
		w.clock.Advance(5 * time.Minute)
		w.live("staging", next(i)) // 14:06, 14:11, ... 14:26
		ends := 30*time.Minute - w.clock.Now().Sub(soakStart)
		w.wantSoaking(gen, "staging", fmt.Sprintf("soaking in staging: %dm of 30m; ends 14:30 UTC", 30-int(ends/time.Minute)), ends)
	}
	w.clock.Advance(4 * time.Minute) // 14:30
	if held := w.tryDeploy("prod", gen); held != nil {
		t.Fatalf("prod at 14:30 with staging busy: %v; want it deployed (its soak counts from 14:00)", held)
	}
}

// A descendant prod's gate never saw live counts from when the gate first saw one: a gate that
// first asks after staging moved on counts from the newer one's going live.
func TestSoakAncestorCountsFromTheFirstSighting(t *testing.T) {
	w := newSoakWorld(t)
	x, d1, d2 := soakSha("d0", 0), soakSha("d1", 1), soakSha("d2", 2)
	w.comparer = descendants{x + ".." + d1: true, x + ".." + d2: true}
	w.live("staging", d1) // 14:00, never seen by prod's gate
	gen := w.prod(x, authority.Soak{For: 30 * time.Minute}, true)
	w.clock.Advance(10 * time.Minute)
	w.live("staging", d2) // 14:10
	w.clock.Advance(5 * time.Minute)
	w.wantSoaking(gen, "staging", "soaking in staging: 5m of 30m; ends 14:40 UTC", 25*time.Minute)
}

// A rollback is the way back from a bad deploy: no soak holds it, whatever is live in staging.
func TestSoakNeverHoldsARollback(t *testing.T) {
	w := newSoakWorld(t)
	old, x := soakSha("e0", 0), soakSha("e1", 1)
	w.live("staging", old)
	w.live("prod", old)
	w.live("staging", x)
	gen := w.prod(x, authority.Soak{For: time.Hour}, false)
	w.clock.Advance(time.Hour)
	if held := w.tryDeploy("prod", gen); held != nil {
		t.Fatalf("prod after an hour: %v", held)
	}
	w.live("staging", old) // old is live in staging again just now: it has not soaked
	res, err := w.process().Rollback(w.ctx, authority.RollbackRequest{Environment: "prod", Scope: "api", Actor: "oncall", Reason: "x breaks checkout"})
	if err != nil {
		t.Fatal(err)
	}
	if held := w.tryDeploy("prod", res.Generation); held != nil {
		t.Fatalf("the rollback's deploy in prod: %v; want it deployed at once", held)
	}
}

// With a soak in several required environments, the gate names the one that ends last, and tells
// the pass to ask again then.
func TestSoakNamesTheRequiredEnvironmentThatEndsLast(t *testing.T) {
	w := newSoakWorld(t)
	x := soakSha("f1", 1)
	w.live("qa", x)
	w.clock.Advance(10 * time.Minute)
	w.live("staging", x)
	gen := w.prod(x, authority.Soak{Environments: map[string]time.Duration{"staging": 30 * time.Minute, "qa": 2 * time.Hour}}, false)
	w.wantSoaking(gen, "qa", "soaking in qa: 10m of 2h; ends 16:00 UTC", 110*time.Minute)
	w.clock.Advance(110 * time.Minute)
	if held := w.tryDeploy("prod", gen); held != nil {
		t.Fatalf("prod once both soaks ended: %v", held)
	}
}

// The gate's words carry the day when the soak ends on another.
func TestSoakEndOnAnotherDay(t *testing.T) {
	w := newSoakWorld(t)
	x := soakSha("a2", 2)
	w.live("staging", x)
	gen := w.prod(x, authority.Soak{For: 48*time.Hour + 30*time.Second}, false)
	w.wantSoaking(gen, "staging", "soaking in staging: 0s of 48h0m30s; ends Fri 4 Dec 14:00:30 UTC", 48*time.Hour+30*time.Second)
}

// A soak is checked where an intent that does not come from a configuration file sets it.
func TestSoakValidate(t *testing.T) {
	staging := &authority.Requirements{Environments: []string{"staging"}}
	for _, c := range []struct {
		name  string
		req   *authority.Requirements
		soak  authority.Soak
		field string
		fix   string
	}{
		{"negative", staging, authority.Soak{For: -time.Minute}, "soak", "positive"},
		{"longer than a week", staging, authority.Soak{For: authority.MaxSoak + time.Second}, "soak", "at most 168h"},
		{"zero for an environment", staging, authority.Soak{Environments: map[string]time.Duration{"staging": 0}}, "soak", "positive"},
		{"an environment not required", staging, authority.Soak{Environments: map[string]time.Duration{"qa": time.Hour}}, "soak", "prod does not require qa"},
		{"nothing required", &authority.Requirements{}, authority.Soak{For: time.Hour}, "soak", "prod requires no environment"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newSoakWorld(t)
			in := authority.Intent{ID: "p", Environment: "prod", Scopes: []string{"api"}, Sha: soakSha("a3", 3), Requires: c.req, Gates: &authority.Gates{Soak: &c.soak}}
			_, err := w.process().Accept(w.ctx, in, false)
			ie, ok := errors.AsType[*authority.InputError](err)
			if !ok || ie.Field != c.field || !strings.Contains(ie.Fix, c.fix) {
				t.Fatalf("accept with %+v: %v; want an input error on %s saying %q", c.soak, err, c.field, c.fix)
			}
		})
	}
	// Within bounds, and without requires in the intent (the stored requirement stays), it is taken.
	w := newSoakWorld(t)
	for i, s := range []authority.Soak{{For: authority.MaxSoak}, {For: time.Second}, {}} {
		in := authority.Intent{ID: fmt.Sprintf("p%d", i), Environment: "prod", Scopes: []string{"api"}, Sha: soakSha("a4", i), Gates: &authority.Gates{Soak: &s}}
		if _, err := w.process().Accept(w.ctx, in, false); err != nil {
			t.Fatalf("accept with %+v: %v", s, err)
		}
	}
}

// The soak says what it holds for on the timeline's line of a change.
func TestSoakString(t *testing.T) {
	for _, c := range []struct {
		soak *authority.Soak
		want string
	}{
		{&authority.Soak{For: 30 * time.Minute}, "soak 30m"},
		{&authority.Soak{For: 90 * time.Minute}, "soak 1h30m"},
		{&authority.Soak{Environments: map[string]time.Duration{"staging": 30 * time.Minute, "qa": time.Hour}}, "soak qa 1h, staging 30m"},
		{&authority.Soak{}, ""},
		{nil, ""},
	} {
		if got := c.soak.String(); got != c.want {
			t.Errorf("%+v: %q; want %q", c.soak, got, c.want)
		}
	}
}

// A descendant the gate saw while something else held the commit (a freeze, here) counts from
// then: the gate's write keeps where the soak counts from even when its refusal repeats itself.
func TestSoakAncestorSightingWhileFrozenIsKept(t *testing.T) {
	w := newSoakWorld(t)
	p1, p2, x, d1, d2 := soakSha("90", 1), soakSha("90", 2), soakSha("91", 0), soakSha("92", 1), soakSha("92", 2)
	w.comparer = descendants{x + ".." + d1: true, x + ".." + d2: true}
	w.live("prod", p1)
	w.live("prod", p2)
	rb, err := w.process().Rollback(w.ctx, authority.RollbackRequest{Environment: "prod", Scope: "api", Actor: "oncall", Reason: "p2 breaks checkout"})
	if err != nil {
		t.Fatal(err)
	}
	if held := w.tryDeploy("prod", rb.Generation); held != nil {
		t.Fatalf("the rollback: %v", held)
	}
	gen := w.prod(x, authority.Soak{For: 30 * time.Minute}, true)
	if held := w.tryDeploy("prod", gen); held == nil || held.Why() != authority.ReasonFrozen {
		t.Fatalf("prod's gate while frozen: %v; want it frozen", held)
	}
	w.live("staging", d1) // 14:00
	w.clock.Advance(time.Minute)
	if held := w.tryDeploy("prod", gen); held == nil || held.Why() != authority.ReasonFrozen {
		t.Fatalf("prod's gate while frozen: %v; want it frozen", held)
	}
	w.clock.Advance(9 * time.Minute)
	w.live("staging", d2) // 14:10
	w.clock.Advance(10 * time.Minute)
	if _, err := w.process().Unfreeze(w.ctx, authority.UnfreezeRequest{Environment: "prod", Scope: "api", Freeze: rb.Generation, Actor: "oncall", Reason: "fixed"}); err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(time.Minute)
	w.wantSoaking(gen, "staging", "soaking in staging: 21m of 30m; ends 14:30 UTC", 9*time.Minute)
}

// A head no gate asks about while it soaks (its pass ended held, or gave up waiting) is not starved
// by a busy staging either: the recovery sweep's write keeps where its soak counts from, and the
// sweep starts it again once the soak has ended, not before.
func TestSoakSweepKeepsTheStartOfAHeadNoGateAsks(t *testing.T) {
	w := newSoakWorld(t)
	x := soakSha("a5", 0)
	comparer := descendants{}
	w.comparer = comparer
	next := func(i int) {
		d := soakSha("a6", i)
		comparer[x+".."+d] = true
		w.live("staging", d)
	}
	gen := w.prod(x, authority.Soak{For: 30 * time.Minute}, true) // 14:00, and no gate asks
	next(1)
	sweep := func() []authority.StalledWork {
		t.Helper()
		var redriven []authority.StalledWork
		rep, err := w.process().Sweep(w.ctx, 10*time.Minute, 3, func(_ context.Context, s authority.StalledWork) error {
			redriven = append(redriven, s)
			return nil
		})
		if err != nil || len(rep.Failed) > 0 {
			t.Fatalf("sweep: %+v, %v", rep, err)
		}
		return redriven
	}
	for i := 2; i <= 6; i++ {
		w.clock.Advance(time.Minute)
		if r := sweep(); len(r) > 0 {
			t.Fatalf("the sweep at %s re-drove %+v while prod's head soaks", w.clock.Now().Format(time.TimeOnly), r)
		}
		w.clock.Advance(4 * time.Minute)
		next(i) // 14:05, 14:10, ... 14:25
	}
	w.clock.Advance(5 * time.Minute) // 14:30
	r := sweep()
	if len(r) != 1 || r[0].Environment != "prod" || r[0].Generation != gen {
		t.Fatalf("the sweep at 14:30 re-drove %+v; want prod's head, whose soak counts from 14:00", r)
	}
	if held := w.tryDeploy("prod", gen); held != nil {
		t.Fatalf("prod's re-driven pass at 14:30: %v", held)
	}
}
