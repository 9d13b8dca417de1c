package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Status is one environment's status as people see it, built once from the store's state and the
// clock (NewStatus) and rendered by every view: the CLI's table (StatusText), the Markdown of job
// summaries, PR comments and check runs (StatusMarkdown), and the App's status page. Its strings
// are as stored, not escaped: each rendering escapes them for its medium.
type Status struct {
	Name     string
	Policy   authority.Policy // never empty: PolicyLatest when none was set
	Observed int64
	Desired  int64
	// Settled: every accepted generation has its outcome (observed reached desired).
	Settled bool
	// AlertAfter is the environment's alert-after, what each row's Convergence is judged against;
	// zero: none.
	AlertAfter time.Duration
	Rows       []Row // one per scope, by name
}

// Row is one scope's status: what is live, the work pending with each intent's place, who owns
// the scope, its lease and its last terminal error.
type Row struct {
	Scope string
	Live  *Live // nil: nothing deployed yet
	// Pending is the scope's pending intents, oldest first: the head (Position 1), then those that
	// wait behind it. Empty when nothing is pending.
	Pending []Entry
	// Blocked is set when the head failed terminally and blocks the scope until someone decides
	// (latestwins skip or retry): the words a pass waiting behind it is told.
	Blocked string
	// Frozen is set while a rollback freezes the scope: who rolled back to what, and why. Nothing but
	// the rollback deploys until someone unfreezes it.
	Frozen string
	// Promotion is set while the head waits at its deploy gate for its commit in an environment this
	// one requires, for its soak time there, for approvals or for a change window: the words its
	// deploy gate says (authority.WaitText), and for promotion the wait itself (PromotionWait). A
	// promotion or a soak is only known when the status was built with the required environments'
	// states (NewStatusWith).
	Promotion     string
	PromotionWait *authority.PromotionWait
	// Approval is set while the head waits for approvals by people: the words its deploy gate
	// says, with who approved so far, and the wait itself (ApprovalWait).
	Approval     string
	ApprovalWait *authority.ApprovalWait
	// Gated: the head waits at its gate for a soak, approvals or a change window, which break-glass
	// waives (authority.Reason.Lasting). Known for a soak only with the required environments'
	// states, as Promotion.
	Gated bool
	// Warning is set while the scope's newest deployment status came from a deployment latestwins
	// never approved (authority.Unapproved): it was not counted as live.
	Warning string
	Owner   int64 // generation of the newest pass that claimed the scope; 0: none
	Lease   Lease
	Failure *authority.Failure // the last terminal error, until a deploy succeeds
	// Convergence is whether the scope caught up with its newest accepted commit, and since when it
	// waits (authority.Judge against the environment's alert-after).
	Convergence authority.Lag
	// Late is set while the scope is behind or stuck: how long it has waited against alert-after,
	// and what it waits for ("behind 42m (alert after 30m): a pass is deploying bbbbbbb ...").
	Late string
}

// Live is what is deployed in a scope.
type Live struct {
	Sha        string
	Short      string // ShortSha(Sha)
	Generation int64
	At         time.Time
	Ago        string // Ago(now, At)
}

// Entry is one pending intent of a scope and its place.
type Entry struct {
	Position   int // 1: the head, the one that goes next
	Generation int64
	Sha        string
	Short      string // ShortSha(Sha)
	Attempts   int    // failed attempts so far
	Barrier    bool   // newer intents wait behind it instead of superseding it (policy latest)
	Claimed    bool   // its pass claimed it while it waited
	Failed     bool   // it ended with a terminal failure; at the head it blocks the scope
	Rollback   bool   // an explicit rollback asked for it
	// ApprovedBy is who approved it (the approvals gate), once each, in order.
	ApprovedBy []string
	// Ahead is how many intents go before it (Position-1).
	Ahead int
	// Wait is what its pass is told when it asks for the lease while it waits (authority.WaitText):
	// "queued: N ahead of this commit", or under policy latest "waiting for barrier SHA"; "" for
	// the head. When the head blocks, Row.Blocked says so once for all of them.
	Wait string
}

// Lease is a scope's lease as seen at the time the status was built.
type Lease struct {
	Holder     string // "": free
	Purpose    string
	Generation int64
	Token      int64
	ExpiresAt  time.Time
	// Held: it has a holder and has not expired.
	Held bool
	// Left is how long it is still held, to the second; for an expired lease, how long ago it
	// expired (a positive duration).
	Left time.Duration
}

// Head is the scope's next intent, nil when nothing is pending.
func (r Row) Head() *Entry {
	if len(r.Pending) == 0 {
		return nil
	}
	return &r.Pending[0]
}

// Waiting is the pending intents behind the head, oldest first.
func (r Row) Waiting() []Entry {
	if len(r.Pending) < 2 {
		return nil
	}
	return r.Pending[1:]
}

// BlockingFailure is the terminal error of the head that blocks the scope (Blocked), nil when
// nothing blocks or the error is not known.
func (r Row) BlockingFailure() *authority.Failure {
	if h := r.Head(); r.Blocked != "" && r.Failure != nil && r.Failure.Generation == h.Generation {
		return r.Failure
	}
	return nil
}

// State is "settled" or "reconciling".
func (s *Status) State() string {
	if s.Settled {
		return "settled"
	}
	return "reconciling"
}

// PolicyNote names the environment's policy when it is not the default (latest), "" otherwise:
// the renderings mention the policy only where it changes what the table means.
func (s *Status) PolicyNote() string {
	if s.Policy == authority.PolicyLatest {
		return ""
	}
	return string(s.Policy)
}

// NewStatus builds an environment's status from its state as read from the store and now. Without
// the states of the environments it requires, no row says whether its head waits for them: see
// NewStatusWith.
func NewStatus(e *authority.Env, now time.Time) *Status { return NewStatusWith(e, now, nil) }

// NewStatusWith is NewStatus that also says, on each row whose head waits for its commit in an
// environment e requires, what it waits for, from required: the required environments' states as
// read from the store, by name (a missing one has nothing live). required nil: not known, nothing
// is said. Every place and wait is the deploy gate's own decision (authority.Hold), worded.
func NewStatusWith(e *authority.Env, now time.Time, required map[string]*authority.Env) *Status {
	st := &Status{Name: e.Name, Policy: e.PolicyOrDefault(), Observed: e.Observed, Desired: e.Desired, Settled: e.Observed >= e.Desired,
		AlertAfter: e.AlertAfter}
	for _, n := range slices.Sorted(maps.Keys(e.Scopes)) {
		v := e.View(n, required)
		if required == nil {
			v.Requires = nil // what is live where it must go first is not known: nothing is said of it
		}
		r := newRow(v, now)
		r.Convergence = authority.Judge(v.State, now, e.AlertAfter)
		r.Late = r.lateText(e.Name)
		st.Rows = append(st.Rows, r)
	}
	return st
}

// promotionWait is what the head of the scope of v waits for in the environments its environment
// requires, nil and "" when nothing: the deploy gate's decision for it (authority.Hold).
func promotionWait(v authority.View, now time.Time) (*authority.PromotionWait, string) {
	if (v.Requires == nil && v.Gates == nil) || v.State == nil || v.State.Mailbox == nil || v.State.Mailbox.Failed {
		return nil, ""
	}
	switch d := authority.Hold(v, v.State.Mailbox.Generation, now, 0); {
	case d.Reason == authority.ReasonPromotion:
		return d.Promotion, d.Text()
	case d.Reason == authority.ReasonSoaking || d.Reason == authority.ReasonWindow:
		// A soak or a change window: said where the promotion wait is, in the gate's words (a wait
		// for approvals has its own, Approval, with who approved).
		return nil, d.Text()
	}
	return nil, ""
}

// newRow is the row of the scope of v: each pending intent with its place and what its deploy gate
// would tell its pass now (authority.Hold), the freeze, the block and the promotion wait.
func newRow(v authority.View, now time.Time) Row {
	s := v.State
	r := Row{Scope: v.Scope, Owner: s.Owner, Failure: s.Failure, Lease: newLease(s.Lease, now)}
	if l := s.Live; l != nil {
		r.Live = &Live{Sha: l.Sha, Short: ShortSha(l.Sha), Generation: l.Generation, At: l.At, Ago: Ago(now, l.At)}
	}
	for i, ref := range s.Entries() {
		en := Entry{Position: i + 1, Generation: ref.Generation, Sha: ref.Sha, Short: ShortSha(ref.Sha), Attempts: ref.Attempt,
			Barrier: ref.Barrier, Claimed: ref.Claimed, Failed: ref.Failed, Rollback: ref.Rollback, Ahead: i,
			ApprovedBy: authority.ApprovalsOf(ref)}
		d := authority.Hold(v, ref.Generation, now, 0)
		switch {
		case i == 0:
			// The head's freeze, block and promotion wait are the row's (Frozen, Blocked, Promotion).
		case d.Reason == authority.ReasonBlocked:
			en.Wait = d.Place() // Row.Blocked says once for all of them what blocks
		default:
			en.Wait = d.Text()
		}
		r.Pending = append(r.Pending, en)
	}
	if h := s.Mailbox; h != nil && h.Failed {
		// A failed head stays only where nothing may pass it: it blocks what waits, or comes next.
		r.Blocked = authority.Verdict{Reason: authority.ReasonBlocked, HeadGeneration: h.Generation, HeadSha: h.Sha}.Text()
	}
	if f := s.Freeze; f != nil {
		r.Frozen = FrozenText(f)
	}
	r.PromotionWait, r.Promotion = promotionWait(v, now)
	r.ApprovalWait, r.Approval = approvalWait(v, now)
	if h := s.Mailbox; h != nil && !h.Failed && v.Gates != nil {
		r.Gated = authority.Hold(v, h.Generation, now, 0).Reason.Lasting()
	}
	if u := s.Unapproved; u != nil {
		r.Warning = u.Text()
	}
	return r
}

func newLease(l authority.Lease, now time.Time) Lease {
	out := Lease{Holder: l.Holder, Purpose: l.Purpose, Generation: l.Generation, Token: l.Token, ExpiresAt: l.ExpiresAt}
	if l.Holder == "" {
		return out
	}
	left := l.ExpiresAt.Sub(now)
	out.Held = left > 0
	out.Left = left.Round(time.Second)
	if !out.Held {
		out.Left = -out.Left
	}
	return out
}

// cellStyle is how a table rendering writes a row's pending cell: its commits, its word for a
// generation, and its escaping of other text.
type cellStyle struct {
	sha  func(string) string
	gen  string
	text func(string) string
	err  func(message string) string // a failure's message, cut to fit
}

var (
	textCell     = cellStyle{sha: Escape, gen: "gen", text: Escape, err: func(m string) string { return "error: " + oneLine(m, 48) }}
	markdownCell = cellStyle{sha: code, gen: "generation", text: cell, err: func(m string) string { return "**error**: " + cell(oneLine(m, 120)) }}
)

// pendingCell is the scope's pending work in one cell of a plain-text or Markdown table: the head
// with its failed attempts, whether it is a barrier and whether it blocks (with the failure's
// message), then the intents waiting behind it with their places; "-" when nothing is pending.
func (r Row) pendingCell(c cellStyle) string {
	h := r.Head()
	if h == nil {
		return "-"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s %d)", c.sha(h.Short), c.gen, h.Generation)
	if h.Attempts > 0 {
		fmt.Fprintf(&b, ", %d failed", h.Attempts)
	}
	if h.Rollback {
		b.WriteString(", rollback")
	} else if h.Barrier {
		b.WriteString(", barrier")
	}
	if r.Frozen != "" {
		b.WriteString(", " + c.text(r.Frozen))
	}
	if r.Promotion != "" {
		b.WriteString(", " + c.text(r.Promotion))
	}
	if r.Approval != "" {
		b.WriteString(", " + c.text(r.Approval))
	} else if len(h.ApprovedBy) > 0 {
		b.WriteString(", approved by " + c.text(strings.Join(h.ApprovedBy, ", ")))
	}
	if r.Blocked != "" {
		b.WriteString(", " + c.text(r.Blocked))
		if f := r.BlockingFailure(); f != nil {
			b.WriteString("; " + c.err(f.Message))
		}
	}
	for i, en := range r.Waiting() {
		if i == 0 {
			b.WriteString("; waiting: ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d. %s (%s %d", en.Position, c.sha(en.Short), c.gen, en.Generation)
		if en.Barrier {
			b.WriteString(", barrier")
		}
		fmt.Fprintf(&b, ", %s)", c.text(en.Wait))
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "someone"
	}
	return s
}
