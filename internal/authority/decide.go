package authority

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Reason says whether a pass may enter a phase of a scope and, when it may not, why. It is the one
// decision every door renders: the deploy gate, the deployment protection rule, deployment
// statuses, the API's 409 body, comments, check runs and the status rows all ask Evaluate or Hold
// and word what they are told, never a rule of their own.
type Reason uint8

// Reasons, in the order the evaluator asks: a pass that lost its authority is told so before
// anything it might wait for, and the lease is asked last.
const (
	// ReasonGo: the pass may enter the phase.
	ReasonGo Reason = iota
	// ReasonSuperseded: a newer intent or pass has the scope; the pass must stop.
	ReasonSuperseded
	// ReasonDone: nothing newer, but the pass's work in the scope already ended.
	ReasonDone
	// ReasonNotClaimed: the pass never claimed the scope.
	ReasonNotClaimed
	// ReasonFrozen: a rollback froze the scope; nothing but the rollback deploys until Unfreeze.
	ReasonFrozen
	// ReasonBlocked: the head failed terminally and blocks what waits behind it until someone
	// decides (Decide).
	ReasonBlocked
	// ReasonBarrier: a barrier ahead goes first (policy latest).
	ReasonBarrier
	// ReasonQueued: older intents go first (policy queue).
	ReasonQueued
	// ReasonPromotion: the commit is not live yet in an environment this one requires.
	ReasonPromotion
	// ReasonSoaking: the commit is live in a required environment, but not for the soak time yet.
	ReasonSoaking
	// ReasonApproval: the commit waits for approvals by people.
	ReasonApproval
	// ReasonWindow: the environment's change window is closed.
	ReasonWindow
	// ReasonLocked: another pass holds the scope's lease.
	ReasonLocked
)

var reasonNames = [...]string{
	ReasonGo:         "go",
	ReasonSuperseded: "superseded",
	ReasonDone:       "done",
	ReasonNotClaimed: "not-claimed",
	ReasonFrozen:     "frozen",
	ReasonBlocked:    "blocked",
	ReasonBarrier:    "barrier",
	ReasonQueued:     "queued",
	ReasonPromotion:  "promotion",
	ReasonSoaking:    "soaking",
	ReasonApproval:   "approval",
	ReasonWindow:     "window",
	ReasonLocked:     "locked",
}

// String is the reason's stable name, as the API and the metrics spell it.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// MarshalText spells the reason by its name.
func (r Reason) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a reason's name; an unknown one is an error.
func (r *Reason) UnmarshalText(b []byte) error {
	if i := slices.Index(reasonNames[:], string(b)); i >= 0 {
		*r = Reason(i)
		return nil
	}
	return fmt.Errorf("unknown reason %q", b)
}

// gated reports whether the reason is one of the gates that hold a commit at its deploy gate for
// its own sake (promotion, soak, approvals, windows), whoever holds the lease meanwhile.
func (r Reason) gated() bool {
	return r == ReasonPromotion || r == ReasonSoaking || r == ReasonApproval || r == ReasonWindow
}

// Lasting reports whether the reason holds a commit for its own sake for as long as it takes
// (soak time, approvals, a closed change window): longer, often, than a pass should wait. A pass
// held so ends with the outcome held, and the recovery sweep starts its work again once the
// evaluator lets it go.
func (r Reason) Lasting() bool {
	return r == ReasonSoaking || r == ReasonApproval || r == ReasonWindow
}

// Stops reports whether the reason ends the pass's work in the scope (it lost its authority, or has
// nothing left to do), rather than making it wait.
func (r Reason) Stops() bool {
	return r == ReasonSuperseded || r == ReasonDone || r == ReasonNotClaimed
}

// View is what the evaluator reads to decide about one scope: the scope's own state, the
// environment's policy and requirements, and what is live in the same scope of each required
// environment. It is narrow on purpose: how the state is stored can change under it.
type View struct {
	Environment string
	Scope       string
	Policy      Policy // empty: PolicyLatest
	Requires    *Requirements
	Gates       *Gates // soak, approvals and change windows; nil: none
	State       *Scope // nil: the environment has no such scope
	// Required is what is live in this scope of each environment Requires names; a missing or nil
	// entry: nothing is.
	Required map[string]*Live
	// Descends holds the promotion comparer's answers, by descendKey, of whether a commit live in a
	// required environment descends from the one waiting. Asked: the comparer was asked (the
	// gate); a renderer's view was built without one, and its words say that the gate asks.
	Descends map[string]bool
	Asked    bool
}

// Question is what a pass asks the evaluator: may the pass at Generation enter its phase now, and,
// with Lease, take the scope's lease as Holder.
type Question struct {
	Generation int64
	Lease      bool
	Holder     string
	Now        time.Time
	Skew       time.Duration // the lease expiry's margin
}

// Verdict is the evaluator's answer: the reason, and what the pass is stopped by or waits for.
// The fields that matter depend on the reason; Err and Text word it.
type Verdict struct {
	Reason      Reason
	Environment string
	Scope       string
	Generation  int64 // the pass asked about

	// By and BySha: the newer generation that has the scope (ReasonSuperseded).
	By    int64
	BySha string

	// Ahead: how many pending intents go before the pass's own; HeadGeneration and HeadSha the
	// head's; After the generation right ahead of the pass's own, which it waits for.
	Ahead          int
	HeadGeneration int64
	HeadSha        string
	After          int64
	// Barrier and BarrierGeneration: the nearest barrier ahead (ReasonBarrier).
	Barrier           string
	BarrierGeneration int64
	// Freeze is the freeze that holds the pass (ReasonFrozen).
	Freeze *Freeze
	// Promotion is what the pass waits for in a required environment (ReasonPromotion).
	Promotion *PromotionWait
	// Soak, Approval and Window are what the pass waits for at the gates (ReasonSoaking,
	// ReasonApproval, ReasonWindow).
	Soak     *SoakWait
	Approval *ApprovalWait
	Window   *WindowWait
	// Lease is the scope's lease as it stands (ReasonLocked, and whoever holds it while a pass waits).
	Lease Lease
	// RetryAfter is how soon to ask again (whole seconds, at least one) when the pass waits.
	RetryAfter time.Duration
	// Until is when a soak or a closed window ends by itself (ReasonSoaking, ReasonWindow); zero
	// for what ends only when someone acts or something else happens first.
	Until time.Time
}

// Go reports whether the pass may enter its phase.
func (v Verdict) Go() bool { return v.Reason == ReasonGo }

// waitsFor is what the pass waits for or is stopped by, in the words of the reason: the same
// verdict for the same pass asked again says the same, so its refusal is recorded once
// (Env.recordRefusal), and a new one (a new holder, another barrier, the pass right ahead gone) is
// recorded anew.
func (v Verdict) waitsFor() string {
	switch v.Reason {
	case ReasonSuperseded:
		return strconv.FormatInt(v.By, 10)
	case ReasonFrozen:
		return strconv.FormatInt(v.Freeze.Generation, 10)
	case ReasonBlocked:
		return strconv.FormatInt(v.HeadGeneration, 10)
	case ReasonBarrier:
		return strconv.FormatInt(v.BarrierGeneration, 10)
	case ReasonQueued:
		return strconv.FormatInt(v.After, 10)
	case ReasonPromotion:
		return v.Promotion.Environment
	case ReasonSoaking:
		return v.Soak.Environment
	case ReasonApproval:
		return strconv.Itoa(v.Approval.Need)
	case ReasonWindow:
		return strconv.FormatInt(v.Window.Opens.Unix(), 10)
	case ReasonLocked:
		return v.Lease.Holder + "/" + strconv.FormatInt(v.Lease.Token, 10)
	}
	return ""
}

// Err is the verdict as the error the pass's gate returns: nil for ReasonGo, a *SupersededError
// when the pass must stop, a *HeldError when it waits.
func (v Verdict) Err() error {
	switch v.Reason {
	case ReasonGo:
		return nil
	case ReasonSuperseded:
		return &SupersededError{Environment: v.Environment, Scope: v.Scope, Generation: v.Generation, By: v.By, BySha: v.BySha}
	case ReasonDone:
		return &SupersededError{Environment: v.Environment, Scope: v.Scope, Generation: v.Generation, Done: true}
	case ReasonNotClaimed:
		return &SupersededError{Environment: v.Environment, Scope: v.Scope, Generation: v.Generation, BySha: v.BySha}
	}
	return v.held()
}

func (v Verdict) held() *HeldError {
	h := &HeldError{Reason: v.Reason, Resource: resourceName(v.Environment, v.Scope), Holder: v.Lease.Holder, Purpose: v.Lease.Purpose,
		Generation: v.HeadGeneration, Ahead: v.Ahead, HeadSha: v.HeadSha, RetryAfter: v.RetryAfter, Until: v.Until}
	switch v.Reason {
	case ReasonFrozen:
		f := *v.Freeze
		h.Frozen, h.Generation, h.HeadSha = &f, f.Generation, f.Sha
	case ReasonBlocked:
		h.Blocked = true
	case ReasonBarrier:
		h.Barrier = v.Barrier
	case ReasonPromotion:
		p := *v.Promotion
		h.Promotion = &p
	case ReasonSoaking:
		w := *v.Soak
		h.Soak = &w
	case ReasonApproval:
		w := *v.Approval
		h.Approval = &w
	case ReasonWindow:
		w := *v.Window
		h.Window = &w
	case ReasonLocked:
		h.Generation, h.Ahead, h.HeadSha = v.Lease.Generation, 0, ""
	}
	if v.Lease.Holder != "" && !v.Lease.ExpiresAt.IsZero() && !v.Reason.gated() {
		h.ExpiresAt = v.Lease.ExpiresAt
	}
	return h
}

// Text says in a few words what the pass waits for or why it stops: the publications' wording.
func (v Verdict) Text() string {
	switch v.Reason {
	case ReasonGo:
		return ""
	case ReasonSuperseded, ReasonDone, ReasonNotClaimed:
		return supersededBy(v.Err().(*SupersededError))
	case ReasonLocked:
		return fmt.Sprintf("%s is locked by %s (%s, generation %d)", v.Scope, v.Lease.Holder, v.Lease.Purpose, v.Lease.Generation)
	}
	return waitText(v.held())
}

// Place says where a waiting intent stands in its scope, whatever else holds it: "queued: N ahead
// of this commit", or under policy latest "waiting for barrier SHA"; "" for the head.
func (v Verdict) Place() string {
	switch {
	case v.Ahead == 0:
		return ""
	case v.Barrier != "":
		return waitText(&HeldError{Reason: ReasonBarrier, Barrier: v.Barrier})
	}
	return waitText(&HeldError{Reason: ReasonQueued, Ahead: v.Ahead})
}

// Evaluate decides whether the pass at q.Generation may enter its phase in the scope of v: it
// must own the scope with nothing newer accepted (the authority check); with q.Lease it must also
// be at the head of the scope's pending work (not queued, not behind a barrier or a blocking
// failure), not held by a freeze, live in every required environment, and find the lease free.
// It is pure: it reads v and changes nothing.
func Evaluate(v View, q Question) Verdict {
	out := Verdict{Environment: v.Environment, Scope: v.Scope, Generation: q.Generation}
	if r, by, bySha := authorizeScope(v, q.Generation); r != ReasonGo {
		out.Reason, out.By, out.BySha = r, by, bySha
		return out
	}
	if !q.Lease {
		return out
	}
	sc := v.State
	if held := hold(v, q.Generation, sc.passRef(q.Generation), q.Now, q.Skew); held.Reason != ReasonGo {
		return held
	}
	l := &sc.Lease
	if !leaseFree(l, q.Holder, q.Generation, q.Now, q.Skew) {
		out.Reason, out.Lease = ReasonLocked, *l
		out.RetryAfter = heldError("", l, q.Now, q.Skew).RetryAfter
		return out
	}
	return out
}

// Hold says what holds the pending intent at generation gen of the scope of v at its deploy gate
// (as if its pass asked now, with the scope claimed): a freeze, older intents ahead, a barrier, a
// blocking failure, or its commit not live in a required environment. ReasonGo: nothing does,
// though the lease may still be held (Evaluate asks that). ReasonDone: nothing is pending at gen.
func Hold(v View, gen int64, now time.Time, skew time.Duration) Verdict {
	if v.State == nil || v.State.position(gen) < 0 {
		return Verdict{Reason: ReasonDone, Environment: v.Environment, Scope: v.Scope, Generation: gen}
	}
	return hold(v, gen, v.State.Entries()[v.State.position(gen)], now, skew)
}

// hold is Hold for the pass at gen deploying ref: its own pending intent, or the head it took over.
func hold(v View, gen int64, ref *Ref, now time.Time, skew time.Duration) Verdict {
	sc := v.State
	out := Verdict{Environment: v.Environment, Scope: v.Scope, Generation: gen, RetryAfter: queueRetry}
	pos := sc.position(gen)
	entries := sc.Entries()
	if pos > 0 {
		head := entries[0]
		out.Ahead, out.HeadGeneration, out.HeadSha, out.After = pos, head.Generation, head.Sha, entries[pos-1].Generation
		if v.Policy != PolicyQueue {
			// Under latest only barriers keep anything waiting: the nearest one ahead is what it waits for.
			for _, r := range entries[:pos] {
				if r.Barrier {
					out.Barrier, out.BarrierGeneration = r.Sha, r.Generation
				}
			}
		}
	}
	if liveLease(&sc.Lease, now, skew) {
		out.Lease = sc.Lease
		out.RetryAfter = min(queueRetry, heldError("", &sc.Lease, now, skew).RetryAfter)
	}
	switch {
	case frozenFor(sc, gen):
		f := *sc.Freeze
		out.Reason, out.Freeze = ReasonFrozen, &f
		out.HeadGeneration, out.HeadSha = f.Generation, f.Sha
		return out
	case pos > 0 && entries[0].Failed:
		out.Reason = ReasonBlocked
		return out
	case pos > 0 && out.Barrier != "":
		out.Reason = ReasonBarrier
		return out
	case pos > 0:
		out.Reason = ReasonQueued
		return out
	}
	if w := promotionWait(v, ref); w != nil {
		return Verdict{Reason: ReasonPromotion, Environment: v.Environment, Scope: v.Scope, Generation: gen,
			HeadGeneration: ref.Generation, HeadSha: ref.Sha, Promotion: w, RetryAfter: promotionRetry}
	}
	if ref == nil || ref.Rollback {
		// A rollback is the way back from a bad deploy: no soak, approval or window holds it.
		return Verdict{Reason: ReasonGo, Environment: v.Environment, Scope: v.Scope, Generation: gen}
	}
	if ref.BreakGlass != nil {
		// Someone broke the glass for this commit: its soak, approvals and window are waived.
		return Verdict{Reason: ReasonGo, Environment: v.Environment, Scope: v.Scope, Generation: gen}
	}
	gated := Verdict{Environment: v.Environment, Scope: v.Scope, Generation: gen, HeadGeneration: ref.Generation, HeadSha: ref.Sha}
	if w := soakWait(v, ref, now); w != nil {
		d := w.retryAfter(now)
		gated.Reason, gated.Soak, gated.RetryAfter, gated.Until = ReasonSoaking, w, d, now.Add(d)
		return gated
	}
	if w := approvalWait(v, ref); w != nil {
		gated.Reason, gated.Approval, gated.RetryAfter = ReasonApproval, w, approvalRetry
		return gated
	}
	if w := windowWait(v, ref, now); w != nil {
		// It ends by itself when the window opens; one that does not open within the search is not
		// said to end (Until zero).
		gated.Reason, gated.Window, gated.RetryAfter, gated.Until = ReasonWindow, w, w.retryAfter(now), w.Opens
		return gated
	}
	return Verdict{Reason: ReasonGo, Environment: v.Environment, Scope: v.Scope, Generation: gen}
}

// promotionWait says what the pass of ref waits for in a required environment; nil: every
// requirement is met. A rollback is never held: it is the way back from a bad deploy, whatever
// the other environments run. Every required environment must have the commit (or, with
// Ancestor, a descendant the comparer vouched for): the first that lacks it is named.
func promotionWait(v View, ref *Ref) *PromotionWait {
	if v.Requires == nil || ref == nil || ref.Rollback {
		return nil
	}
	for _, r := range v.Requires.Environments {
		live := v.Required[r]
		if live != nil && (live.Sha == ref.Sha || (v.Requires.Ancestor && v.Descends[descendKey(ref.Sha, live.Sha)])) {
			continue
		}
		w := &PromotionWait{Environment: r, Sha: ref.Sha, Ancestor: v.Requires.Ancestor, Unasked: !v.Asked}
		if live != nil {
			w.Live = live.Sha
		}
		return w
	}
	return nil
}

// authorizeScope is the authority check: the pass at gen owns the scope and nothing newer was
// accepted. It returns ReasonGo, or why not with the newer generation and its commit.
func authorizeScope(v View, gen int64) (Reason, int64, string) {
	sc := v.State
	if sc == nil {
		return ReasonNotClaimed, 0, ""
	}
	list, pos := sc.Entries(), sc.position(gen)
	switch {
	case pos > 0 && list[pos].Failed, pos <= 0 && len(list) > 0 && list[0].Failed:
		// Its own intent failed terminally, or the head it took over did: it blocks, and the pass's
		// work there ended.
		return ReasonDone, 0, ""
	case pos > 0 && !list[pos].Claimed:
		return ReasonNotClaimed, 0, "" // never claimed by this pass
	case pos > 0:
		return ReasonGo, 0, "" // its own intent, waiting: it may work, and takes the lease once at the head (hold)
	case pos < 0 && len(list) > 0 && list[len(list)-1].Generation > gen && (sc.Owner != gen || list[0].Generation > gen):
		// Newer intents supersede the pass, unless they wait behind the head it owns (it took the
		// head over): then it deploys the head, as the queue or the barrier says.
		newest := list[len(list)-1]
		if v.Policy == PolicyQueue && gen < list[0].Generation {
			return ReasonDone, 0, ""
		}
		return ReasonSuperseded, newest.Generation, newest.Sha
	}
	if m := sc.Mailbox; m != nil && m.Generation > gen {
		return ReasonSuperseded, m.Generation, m.Sha
	}
	if sc.Owner == gen && sc.Mailbox == nil {
		// The pass's work here already ended (deployed, failed terminally, withdrawn): nothing may start.
		return ReasonDone, 0, ""
	}
	if sc.Owner != gen {
		sha := ""
		if sc.Mailbox != nil {
			sha = sc.Mailbox.Sha
		} else if sc.Live != nil && sc.Live.Generation == sc.Owner {
			sha = sc.Live.Sha
		}
		if sc.Owner < gen {
			return ReasonNotClaimed, 0, sha // never claimed by this pass
		}
		return ReasonSuperseded, sc.Owner, sha
	}
	return ReasonGo, 0, ""
}

// View is the evaluator's view of one scope of e, for a renderer that read the required
// environments itself (required, by name; a missing or nil one has nothing live). No comparer is
// asked there: where a descendant would do, the words say that the gate asks.
func (e *Env) View(scope string, requiredEnvs map[string]*Env) View {
	return e.view(scope, &required{envs: requiredEnvs, descends: map[string]bool{}}, false)
}

// view is the evaluator's view of one scope of e with what the gate read of the environments e
// requires (req; nil: nothing was read, so nothing counts as live there).
func (e *Env) view(scope string, req *required, asked bool) View {
	v := View{Environment: e.Name, Scope: scope, Policy: e.policy(), Requires: e.Requires, Gates: e.Gates, State: e.Scopes[scope], Asked: asked}
	if e.Requires != nil {
		v.Required = map[string]*Live{}
		for _, r := range e.Requires.Environments {
			if req == nil {
				continue
			}
			if re := req.envs[r]; re != nil && re.Scopes[scope] != nil {
				v.Required[r] = re.Scopes[scope].Live
			}
		}
		if req != nil {
			v.Descends = req.descends
		}
	}
	return v
}
