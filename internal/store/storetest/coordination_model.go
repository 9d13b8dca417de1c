package storetest

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// What the coordination property test expects, worked out from the state before a step: the rules
// of docs/config.md and spec section 2 as a user relies on them, written without the Authority's
// code.

// entriesOf is a scope's pending intents, oldest first; nil when the scope does not exist.
func entriesOf(e *authority.Env, s string) []*authority.Ref {
	if e == nil || e.Scopes[s] == nil {
		return nil
	}
	return e.Scopes[s].Entries()
}

func positionOf(list []*authority.Ref, gen int64) int {
	return slices.IndexFunc(list, func(r *authority.Ref) bool { return r.Generation == gen })
}

func policyOf(e *authority.Env) authority.Policy {
	if e == nil {
		return authority.PolicyLatest
	}
	return e.PolicyOrDefault()
}

// latestWins is what stays pending of list under policy latest: the barriers and the newest intent
// (unless it failed; a failed intent has its outcome).
func latestWins(list []*authority.Ref) []*authority.Ref {
	var out []*authority.Ref
	for i, r := range list {
		if r.Barrier || (i == len(list)-1 && !r.Failed) {
			out = append(out, r)
		}
	}
	return out
}

// settledUpTo is observed by its definition: the highest G such that every intent up to G has its
// outcome. The pending intents that have not failed are the ones without one.
func settledUpTo(e *authority.Env) int64 {
	obs := e.Desired
	for _, sc := range e.Scopes {
		for _, m := range sc.Entries() {
			if !m.Failed {
				obs = min(obs, m.Generation-1)
			}
		}
	}
	return obs
}

func gensOf(list []*authority.Ref) []int64 {
	out := make([]int64, len(list))
	for i, r := range list {
		out[i] = r.Generation
	}
	return out
}

// acceptVerdict is what an intent arriving in prev must become.
type acceptVerdict struct {
	full   bool            // refused: a scope would hold more than the limit
	joined int64           // > 0: every scope has this very commit pending at that generation
	stale  map[string]bool // scopes where the same commit of the branch is pending already
	// after: per scope that takes the intent, the generations pending afterwards, oldest first; 0
	// stands for the new intent.
	after map[string][]int64
	// toLatest: the intent switches the environment to policy latest, which supersedes.
	toLatest bool
}

// predictAccept works out what becomes of in, arriving in prev, with queue limit limit.
func predictAccept(prev *authority.Env, in authority.Intent, limit int) acceptVerdict {
	v := acceptVerdict{stale: map[string]bool{}, after: map[string][]int64{}}
	from, pol := policyOf(prev), policyOf(prev)
	if in.Policy != "" {
		pol = in.Policy
	}
	v.toLatest = pol == authority.PolicyLatest && from != authority.PolicyLatest
	pending := map[string][]*authority.Ref{}
	for _, s := range in.Scopes {
		list := entriesOf(prev, s)
		if v.toLatest && len(list) > 0 {
			list = latestWins(list)
		}
		pending[s] = list
	}
	ordered := !in.Redeploy && in.Ref != ""
	if ordered {
		// A second intent for a commit every scope has pending at one generation joins it.
		var gen int64
		for _, s := range in.Scopes {
			var found *authority.Ref
			if prev != nil && prev.Scopes[s] != nil {
				for _, m := range pending[s] {
					if m.Ref == in.Ref && m.Sha == in.Sha && !m.Failed && (gen == 0 || m.Generation == gen) {
						found = m
					}
				}
			}
			if found == nil {
				gen = 0
				break
			}
			gen = found.Generation
		}
		if gen > 0 {
			v.joined = gen
			return v
		}
	}
	for _, s := range in.Scopes {
		list := pending[s]
		if ordered && slices.ContainsFunc(list, func(m *authority.Ref) bool { return m.Ref == in.Ref && m.Sha == in.Sha }) {
			v.stale[s] = true // the same commit of the branch, again: not newer than what waits
			continue
		}
		// The bound counts what stays pending with the new intent: under latest the barriers and
		// the new one, whatever it is; under queue every one.
		var after []int64
		for _, m := range list {
			if pol == authority.PolicyQueue || m.Barrier {
				after = append(after, m.Generation)
			}
		}
		after = append(after, 0)
		if len(after) > limit {
			v.full = true
		}
		v.after[s] = after
	}
	return v
}

// coVerdict is what the deploy gate must answer for one scope.
type coVerdict int

const (
	gateGoes       coVerdict = iota
	gateSuperseded           // the pass has no authority over the scope
	gateQueued               // its own intent waits behind older ones (or a barrier)
	gateFrozen               // a rollback's freeze holds it
	gatePromotion            // its commit is not live in every required environment
	gateLeased               // another pass holds the scope's lease
	gateApproval             // its commit waits for approvals by people
	gateWindow               // the environment's change window is closed
	gateSoaking              // its commit has not been live long enough in a required environment
)

func (v coVerdict) String() string {
	return [...]string{"may go", "superseded", "queued", "frozen", "waiting for promotion", "leased", "waiting for approval", "outside the change window", "soaking"}[v]
}

// authorityOf is guarantee 4 with the queue: the pass at gen owns the scope, its work there has not
// ended, and nothing newer than it was accepted, unless what is newer waits behind the head the
// pass deploys (its own intent, or one it took over). A pass whose own intent waits behind others was claimed and may work, but waits
// (queued) to deploy. deploys is the intent the pass would deploy: the head.
func authorityOf(e *authority.Env, gen int64, s string) (v coVerdict, deploys *authority.Ref) {
	sc := e.Scopes[s]
	if sc == nil {
		return gateSuperseded, nil
	}
	list := sc.Entries()
	pos := positionOf(list, gen)
	switch {
	case pos > 0 && (list[pos].Failed || !list[pos].Claimed):
		return gateSuperseded, nil
	case pos > 0:
		return gateQueued, list[0]
	case len(list) == 0 || list[0].Failed || sc.Owner != gen:
		return gateSuperseded, nil
	case pos < 0 && list[0].Generation > gen:
		return gateSuperseded, nil // everything pending is newer than the pass
	}
	return gateGoes, list[0]
}

// gateVerdict is the whole deploy gate for one scope: authority, the freeze, the queue, the
// promotion requirement (every required environment has the commit live in the scope; a rollback
// is never held) and the lease.
func (c *coRun) gateVerdict(e *authority.Env, gen int64, holder, s string, now time.Time) (coVerdict, *authority.Ref) {
	v, d := authorityOf(e, gen, s)
	if v == gateSuperseded {
		return v, nil
	}
	sc := e.Scopes[s]
	if sc.Freeze != nil && sc.Freeze.Generation != gen {
		return gateFrozen, d
	}
	if v == gateQueued {
		return v, d
	}
	if e.Requires != nil && !d.Rollback {
		for _, r := range e.Requires.Environments {
			if l := c.liveIn(r, s); l == nil || l.Sha != d.Sha {
				return gatePromotion, d
			}
		}
	}
	if !c.soakEnds(e, s, d, now).IsZero() {
		return gateSoaking, d
	}
	if approvalsNeeded(e, d) > 0 {
		return gateApproval, d
	}
	if !d.Rollback && d.BreakGlass == nil && windowClosed(e, now) {
		return gateWindow, d
	}
	l := sc.Lease
	if l.Holder != "" && (l.Holder != holder || l.Generation != gen) && now.Before(l.ExpiresAt.Add(c.h.skew)) {
		return gateLeased, d
	}
	return gateGoes, d
}

func (c *coRun) liveIn(env, s string) *authority.Live {
	if e := c.state[env]; e != nil && e.Scopes[s] != nil {
		return e.Scopes[s].Live
	}
	return nil
}

// liveLease reports whether l is held and not yet past its expiry and the skew margin.
func (c *coRun) liveLease(l authority.Lease) bool {
	return l.Holder != "" && c.h.clock.Now().Before(l.ExpiresAt.Add(c.h.skew))
}

// coEffect is what one step may change; everything else must stay as it was.
type coEffect struct {
	granted    map[string]int64           // scope -> the token the step granted
	freed      map[string]bool            // scopes whose lease the step may free
	renewed    map[string]bool            // scopes whose lease the step may extend
	live       map[string]*authority.Live // scope -> what the step makes live (sha, generation, token)
	ended      map[string]int64           // scope -> the intent the step gives an outcome of its own
	endedAs    string                     // that outcome: deployed or failed
	failed     map[string]int64           // scope -> the intent the step marks failed, staying pending
	retried    map[string]int64           // scope -> the failed intent the step lets try again
	entered    map[string]int64           // scope -> the intent the step adds
	stale      map[string]int64           // scope -> the intent the step records as superseded at once
	froze      map[string]int64           // scope -> the rollback that freezes it
	unfroze    map[string]bool            // scopes whose freeze the step lifts
	owner      map[string]int64           // scope -> the owner the step must leave (claims)
	claimed    map[string]int64           // scope -> a waiting intent the step marks claimed
	approved   map[string][]int64         // scope -> the pending intents the step approves
	brokeGlass map[string]int64           // scope -> the pending intent the step breaks the glass for
	dropped    bool                       // failed intents may leave (they have their outcome)
	supplant   bool                       // intents may leave as superseded, each with an event saying so
}

func newEffect() *coEffect {
	return &coEffect{granted: map[string]int64{}, freed: map[string]bool{}, renewed: map[string]bool{}, live: map[string]*authority.Live{},
		ended: map[string]int64{}, stale: map[string]int64{}, failed: map[string]int64{}, retried: map[string]int64{}, entered: map[string]int64{},
		froze: map[string]int64{}, unfroze: map[string]bool{}, owner: map[string]int64{}, claimed: map[string]int64{},
		approved: map[string][]int64{}, brokeGlass: map[string]int64{}}
}

// coKey names one accepted intent in one scope.
type coKey struct {
	env, scope string
	gen        int64
}

func (k coKey) String() string { return fmt.Sprintf("%s/%s generation %d", k.env, k.scope, k.gen) }

// end gives an intent its outcome: once.
func (c *coRun) end(k coKey, outcome string) {
	c.t.Helper()
	if was, ok := c.outcome[k]; ok {
		c.fail("%s ended as %s after it had ended as %s: every intent ends in exactly one outcome", k, outcome, was)
	}
	c.outcome[k] = outcome
}

// invariants checks, after every step, what holds whatever the step was, against what the step
// may change (eff).
func (c *coRun) invariants(env string, prev, next *authority.Env, eff *coEffect) {
	c.t.Helper()
	if next == nil {
		if prev != nil {
			c.fail("%s is gone", env)
		}
		return
	}
	if prev == nil {
		prev = &authority.Env{Name: env}
	}
	if next.Desired < prev.Desired {
		c.fail("desired went back from %d to %d", prev.Desired, next.Desired)
	}
	// The per-scope layout derives observed from the scopes on every read rather than keeping
	// it: a retried failure makes its generation unsettled again (design.md §9).
	if next.Observed < prev.Observed && !c.h.split || next.Observed > next.Desired {
		c.fail("observed %d after %d (desired %d): it never decreases and never passes desired", next.Observed, prev.Observed, next.Desired)
	}
	want := max(prev.Observed, settledUpTo(next))
	if c.h.split && next.Observed >= settledUpTo(next) {
		want = next.Observed // derived: at least what the intents' outcomes settle
	}
	if next.Observed != want {
		c.fail("observed %d; want %d: the highest generation up to which every intent has its outcome", next.Observed, want)
	}
	if next.EventSeq < prev.EventSeq {
		c.fail("event sequence went back from %d to %d", prev.EventSeq, next.EventSeq)
	}
	for i, ev := range next.Outbox {
		if !c.h.split && ((i > 0 && ev.Seq != next.Outbox[i-1].Seq+1) || ev.Seq > next.EventSeq) { // per document in the per-scope layout
			c.fail("outbox out of sequence at %d: event %d (newest %d)", i, ev.Seq, next.EventSeq)
		}
	}
	events := stepEvents(prev, next) // this step's
	if int64(len(events)) != next.EventSeq-prev.EventSeq {
		c.fail("%d events recorded but %d in the outbox", next.EventSeq-prev.EventSeq, len(events))
	}
	now := c.h.clock.Now()
	for _, s := range sortedKeys(prev.Scopes) {
		if next.Scopes[s] == nil {
			c.fail("scope %s disappeared", s)
		}
	}
	for _, s := range sortedKeys(next.Scopes) {
		before, after := prev.Scopes[s], next.Scopes[s]
		if before == nil {
			before = &authority.Scope{}
		}
		list := after.Entries()
		for i, r := range list {
			if r.Generation > next.Desired || (i > 0 && r.Generation <= list[i-1].Generation) {
				c.fail("%s: pending generations %v, desired %d: each a generation handed out, oldest first", s, gensOf(list), next.Desired)
			}
			if next.PolicyOrDefault() == authority.PolicyLatest && i < len(list)-1 && !r.Barrier {
				c.fail("%s: under latest, generation %d waits pending behind newer ones %v without being a barrier", s, r.Generation, gensOf(list))
			}
		}
		if len(list) > c.limit {
			c.fail("%s holds %d pending intents %v; the queue limit is %d", s, len(list), gensOf(list), c.limit)
		}
		// Owners.
		if want, ok := eff.owner[s]; ok && after.Owner != want {
			c.fail("%s: owner %d after the step; want %d", s, after.Owner, want)
		}
		if after.Owner < before.Owner || after.Owner > next.Desired {
			c.fail("%s: owner %d after %d (desired %d): owners never go back", s, after.Owner, before.Owner, next.Desired)
		}
		// Leases and tokens.
		bl, al := before.Lease, after.Lease
		switch {
		case al.Token != bl.Token:
			if tok, ok := eff.granted[s]; !ok || tok != al.Token {
				c.fail("%s: token moved from %d to %d without a grant of it", s, bl.Token, al.Token)
			}
			k := env + "/" + s
			if al.Token <= c.maxToken[k] {
				c.fail("%s: granted token %d, not above %d granted before: tokens strictly increase", s, al.Token, c.maxToken[k])
			}
			c.maxToken[k] = al.Token
			if bl.Holder != "" && (bl.Holder != al.Holder || bl.Generation != al.Generation) && now.Before(bl.ExpiresAt.Add(c.h.skew)) {
				c.fail("%s: granted to %s (generation %d) while %s held it for generation %d until %v (skew %v): two live grants",
					s, al.Holder, al.Generation, bl.Holder, bl.Generation, bl.ExpiresAt, c.h.skew)
			}
		case cmp.Equal(al, bl):
		case al.Holder == "" && eff.freed[s]:
		case eff.renewed[s] && al.Holder == bl.Holder && al.Generation == bl.Generation && al.Sha == bl.Sha:
		default:
			c.fail("%s: lease changed from %+v to %+v by a step without the right to", s, bl, al)
		}
		if _, ok := eff.granted[s]; ok && al.Token == bl.Token {
			c.fail("%s: a grant kept token %d", s, al.Token)
		}
		// What is live.
		if !cmp.Equal(before.Live, after.Live) {
			want := eff.live[s]
			if want == nil || after.Live == nil || after.Live.Sha != want.Sha || after.Live.Generation != want.Generation || after.Live.Token != want.Token {
				c.fail("%s: live changed from %+v to %+v; the step may make live only %+v (a fenced success, what its grant deployed)", s, before.Live, after.Live, want)
			}
			if before.Live != nil && after.Live.Generation < before.Live.Generation {
				c.fail("%s: live generation went back from %d to %d", s, before.Live.Generation, after.Live.Generation)
			}
			if before.Freeze != nil && after.Live.Generation != before.Freeze.Generation {
				c.fail("%s: generation %d deployed through the freeze of rollback %d", s, after.Live.Generation, before.Freeze.Generation)
			}
		} else if want := eff.live[s]; want != nil && (after.Live == nil || after.Live.Sha != want.Sha || after.Live.Generation != want.Generation) {
			c.fail("%s: live %+v; the step should have made %+v live", s, after.Live, want)
		}
		// Freezes.
		switch {
		case eff.froze[s] > 0:
			if f := after.Freeze; f == nil || f.Generation != eff.froze[s] {
				c.fail("%s: freeze %+v after rollback %d", s, f, eff.froze[s])
			}
		case eff.unfroze[s]:
			if after.Freeze != nil {
				c.fail("%s: still frozen after the unfreeze: %+v", s, after.Freeze)
			}
		case !cmp.Equal(before.Freeze, after.Freeze):
			c.fail("%s: freeze changed from %+v to %+v by a step that is neither a rollback nor an unfreeze", s, before.Freeze, after.Freeze)
		}
		c.outcomes(env, s, before, after, eff, events)
	}
	if listed := slices.Contains(c.h.pending(), env); listed != next.HasPending() {
		c.fail("the pending index lists %s: %v; it has pending work: %v", env, listed, next.HasPending())
	}
}

// outcomes follows each pending intent of one scope through the step: one that leaves the pending
// intents, or fails while it stays (blocking), gets its outcome, once; none comes back.
func (c *coRun) outcomes(env, s string, before, after *authority.Scope, eff *coEffect, events []authority.Event) {
	c.t.Helper()
	was, now := map[int64]*authority.Ref{}, map[int64]*authority.Ref{}
	for _, r := range before.Entries() {
		was[r.Generation] = r
	}
	for _, r := range after.Entries() {
		now[r.Generation] = r
	}
	supersededEvent := func(gen int64) bool {
		return slices.ContainsFunc(events, func(ev authority.Event) bool {
			return ev.Kind == authority.EventSuperseded && ev.Scope == s && ev.Generation == gen
		})
	}
	for _, ev := range events {
		if k := (coKey{env, s, ev.Generation}); ev.Kind == authority.EventSuperseded && ev.Scope == s {
			if o, ok := c.outcome[k]; ok {
				c.fail("%s recorded as superseded (%q) after it had ended as %s", k, ev.Message, o)
			}
		}
	}
	if gen := eff.stale[s]; gen > 0 {
		if !supersededEvent(gen) {
			c.fail("%s/%s generation %d held back as out of order without an event saying so", env, s, gen)
		}
		c.end(coKey{env, s, gen}, "superseded")
	}
	for _, gen := range slices.Sorted(maps.Keys(was)) {
		r, a, k := was[gen], now[gen], coKey{env, s, gen}
		switch {
		case a != nil && !r.Failed && a.Failed:
			if eff.failed[s] != gen {
				c.fail("%s marked failed by a step that did not fail it", k)
			}
			c.end(k, "failed")
		case a != nil && r.Failed && !a.Failed:
			if eff.retried[s] != gen {
				c.fail("%s no longer failed, but nobody decided to retry it", k)
			}
			delete(c.outcome, k) // a decision to try again: it has no outcome until it ends again
		case a != nil:
			if a.Sha != r.Sha || a.IntentID != r.IntentID || a.Barrier != r.Barrier || a.Rollback != r.Rollback {
				c.fail("%s changed while pending: %+v -> %+v", k, r, a)
			}
			c.gatesChanged(k, r, a, eff)
		case r.Failed:
			if !eff.dropped {
				c.fail("%s (failed) left the pending intents at a step that cannot drop it", k)
			}
		case eff.ended[s] == gen:
			c.end(k, eff.endedAs)
		case eff.supplant:
			if !supersededEvent(gen) {
				c.fail("%s left the pending intents without an event saying it was superseded", k)
			}
			c.end(k, "superseded")
		default:
			c.fail("%s left the pending intents at a step that cannot end it", k)
		}
	}
	for _, gen := range slices.Sorted(maps.Keys(now)) {
		if was[gen] != nil {
			continue
		}
		k := coKey{env, s, gen}
		if eff.entered[s] != gen {
			c.fail("%s appeared among the pending intents at a step that did not accept it", k)
		}
		if o, ok := c.outcome[k]; ok {
			c.fail("%s is pending again after it ended as %s", k, o)
		}
	}
	if gen := eff.ended[s]; gen > 0 && now[gen] != nil {
		c.fail("%s/%s generation %d should have ended as %s but is still pending", env, s, gen, eff.endedAs)
	}
	if gen := eff.claimed[s]; gen > 0 {
		if r := now[gen]; r == nil || !r.Claimed {
			c.fail("%s/%s generation %d waits unclaimed after its pass claimed it: %+v", env, s, gen, r)
		}
	}
}

// stepEvents returns the events next holds in its outbox that prev did not number yet: in the
// single document those above prev's event counter, in the per-scope layout those above it in
// each document's own stream (Env.Streams), a write leaving its own events in its outbox.
func stepEvents(prev, next *authority.Env) []authority.Event {
	var out []authority.Event
	if len(next.Streams) == 0 {
		for _, ev := range next.Outbox {
			if ev.Seq > prev.EventSeq {
				out = append(out, ev)
			}
		}
		return out
	}
	for _, s := range next.Streams {
		var was int64
		for _, p := range prev.Streams {
			if p.Scope == s.Scope {
				was = p.Newest
			}
		}
		for _, ev := range s.Outbox {
			if ev.Seq > was {
				out = append(out, ev)
			}
		}
	}
	return out
}
