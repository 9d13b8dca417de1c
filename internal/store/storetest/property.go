package storetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// testProperty drives an environment through long seeded random sequences of every operation
// (accept, re-delivery, out-of-order pushes, redeploys, claim, gate, renew, release, complete with
// every outcome and stale tokens, unlock, time passing), through several processes, and checks
// after every step that each operation did what the rules say and that nothing went backwards:
// desired, observed, owners, live generations and lease tokens never decrease, observed is exactly
// what its definition says, and live state changes only by a success of the pass that owns the
// scope, fenced by the current token.
func testProperty(t *testing.T, h *harness) {
	steps := rounds(200, 50)
	for _, seed := range []uint64{1, 2, 3} {
		p := &propRun{t: t, h: h, env: fmt.Sprintf("prop-%d", seed), seed: seed, r: rand.New(rand.NewPCG(seed, 0x5eed)),
			procs: []*authority.Authority{h.process(), h.process(), h.process()}, lastStep: -1, seen: map[string]int{}}
		var state *authority.Env
		for p.step = 0; p.step < steps; p.step++ {
			state = p.once(state)
		}
		t.Logf("seed %d: %d steps, %d/%d settled, what happened: %v", seed, steps, state.Observed, state.Desired, p.seen)
		wantTimeline(t, h, p.env)
	}
}

var (
	propScopes  = []string{"api", "web", "db"}
	propHolders = []string{"run-1", "run-2", "run-3", "run-4"}
)

type propRun struct {
	t      *testing.T
	h      *harness
	env    string
	seed   uint64
	r      *rand.Rand
	procs  []*authority.Authority
	step   int
	trace  []string
	shas   []string
	sent   []authority.Intent
	gens   map[string]int64 // intent id -> generation
	grants []*authority.Grant
	// last is the state read after the operation of step lastStep.
	last     *authority.Env
	lastStep int
	seen     map[string]int // how often each kind of outcome happened, to show what the run covered
}

func (p *propRun) fail(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("seed %d, step %d: %s\nrecent steps:\n  %s", p.seed, p.step, fmt.Sprintf(format, args...), strings.Join(p.trace, "\n  "))
}

func (p *propRun) note(format string, args ...any) {
	p.trace = append(p.trace, fmt.Sprintf("%d: ", p.step)+fmt.Sprintf(format, args...))
	if len(p.trace) > 12 {
		p.trace = p.trace[1:]
	}
}

func (p *propRun) proc() *authority.Authority { return p.procs[p.r.IntN(len(p.procs))] }

func (p *propRun) subset() []string {
	var out []string
	for _, s := range propScopes {
		if p.r.IntN(2) == 0 {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = []string{propScopes[p.r.IntN(len(propScopes))]}
	}
	return out
}

// state reads the environment, or nil before anything was accepted.
func (p *propRun) state() *authority.Env {
	p.t.Helper()
	d, err := p.h.store.Get(p.h.ctx, authority.EnvKey(p.env))
	if err == nil && p.h.split {
		d, err = p.h.splitDoc(p.env)
	}
	if errors.Is(err, authority.ErrNotFound) {
		return nil
	}
	if err != nil {
		p.fail("read: %v", err)
	}
	return d.Env
}

// once runs one random step from state prev (nil before the first) and returns the state after it.
func (p *propRun) once(prev *authority.Env) *authority.Env {
	p.t.Helper()
	var liveMayChange map[string]bool
	switch op := p.r.IntN(100); {
	case prev == nil || op < 12:
		p.accept(prev)
	case op < 32:
		p.claim(prev)
	case op < 54:
		p.gate(prev)
	case op < 59:
		p.renew(prev)
	case op < 63:
		p.release(prev)
	case op < 88:
		liveMayChange = p.complete(prev)
	case op < 91:
		p.unlock(prev)
	default:
		d := time.Duration(p.r.IntN(45)) * time.Second
		p.note("advance %s", d)
		p.h.clock.Advance(d)
	}
	next := p.last
	if p.lastStep != p.step {
		next = p.state()
	}
	p.invariants(prev, next, liveMayChange)
	return next
}

// read reads the state after this step's operation and keeps it for the invariants.
func (p *propRun) read() *authority.Env {
	p.t.Helper()
	p.last, p.lastStep = p.state(), p.step
	return p.last
}

func (p *propRun) accept(prev *authority.Env) {
	p.t.Helper()
	if p.gens == nil {
		p.gens = map[string]int64{}
	}
	var in authority.Intent
	claim := p.r.IntN(2) == 0
	switch k := p.r.IntN(100); {
	case k < 10 && len(p.sent) > 0: // a re-delivery
		in = p.sent[p.r.IntN(len(p.sent))]
	default:
		in = authority.Intent{ID: fmt.Sprintf("%s-intent-%d", p.env, p.step), Environment: p.env, Scopes: p.subset(), Ref: "refs/heads/main", Source: "example/app"}
		switch {
		case k < 25 && len(p.shas) > 0: // a late or repeated delivery of an older commit
			in.Sha = p.shas[p.r.IntN(len(p.shas))]
		default:
			in.Sha = sha("s", p.step)
			p.shas = append(p.shas, in.Sha)
		}
		if len(p.shas) > 1 && p.r.IntN(3) > 0 { // pushed on top of a known commit, usually the newest
			in.Before = p.shas[max(0, len(p.shas)-2-p.r.IntN(2))]
		}
		if p.r.IntN(8) == 0 {
			in.Ref = "refs/heads/feature"
		}
		in.Redeploy = p.r.IntN(10) == 0
	}
	p.note("accept %s %v sha %s before %s ref %s redeploy %v claim %v", in.ID, in.Scopes, in.Sha, in.Before, in.Ref, in.Redeploy, claim)
	res, err := p.proc().Accept(p.h.ctx, in, claim)
	if err != nil {
		p.fail("accept: %v", err)
	}
	next := p.read()
	if first, seen := p.gens[in.ID]; seen {
		p.seen["accept: re-delivery"]++
		if !res.Duplicate || res.Generation != first {
			p.fail("re-delivery of %s: generation %d, duplicate %v; want %d, duplicate", in.ID, res.Generation, res.Duplicate, first)
		}
		if !claim {
			if diff := cmp.Diff(prev, next); diff != "" {
				p.fail("a re-delivery changed the environment (-before +after):\n%s", diff)
			}
		}
		return
	}
	p.sent = append(p.sent, in)
	p.gens[in.ID] = res.Generation
	if res.Joined {
		// Every scope had exactly this commit pending at one generation: the intent joins it.
		p.seen["accept: joined the pending commit"]++
		for _, s := range in.Scopes {
			m := next.Scopes[s].Mailbox
			if m == nil || m.Sha != in.Sha || m.Generation != res.Generation || prev == nil || next.Desired != prev.Desired {
				p.fail("%s: joined generation %d, but the mailbox holds %+v (desired %d)", s, res.Generation, m, next.Desired)
			}
		}
		return
	}
	p.seen["accept: new"]++
	p.seen["accept: held back as out of order"] += len(res.Stale)
	var desired int64
	if prev != nil {
		desired = prev.Desired
	}
	// The per-scope layout may skip a generation a crashed or raced accept took (design.md §9).
	if res.Duplicate || res.Generation != desired+1 && !(p.h.split && res.Generation > desired) {
		p.fail("new intent: generation %d, duplicate %v; want %d", res.Generation, res.Duplicate, desired+1)
	}
	got := append(slices.Clone(res.Accepted), sortedKeys(res.Stale)...)
	if !slices.Equal(sortedCopy(got), sortedCopy(in.Scopes)) {
		p.fail("accepted %v and stale %v do not partition the scopes %v", res.Accepted, res.Stale, in.Scopes)
	}
	for _, s := range res.Accepted {
		if m := next.Scopes[s].Mailbox; m == nil || m.IntentID != in.ID || m.Generation != res.Generation {
			p.fail("%s: mailbox %+v after accepting %s", s, m, in.ID)
		}
	}
	for s := range res.Stale {
		if in.Redeploy {
			p.fail("a redeploy was held back as out of order in %s", s)
		}
		var before *authority.Ref
		if prev != nil && prev.Scopes[s] != nil {
			before = prev.Scopes[s].Mailbox
		}
		if diff := cmp.Diff(before, next.Scopes[s].Mailbox); diff != "" {
			p.fail("%s: an out-of-order intent changed the mailbox (-before +after):\n%s", s, diff)
		}
	}
	if claim && len(res.Accepted) > 0 {
		if res.Claim == nil {
			p.fail("accept+claim returned no claim")
		}
		for _, c := range res.Claim.Claimed {
			if next.Scopes[c.Scope].Owner != res.Generation {
				p.fail("%s: owner %d after accept+claim at %d", c.Scope, next.Scopes[c.Scope].Owner, res.Generation)
			}
		}
	}
}

func (p *propRun) claim(prev *authority.Env) {
	p.t.Helper()
	gen := 1 + p.r.Int64N(prev.Desired)
	if p.r.IntN(2) == 0 {
		gen = prev.Desired // usually the newest pass claims
	}
	var scopes []string
	if p.r.IntN(3) > 0 {
		scopes = p.subset()
	}
	p.note("claim %v at %d", scopes, gen)
	res, err := p.proc().Claim(p.h.ctx, p.env, gen, scopes)
	if unknown := slices.ContainsFunc(scopes, func(s string) bool { return prev.Scopes[s] == nil }); unknown {
		// A scope the environment has never seen is bad input, and nothing changes.
		if !errors.Is(err, authority.ErrInvalidInput) {
			p.fail("claim of an unknown scope among %v: %v; want invalid input", scopes, err)
		}
		if diff := cmp.Diff(prev, p.read()); diff != "" {
			p.fail("a refused claim changed the environment (-before +after):\n%s", diff)
		}
		return
	}
	if err != nil {
		p.fail("claim: %v", err)
	}
	next := p.read()
	if scopes == nil {
		for _, s := range sortedKeys(prev.Scopes) {
			if prev.Scopes[s].Mailbox != nil {
				scopes = append(scopes, s)
			}
		}
	}
	claimed, superseded, idle := res.Scopes(), map[string]bool{}, res.Idle
	for _, sup := range res.Superseded {
		superseded[sup.Scope] = true
	}
	for _, s := range scopes {
		sc := prev.Scopes[s]
		switch {
		case sc == nil || sc.Mailbox == nil:
			p.seen["claim: idle"]++
			if !slices.Contains(idle, s) {
				p.fail("%s has nothing pending but is not idle: %+v", s, res)
			}
		case sc.Mailbox.Generation <= gen && sc.Owner <= gen:
			p.seen["claim: claimed"]++
			if !slices.Contains(claimed, s) || next.Scopes[s].Owner != gen {
				p.fail("%s (mailbox %d, owner %d) should be claimed at %d: %+v, owner now %d", s, sc.Mailbox.Generation, sc.Owner, gen, res, next.Scopes[s].Owner)
			}
		default:
			p.seen["claim: refused"]++
			if !superseded[s] || next.Scopes[s].Owner != sc.Owner {
				p.fail("%s (mailbox %d, owner %d) should be refused at %d: %+v, owner now %d", s, sc.Mailbox.Generation, sc.Owner, gen, res, next.Scopes[s].Owner)
			}
		}
	}
}

// authorized is the authority rule, from the state before an operation.
// authorized is guarantee 4: the pass owns the scope, nothing newer was accepted, and its work there
// has not already ended (an empty mailbox means it was deployed, failed or withdrawn).
func authorized(e *authority.Env, gen int64, s string) bool {
	sc := e.Scopes[s]
	return sc != nil && sc.Owner == gen && sc.Mailbox != nil && sc.Mailbox.Generation <= gen
}

func (p *propRun) gate(prev *authority.Env) {
	p.t.Helper()
	gen, scopes := p.passOf(prev)
	req := authority.GateRequest{Environment: p.env, Generation: gen, Scopes: scopes, Phase: []string{"build", "deploy", "publish"}[p.r.IntN(3)]}
	if p.r.IntN(10) < 7 {
		req.Holder, req.LeaseTTL = propHolders[p.r.IntN(len(propHolders))], testTTL
	}
	p.note("gate %s %v at %d holder %q", req.Phase, req.Scopes, gen, req.Holder)
	now := p.h.clock.Now()
	g, err := p.proc().Gate(p.h.ctx, req)
	next := p.read()
	allowed, free := true, true
	for _, s := range req.Scopes {
		allowed = allowed && authorized(prev, gen, s)
		if req.LeaseTTL > 0 && prev.Scopes[s] != nil {
			l := prev.Scopes[s].Lease
			// A grant belongs to (generation, holder): the same name in another generation waits.
			free = free && (l.Holder == "" || (l.Holder == req.Holder && l.Generation == gen) || !now.Before(l.ExpiresAt.Add(p.h.skew)))
		}
	}
	switch {
	case !allowed:
		p.seen["gate: superseded"]++
		if !errors.Is(err, authority.ErrSuperseded) {
			p.fail("gate by a pass without authority: %v; want superseded", err)
		}
	case !free:
		p.seen["gate: held"]++
		var held *authority.HeldError
		if !errors.As(err, &held) || held.RetryAfter < time.Second || held.RetryAfter%time.Second != 0 {
			p.fail("gate on a held lease: %v; want a *HeldError with whole seconds to wait", err)
		}
	case err != nil:
		p.fail("gate by the owner on free leases: %v", err)
	default:
		p.seen["gate: passed"]++
		if req.LeaseTTL > 0 {
			for _, s := range req.Scopes {
				before, after := prev.Scopes[s].Lease, next.Scopes[s].Lease
				if after.Holder != req.Holder || g.Tokens[s] != after.Token || !after.ExpiresAt.Equal(now.Add(testTTL)) {
					p.fail("%s: lease %+v after a grant %+v to %s", s, after, g, req.Holder)
				}
				if after.Token <= before.Token || after.Generation != gen {
					p.fail("%s: token %d granted to %s at %d after token %d of %q at %d; want a greater one, every grant", s, after.Token, req.Holder, gen, before.Token, before.Holder, before.Generation)
				}
			}
			p.grants = append(p.grants, g)
		}
	}
	for _, s := range req.Scopes {
		if (err != nil || req.LeaseTTL == 0) && prev.Scopes[s] != nil && !cmp.Equal(next.Scopes[s].Lease, prev.Scopes[s].Lease) {
			p.fail("%s: a gate without a grant changed the lease from %+v to %+v", s, prev.Scopes[s].Lease, next.Scopes[s].Lease)
		}
	}
}

// passOf picks a pass and scopes to act for: mostly the owner of a scope with the scopes it owns,
// sometimes a recent generation with any scopes (usually one without authority).
func (p *propRun) passOf(prev *authority.Env) (int64, []string) {
	names := sortedKeys(prev.Scopes)
	if len(names) > 0 && p.r.IntN(10) < 7 {
		s := names[p.r.IntN(len(names))]
		if gen := prev.Scopes[s].Owner; gen > 0 {
			scopes := []string{s}
			for _, other := range names {
				if other != s && prev.Scopes[other].Owner == gen && p.r.IntN(2) == 0 {
					scopes = append(scopes, other)
				}
			}
			return gen, scopes
		}
	}
	// Any scopes the environment has (a scope it never had is bad input, checked by the claim step).
	var scopes []string
	for _, s := range p.subset() {
		if prev.Scopes[s] != nil {
			scopes = append(scopes, s)
		}
	}
	if len(scopes) == 0 && len(names) > 0 {
		scopes = []string{names[p.r.IntN(len(names))]}
	}
	return max(1, prev.Desired-p.r.Int64N(3)), scopes
}

// holds reports whether grant g's leases are all still current.
func holds(e *authority.Env, g *authority.Grant) bool {
	for s, tok := range g.Tokens {
		if sc := e.Scopes[s]; sc == nil || sc.Lease.Holder != g.Holder || sc.Lease.Token != tok || sc.Lease.Generation != g.Generation {
			return false
		}
	}
	return true
}

func (p *propRun) pickGrant() *authority.Grant {
	if len(p.grants) == 0 {
		return nil
	}
	// Mostly recent grants, sometimes old (stale) ones.
	return p.grants[max(0, len(p.grants)-1-p.r.IntN(min(len(p.grants), 6)))]
}

func (p *propRun) renew(prev *authority.Env) {
	p.t.Helper()
	g := p.pickGrant()
	if g == nil {
		return
	}
	p.note("renew %s %v", g.Holder, g.Tokens)
	p.seen["renew"]++
	copyG := *g
	err := p.proc().Renew(p.h.ctx, &copyG, testTTL)
	next := p.read()
	if holds(prev, g) {
		if err != nil {
			p.fail("renew by the holder: %v", err)
		}
		for s := range g.Tokens {
			if !next.Scopes[s].Lease.ExpiresAt.Equal(p.h.clock.Now().Add(testTTL)) {
				p.fail("%s: renewed lease expires at %v", s, next.Scopes[s].Lease.ExpiresAt)
			}
		}
		return
	}
	if !errors.Is(err, authority.ErrLeaseLost) {
		p.fail("renew of a lease no longer held: %v; want ErrLeaseLost", err)
	}
	p.sameLeases(prev, next)
}

func (p *propRun) release(prev *authority.Env) {
	p.t.Helper()
	g := p.pickGrant()
	if g == nil {
		return
	}
	p.note("release %s %v", g.Holder, g.Tokens)
	p.seen["release"]++
	err := p.proc().Release(p.h.ctx, g)
	next := p.read()
	if holds(prev, g) {
		if err != nil {
			p.fail("release by the holder: %v", err)
		}
		for s, tok := range g.Tokens {
			if l := next.Scopes[s].Lease; l.Holder != "" || l.Token != tok {
				p.fail("%s: lease %+v after release; want free, keeping token %d", s, l, tok)
			}
		}
		return
	}
	if !errors.Is(err, authority.ErrLeaseLost) {
		p.fail("release of a lease no longer held: %v; want ErrLeaseLost", err)
	}
	p.sameLeases(prev, next)
}

func (p *propRun) sameLeases(prev, next *authority.Env) {
	p.t.Helper()
	for s, sc := range prev.Scopes {
		if !cmp.Equal(next.Scopes[s].Lease, sc.Lease) {
			p.fail("%s: a refused lease operation changed the lease from %+v to %+v", s, sc.Lease, next.Scopes[s].Lease)
		}
	}
}

// complete reports an outcome and returns the scopes whose live state the report may change.
func (p *propRun) complete(prev *authority.Env) map[string]bool {
	p.t.Helper()
	outcomes := []authority.Outcome{authority.OutcomeSuccess, authority.OutcomeSuccess, authority.OutcomeSuccess, authority.OutcomeFailure,
		authority.OutcomeFailure, authority.OutcomeLost, authority.OutcomeInterrupted, authority.OutcomeInvalid}
	c := authority.Completion{Environment: p.env, Outcome: outcomes[p.r.IntN(len(outcomes))], Attempt: 1 + p.r.IntN(3), MaxAttempts: 3, Message: "step result", Run: fmt.Sprintf("run-%d", p.step)}
	g := p.pickGrant()
	if p.r.IntN(3) > 0 { // usually a pass that still holds its leases reports
		for i := len(p.grants) - 1; i >= 0; i-- {
			if holds(prev, p.grants[i]) {
				g = p.grants[i]
				break
			}
		}
	}
	if g != nil && p.r.IntN(5) > 0 {
		c.Generation, c.Holder, c.Tokens, c.Scopes = g.Generation, g.Holder, g.Tokens, sortedKeys(g.Tokens)
	} else {
		if c.Outcome == authority.OutcomeSuccess {
			c.Outcome = authority.OutcomeFailure
		}
		c.Generation, c.Scopes = p.passOf(prev)
	}
	p.note("complete %s %v at %d holder %q tokens %v attempt %d", c.Outcome, c.Scopes, c.Generation, c.Holder, c.Tokens, c.Attempt)
	res, err := p.proc().Complete(p.h.ctx, c)
	next := p.read()

	fenced, repeat := true, c.Outcome == authority.OutcomeSuccess
	for s, tok := range c.Tokens {
		sc := prev.Scopes[s]
		if sc == nil || sc.Lease.Holder != c.Holder || sc.Lease.Token != tok || sc.Lease.Generation != c.Generation {
			fenced = false
		}
		if sc == nil || sc.Live == nil || sc.Live.Generation != c.Generation || sc.Live.Token != tok || sc.Lease.Token != tok || sc.Lease.Holder != "" {
			repeat = false
		}
	}
	if repeat {
		// A success that already took effect, asked again (its answer was lost): the same result.
		p.seen["complete: repeated success"]++
		for _, s := range c.Scopes {
			if err != nil || res.Results[s] != authority.ResultDeployed {
				p.fail("a repeated success: %+v, %v; want deployed", res, err)
			}
		}
		if diff := cmp.Diff(prev, next); diff != "" {
			p.fail("a repeated success changed the environment (-before +after):\n%s", diff)
		}
		return nil
	}
	if !fenced && c.Outcome != authority.OutcomeLost {
		p.seen["complete: stale token refused"]++
		if !errors.Is(err, authority.ErrLeaseLost) {
			p.fail("complete with a stale token: %v; want ErrLeaseLost", err)
		}
		if diff := cmp.Diff(prev, next); diff != "" {
			p.fail("a refused completion changed the environment (-before +after):\n%s", diff)
		}
		return nil
	}
	retryable := c.Outcome == authority.OutcomeLost || c.Outcome == authority.OutcomeInterrupted
	if !retryable {
		// An ending without the token of a lease another holder has live must not overrule that holder.
		now := p.h.clock.Now()
		for _, s := range c.Scopes {
			l := prev.Scopes[s].Lease
			if _, ok := c.Tokens[s]; !ok && l.Holder != "" && (l.Holder != c.Holder || l.Generation != c.Generation) && now.Before(l.ExpiresAt.Add(p.h.skew)) {
				p.seen["complete: unfenced ending refused"]++
				if !errors.Is(err, authority.ErrLeaseHeld) {
					p.fail("an unfenced %s while %s holds %s's lease: %v; want ErrLeaseHeld", c.Outcome, l.Holder, s, err)
				}
				if diff := cmp.Diff(prev, next); diff != "" {
					p.fail("a refused completion changed the environment (-before +after):\n%s", diff)
				}
				return nil
			}
		}
	}
	if err != nil {
		p.fail("complete: %v", err)
	}
	mayChange := map[string]bool{}
	final := c.Outcome == authority.OutcomeInvalid || (c.Outcome == authority.OutcomeFailure && c.Attempt >= c.MaxAttempts)
	for _, s := range c.Scopes {
		var before *authority.Ref
		if prev.Scopes[s] != nil {
			before = prev.Scopes[s].Mailbox
		}
		after := next.Scopes[s]
		ended := prev.Scopes[s].Owner == c.Generation && before == nil
		var want authority.Result
		switch {
		case ended && c.Outcome == authority.OutcomeSuccess && prev.Scopes[s].Live != nil && prev.Scopes[s].Live.Generation == c.Generation:
			want = authority.ResultDeployed // a repeat of the success that ended it
		case ended && final && prev.Scopes[s].Failure != nil && prev.Scopes[s].Failure.Generation == c.Generation:
			want = authority.ResultFailed // a repeat of the terminal failure that ended it
		case c.Outcome == authority.OutcomeSuccess && !authorized(prev, c.Generation, s) &&
			(prev.Scopes[s].Live == nil || prev.Scopes[s].Live.Generation < c.Generation):
			// Superseded while it deployed under its valid grant: what it deployed is live; the newer
			// intent stays pending (guarantee 5).
			want = authority.ResultDeployed
			mayChange[s] = true
			l := prev.Scopes[s].Lease
			if live := after.Live; live == nil || live.Sha != l.Sha || live.Generation != c.Generation || live.Token != c.Tokens[s] {
				p.fail("%s: after a success superseded mid-deploy under lease %+v: live %+v", s, l, after.Live)
			}
			if (before == nil) != (after.Mailbox == nil) || (before != nil && after.Mailbox.IntentID != before.IntentID) {
				p.fail("%s: recording a superseded deploy changed the pending intent from %+v to %+v", s, before, after.Mailbox)
			}
		case !retryable && !authorized(prev, c.Generation, s):
			want = authority.ResultSuperseded
		case c.Outcome == authority.OutcomeSuccess:
			want = authority.ResultDeployed
			if before != nil {
				mayChange[s] = true
				if l := after.Live; l == nil || l.Sha != before.Sha || l.Generation != c.Generation || l.Token != c.Tokens[s] || after.Mailbox != nil || after.Failure != nil {
					p.fail("%s: after a fenced success of %s: live %+v, mailbox %+v, failure %+v", s, before.Sha, l, after.Mailbox, after.Failure)
				}
			}
		case final:
			want = authority.ResultFailed
			if before != nil && (after.Mailbox != nil || after.Failure == nil || after.Failure.Sha != before.Sha) {
				p.fail("%s: after a terminal failure of %s: mailbox %+v, failure %+v", s, before.Sha, after.Mailbox, after.Failure)
			}
		default:
			want = authority.ResultRetry
		}
		p.seen["complete: "+string(want)]++
		if got := res.Results[s]; got != want {
			p.fail("%s: result %s, want %s", s, got, want)
		}
		if want == authority.ResultSuperseded || want == authority.ResultRetry {
			if (before == nil) != (after.Mailbox == nil) || (before != nil && (after.Mailbox.IntentID != before.IntentID || after.Mailbox.Sha != before.Sha)) {
				p.fail("%s: a %s result changed the mailbox from %+v to %+v", s, want, before, after.Mailbox)
			}
			if prev.Scopes[s] != nil && !cmp.Equal(prev.Scopes[s].Failure, after.Failure) {
				p.fail("%s: a %s result changed the failure to %+v", s, want, after.Failure)
			}
		}
	}
	return mayChange
}

func (p *propRun) unlock(prev *authority.Env) {
	p.t.Helper()
	s := propScopes[p.r.IntN(len(propScopes))]
	p.note("unlock %s", s)
	p.seen["unlock"]++
	was, err := p.proc().Unlock(p.h.ctx, p.env+"/"+s, "stuck", "octocat")
	next := p.read()
	sc := prev.Scopes[s]
	if sc == nil || sc.Lease.Holder == "" {
		if !errors.Is(err, authority.ErrNotFound) {
			p.fail("unlock of a free lease: %v; want ErrNotFound", err)
		}
		return
	}
	if err != nil || !cmp.Equal(was, sc.Lease) {
		p.fail("unlock: %+v, %v; want the lease as it was, %+v", was, err, sc.Lease)
	}
	if l := next.Scopes[s].Lease; l.Holder != "" || l.Token != sc.Lease.Token {
		p.fail("%s: lease %+v after unlock; want free with token %d", s, l, sc.Lease.Token)
	}
}

// invariants checks what must hold after every step, whatever it was.
func (p *propRun) invariants(prev, next *authority.Env, liveMayChange map[string]bool) {
	p.t.Helper()
	if next == nil {
		p.fail("the environment is gone")
	}
	if prev == nil {
		prev = &authority.Env{}
	}
	if next.Desired < prev.Desired || next.Observed < prev.Observed {
		p.fail("counters went back: %d/%d after %d/%d", next.Observed, next.Desired, prev.Observed, prev.Desired)
	}
	wantObserved := next.Desired
	for _, sc := range next.Scopes {
		if m := sc.Mailbox; m != nil {
			wantObserved = min(wantObserved, m.Generation-1)
			if m.Generation > next.Desired {
				p.fail("mailbox generation %d beyond desired %d", m.Generation, next.Desired)
			}
		}
	}
	if next.Observed != wantObserved {
		p.fail("observed %d; want %d: the highest generation up to which every intent has its outcome", next.Observed, wantObserved)
	}
	for s, before := range prev.Scopes {
		after := next.Scopes[s]
		if after == nil {
			p.fail("scope %s disappeared", s)
		}
		if after.Owner < before.Owner || after.Owner > next.Desired {
			p.fail("%s: owner %d after %d (desired %d)", s, after.Owner, before.Owner, next.Desired)
		}
		if after.Lease.Token < before.Lease.Token {
			p.fail("%s: lease token went back from %d to %d", s, before.Lease.Token, after.Lease.Token)
		}
		if after.Lease.Token != before.Lease.Token && before.Lease.Holder != "" && p.h.clock.Now().Before(before.Lease.ExpiresAt.Add(p.h.skew)) &&
			(after.Lease.Holder != before.Lease.Holder || after.Lease.Generation != before.Lease.Generation) {
			p.fail("%s: token moved from %d to %d (%s at %d) while %s held the lease for generation %d", s, before.Lease.Token, after.Lease.Token,
				after.Lease.Holder, after.Lease.Generation, before.Lease.Holder, before.Lease.Generation)
		}
		if before.Live != nil && (after.Live == nil || after.Live.Generation < before.Live.Generation) {
			p.fail("%s: live generation went back: %+v after %+v", s, after.Live, before.Live)
		}
		// What is deployed may change only through a fenced success of a pass that holds its grant.
		if !cmp.Equal(before.Live, after.Live) && !liveMayChange[s] {
			p.fail("%s: live state changed without a fenced success of its owner: %+v -> %+v", s, before.Live, after.Live)
		}
	}
	// The per-scope layout numbers each document's events on their own; every read checks that
	// each document's outbox is numbered up to its counter (authority.InvariantEvents).
	for i, ev := range next.Outbox {
		if !p.h.split && i > 0 && ev.Seq != next.Outbox[i-1].Seq+1 {
			p.fail("outbox sequence broken at %d: %d after %d", i, ev.Seq, next.Outbox[i-1].Seq)
		}
	}
	if n := len(next.Outbox); !p.h.split && n > 0 && next.Outbox[n-1].Seq != next.EventSeq {
		p.fail("last event in the outbox %d, sequence counter %d", next.Outbox[n-1].Seq, next.EventSeq)
	}
	if listed := slices.Contains(p.h.pending(), p.env); listed != next.HasPending() {
		p.fail("pending index lists the environment: %v; it has pending work: %v", listed, next.HasPending())
	}
}
