package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Property tests: long seeded random sequences of operations, checked after every step.
func propertyCases() []testCase {
	return []testCase{
		{"Coordination", testCoordination},
	}
}

// Settings of the coordination property test, for long runs and for replaying a failure.
const (
	// propertySequencesVar is the number of sequences (seeds 1..N) to run; default 6 (2 with -short).
	propertySequencesVar = "LATESTWINS_PROPERTY_SEQUENCES"
	// propertyStepsVar is the number of random steps of each sequence; default 150 (60 with -short).
	propertyStepsVar = "LATESTWINS_PROPERTY_STEPS"
	// propertySeedVar runs the one sequence of that seed (to replay a failure).
	propertySeedVar = "LATESTWINS_PROPERTY_SEED"
)

func coordinationSettings(t *testing.T) (seeds []uint64, steps int) {
	t.Helper()
	sequences, steps := rounds(6, 2), rounds(150, 60)
	number := func(name string, into *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a whole number of at least 1", name, v)
			}
			*into = n
		}
	}
	number(propertySequencesVar, &sequences)
	number(propertyStepsVar, &steps)
	if v := os.Getenv(propertySeedVar); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a seed printed by a failure", propertySeedVar, v)
		}
		return []uint64{seed}, steps
	}
	for i := range sequences {
		seeds = append(seeds, uint64(i+1))
	}
	// The sequences above run as they always did; these run the same operations with production's
	// gates on (coRun.gated), half as many.
	for i := range max(1, sequences/2) {
		seeds = append(seeds, gatedSeeds+uint64(i+1))
	}
	return seeds, steps
}

// testCoordination drives three environments (qa, staging, and production, which requires both)
// through seeded random sequences of every coordination operation, each by one of three
// Authorities over the one store, as separate processes: pushes with barriers, re-deliveries,
// switches between policies latest and queue, claims, deploy gates (with stale and reused holders),
// renewals and releases with current and stale tokens, completions of every outcome (success,
// failure on a non-final and on the final attempt, lost, interrupted, invalid) with the current
// token, an older token of the same pass and tokens of older passes, rollbacks and unfreezes,
// promotions, decisions about blocking failures, unlocks, and time passing; the queue limit is small
// (2 or 3). After every step it checks what the rules say of that step and what holds whatever the
// step was (coRun.invariants); at the end it deploys everything still pending and checks that every
// accepted intent ended in exactly one outcome. A failure names its seed: propertySeedVar replays it.
func testCoordination(t *testing.T, h *harness) {
	seeds, steps := coordinationSettings(t)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			c := newCoRun(t, h.store, seed, h.split)
			c.run(steps)
		})
	}
}

// coRun is one sequence: its environments, Authorities and clock, what it saw, and what each
// accepted intent became.
type coRun struct {
	t     *testing.T
	h     *harness
	seed  uint64
	r     *rand.Rand
	limit int
	procs []*authority.Authority

	qa, staging, prod string
	envs              []string
	state             map[string]*authority.Env // each environment as read after the last step that touched it

	step, steps int
	phase       string
	trace       []string
	seen        map[string]int

	gens      map[string]map[int64]string // env -> generation -> the intent it was handed to
	sent      []coSent                    // what may be delivered again
	grants    []coGrant
	maxToken  map[string]int64 // env/scope -> the greatest token granted
	outcome   map[coKey]string
	accepted  []coKey
	shas      []string
	wasLive   map[string][]string  // env/scope -> commits that were live there
	liveSince map[string]time.Time // env/scope -> when the commit live there first went live
	rollbacks map[string]int64     // env/scope -> the newest rollback
	requests  int
	asked     map[string]bool // what the drain asked already
}

type coSent struct {
	kind string // accept, rollback or promote
	env  string
	gen  int64
	in   authority.Intent
	rb   authority.RollbackRequest
	pr   authority.PromoteRequest
}

type coGrant struct {
	env  string
	g    *authority.Grant
	step int
}

var coScopes = []string{"api", "web"}

func newCoRun(t *testing.T, store *countingStore, seed uint64, split bool) *coRun {
	clock := NewClock(start)
	c := &coRun{
		t: t, seed: seed, r: rand.New(rand.NewPCG(seed, 0xc0de)), limit: 2 + int(seed%2),
		h:     &harness{t: t, ctx: t.Context(), store: store, clock: clock, skew: testSkew, split: split},
		state: map[string]*authority.Env{}, seen: map[string]int{},
		gens: map[string]map[int64]string{}, maxToken: map[string]int64{}, outcome: map[coKey]string{},
		wasLive: map[string][]string{}, liveSince: map[string]time.Time{}, rollbacks: map[string]int64{}, asked: map[string]bool{},
	}
	for range 3 {
		c.procs = append(c.procs, c.h.authority(store, authority.WithQueueLimit(c.limit)))
	}
	prefix := fmt.Sprintf("prop%d/", seed)
	c.qa, c.staging, c.prod = prefix+"qa", prefix+"staging", prefix+"production"
	c.envs = []string{c.qa, c.staging, c.prod}
	return c
}

func (c *coRun) fail(format string, args ...any) {
	c.t.Helper()
	c.t.Fatalf("seed %d, step %d (%s): %s\nreplay: %s=%d %s=%d go test -run 'TestConformance/Property/Coordination' (the same store's package)\nrecent steps:\n  %s",
		c.seed, c.step, c.phase, fmt.Sprintf(format, args...), propertySeedVar, c.seed, propertyStepsVar, c.steps, strings.Join(c.trace, "\n  "))
}

// begin starts a step on env and returns env's state before it.
func (c *coRun) begin(env, format string, args ...any) *authority.Env {
	c.step++
	c.trace = append(c.trace, fmt.Sprintf("%d: ", c.step)+fmt.Sprintf(format, args...))
	if len(c.trace) > 16 {
		c.trace = c.trace[1:]
	}
	return c.state[env]
}

// finish checks the invariants after a step on env and keeps what it left.
func (c *coRun) finish(env string, prev, next *authority.Env, eff *coEffect) {
	c.t.Helper()
	c.invariants(env, prev, next, eff)
	c.state[env] = next
	if next == nil {
		return
	}
	for _, s := range sortedKeys(next.Scopes) {
		if l := next.Scopes[s].Live; l != nil {
			k := env + "/" + s
			if !slices.Contains(c.wasLive[k], l.Sha) {
				c.wasLive[k] = append(c.wasLive[k], l.Sha)
			}
			// When the commit live there first went live: a deploy of the same commit again keeps it.
			if prev == nil || prev.Scopes[s] == nil || prev.Scopes[s].Live == nil || prev.Scopes[s].Live.Sha != l.Sha {
				c.liveSince[k] = c.h.clock.Now()
			}
		}
	}
	if c.step%10 == 0 {
		c.unchangedElsewhere()
	}
}

// unchangedElsewhere checks that no step changed an environment it did not touch.
func (c *coRun) unchangedElsewhere() {
	c.t.Helper()
	for _, env := range c.envs {
		if diff := cmp.Diff(c.state[env], c.read(env)); diff != "" {
			c.fail("%s changed without a step on it (-last seen +stored):\n%s", env, diff)
		}
	}
}

// read reads an environment from the store; nil when nothing is stored for it.
func (c *coRun) read(env string) *authority.Env {
	c.t.Helper()
	d, err := c.h.store.Get(c.h.ctx, authority.EnvKey(env))
	if err != nil {
		if errors.Is(err, authority.ErrNotFound) {
			return nil
		}
		c.fail("read %s: %v", env, err)
	}
	if c.h.split && d.Env != nil {
		if d, err = c.h.splitDoc(env); err != nil {
			c.fail("state of %s: %v", env, err)
		}
	}
	return d.Env
}

func (c *coRun) proc() *authority.Authority { return c.procs[c.r.IntN(len(c.procs))] }

func (c *coRun) ctx() context.Context { return c.h.ctx }

func (c *coRun) request(kind string) string {
	c.requests++
	return fmt.Sprintf("%s-%d-%d", kind, c.seed, c.requests)
}

func (c *coRun) newSha() string {
	s := fmt.Sprintf("c%06d%s", len(c.shas)+1, strings.Repeat("a", 33))
	c.shas = append(c.shas, s)
	return s
}

// run sets the environments up, takes steps random steps, deploys what is left, and checks that
// everything ended.
func (c *coRun) run(steps int) {
	c.t.Helper()
	c.steps = steps
	c.phase = "setup"
	c.opSetRequires(c.prod, []string{c.staging, c.qa})
	if c.gated() {
		c.opSetGates(c.prod, authority.Gates{Approvals: c.coApprovalRule(), Windows: c.coWindows(), Soak: c.coSoak()})
	}
	for _, env := range c.envs {
		c.opSetPolicy(env, c.randomPolicy())
	}
	c.phase = "random"
	for c.step < steps {
		c.randomStep()
	}
	c.phase = "drain"
	if c.coWindows() != nil {
		// The drain starts outside production's change window: what is pending there waits for it.
		now := c.h.clock.Now()
		c.begin("", "advance the clock to half past, outside production's change window")
		c.h.clock.Advance(now.Truncate(time.Hour).Add(90 * time.Minute).Sub(now))
	}
	c.drain()
	c.phase = "end"
	c.unchangedElsewhere()
	for _, env := range c.envs {
		e := c.state[env]
		if e == nil {
			continue
		}
		if e.HasPending() || e.Observed != e.Desired {
			c.fail("%s not settled after the drain: %d/%d", env, e.Observed, e.Desired)
		}
		wantTimeline(c.t, c.h, env)
	}
	for _, k := range c.accepted {
		if _, ok := c.outcome[k]; !ok {
			c.fail("%s never got an outcome", k)
		}
	}
	c.t.Logf("seed %d: %d steps (limit %d), %d intents; what happened: %v", c.seed, c.step, c.limit, len(c.accepted), c.seen)
}

func (c *coRun) randomPolicy() authority.Policy {
	return []authority.Policy{authority.PolicyLatest, authority.PolicyQueue}[c.r.IntN(2)]
}

func (c *coRun) randomEnv() string {
	switch k := c.r.IntN(10); {
	case k < 4:
		return c.qa
	case k < 7:
		return c.staging
	}
	return c.prod
}

// randomScope is one of env's scopes; "" when it has none yet.
func (c *coRun) randomScope(env string) string {
	e := c.state[env]
	if e == nil || len(e.Scopes) == 0 {
		return ""
	}
	names := sortedKeys(e.Scopes)
	return names[c.r.IntN(len(names))]
}

func (c *coRun) randomStep() {
	c.t.Helper()
	env := c.randomEnv()
	s := c.randomScope(env)
	if c.gated() && env == c.prod && s != "" && c.r.IntN(6) == 0 {
		c.randomGateStep()
		return
	}
	if s == "" {
		c.randomAccept(env)
		return
	}
	switch k := c.r.IntN(100); {
	case k < 14:
		c.randomAccept(env)
	case k < 18:
		c.randomRedelivery()
	case k < 20:
		p := authority.PolicyQueue
		if policyOf(c.state[env]) == p {
			p = authority.PolicyLatest
		}
		c.opSetPolicy(env, p)
	case k < 30:
		c.randomClaim(env)
	case k < 48:
		c.randomGate(env)
	case k < 52:
		if g := c.pickGrant(env); g != nil {
			c.opRenew(*g)
		}
	case k < 54:
		if g := c.pickGrant(env); g != nil {
			c.opRelease(*g)
		}
	case k < 70:
		c.randomComplete(env)
	case k < 76:
		c.randomStaleStep(env)
	case k < 80:
		c.randomRollback(env, s)
	case k < 83:
		c.randomUnfreeze(env)
	case k < 88:
		c.randomPromote()
	case k < 92:
		if c.blocked(env) || c.r.IntN(5) == 0 {
			c.randomDecide(env)
		} else {
			c.randomComplete(env)
		}
	case k < 93:
		c.opUnlock(env, s)
	default:
		c.randomAdvance(env)
	}
}

// randomAdvance lets time pass: any number of seconds, or to around the expiry of a lease (before
// it, within the skew margin, or past it).
func (c *coRun) randomAdvance(env string) {
	d := time.Duration(c.r.IntN(46)) * time.Second
	if cur := c.holding(env); len(cur) > 0 && c.r.IntN(2) == 0 {
		g := cur[c.r.IntN(len(cur))].g
		at := g.ExpiresAt.Add(time.Duration(c.r.IntN(int(c.h.skew/time.Second)+5)-2) * time.Second)
		d = max(0, at.Sub(c.h.clock.Now()))
	}
	c.begin("", "advance the clock %s", d)
	c.h.clock.Advance(d)
}

func (c *coRun) randomAccept(env string) {
	in := authority.Intent{ID: c.request("push"), Environment: env, Ref: "refs/heads/main", Source: "example/app", Actor: "octocat"}
	for _, s := range coScopes {
		if c.r.IntN(2) == 0 {
			in.Scopes = append(in.Scopes, s)
		}
	}
	if len(in.Scopes) == 0 {
		in.Scopes = []string{coScopes[c.r.IntN(len(coScopes))]}
	}
	for _, s := range in.Scopes {
		if c.r.IntN(4) == 0 {
			in.Barrier = append(in.Barrier, s)
		}
	}
	first := in.Scopes[0]
	switch k := c.r.IntN(100); {
	case env == c.prod && k < 50:
		in.Sha = c.liveOrNew(c.qa, first) // often live in qa alone
	case env == c.prod && k < 70:
		in.Sha = c.liveOrNew(c.staging, first)
	case k < 85 && len(c.shas) > 0:
		in.Sha = c.shas[max(0, len(c.shas)-1-c.r.IntN(6))] // a recent commit, maybe pending here already
	default:
		in.Sha = c.newSha()
	}
	if c.r.IntN(10) == 0 {
		in.Policy = c.randomPolicy() // the maker's configuration says so
	}
	if env == c.prod && c.r.IntN(4) == 0 {
		in.Requires = &authority.Requirements{Environments: []string{c.qa, c.staging}}
	}
	claim := c.r.IntN(2) == 0
	gen := c.opAccept(env, in, claim)
	if claim && gen > 0 && c.r.IntN(5) < 2 {
		c.opGate(env, gen, fmt.Sprintf("run-%d", gen), in.Scopes, true) // the run goes on to deploy
	}
}

func (c *coRun) liveOrNew(env, s string) string {
	if l := c.liveIn(env, s); l != nil {
		return l.Sha
	}
	return c.newSha()
}

// passFor picks a pass to act in env and the scopes it acts on: mostly the pass that may deploy a
// scope's head (its owner, or the head's own), sometimes the pass of another pending intent, an
// older owner, or any recent generation.
func (c *coRun) passFor(env string) (int64, []string) {
	e := c.state[env]
	names := sortedKeys(e.Scopes)
	var pending []string
	for _, s := range names {
		if e.Scopes[s].Mailbox != nil {
			pending = append(pending, s)
		}
	}
	s := names[c.r.IntN(len(names))]
	if len(pending) > 0 && c.r.IntN(4) > 0 {
		s = pending[c.r.IntN(len(pending))]
	}
	next := func(sc *authority.Scope) int64 {
		if sc.Mailbox == nil {
			return sc.Owner
		}
		return max(sc.Owner, sc.Mailbox.Generation)
	}
	sc := e.Scopes[s]
	var gen int64
	switch k := c.r.IntN(10); {
	case k < 6 && sc.Mailbox != nil:
		gen = next(sc)
	case k < 8 && sc.Mailbox != nil:
		list := sc.Entries()
		gen = list[c.r.IntN(len(list))].Generation
	case k < 9 && sc.Owner > 0:
		gen = sc.Owner
	default:
		gen = max(1, e.Desired-c.r.Int64N(4))
	}
	scopes := []string{s}
	for _, o := range names {
		if o != s && ((next(e.Scopes[o]) == gen && c.r.IntN(2) == 0) || c.r.IntN(6) == 0) {
			scopes = append(scopes, o)
		}
	}
	return gen, scopes
}

func (c *coRun) randomClaim(env string) {
	gen, scopes := c.passFor(env)
	switch k := c.r.IntN(4); {
	case k < 2:
		// The newest pass claims every pending scope (a claim that names none): it takes over the
		// heads of scopes its own intent is not for, and often goes on to deploy them.
		gen = c.state[env].Desired
		claimed := c.opClaim(env, gen, nil)
		if len(claimed) == 0 || c.r.IntN(2) == 0 {
			return
		}
		g := c.opGate(env, gen, fmt.Sprintf("run-%d", gen), claimed, true)
		if g == nil {
			return
		}
		comp := authority.Completion{Environment: env, Generation: gen, Holder: g.Holder, Tokens: g.Tokens, Scopes: claimed,
			MaxAttempts: 3, Message: "step result", Run: fmt.Sprintf("run/%d", c.step)}
		c.randomOutcome(&comp)
		if c.r.IntN(3) == 0 {
			comp.Outcome, comp.Attempt = authority.OutcomeFailure, 3
		}
		c.opComplete(comp)
		if comp.Outcome == authority.OutcomeFailure && comp.Attempt == 3 && c.r.IntN(2) == 0 {
			c.opGate(env, gen, g.Holder, claimed, true) // its workflow re-run: it may not deploy what failed
		}
		return
	case k == 2:
		scopes = nil
	}
	c.opClaim(env, gen, scopes)
}

func (c *coRun) randomGate(env string) {
	gen, scopes := c.passFor(env)
	holder := fmt.Sprintf("run-%d", gen)
	switch k := c.r.IntN(10); {
	case k < 3:
		// The pass that holds a lease asks again (a retried step): a new token, the old one stale.
		if cur := c.holding(env); len(cur) > 0 {
			g := cur[c.r.IntN(len(cur))].g
			gen, holder, scopes = g.Generation, g.Holder, sortedKeys(g.Tokens)
		}
	case k < 4:
		holder = "deployer" // one name for every generation
	case k < 6:
		// The pass of an intent that waits: behind older ones, a barrier, or a freeze.
		if g, s, ok := c.waitingPass(env); ok {
			gen, scopes, holder = g, []string{s}, fmt.Sprintf("run-%d", g)
			c.opClaim(env, gen, scopes)
		}
	}
	lease := c.r.IntN(8) > 0
	if lease && c.r.IntN(2) == 0 {
		for _, s := range scopes {
			if v, _ := authorityOf(c.state[env], gen, s); v != gateGoes {
				c.opClaim(env, gen, scopes) // the pass claims first, as a run does
				break
			}
		}
	}
	c.opGate(env, gen, holder, scopes, lease)
}

// waitingPass picks the pass of an intent of env that waits behind another, or behind a freeze.
func (c *coRun) waitingPass(env string) (int64, string, bool) {
	e := c.state[env]
	type pick struct {
		gen   int64
		scope string
	}
	var picks []pick
	for _, s := range sortedKeys(e.Scopes) {
		sc := e.Scopes[s]
		for i, r := range sc.Entries() {
			if i > 0 || (sc.Freeze != nil && sc.Freeze.Generation != r.Generation) {
				picks = append(picks, pick{r.Generation, s})
			}
		}
	}
	if len(picks) == 0 {
		return 0, "", false
	}
	p := picks[c.r.IntN(len(picks))]
	return p.gen, p.scope, true
}

// holding lists env's grants whose leases are all still theirs.
func (c *coRun) holding(env string) []coGrant {
	var out []coGrant
	for _, g := range c.grants {
		if g.env == env && holds(c.state[env], g.g) {
			out = append(out, g)
		}
	}
	return out
}

// pickGrant picks a grant of env: one that holds, an older one of the same pass, or an older pass's.
func (c *coRun) pickGrant(env string) *coGrant {
	var mine, same, older []coGrant
	cur := c.holding(env)
	for _, g := range c.grants {
		switch {
		case g.env != env:
		case holds(c.state[env], g.g):
			mine = append(mine, g)
		case slices.ContainsFunc(cur, func(h coGrant) bool { return h.g.Generation == g.g.Generation && h.g.Holder == g.g.Holder }):
			same = append(same, g)
		default:
			older = append(older, g)
		}
	}
	pools := [][]coGrant{mine, mine, same, older}
	p := pools[c.r.IntN(len(pools))]
	if len(p) == 0 {
		for _, q := range pools {
			if len(q) > 0 {
				p = q
			}
		}
	}
	if len(p) == 0 {
		return nil
	}
	g := p[max(0, len(p)-1-c.r.IntN(4))]
	return &g
}

// randomRedelivery delivers again an accepted intent, rollback or promotion (each kind as often).
func (c *coRun) randomRedelivery() {
	kinds := map[string][]coSent{}
	for _, s := range c.sent {
		kinds[s.kind] = append(kinds[s.kind], s)
	}
	if len(kinds) == 0 {
		return
	}
	names := sortedKeys(kinds)
	list := kinds[names[c.r.IntN(len(names))]]
	c.opRedeliver(list[c.r.IntN(len(list))])
}

// randomOutcome is any outcome, with the attempt it ends.
func (c *coRun) randomOutcome(comp *authority.Completion) {
	switch k := c.r.IntN(100); {
	case k < 35:
		comp.Outcome = authority.OutcomeSuccess
	case k < 50:
		comp.Outcome, comp.Attempt = authority.OutcomeFailure, 1+c.r.IntN(2)
	case k < 62:
		comp.Outcome, comp.Attempt = authority.OutcomeFailure, 3
	case k < 77:
		comp.Outcome = authority.OutcomeLost
	case k < 92:
		comp.Outcome = authority.OutcomeInterrupted
	default:
		comp.Outcome = authority.OutcomeInvalid
	}
	if comp.Attempt == 0 {
		comp.Attempt = 1 + c.r.IntN(3)
	}
}

// randomStaleStep: a pass that holds its leases asks its gate again (a retried request) and gets
// a new token; then a step of it still holding the older token renews, releases or ends, often
// saying it lost its lease or was interrupted. None of it may touch the newer grant.
func (c *coRun) randomStaleStep(env string) {
	cur := c.holding(env)
	if len(cur) == 0 {
		c.randomComplete(env)
		return
	}
	old := cur[c.r.IntN(len(cur))]
	if c.opGate(env, old.g.Generation, old.g.Holder, sortedKeys(old.g.Tokens), true) == nil {
		return
	}
	switch k := c.r.IntN(10); {
	case k < 1:
		c.opRenew(old)
	case k < 2:
		c.opRelease(old)
	default:
		comp := authority.Completion{Environment: env, Generation: old.g.Generation, Holder: old.g.Holder, Tokens: old.g.Tokens,
			Scopes: sortedKeys(old.g.Tokens), MaxAttempts: 3, Message: "an older step", Run: fmt.Sprintf("run/%d", c.step)}
		c.randomOutcome(&comp)
		if k < 7 {
			comp.Outcome = []authority.Outcome{authority.OutcomeLost, authority.OutcomeInterrupted}[c.r.IntN(2)]
		}
		c.opComplete(comp)
	}
}

func (c *coRun) randomComplete(env string) {
	comp := authority.Completion{Environment: env, MaxAttempts: 3, Message: "step result", Run: fmt.Sprintf("run/%d", c.step)}
	c.randomOutcome(&comp)
	g := c.pickGrant(env)
	if g != nil && (c.r.IntN(6) > 0 || comp.Outcome == authority.OutcomeSuccess) {
		comp.Generation, comp.Holder, comp.Tokens, comp.Scopes = g.g.Generation, g.g.Holder, g.g.Tokens, sortedKeys(g.g.Tokens)
	} else {
		// A pass that ends without a lease's token: it never got one, or lost its state.
		if comp.Outcome == authority.OutcomeSuccess {
			comp.Outcome = authority.OutcomeFailure
		}
		comp.Generation, comp.Scopes = c.passFor(env)
		comp.Holder = fmt.Sprintf("run-%d", comp.Generation)
	}
	c.opComplete(comp)
}

func (c *coRun) randomRollback(env, s string) {
	to := ""
	if c.state[env].Scopes[s].Prev == nil || c.r.IntN(5) < 3 {
		if was := c.wasLive[env+"/"+s]; len(was) > 0 && c.r.IntN(4) > 0 {
			to = was[c.r.IntN(len(was))]
		} else if len(c.shas) > 0 && c.r.IntN(6) > 0 {
			to = c.shas[c.r.IntN(len(c.shas))]
		}
	}
	c.opRollback(env, s, to)
}

// randomPromote promotes a scope's live commit along qa, staging, production; mostly from where
// something is live.
func (c *coRun) randomPromote() {
	var again []coSent
	for _, s := range c.sent {
		if s.kind == "promote" {
			again = append(again, s)
		}
	}
	if len(again) > 0 && c.r.IntN(10) < 3 {
		c.opRedeliver(again[c.r.IntN(len(again))]) // the comment's delivery, again
		return
	}
	from, to := []string{c.qa, c.qa, c.staging}, []string{c.staging, c.prod, c.prod}
	i, s := c.r.IntN(3), coScopes[c.r.IntN(len(coScopes))]
	for range 4 {
		if c.liveIn(from[i], s) != nil {
			break
		}
		i, s = c.r.IntN(3), coScopes[c.r.IntN(len(coScopes))]
	}
	if gen := c.opPromote(to[i], from[i], s); gen > 0 && c.r.IntN(2) == 0 {
		c.opGate(to[i], gen, fmt.Sprintf("run-%d", gen), []string{s}, true) // the pass it starts
	}
}

func (c *coRun) randomUnfreeze(env string) {
	e := c.state[env]
	var frozen []string
	for _, s := range sortedKeys(e.Scopes) {
		if e.Scopes[s].Freeze != nil {
			frozen = append(frozen, s)
		}
	}
	s := c.randomScope(env)
	if len(frozen) > 0 && c.r.IntN(8) > 0 {
		s = frozen[c.r.IntN(len(frozen))]
	}
	c.opUnfreeze(env, s, c.rollbacks[env+"/"+s])
}

// blocked reports whether a failed intent blocks a scope of env.
func (c *coRun) blocked(env string) bool {
	for _, sc := range c.state[env].Scopes {
		if sc.Mailbox != nil && sc.Mailbox.Failed {
			return true
		}
	}
	return false
}

func (c *coRun) randomDecide(env string) {
	e := c.state[env]
	s := c.randomScope(env)
	for _, o := range sortedKeys(e.Scopes) {
		if m := e.Scopes[o].Mailbox; m != nil && m.Failed && c.r.IntN(5) > 0 {
			s = o
		}
	}
	action := authority.DecideSkip
	if c.r.IntN(5) < 2 {
		action = authority.DecideRetry
	}
	c.opDecide(env, s, action)
}

// drain deploys everything still pending, environment by environment, through the same checked
// steps: it lifts freezes, skips blocking failures, waits out leases, brings a commit production
// waits for to qa and staging, and deploys each head with the pass that may.
func (c *coRun) drain() {
	c.t.Helper()
	// The newest pass of each environment claims every pending scope, taking over the heads of
	// the scopes its own intent is not for.
	for _, env := range c.envs {
		if e := c.state[env]; e != nil && e.HasPending() {
			c.opClaim(env, e.Desired, nil)
		}
	}
	for round := 0; ; round++ {
		if round > 400 {
			c.fail("still not settled after %d drain steps", round)
		}
		if !c.drainOnce() {
			return
		}
	}
}

// drainOnce takes one step towards settling every environment; false when all are settled.
func (c *coRun) drainOnce() bool {
	c.t.Helper()
	pending := false
	var stuck []string
	for _, env := range c.envs {
		e := c.state[env]
		if e == nil {
			continue
		}
		for _, s := range sortedKeys(e.Scopes) {
			sc := e.Scopes[s]
			if sc.Freeze != nil {
				c.opUnfreeze(env, s, sc.Freeze.Generation)
				return true
			}
			head := sc.Mailbox
			if head == nil {
				continue
			}
			pending = true
			if head.Failed {
				// The pass that failed it runs again (a re-run of its workflow): it may not deploy.
				if k := fmt.Sprintf("failed %s/%s %d", env, s, head.Generation); !c.asked[k] {
					c.asked[k] = true
					c.opGate(env, max(sc.Owner, head.Generation), fmt.Sprintf("run-%d", sc.Owner), []string{s}, true)
					return true
				}
				// Someone decides: retry it the first time, skip it after that.
				action := authority.DecideSkip
				if k := fmt.Sprintf("retry %s/%s %d", env, s, head.Generation); !c.asked[k] {
					c.asked[k], action = true, authority.DecideRetry
				}
				c.opDecide(env, s, action)
				return true
			}
			if c.liveLease(sc.Lease) {
				c.begin("", "advance the clock past the lease of %s/%s", env, s)
				c.h.clock.Advance(sc.Lease.ExpiresAt.Add(c.h.skew).Sub(c.h.clock.Now()) + time.Second)
				return true
			}
			if e.Requires != nil && !head.Rollback {
				// Once the commit is live in some required environment but not all, the pass asks
				// its gate (as a waiting pass polls): it must wait still.
				k, some := fmt.Sprintf("promotion %s/%s %d", env, s, head.Generation), false
				for _, r := range e.Requires.Environments {
					l := c.liveIn(r, s)
					some = some || (l != nil && l.Sha == head.Sha)
					if l != nil {
						k += " " + r + ":" + l.Sha
					}
				}
				if some && !c.asked[k] {
					c.asked[k] = true
					if c.drainDeploy(env, s, max(sc.Owner, head.Generation)) {
						return true
					}
				}
				waiting := false
				for _, r := range e.Requires.Environments {
					if l := c.liveIn(r, s); l == nil || l.Sha != head.Sha {
						waiting = true
						if len(entriesOf(c.state[r], s)) == 0 {
							in := authority.Intent{ID: c.request("bring"), Environment: r, Scopes: []string{s}, Sha: head.Sha, Ref: head.Ref, Redeploy: true, Source: "drain"}
							c.opAccept(r, in, false)
							return true
						}
					}
				}
				if waiting {
					continue // the required environments deploy it first
				}
			}
			if c.drainSoak(env, s, head) || c.drainApproval(env, s, head) || c.drainWindow(env, s, head) {
				return true
			}
			for _, gen := range []int64{head.Generation, sc.Owner} {
				if c.drainDeploy(env, s, gen) {
					return true
				}
			}
			stuck = append(stuck, fmt.Sprintf("%s/%s (pending %v, owner %d)", env, s, gensOf(sc.Entries()), sc.Owner))
		}
	}
	if pending {
		c.fail("no pass can deploy what is pending: %s", strings.Join(stuck, ", "))
	}
	return false
}

// drainDeploy claims s for the pass at gen and deploys it, when that pass may; it reports whether
// it took a step.
func (c *coRun) drainDeploy(env, s string, gen int64) bool {
	c.t.Helper()
	if gen < 1 {
		return false
	}
	if v, _ := authorityOf(c.state[env], gen, s); v != gateGoes {
		c.opClaim(env, gen, []string{s})
		if v, _ := authorityOf(c.state[env], gen, s); v != gateGoes {
			return false
		}
	}
	e := c.state[env]
	head := e.Scopes[s].Mailbox
	g := c.opGate(env, gen, fmt.Sprintf("drain-%d", gen), []string{s}, true)
	if g == nil {
		return true
	}
	comp := authority.Completion{Environment: env, Generation: gen, Scopes: []string{s}, Holder: g.Holder, Tokens: g.Tokens,
		Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3, Run: fmt.Sprintf("drain/%d", c.step)}
	// Once per environment, the switch to latest supersedes a queue head that a pass took over
	// while that pass deploys it: what it deploys is still what its success records.
	if k := "switch " + env; head.Generation != gen && e.PolicyOrDefault() == authority.PolicyQueue && len(e.Scopes[s].Entries()) > 1 && !c.asked[k] {
		c.asked[k] = true
		c.seen["drain: a switch to latest under a taken-over head's deploy"]++
		c.opSetPolicy(env, authority.PolicyLatest)
		c.opComplete(comp)
		return true
	}
	// Once per environment, a pass deploying the second head it took over (live has its generation
	// already) is superseded by a push that says latest: what it deploys is still what it records.
	if k := "push " + env; head.Generation != gen && !head.Barrier && e.Scopes[s].Live != nil && e.Scopes[s].Live.Generation == gen && !c.asked[k] {
		c.asked[k] = true
		in := authority.Intent{ID: c.request("push"), Environment: env, Scopes: []string{s}, Sha: c.newSha(), Ref: "refs/heads/main",
			Source: "example/app", Policy: authority.PolicyLatest}
		c.seen["drain: a push under a second taken-over head's deploy"]++
		c.opAccept(env, in, false)
		c.opComplete(comp)
		return true
	}
	// A pass that took over a head that blocks what waits behind it (queue, or a barrier) fails
	// on its first attempt, then on its final one: the head stays, failed, until someone decides.
	if head.Generation != gen && (e.PolicyOrDefault() == authority.PolicyQueue || head.Barrier) {
		for _, attempt := range []int{1, 3} {
			if k := fmt.Sprintf("fail %s/%s %d attempt %d", env, s, head.Generation, attempt); !c.asked[k] {
				c.asked[k] = true
				comp.Outcome, comp.Attempt = authority.OutcomeFailure, attempt
				break
			}
		}
	}
	c.opComplete(comp)
	return true
}
