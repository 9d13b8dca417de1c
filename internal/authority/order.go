package authority

import (
	"context"
	"fmt"
)

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
func decide(in *Intent, sha, before string, o Order, answers map[string]verdict) verdict {
	switch {
	case in.Sha == sha:
		return same
	case in.Before != "" && in.Before == sha:
		return newer
	case before != "" && before == in.Sha:
		return older
	}
	a, b := in.Order, o
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
}

// WithComparer lets Accept ask c about commits the payloads cannot order.
func WithComparer(c Comparer) AcceptOption { return func(o *acceptOptions) { o.comparer = c } }

// undecidedShas lists the commits of in's branch held by in's scopes that the facts and the answers
// so far cannot order against in.
func (e *Env) undecidedShas(in *Intent, answers map[string]verdict) []string {
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
			if m.Ref == in.Ref && decide(in, m.Sha, m.Before, m.Order, answers) == undecided {
				out = append(out, m.Sha)
			}
		}
		if l := sc.Live; l != nil && l.Ref == in.Ref && decide(in, l.Sha, l.Before, l.Order, answers) == undecided {
			out = append(out, l.Sha)
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
