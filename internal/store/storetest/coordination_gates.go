package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// The gates in the coordination property test: production needs approvals (one or two people,
// by seed), which people give to pending commits at random, and break-glass waives them for a
// commit now and then. What each step must do is worked out here without the Authority's code.

var coApprovers = []string{"alice", "bob", "carol"}

// gatedSeeds is where the seeds of the sequences with gates begin: those below it run without any,
// exactly as before gates existed, so that what they cover stays covered.
const gatedSeeds = 100

// gated reports whether the sequence runs with production's gates: approvals always, change
// windows for every odd seed, a soak for every third.
func (c *coRun) gated() bool { return c.seed > gatedSeeds }

// coWindows is production's change windows for the run's seed: every odd seed's production
// deploys only in the first 20 minutes of each hour (UTC); nil for the others.
func (c *coRun) coWindows() *authority.Windows {
	if !c.gated() || c.seed%2 == 0 {
		return nil
	}
	return &authority.Windows{Allow: []authority.WindowPeriod{{Start: "0 * * * *", Duration: 20 * time.Minute}}}
}

// windowClosed reports whether e's change window (the first 20 minutes of each hour, coWindows) is
// closed at now.
func windowClosed(e *authority.Env, now time.Time) bool {
	return e != nil && e.Gates != nil && e.Gates.Windows != nil && now.UTC().Minute() >= 20
}

// coSoak is production's soak for the run's seed: every third seed's production deploys a commit
// only once it has been live in qa and staging for ten minutes; an empty soak for the others.
func (c *coRun) coSoak() *authority.Soak {
	if !c.gated() || c.seed%3 != 0 {
		return &authority.Soak{}
	}
	return &authority.Soak{For: 10 * time.Minute}
}

// soakEnds is when the soak of d in the scope s of e ends (zero: it is not soaking): its commit
// must have been live for the soak in each environment e requires, counted from when it first went
// live there. Only for a commit live in every one of them (promotion comes first).
func (c *coRun) soakEnds(e *authority.Env, s string, d *authority.Ref, now time.Time) time.Time {
	if e == nil || e.Gates == nil || e.Gates.Soak == nil || e.Gates.Soak.For <= 0 || d == nil || d.Rollback || d.BreakGlass != nil || e.Requires == nil {
		return time.Time{}
	}
	var ends time.Time
	for _, r := range e.Requires.Environments {
		if at := c.liveSince[r+"/"+s].Add(e.Gates.Soak.For); now.Before(at) && at.After(ends) {
			ends = at
		}
	}
	return ends
}

// drainSoak moves the clock to the end of the soak of the head of s in env when it soaks; it
// reports whether it took a step.
func (c *coRun) drainSoak(env, s string, head *authority.Ref) bool {
	now := c.h.clock.Now()
	ends := c.soakEnds(c.state[env], s, head, now)
	if ends.IsZero() {
		return false
	}
	if k := fmt.Sprintf("soak %s/%s %d", env, s, head.Generation); !c.asked[k] {
		// Its pass asks first (as a waiting pass polls): the gate must hold it while it soaks.
		c.asked[k] = true
		if c.drainDeploy(env, s, max(c.state[env].Scopes[s].Owner, head.Generation)) {
			return true
		}
	}
	c.seen["drain: the clock to the end of a soak"]++
	c.begin("", "advance the clock to the end of the soak of %s/%s generation %d", env, s, head.Generation)
	c.h.clock.Advance(ends.Sub(now))
	return true
}

// coApprovalRule is production's approvals gate for the run's seed.
func (c *coRun) coApprovalRule() *authority.ApprovalRule {
	return &authority.ApprovalRule{Count: 1 + int(c.seed%2)}
}

// approvalsNeeded is how many more people must approve d in e before its pass may deploy: 0 when
// e has no approvals gate, d is a rollback or someone broke the glass for it.
func approvalsNeeded(e *authority.Env, d *authority.Ref) int {
	if e == nil || e.Gates == nil || e.Gates.Approvals == nil || d == nil || d.Rollback || d.BreakGlass != nil {
		return 0
	}
	var who []string
	for _, a := range d.Approvals {
		if l := strings.ToLower(a.Login); !slices.Contains(who, l) {
			who = append(who, l)
		}
	}
	return max(0, e.Gates.Approvals.Count-len(who))
}

// opSetGates sets env's gates.
func (c *coRun) opSetGates(env string, g authority.Gates) {
	c.t.Helper()
	prev := c.begin(env, "set the gates of %s to %s", env, g.String())
	if _, err := c.proc().SetGates(c.ctx(), env, g, "admin"); err != nil {
		c.fail("set the gates: %v", err)
	}
	next := c.read(env)
	if next.Gates == nil || next.Gates.Approvals == nil || (next.Gates.Soak == nil) != (g.Soak.For == 0) || next.Gates.Approvals.Count != g.Approvals.Count || (next.Gates.Windows == nil) != (g.Windows == nil) {
		c.fail("gates %+v after setting %+v", next.Gates, g)
	}
	c.finish(env, prev, next, newEffect())
}

// pendingShas are the commits pending in env, in scope and generation order.
func pendingShas(e *authority.Env) []string {
	var out []string
	if e == nil {
		return nil
	}
	for _, s := range sortedKeys(e.Scopes) {
		for _, r := range e.Scopes[s].Entries() {
			if !slices.Contains(out, r.Sha) {
				out = append(out, r.Sha)
			}
		}
	}
	return out
}

// randomGateStep approves a commit pending in production, or one that is not, or breaks the glass
// for one, or lets a quiet spell of minutes pass.
func (c *coRun) randomGateStep() {
	c.t.Helper()
	if c.r.IntN(4) == 0 {
		// A quiet spell, long enough for a change window to close or open.
		d := time.Duration(5+c.r.IntN(41)) * time.Minute
		c.seen["a quiet spell"]++
		c.begin("", "advance the clock %s", d)
		c.h.clock.Advance(d)
		return
	}
	shas := pendingShas(c.state[c.prod])
	if len(shas) == 0 || c.r.IntN(8) == 0 {
		c.opApprove(c.prod, c.newSha(), coApprovers[c.r.IntN(len(coApprovers))])
		return
	}
	sha := shas[c.r.IntN(len(shas))]
	if c.r.IntN(5) == 0 {
		c.opBreakGlass(c.prod, sha)
		return
	}
	c.opApprove(c.prod, sha, coApprovers[c.r.IntN(len(coApprovers))])
}

// opApprove is login's approval of sha in env: every pending entry of sha there but a rollback's
// gets it, once per person; a commit pending nowhere there is refused as bad input, changing
// nothing.
func (c *coRun) opApprove(env, sha, login string) {
	c.t.Helper()
	prev := c.begin(env, "%s approves %.7s in %s", login, sha, env)
	_, err := c.proc().ApproveCommit(c.ctx(), authority.CommitApprovalRequest{Environment: env, Sha: sha, Login: login, Door: authority.ApprovalDoorCLI})
	next := c.read(env)
	eff := newEffect()
	want := map[string][]int64{} // every pending entry of the commit, in every scope
	if prev != nil {
		for _, s := range sortedKeys(prev.Scopes) {
			for _, r := range prev.Scopes[s].Entries() {
				if r.Sha == sha && !r.Rollback {
					want[s] = append(want[s], r.Generation)
				}
			}
		}
	}
	switch {
	case len(want) == 0:
		if !errors.Is(err, authority.ErrInvalidInput) {
			c.fail("approving %.7s, which is not pending in %s: %v; want bad input", sha, env, err)
		}
		c.seen["approve: not pending, refused"]++
	case err != nil:
		c.fail("approving %.7s, pending in %v: %v", sha, want, err)
	default:
		c.seen["approve"]++
		for s, gens := range want {
			eff.approved[s] = gens
			for _, gen := range gens {
				r := entryAt(next, s, gen)
				if r == nil || !slices.ContainsFunc(r.Approvals, func(a authority.CommitApproval) bool { return a.Login == login }) {
					c.fail("%s/%s generation %d: approvals %+v after %s approved it", env, s, gen, r, login)
				}
			}
		}
	}
	c.finish(env, prev, next, eff)
}

// opBreakGlass waives the gates of sha in env: the first pending entry of it that has not failed,
// in each scope; refused as bad input, changing nothing, when there is none.
func (c *coRun) opBreakGlass(env, sha string) {
	c.t.Helper()
	prev := c.begin(env, "break the glass for %.7s in %s", sha, env)
	_, err := c.proc().BreakGlass(c.ctx(), authority.BreakGlassRequest{Environment: env, Sha: sha, Actor: "oncall", Reason: "incident"})
	next := c.read(env)
	eff := newEffect()
	want := map[string]int64{}
	if prev != nil {
		for _, s := range sortedKeys(prev.Scopes) {
			for _, r := range prev.Scopes[s].Entries() {
				if r.Sha == sha && !r.Failed {
					want[s] = r.Generation
					break
				}
			}
		}
	}
	switch {
	case len(want) == 0:
		if !errors.Is(err, authority.ErrInvalidInput) {
			c.fail("break-glass for %.7s, which is not pending in %s: %v; want bad input", sha, env, err)
		}
	case err != nil:
		c.fail("break-glass for %.7s, pending in %v: %v", sha, want, err)
	default:
		c.seen["break-glass"]++
		for s, gen := range want {
			eff.brokeGlass[s] = gen
			if r := entryAt(next, s, gen); r == nil || r.BreakGlass == nil {
				c.fail("%s/%s generation %d: %+v after break-glass", env, s, gen, r)
			}
		}
	}
	c.finish(env, prev, next, eff)
}

// entryAt is the pending entry at gen of scope s in e, or nil.
func entryAt(e *authority.Env, s string, gen int64) *authority.Ref {
	if e == nil || e.Scopes[s] == nil {
		return nil
	}
	for _, r := range e.Scopes[s].Entries() {
		if r.Generation == gen {
			return r
		}
	}
	return nil
}

// gatesChanged checks what became of an entry's approvals and break-glass through a step: they
// change only by a step that approves or breaks the glass for that entry, and approvals are never
// taken back while it is pending.
func (c *coRun) gatesChanged(k coKey, was, now *authority.Ref, eff *coEffect) {
	c.t.Helper()
	if len(now.Approvals) < len(was.Approvals) || !slices.EqualFunc(was.Approvals, now.Approvals[:len(was.Approvals)], func(a, b authority.CommitApproval) bool { return a.Login == b.Login }) {
		c.fail("%s: approvals went from %+v to %+v: an approval is never taken back", k, was.Approvals, now.Approvals)
	}
	if len(now.Approvals) != len(was.Approvals) && !slices.Contains(eff.approved[k.scope], k.gen) {
		c.fail("%s: approvals changed from %+v to %+v at a step that did not approve it", k, was.Approvals, now.Approvals)
	}
	switch {
	case was.BreakGlass != nil && now.BreakGlass == nil:
		c.fail("%s: its break-glass is gone while it is pending", k)
	case was.BreakGlass == nil && now.BreakGlass != nil && eff.brokeGlass[k.scope] != k.gen:
		c.fail("%s: break-glass %+v at a step that did not break the glass for it", k, now.BreakGlass)
	}
}

// drainWindow moves the clock to the next opening of env's change window when it is closed and the
// head of s waits for nothing else; it reports whether it took a step.
func (c *coRun) drainWindow(env, s string, head *authority.Ref) bool {
	now := c.h.clock.Now()
	if head.Rollback || head.BreakGlass != nil || !windowClosed(c.state[env], now) {
		return false
	}
	if k := fmt.Sprintf("window %s/%s %d %d", env, s, head.Generation, now.Unix()/3600); !c.asked[k] {
		// Its pass asks first (as a waiting pass polls): the gate must hold it for the window.
		c.asked[k] = true
		if c.drainDeploy(env, s, max(c.state[env].Scopes[s].Owner, head.Generation)) {
			return true
		}
	}
	c.seen["drain: the clock to the change window's opening"]++
	c.begin("", "advance the clock to the opening of %s's change window for %s", env, s)
	c.h.clock.Advance(now.Truncate(time.Hour).Add(time.Hour).Sub(now))
	return true
}

// drainApproval gets the head of s in env the approvals it lacks, one person at a time, or breaks
// the glass for it; it reports whether it took a step.
func (c *coRun) drainApproval(env, s string, head *authority.Ref) bool {
	need := approvalsNeeded(c.state[env], head)
	if need == 0 {
		return false
	}
	if c.r.IntN(4) == 0 {
		c.opBreakGlass(env, head.Sha)
		return true
	}
	for _, who := range coApprovers {
		if !slices.ContainsFunc(head.Approvals, func(a authority.CommitApproval) bool { return strings.EqualFold(a.Login, who) }) {
			c.opApprove(env, head.Sha, who)
			return true
		}
	}
	panic(fmt.Sprintf("%s/%s: %d approvals needed and every approver approved", env, s, need))
}
