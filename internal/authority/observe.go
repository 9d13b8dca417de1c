package authority

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Observer is told what the Authority decides, for metrics. Its methods are called after the
// write that decided, from the goroutine that asked; they must be quick and must not block.
type Observer interface {
	// Decided is the answer of a gate to a pass: ReasonGo when it may enter the phase, else why
	// not. Each ask counts, a poller's repeated refusal too.
	Decided(env, phase string, r Reason)
	// HandedOver is how long a scope's lease was free before a pass that had waited for it was
	// granted it: from the release (or completion) of the grant before to the new grant.
	HandedOver(env, scope string, waited time.Duration)
}

// WithObserver sets the Observer told of every gate's answer and every hand-over.
func WithObserver(o Observer) Option { return func(a *Authority) { a.observer = o } }

// observeGate tells the observer how Gate answered r: its grant, or the verdict its error carries.
// Other errors (bad input, the store) decided nothing and are not told.
func (a *Authority) observeGate(r GateRequest, g *Grant, err error) {
	if a.observer == nil {
		return
	}
	var (
		held *HeldError
		sup  *SupersededError
	)
	switch {
	case err == nil:
		a.observer.Decided(r.Environment, r.Phase, ReasonGo)
		for _, h := range g.handovers {
			a.observer.HandedOver(r.Environment, h.scope, h.waited)
		}
	case errors.As(err, &held):
		a.observer.Decided(r.Environment, r.Phase, held.Reason)
	case errors.As(err, &sup):
		reason := ReasonSuperseded
		switch {
		case sup.Done:
			reason = ReasonDone
		case sup.By == 0:
			reason = ReasonNotClaimed
		}
		a.observer.Decided(r.Environment, r.Phase, reason)
	}
}

// handover is one scope of a grant whose pass waited for the lease, and how long the lease was
// free before the grant.
type handover struct {
	scope  string
	waited time.Duration
}

// handedOver reports how long the free lease of sc waited for the pass at gen, which is granted it
// now: only when that pass asked before and was refused (it waited), and the lease was released
// rather than taken over after its expiry.
func (s *Scope) handedOver(gen int64, now time.Time) (time.Duration, bool) {
	l := s.Lease
	if l.Holder != "" || l.ReleasedAt.IsZero() || now.Before(l.ReleasedAt) {
		return 0, false
	}
	prefix := strconv.FormatInt(gen, 10) + " "
	for _, m := range s.Refused {
		if strings.HasPrefix(m, prefix) {
			return now.Sub(l.ReleasedAt), true
		}
	}
	return 0, false
}

// since is when the commits this entry stands for began to wait: the acceptance of the oldest
// intent it superseded, or its own.
func (r *Ref) since() time.Time {
	if !r.Since.IsZero() {
		return r.Since
	}
	return r.At
}

// WaitingSince is since when the scope has had an accepted commit that is not live: the
// acceptance of the oldest pending intent, or of the oldest one a pending intent superseded; false
// when nothing is pending.
func (s *Scope) WaitingSince() (time.Time, bool) {
	var since time.Time
	for _, r := range s.Entries() {
		if t := r.since(); since.IsZero() || t.Before(since) {
			since = t
		}
	}
	return since, !since.IsZero()
}
