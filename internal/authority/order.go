package authority

import (
	"context"
	"fmt"
	"time"
)

// MaxOrderSkew is how far ahead of the Authority's clock an ordering fact (Order.PushedAt,
// Order.CommittedAt) may be. GitHub's clock, a committer's and ours may disagree a little; a fact
// further ahead is no time a push happened, and taken as one it would make every later push of the
// branch look older ("Arrived out of order") until that time came: the scope would be pinned.
const MaxOrderSkew = 5 * time.Minute

// The names of the ordering facts, as an *InputError names them.
const (
	FieldPushedAt    = "pushed_at"
	FieldCommittedAt = "committed_at"
)

// Check refuses a fact of o beyond MaxOrderSkew ahead of now: an *InputError naming the fact, its
// value and the allowance. Accept checks every intent's order with the Authority's clock.
func (o Order) Check(now time.Time) error {
	if bad := o.future(now); len(bad) > 0 {
		return bad[0]
	}
	return nil
}

// Bounded is o without its facts beyond MaxOrderSkew ahead of now (zero: unknown, so that the
// intent is ordered by what else is known, or as it arrives), and an error naming each fact it left
// out. It is for facts nobody can correct, those of a payload GitHub signed: refusing them would
// lose the push.
func (o Order) Bounded(now time.Time) (Order, []*InputError) {
	bad := o.future(now)
	for _, e := range bad {
		switch e.Field {
		case FieldPushedAt:
			o.PushedAt = time.Time{}
		case FieldCommittedAt:
			o.CommittedAt = time.Time{}
		}
	}
	return o, bad
}

func (o Order) future(now time.Time) []*InputError {
	limit := now.Add(MaxOrderSkew)
	var bad []*InputError
	for _, f := range []struct {
		field, what string
		at          time.Time
	}{
		{FieldPushedAt, "the time the push happened (repository.pushed_at of its push event)", o.PushedAt},
		{FieldCommittedAt, "the head commit's time (head_commit.timestamp of its push event)", o.CommittedAt},
	} {
		if f.at.After(limit) {
			bad = append(bad, &InputError{Field: f.field, Value: f.at.UTC().Format(time.RFC3339),
				Fix: fmt.Sprintf("it is later than now (%s) by more than the %s allowed for clock skew; give %s, or leave it out to order the intent as it arrives",
					now.UTC().Format(time.RFC3339), MaxOrderSkew, f.what)})
		}
	}
	return bad
}

// verdict is how an arriving commit relates to one a scope already holds for the same branch.
type verdict int

const (
	undecided verdict = iota // the facts cannot tell: the commit is taken as the newer, as it arrives
	newer
	older
	same
)

// decide orders an arriving intent against a commit the scope holds (sha, pushed on top of before,
// with its order facts), from the facts alone, then from the answers a Comparer gave (keyed by sha).
//
// The facts, most exact first: the same commit; the before/after chain (one was pushed on top of
// the other); repository.pushed_at of the two pushes (whole seconds); a forced push, which is newer
// by definition when the push times cannot tell; the head commits' timestamps, unless either push
// was forced (a rewrite can carry old commits). What none of these decides, the compare API does
// (in the App); and what nothing decides is ordered as it arrives.
//
// A stored fact beyond MaxOrderSkew ahead of now counts as unknown: the boundary refuses such facts
// today, but a document written before it did may hold one (a pushed_at in 2100), and it must not
// make every later push of its branch older forever.
func decide(in *Intent, sha, before string, o Order, answers map[string]verdict, now time.Time) verdict {
	switch {
	case in.Sha == sha:
		return same
	case in.Before != "" && in.Before == sha:
		return newer
	case before != "" && before == in.Sha:
		return older
	}
	a, b := in.Order, o
	b, _ = b.Bounded(now)
	if !a.PushedAt.IsZero() && !b.PushedAt.IsZero() {
		if c := a.PushedAt.Compare(b.PushedAt); c != 0 {
			return map[bool]verdict{true: newer, false: older}[c > 0]
		}
	}
	if a.Forced != b.Forced {
		return map[bool]verdict{true: newer, false: older}[a.Forced]
	}
	if !a.Forced && !b.Forced && !a.CommittedAt.IsZero() && !b.CommittedAt.IsZero() {
		if c := a.CommittedAt.Compare(b.CommittedAt); c != 0 {
			return map[bool]verdict{true: newer, false: older}[c > 0]
		}
	}
	if v, ok := answers[sha]; ok {
		return v
	}
	return undecided
}

// CommitOrder is how the head commit of a comparison relates to its base.
type CommitOrder string

// Commit orders, as GitHub's compare API names them.
const (
	Ahead     CommitOrder = "ahead"     // head builds on base: newer
	Behind    CommitOrder = "behind"    // base builds on head: older
	Identical CommitOrder = "identical" // the same commit
	Diverged  CommitOrder = "diverged"  // neither: the facts decide nothing
)

// Comparer tells how two commits of the intent's repository relate when the payloads cannot (the
// App asks GitHub's compare API). The domain never knows where it asks.
type Comparer interface {
	Compare(ctx context.Context, in Intent, base, head string) (CommitOrder, error)
}

// AcceptOption configures one Accept.
type AcceptOption func(*acceptOptions)

type acceptOptions struct {
	comparer Comparer
	anyLive  bool // ask the comparer about live commits of other branches too
	barriers BarrierFunc
	enter    *entry // enter the deploy phase in the accept's write when the gate lets the pass go
}

// WithComparer lets Accept ask c about commits the payloads cannot order.
func WithComparer(c Comparer) AcceptOption { return func(o *acceptOptions) { o.comparer = c } }

// CompareLive makes Accept ask its comparer also about each scope's live commit when another
// branch deployed it: an intent whose commit the live one builds on (behind) is older, whatever
// branch it names, and is recorded as arrived out of order. For callers whose branch is their own
// word (the App's API): without it, only commits of the intent's branch are compared.
func CompareLive() AcceptOption { return func(o *acceptOptions) { o.anyLive = true } }

// BarrierFunc decides whether an intent is a barrier in one of its scopes, given the commit the
// scope has live (nil: nothing yet).
type BarrierFunc func(ctx context.Context, scope string, live *Live) (bool, error)

// WithBarriers lets f decide in which of its scopes the intent is a barrier, against the state
// Accept writes over; its answers replace Intent.Barrier.
func WithBarriers(f BarrierFunc) AcceptOption { return func(o *acceptOptions) { o.barriers = f } }

// barriersOf asks f about each scope of in, with a copy of what the scope has live.
func (e *Env) barriersOf(ctx context.Context, f BarrierFunc, in *Intent) ([]string, error) {
	var out []string
	for _, name := range in.Scopes {
		var live *Live
		if e != nil {
			if sc := e.Scopes[name]; sc != nil && sc.Live != nil {
				l := *sc.Live
				live = &l
			}
		}
		b, err := f(ctx, name, live)
		if err != nil {
			return nil, fmt.Errorf("is %s a barrier in %s: %w", shortSha(in.Sha), name, err)
		}
		if b {
			out = append(out, name)
		}
	}
	return out, nil
}

// liveVerdict orders in against a scope's live commit: by the facts, then the answers, when its
// branch deployed it; by an answer alone (see CompareLive) when another branch did.
func liveVerdict(in *Intent, l *Live, answers map[string]verdict, now time.Time) verdict {
	if l.Ref == in.Ref {
		return decide(in, l.Sha, l.Before, l.Order, answers, now)
	}
	if v, ok := answers[l.Sha]; ok && l.Sha != in.Sha {
		return v
	}
	return undecided
}

// undecidedShas lists the commits of in's branch held by in's scopes that the facts and the answers
// so far cannot order against in; with anyLive, also the live commits of other branches.
func (e *Env) undecidedShas(in *Intent, answers map[string]verdict, anyLive bool, now time.Time) []string {
	if e == nil || in.Redeploy || in.Ref == "" {
		return nil
	}
	var out []string
	for _, name := range in.Scopes {
		sc := e.Scopes[name]
		if sc == nil {
			continue
		}
		for _, m := range sc.Entries() {
			if m.Ref == in.Ref && decide(in, m.Sha, m.Before, m.Order, answers, now) == undecided {
				out = append(out, m.Sha)
			}
		}
		l := sc.Live
		switch {
		case l == nil:
		case l.Ref == in.Ref || anyLive && l.Sha != in.Sha:
			if liveVerdict(in, l, answers, now) == undecided {
				out = append(out, l.Sha)
			}
		}
	}
	return out
}

// ask fills answers for the commits the facts cannot order, through c.
func ask(ctx context.Context, c Comparer, in *Intent, shas []string, answers map[string]verdict) error {
	for _, sha := range shas {
		if _, ok := answers[sha]; ok {
			continue
		}
		o, err := c.Compare(ctx, *in, sha, in.Sha)
		if err != nil {
			return fmt.Errorf("compare %s with %s: %w", shortSha(sha), shortSha(in.Sha), err)
		}
		switch o {
		case Ahead:
			answers[sha] = newer
		case Behind:
			answers[sha] = older
		case Identical:
			answers[sha] = same
		default:
			answers[sha] = undecided
		}
	}
	return nil
}
