package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// The coordination property test's steps: each makes one call through one of the Authorities and
// checks what the rules say of it, then the invariants (coRun.invariants) against what it may
// change.

// unfreeze lifts the freeze that rollback rollbackGen set on env/scope. Every unfreeze of the
// property test goes through here: it names the freeze it means to lift.
func unfreeze(ctx context.Context, a *authority.Authority, env, scope string, rollbackGen int64, request string) (*authority.Freeze, error) {
	f, err := a.Unfreeze(ctx, authority.UnfreezeRequest{Environment: env, Scope: scope, Freeze: rollbackGen, Actor: "oncall", Reason: "fixed forward", Request: request})
	if err == nil && f.Generation != rollbackGen {
		return f, fmt.Errorf("unfreeze %s/%s lifted the freeze of rollback %d, not the one named, %d", env, scope, f.Generation, rollbackGen)
	}
	return f, err
}

// unchanged fails unless a refused call left the environment as it was.
func (c *coRun) unchanged(what string, prev, next *authority.Env) {
	c.t.Helper()
	if diff := cmp.Diff(prev, next); diff != "" {
		c.fail("%s changed the environment (-before +after):\n%s", what, diff)
	}
}

// newGeneration records that gen was handed to intent id, and fails if it was handed out before.
func (c *coRun) newGeneration(env string, gen int64, id string) {
	c.t.Helper()
	if c.gens[env] == nil {
		c.gens[env] = map[int64]string{}
	}
	if was, ok := c.gens[env][gen]; ok {
		c.fail("generation %d of %s handed to %s, and before to %s: generations are never reused", gen, env, id, was)
	}
	c.gens[env][gen] = id
}

func (c *coRun) opSetRequires(env string, required []string) {
	c.t.Helper()
	prev := c.begin(env, "%s requires %v", env, required)
	changed, err := c.proc().SetRequires(c.ctx(), env, authority.Requirements{Environments: required}, "octocat")
	next := c.read(env)
	if err != nil || !changed || next.Requires == nil || !slices.Equal(next.Requires.Environments, sortedCopy(required)) {
		c.fail("set requires: %v, changed %v, requirement %+v", err, changed, next.Requires)
	}
	c.finish(env, prev, next, newEffect())
}

func (c *coRun) opSetPolicy(env string, p authority.Policy) {
	c.t.Helper()
	prev := c.begin(env, "set the policy of %s to %s", env, p)
	from := policyOf(prev)
	changed, err := c.proc().SetPolicy(c.ctx(), env, p, "octocat")
	next := c.read(env)
	if prev == nil {
		// Nothing was ever accepted there: the policy of an unknown environment is refused, and
		// nothing is made (the intents' own policy sets it).
		if !errors.Is(err, authority.ErrInvalidInput) || changed || next != nil {
			c.fail("set the policy of unknown %s: changed %v, %v, stored %+v; want it refused and nothing stored", env, changed, err, next)
		}
		c.finish(env, prev, next, newEffect())
		return
	}
	if err != nil || changed != (from != p) {
		c.fail("set policy from %s to %s: changed %v, %v", from, p, changed, err)
	}
	eff := newEffect()
	if next != nil {
		if next.PolicyOrDefault() != p {
			c.fail("policy %s after setting %s", next.PolicyOrDefault(), p)
		}
		if from == authority.PolicyQueue && p == authority.PolicyLatest {
			c.seen["policy: queue to latest"]++
			eff.supplant, eff.dropped = true, true
			for _, s := range sortedKeys(next.Scopes) {
				if want, got := gensOf(latestWins(entriesOf(prev, s))), gensOf(next.Scopes[s].Entries()); !slices.Equal(want, got) {
					c.fail("%s: pending %v after switching to latest; want %v (the barriers and the newest)", s, got, want)
				}
			}
		} else if changed {
			c.seen["policy: latest to queue"]++
		}
	}
	c.finish(env, prev, next, eff)
}

// opAccept accepts in and returns its generation; 0 when it was refused.
func (c *coRun) opAccept(env string, in authority.Intent, claim bool) int64 {
	c.t.Helper()
	prev := c.begin(env, "accept %s in %s: %v sha %.7s barrier %v policy %q claim %v redeploy %v", in.ID, env, in.Scopes, in.Sha, in.Barrier, in.Policy, claim, in.Redeploy)
	v := predictAccept(prev, in, c.limit)
	res, err := c.proc().Accept(c.ctx(), in, claim)
	next := c.read(env)
	eff := newEffect()
	gen, ok := c.checkAccept(env, prev, next, in, claim, v, res, err, eff)
	if ok {
		c.sent = append(c.sent, coSent{kind: "accept", env: env, gen: gen, in: in})
	}
	c.finish(env, prev, next, eff)
	return gen
}

// checkAccept checks what became of an intent (an accept's or a promotion's) against v, and fills
// in what the step may change. It returns the intent's generation, and false when it was refused.
func (c *coRun) checkAccept(env string, prev, next *authority.Env, in authority.Intent, claim bool, v acceptVerdict, res *authority.AcceptResult, err error, eff *coEffect) (int64, bool) {
	c.t.Helper()
	if v.full {
		c.seen["accept: refused, queue full"]++
		if !errors.Is(err, authority.ErrQueueFull) {
			c.fail("an intent past the queue limit %d: %v; want ErrQueueFull", c.limit, err)
		}
		c.unchanged("a refused intent", prev, next)
		return 0, false
	}
	if err != nil {
		c.fail("accept %s: %v", in.ID, err)
	}
	if in.Policy != "" && next.PolicyOrDefault() != in.Policy {
		c.fail("policy %s after an intent saying %s", next.PolicyOrDefault(), in.Policy)
	}
	eff.supplant, eff.dropped = v.toLatest, v.toLatest
	var desired int64
	if prev != nil {
		desired = prev.Desired
	}
	if v.joined > 0 {
		c.seen["accept: joined"]++
		if !res.Joined || res.Duplicate || res.Generation != v.joined || next.Desired != desired && !(c.h.split && next.Desired > desired) {
			c.fail("an intent for a commit pending at generation %d: %+v, desired %d; want it joined", v.joined, res, next.Desired)
		}
		return v.joined, true
	}
	gen := desired + 1
	if c.h.split && res.Generation > desired {
		gen = res.Generation // the per-scope layout may skip a generation an interrupted write took
	}
	if res.Duplicate || res.Joined || res.Generation != gen || next.Desired != gen {
		c.fail("a new intent: generation %d (duplicate %v, joined %v), desired %d; want generation %d, never handed out before",
			res.Generation, res.Duplicate, res.Joined, next.Desired, gen)
	}
	c.newGeneration(env, gen, in.ID)
	eff.supplant, eff.dropped = true, true
	if got, want := sortedKeys(res.Stale), sortedKeys(v.stale); !slices.Equal(got, want) {
		c.fail("held back as out of order in %v; want %v (the same commit is pending there)", got, want)
	}
	var accepted []string
	for _, s := range sortedCopy(in.Scopes) {
		k := coKey{env, s, gen}
		c.accepted = append(c.accepted, k)
		if v.stale[s] {
			c.seen["accept: same commit pending, superseded at once"]++
			eff.stale[s] = gen
			continue
		}
		accepted = append(accepted, s)
		eff.entered[s] = gen
		list := next.Scopes[s].Entries()
		want := slices.Clone(v.after[s])
		want[len(want)-1] = gen
		if !slices.Equal(gensOf(list), want) {
			c.fail("%s: pending %v after accepting generation %d under %s; want %v", s, gensOf(list), gen, next.PolicyOrDefault(), want)
		}
		if m := list[len(list)-1]; m.IntentID != in.ID || m.Sha != in.Sha || m.Barrier != slices.Contains(in.Barrier, s) {
			c.fail("%s: newest pending %+v after accepting %s", s, m, in.ID)
		}
		if claim {
			if len(list) == 1 {
				eff.owner[s] = gen
			} else {
				eff.claimed[s] = gen
			}
		}
	}
	if !slices.Equal(sortedCopy(res.Accepted), accepted) {
		c.fail("accepted in %v; want %v", res.Accepted, accepted)
	}
	c.seen["accept: new"]++
	return gen, true
}

func (c *coRun) opRedeliver(sent coSent) {
	c.t.Helper()
	prev := c.begin(sent.env, "deliver the %s of generation %d again", sent.kind, sent.gen)
	var (
		gen int64
		dup bool
		err error
	)
	switch sent.kind {
	case "accept":
		var res *authority.AcceptResult
		if res, err = c.proc().Accept(c.ctx(), sent.in, false); err == nil {
			gen, dup = res.Generation, res.Duplicate
		}
	case "rollback":
		var res *authority.AcceptResult
		if res, err = c.proc().Rollback(c.ctx(), sent.rb); err == nil {
			gen, dup = res.Generation, res.Duplicate
		}
	case "promote":
		var res *authority.PromoteResult
		if res, err = c.proc().Promote(c.ctx(), sent.pr); err == nil {
			gen, dup = res.Generation, res.Duplicate
		}
	}
	next := c.read(sent.env)
	if err != nil || !dup || gen != sent.gen {
		c.fail("the %s of generation %d delivered again: generation %d, duplicate %v, %v; want the same generation, a duplicate", sent.kind, sent.gen, gen, dup, err)
	}
	c.seen["re-delivery: "+sent.kind]++
	c.unchanged("a re-delivery", prev, next)
	c.finish(sent.env, prev, next, newEffect())
}

// opClaim claims scopes (nil: every pending one) for the pass at gen and returns the scopes it
// now owns or waits in.
func (c *coRun) opClaim(env string, gen int64, scopes []string) []string {
	c.t.Helper()
	prev := c.begin(env, "claim %v at %d in %s", scopes, gen, env)
	res, err := c.proc().Claim(c.ctx(), env, gen, scopes)
	next := c.read(env)
	if err != nil {
		c.fail("claim: %v", err)
	}
	names := scopes
	if names == nil {
		for _, s := range sortedKeys(prev.Scopes) {
			if prev.Scopes[s].Mailbox != nil {
				names = append(names, s)
			}
		}
	}
	claimed, refused := map[string]authority.ClaimedScope{}, map[string]bool{}
	for _, cs := range res.Claimed {
		claimed[cs.Scope] = cs
	}
	for _, sup := range res.Superseded {
		refused[sup.Scope] = true
	}
	eff := newEffect()
	for _, s := range names {
		sc := prev.Scopes[s]
		list := sc.Entries()
		eff.owner[s] = sc.Owner
		pos := positionOf(list, gen)
		var want string
		switch {
		case len(list) == 0:
			want = "idle"
		case pos > 0 && list[pos].Failed:
			want = "refused"
		case pos > 0:
			// Its own intent waits behind others: claimed, and owned once it is the head.
			want = "queued"
			eff.claimed[s] = gen
			if claimed[s].Ahead != pos {
				c.fail("%s: claimed with %d ahead; want %d", s, claimed[s].Ahead, pos)
			}
		case pos < 0 && list[len(list)-1].Generation > gen && sc.Owner != gen, list[0].Failed, list[0].Generation > gen, sc.Owner > gen:
			want = "refused"
		case list[0].Rollback && list[0].Generation != gen:
			want = "refused" // a rollback is deployed by its own pass
		default:
			want = "claimed"
			eff.owner[s] = gen
			if pos < 0 && sc.Owner < gen {
				c.seen["claim: took over the head"]++
				if len(list) > 1 {
					c.seen["claim: took over the head, others waiting"]++
				}
			}
		}
		c.seen["claim: "+want]++
		got := "refused"
		switch {
		case slices.Contains(res.Idle, s):
			got = "idle"
		case claimed[s].Scope != "" && claimed[s].Ahead > 0:
			got = "queued"
		case claimed[s].Scope != "":
			got = "claimed"
		case !refused[s]:
			got = "missing"
		}
		if got != want {
			c.fail("%s (pending %v, owner %d): claim at %d %s; want %s", s, gensOf(list), sc.Owner, gen, got, want)
		}
	}
	c.finish(env, prev, next, eff)
	return res.Scopes()
}

func (c *coRun) opGate(env string, gen int64, holder string, scopes []string, lease bool) *authority.Grant {
	c.t.Helper()
	req := authority.GateRequest{Environment: env, Generation: gen, Scopes: scopes, Phase: "build"}
	if lease {
		req.Phase, req.Holder, req.LeaseTTL = "deploy", holder, testTTL
	}
	prev := c.begin(env, "gate %s %v at %d holder %q in %s", req.Phase, scopes, gen, req.Holder, env)
	now := c.h.clock.Now()
	g, err := c.proc().Gate(c.ctx(), req)
	next := c.read(env)
	eff := newEffect()
	if !lease {
		// A phase without a lease needs authority only: a pass whose intent waits may work.
		allowed := true
		for _, s := range scopes {
			v, _ := authorityOf(prev, gen, s)
			allowed = allowed && (v == gateGoes || v == gateQueued)
		}
		switch {
		case allowed && err != nil:
			c.fail("a build gate of a pass with authority: %v", err)
		case !allowed && !errors.Is(err, authority.ErrSuperseded):
			c.fail("a build gate of a pass without authority: %v; want ErrSuperseded", err)
		}
		c.seen[fmt.Sprintf("gate build: allowed %v", allowed)]++
		c.finish(env, prev, next, eff)
		return nil
	}
	verdicts := map[string]coVerdict{}
	deploys := map[string]*authority.Ref{}
	want := gateGoes
	for _, s := range scopes {
		verdicts[s], deploys[s] = c.gateVerdict(prev, gen, holder, s, now)
		if verdicts[s] == gateSuperseded {
			want = gateSuperseded
		}
	}
	first := ""
	if want != gateSuperseded {
		for _, s := range scopes {
			if verdicts[s] != gateGoes {
				want, first = verdicts[s], s
				break
			}
		}
	}
	c.seen["gate deploy: "+want.String()]++
	var held *authority.HeldError
	switch {
	case want == gateGoes:
		if err != nil {
			c.fail("deploy gate at %d for %v (verdicts %v): %v; the pass may deploy\n%s", gen, scopes, verdicts, err, describe(prev, scopes))
		}
		for _, s := range scopes {
			l, d := next.Scopes[s].Lease, deploys[s]
			if l.Holder != holder || l.Generation != gen || l.Token != g.Tokens[s] || l.Sha != d.Sha || !l.ExpiresAt.Equal(now.Add(testTTL)) {
				c.fail("%s: lease %+v after a grant %+v to %s at %d deploying %+v", s, l, g, holder, gen, d)
			}
			eff.granted[s] = g.Tokens[s]
		}
		c.grants = append(c.grants, coGrant{env: env, g: g, step: c.step})
	case want == gateSuperseded:
		if !errors.Is(err, authority.ErrSuperseded) {
			c.fail("deploy gate at %d for %v (verdicts %v): %v; want ErrSuperseded: a superseded pass never deploys\n%s", gen, scopes, verdicts, err, describe(prev, scopes))
		}
	case !errors.As(err, &held):
		c.fail("deploy gate at %d for %v (verdicts %v): %v; want a *HeldError: %s is %s", gen, scopes, verdicts, err, first, want)
	case want == gatePromotion:
		w := held.Promotion
		if w == nil || w.Sha != deploys[first].Sha || !slices.Contains(prev.Requires.Environments, w.Environment) {
			c.fail("%s: deploy gate at %d refused with %v (promotion %+v); want it waiting for %.7s in a required environment", first, gen, err, w, deploys[first].Sha)
		}
		if l := c.liveIn(w.Environment, first); l != nil && l.Sha == w.Sha {
			c.fail("%s: the gate says it waits for %s, which has %.7s live", first, w.Environment, w.Sha)
		}
		for _, r := range prev.Requires.Environments {
			if l := c.liveIn(r, first); l != nil && l.Sha == w.Sha {
				c.seen["gate deploy: waiting for promotion, live in "+strings.TrimPrefix(r, fmt.Sprintf("prop%d/", c.seed))+" only"]++
			}
		}
	case want == gateFrozen:
		if held.Frozen == nil || held.Frozen.Generation != prev.Scopes[first].Freeze.Generation {
			c.fail("%s: deploy gate at %d refused with %v; want it held by the freeze %+v", first, gen, err, prev.Scopes[first].Freeze)
		}
	case want == gateQueued:
		if held.Ahead < 1 {
			c.fail("%s: deploy gate at %d refused with %v; want it queued", first, gen, err)
		}
	case want == gateApproval:
		if held.Why() != authority.ReasonApproval || held.Approval == nil || held.Approval.Sha != deploys[first].Sha || held.Approval.Need != approvalsNeeded(prev, deploys[first]) {
			c.fail("%s: deploy gate at %d refused with %v (approval %+v); want it waiting for %d approvals of %.7s", first, gen, err, held.Approval, approvalsNeeded(prev, deploys[first]), deploys[first].Sha)
		}
	case want == gateSoaking:
		if ends := c.soakEnds(prev, first, deploys[first], now); held.Why() != authority.ReasonSoaking || held.Soak == nil || !held.Until.Equal(ends) {
			c.fail("%s: deploy gate at %d refused with %v (soak %+v, until %v); want it soaking until %v", first, gen, err, held.Soak, held.Until, ends)
		}
	case want == gateWindow:
		if held.Why() != authority.ReasonWindow || held.Window == nil || held.Until.IsZero() || held.Until.UTC().Minute() != 0 || !held.Until.After(now) {
			c.fail("%s: deploy gate at %d refused with %v (window %+v, until %v); want it waiting for the window to open on the hour", first, gen, err, held.Window, held.Until)
		}
	case want == gateLeased:
		if l := prev.Scopes[first].Lease; held.Holder != l.Holder || held.RetryAfter < 1 {
			c.fail("%s: deploy gate at %d refused with %v; want it waiting for %s's lease", first, gen, err, l.Holder)
		}
	}
	if want != gateGoes {
		g = nil
	}
	c.finish(env, prev, next, eff)
	return g
}

func (c *coRun) opRenew(cg coGrant) {
	c.t.Helper()
	prev := c.begin(cg.env, "renew the grant of step %d: %s at %d tokens %v", cg.step, cg.g.Holder, cg.g.Generation, cg.g.Tokens)
	g := *cg.g
	err := c.proc().Renew(c.ctx(), &g, testTTL)
	next := c.read(cg.env)
	eff := newEffect()
	if holds(prev, cg.g) {
		c.seen["renew: holder"]++
		if err != nil {
			c.fail("renew by the holder: %v", err)
		}
		for s := range cg.g.Tokens {
			eff.renewed[s] = true
			if !next.Scopes[s].Lease.ExpiresAt.Equal(c.h.clock.Now().Add(testTTL)) {
				c.fail("%s: renewed lease expires at %v", s, next.Scopes[s].Lease.ExpiresAt)
			}
		}
	} else {
		c.seen["renew: stale token refused"]++
		if !errors.Is(err, authority.ErrLeaseLost) {
			c.fail("renew with a stale token: %v; want ErrLeaseLost", err)
		}
		c.unchanged("a refused renewal", prev, next)
	}
	c.finish(cg.env, prev, next, eff)
}

func (c *coRun) opRelease(cg coGrant) {
	c.t.Helper()
	prev := c.begin(cg.env, "release the grant of step %d: %s at %d tokens %v", cg.step, cg.g.Holder, cg.g.Generation, cg.g.Tokens)
	err := c.proc().Release(c.ctx(), cg.g)
	next := c.read(cg.env)
	eff := newEffect()
	if holds(prev, cg.g) {
		c.seen["release: holder"]++
		if err != nil {
			c.fail("release by the holder: %v", err)
		}
		for s := range cg.g.Tokens {
			eff.freed[s] = true
			if l := next.Scopes[s].Lease; l.Holder != "" {
				c.fail("%s: lease %+v after its holder released it", s, l)
			}
		}
	} else {
		c.seen["release: stale token refused"]++
		if !errors.Is(err, authority.ErrLeaseLost) {
			c.fail("release with a stale token: %v; want ErrLeaseLost", err)
		}
		c.unchanged("a refused release", prev, next)
	}
	c.finish(cg.env, prev, next, eff)
}

// describe says what a failure message needs of scopes' state.
func describe(e *authority.Env, scopes []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s under %s, %d/%d:", e.Name, e.PolicyOrDefault(), e.Observed, e.Desired)
	for _, s := range scopes {
		sc := e.Scopes[s]
		if sc == nil {
			continue
		}
		fmt.Fprintf(&b, "\n    %s: owner %d, lease %s@%d token %d", s, sc.Owner, sc.Lease.Holder, sc.Lease.Generation, sc.Lease.Token)
		for _, r := range sc.Entries() {
			fmt.Fprintf(&b, "\n      pending %d %.7s barrier %v claimed %v failed %v rollback %v attempt %d", r.Generation, r.Sha, r.Barrier, r.Claimed, r.Failed, r.Rollback, r.Attempt)
		}
		if sc.Live != nil {
			fmt.Fprintf(&b, "\n      live %d %.7s token %d", sc.Live.Generation, sc.Live.Sha, sc.Live.Token)
		}
		if sc.Freeze != nil {
			fmt.Fprintf(&b, "\n      frozen by %d", sc.Freeze.Generation)
		}
	}
	return b.String()
}

// completeWant is what a completion must do.
type completeWant struct {
	refusal string // "": it takes effect; "repeat": a success that took effect before; "lost", "held": refused
	results map[string]authority.Result
	eff     *coEffect
	failure map[string]string // scope -> the commit a terminal failure is recorded for
	attempt map[string]int    // scope -> the failed attempts its intent has after a retryable failure
	worked  map[string]int64  // scope -> the intent the pass worked on
	sha     map[string]string // scope -> the commit the success records
}

// predictComplete works out what comp must do in prev.
func (c *coRun) predictComplete(prev *authority.Env, comp authority.Completion) completeWant {
	w := completeWant{results: map[string]authority.Result{}, eff: newEffect(), failure: map[string]string{}, attempt: map[string]int{}, worked: map[string]int64{}, sha: map[string]string{}}
	gen, success := comp.Generation, comp.Outcome == authority.OutcomeSuccess
	retryable := comp.Outcome == authority.OutcomeLost || comp.Outcome == authority.OutcomeInterrupted
	final := comp.Outcome == authority.OutcomeInvalid || (comp.Outcome == authority.OutcomeFailure && comp.Attempt >= comp.MaxAttempts)
	if success {
		repeat := true
		for _, s := range comp.Scopes {
			sc, tok := prev.Scopes[s], comp.Tokens[s]
			repeat = repeat && sc.Live != nil && sc.Live.Generation == gen && sc.Live.Token == tok && sc.Lease.Token == tok && sc.Lease.Holder == ""
		}
		if repeat {
			w.refusal = "repeat"
			return w
		}
	}
	// Fenced: every token given is the current grant's. Only a pass that says it lost its lease
	// may end without that (and then frees nothing but its own grant).
	for _, s := range comp.Scopes {
		l := prev.Scopes[s].Lease
		if tok, ok := comp.Tokens[s]; ok && (l.Holder != comp.Holder || l.Token != tok || l.Generation != gen) && comp.Outcome != authority.OutcomeLost {
			w.refusal = "lost"
			return w
		}
	}
	if !retryable {
		for _, s := range comp.Scopes {
			l := prev.Scopes[s].Lease
			if _, ok := comp.Tokens[s]; !ok && c.liveLease(l) && (l.Holder != comp.Holder || l.Generation != gen) {
				w.refusal = "held"
				return w
			}
		}
	}
	for _, s := range comp.Scopes {
		sc := prev.Scopes[s]
		list := sc.Entries()
		tok, hasTok := comp.Tokens[s]
		if hasTok && sc.Lease.Holder == comp.Holder && sc.Lease.Token == tok && sc.Lease.Generation == gen {
			w.eff.freed[s] = true
		}
		if sc.Owner == gen && (sc.Mailbox == nil || (sc.Mailbox.Failed && positionOf(list, gen) <= 0)) {
			// The pass's work here ended: a repeat of that ending reports the same.
			if success && sc.Live != nil && sc.Live.Generation == gen {
				w.results[s] = authority.ResultDeployed
				continue
			}
			if final && sc.Failure != nil && sc.Failure.Generation == gen {
				w.results[s] = authority.ResultFailed
				continue
			}
		}
		var m *authority.Ref
		if len(list) > 0 {
			m = list[max(positionOf(list, gen), 0)] // its own intent, or the head it took over
		}
		v, _ := authorityOf(prev, gen, s)
		authorized := v == gateGoes || v == gateQueued
		l := sc.Lease
		if success && hasTok && l.Holder == comp.Holder && l.Token == tok && l.Generation == gen && l.Sha != "" &&
			(!authorized || l.Sha != m.Sha) && (sc.Live == nil || sc.Live.Generation <= gen) {
			// Superseded while it deployed under its grant, or what it deployed is no longer the
			// intent it would end: what it deployed is live, and what is pending stays.
			w.results[s] = authority.ResultDeployed
			w.eff.live[s] = &authority.Live{Sha: l.Sha, Generation: gen, Token: tok}
			w.sha[s] = l.Sha
			continue
		}
		if !authorized && !retryable {
			w.results[s] = authority.ResultSuperseded
			continue
		}
		switch {
		case success:
			w.results[s] = authority.ResultDeployed
			w.eff.live[s] = &authority.Live{Sha: m.Sha, Generation: gen, Token: tok}
			w.eff.ended[s], w.eff.endedAs = m.Generation, "deployed"
			w.sha[s] = m.Sha
		case final:
			w.results[s] = authority.ResultFailed
			if m != nil {
				w.failure[s] = m.Sha
				if policyOf(prev) == authority.PolicyQueue || m.Barrier {
					w.eff.failed[s] = m.Generation // it stays, blocking what waits behind it
				} else {
					w.eff.ended[s], w.eff.endedAs = m.Generation, "failed"
				}
			}
		default:
			w.results[s] = authority.ResultRetry
			if m != nil {
				w.worked[s], w.attempt[s] = m.Generation, m.Attempt
				if comp.Outcome == authority.OutcomeFailure {
					w.attempt[s] = max(m.Attempt, comp.Attempt)
				}
			}
		}
	}
	return w
}

func (c *coRun) opComplete(comp authority.Completion) {
	c.t.Helper()
	env := comp.Environment
	prev := c.begin(env, "complete %s %v at %d holder %q tokens %v attempt %d of %d", comp.Outcome, comp.Scopes, comp.Generation, comp.Holder, comp.Tokens, comp.Attempt, comp.MaxAttempts)
	w := c.predictComplete(prev, comp)
	stale := ""
	for _, s := range comp.Scopes {
		l := prev.Scopes[s].Lease
		tok, ok := comp.Tokens[s]
		switch {
		case !ok:
		case l.Token != tok && l.Holder == comp.Holder && l.Generation == comp.Generation:
			stale = "an older token of the same pass"
		case l.Token != tok:
			stale = "an older pass's token"
		case l.Holder != comp.Holder || l.Generation != comp.Generation:
			stale = "the token of a released lease"
		}
	}
	res, err := c.proc().Complete(c.ctx(), comp)
	next := c.read(env)
	switch w.refusal {
	case "repeat":
		c.seen["complete: a success again"]++
		for _, s := range comp.Scopes {
			if err != nil || res.Results[s] != authority.ResultDeployed {
				c.fail("a success asked again: %+v, %v; want deployed", res, err)
			}
		}
		c.unchanged("a success asked again", prev, next)
	case "lost":
		c.seen["complete: "+string(comp.Outcome)+" with "+stale+" refused"]++
		if !errors.Is(err, authority.ErrLeaseLost) {
			c.fail("%s with %s: %v; want ErrLeaseLost", comp.Outcome, stale, err)
		}
		c.unchanged("a completion with "+stale, prev, next)
	case "held":
		c.seen["complete: unfenced while another holds the lease"]++
		if !errors.Is(err, authority.ErrLeaseHeld) {
			c.fail("%s without a token while another pass holds the lease: %v; want ErrLeaseHeld", comp.Outcome, err)
		}
		c.unchanged("a refused completion", prev, next)
	default:
		if err != nil {
			c.fail("complete: %v", err)
		}
		if stale != "" {
			c.seen["complete: "+string(comp.Outcome)+" with "+stale]++
		}
		for _, s := range comp.Scopes {
			c.seen[fmt.Sprintf("complete %s: %s", comp.Outcome, w.results[s])]++
			if got := res.Results[s]; got != w.results[s] {
				c.fail("%s (pending %v, owner %d): result %s; want %s", s, gensOf(entriesOf(prev, s)), prev.Scopes[s].Owner, got, w.results[s])
			}
			after := next.Scopes[s]
			if sha, ok := w.sha[s]; ok {
				// What becomes live is what the pass's grant deployed.
				if l := prev.Scopes[s].Lease; l.Holder == comp.Holder && l.Generation == comp.Generation && l.Token == comp.Tokens[s] && l.Sha != sha {
					c.fail("%s: a success under the grant of %.7s records %.7s\n%s", s, l.Sha, sha, describe(prev, comp.Scopes))
				}
				if after.Failure != nil && w.eff.ended[s] > 0 {
					c.fail("%s: failure %+v still shown after a deploy", s, after.Failure)
				}
			}
			if sha, ok := w.failure[s]; ok && (after.Failure == nil || after.Failure.Generation != comp.Generation || after.Failure.Sha != sha) {
				c.fail("%s: failure %+v after a terminal %s; want one for generation %d, %.7s", s, after.Failure, comp.Outcome, comp.Generation, sha)
			}
			if n, ok := w.attempt[s]; ok {
				if i := positionOf(after.Entries(), w.worked[s]); i < 0 || after.Entries()[i].Attempt != n {
					c.fail("%s: pending %v after a retryable %s of generation %d; want it pending with %d failed attempts", s, gensOf(after.Entries()), comp.Outcome, w.worked[s], n)
				}
			}
		}
	}
	c.finish(env, prev, next, w.eff)
}

func (c *coRun) opRollback(env, s, to string) {
	c.t.Helper()
	prev := c.begin(env, "roll %s/%s back to %q", env, s, to)
	r := authority.RollbackRequest{Environment: env, Scope: s, To: to, Actor: "oncall", Reason: "bad deploy", Request: c.request("rollback")}
	res, err := c.proc().Rollback(c.ctx(), r)
	next := c.read(env)
	sc := prev.Scopes[s]
	eff := newEffect()
	if to == "" && (sc.Freeze != nil || sc.Prev == nil) {
		c.seen["rollback: nothing to go back to"]++
		if !errors.Is(err, authority.ErrInvalidInput) {
			c.fail("a rollback without a commit to go back to: %v; want invalid input", err)
		}
		c.unchanged("a refused rollback", prev, next)
		c.finish(env, prev, next, eff)
		return
	}
	if to == "" {
		to = sc.Prev.Sha
	}
	gen := prev.Desired + 1
	if c.h.split && err == nil && res.Generation > prev.Desired {
		gen = res.Generation // the per-scope layout may skip a generation an interrupted write took
	}
	if err != nil || res.Duplicate || res.Generation != gen || next.Desired != gen {
		c.fail("rollback: %+v, %v; want generation %d", res, err, gen)
	}
	c.seen["rollback"]++
	c.newGeneration(env, gen, r.Request)
	list := next.Scopes[s].Entries()
	if len(list) != 1 || list[0].Generation != gen || !list[0].Rollback || !list[0].Barrier || list[0].Sha != to {
		c.fail("%s: pending %v after a rollback to %.7s at %d; want it alone, ahead of everything", s, gensOf(list), to, gen)
	}
	eff.entered[s], eff.froze[s], eff.owner[s] = gen, gen, gen
	eff.supplant, eff.dropped = true, true
	if sc.Lease.Holder != "" && sc.Lease.Generation < gen {
		eff.freed[s] = true // the deploy being undone loses its lease now
		if next.Scopes[s].Lease.Holder != "" {
			c.fail("%s: lease %+v kept by the deploy a rollback undoes", s, next.Scopes[s].Lease)
		}
	}
	k := coKey{env, s, gen}
	c.accepted = append(c.accepted, k)
	c.rollbacks[env+"/"+s] = gen
	c.sent = append(c.sent, coSent{kind: "rollback", env: env, gen: gen, rb: r})
	c.finish(env, prev, next, eff)
}

func (c *coRun) opUnfreeze(env, s string, rollbackGen int64) {
	c.t.Helper()
	prev := c.begin(env, "unfreeze %s/%s (rollback %d)", env, s, rollbackGen)
	f, err := unfreeze(c.ctx(), c.proc(), env, s, rollbackGen, c.request("unfreeze"))
	next := c.read(env)
	eff := newEffect()
	if sc := prev.Scopes[s]; sc.Freeze == nil {
		c.seen["unfreeze: not frozen"]++
		if !errors.Is(err, authority.ErrNotFrozen) {
			c.fail("unfreeze of a scope no rollback holds: %v; want ErrNotFrozen", err)
		}
		c.unchanged("a refused unfreeze", prev, next)
	} else {
		c.seen["unfreeze"]++
		if err != nil || f.Generation != sc.Freeze.Generation {
			c.fail("unfreeze of the freeze of rollback %d: %+v, %v", sc.Freeze.Generation, f, err)
		}
		eff.unfroze[s] = true
	}
	c.finish(env, prev, next, eff)
}

// opPromote promotes s from from to to and returns the promotion's generation; 0 when refused.
func (c *coRun) opPromote(to, from, s string) int64 {
	c.t.Helper()
	prev := c.begin(to, "promote %s from %s to %s", s, from, to)
	r := authority.PromoteRequest{Environment: to, Scope: s, From: from, Actor: "octocat", Request: c.request("promote")}
	live := c.liveIn(from, s)
	res, err := c.proc().Promote(c.ctx(), r)
	next := c.read(to)
	eff := newEffect()
	if live == nil {
		c.seen["promote: nothing live"]++
		if !errors.Is(err, authority.ErrInvalidInput) {
			c.fail("promote from a scope with nothing live: %v; want invalid input", err)
		}
		c.unchanged("a refused promotion", prev, next)
		c.finish(to, prev, next, eff)
		return 0
	}
	in := authority.Intent{ID: "promote:" + s + ":" + r.Request, Environment: to, Scopes: []string{s}, Sha: live.Sha, Ref: live.Ref, Redeploy: true}
	v := predictAccept(prev, in, c.limit)
	var ar *authority.AcceptResult
	if err == nil {
		ar = res.AcceptResult
		if res.Sha != live.Sha {
			c.fail("promoted %.7s; %.7s is live in %s", res.Sha, live.Sha, from)
		}
	}
	gen, ok := c.checkAccept(to, prev, next, in, true, v, ar, err, eff)
	if ok {
		c.seen["promote"]++
		c.sent = append(c.sent, coSent{kind: "promote", env: to, gen: gen, pr: r})
	}
	c.finish(to, prev, next, eff)
	return gen
}

func (c *coRun) opDecide(env, s string, action authority.DecisionAction) {
	c.t.Helper()
	prev := c.begin(env, "decide %s in %s/%s", action, env, s)
	ref, err := c.proc().Decide(c.ctx(), authority.Decision{Environment: env, Scope: s, Action: action, Reason: "looked at it", Actor: "oncall", Request: c.request("decide")})
	next := c.read(env)
	eff := newEffect()
	head := prev.Scopes[s].Mailbox
	if head == nil || !head.Failed {
		c.seen["decide: not blocked"]++
		if !errors.Is(err, authority.ErrNotBlocked) {
			c.fail("%s of a scope nothing blocks: %v; want ErrNotBlocked", action, err)
		}
		c.unchanged("a refused decision", prev, next)
		c.finish(env, prev, next, eff)
		return
	}
	c.seen["decide: "+string(action)]++
	if err != nil || ref.Generation != head.Generation {
		c.fail("%s of the failed head %d: %+v, %v", action, head.Generation, ref, err)
	}
	list := next.Scopes[s].Entries()
	if action == authority.DecideSkip {
		eff.dropped = true
		if want := gensOf(prev.Scopes[s].Entries()[1:]); !slices.Equal(gensOf(list), want) {
			c.fail("%s: pending %v after skipping %d; want %v", s, gensOf(list), head.Generation, want)
		}
	} else {
		eff.retried[s] = head.Generation
		if len(list) == 0 || list[0].Generation != head.Generation || list[0].Failed || list[0].Attempt != 0 {
			c.fail("%s: pending %v after retrying %d; want it pending from its first attempt", s, gensOf(list), head.Generation)
		}
	}
	c.finish(env, prev, next, eff)
}

func (c *coRun) opUnlock(env, s string) {
	c.t.Helper()
	prev := c.begin(env, "unlock %s/%s", env, s)
	was, err := c.proc().Unlock(c.ctx(), env+"/"+s, "stuck", "oncall")
	next := c.read(env)
	eff := newEffect()
	l := prev.Scopes[s].Lease
	if l.Holder == "" {
		if !errors.Is(err, authority.ErrNotFound) {
			c.fail("unlock of a free lease: %v; want ErrNotFound", err)
		}
		c.unchanged("a refused unlock", prev, next)
	} else {
		c.seen["unlock"]++
		if err != nil || !cmp.Equal(was, l) {
			c.fail("unlock: %+v, %v; want the lease as it was, %+v", was, err, l)
		}
		eff.freed[s] = true
	}
	c.finish(env, prev, next, eff)
}
