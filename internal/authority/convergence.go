package authority

import (
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Convergence says whether a scope has caught up with what was accepted for it, judged against the
// environment's alert-after (Env.AlertAfter): the one rule the status rows, the metrics' readers
// and the alert notifier all ask (Judge), never a rule of their own.
type Convergence uint8

// Convergence states, from settled to alarming.
const (
	// ConvergenceCurrent: nothing is pending; the newest accepted commit is live (or nothing was
	// ever accepted).
	ConvergenceCurrent Convergence = iota
	// ConvergenceWaiting: a commit is pending, for no longer than alert-after (or the environment
	// has none): too early to judge.
	ConvergenceWaiting
	// ConvergenceBehind: pending for longer than alert-after while a pass holds a live lease for a
	// pending commit: a deploy is running, but late.
	ConvergenceBehind
	// ConvergenceStuck: pending for longer than alert-after and no pass holds a live lease for it:
	// nothing is running to bring the scope to its commit.
	ConvergenceStuck
)

var convergenceNames = [...]string{
	ConvergenceCurrent: "current",
	ConvergenceWaiting: "waiting",
	ConvergenceBehind:  "behind",
	ConvergenceStuck:   "stuck",
}

// String is the state's stable name, as status --json, the webhook and the docs spell it.
func (c Convergence) String() string {
	if int(c) < len(convergenceNames) {
		return convergenceNames[c]
	}
	return "convergence(" + strconv.Itoa(int(c)) + ")"
}

// MarshalText spells the state by its name.
func (c Convergence) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a state's name; an unknown one is an error.
func (c *Convergence) UnmarshalText(b []byte) error {
	if i := slices.Index(convergenceNames[:], string(b)); i >= 0 {
		*c = Convergence(i)
		return nil
	}
	return fmt.Errorf("unknown convergence state %q", b)
}

// Late reports whether the state is one to alarm about: behind or stuck.
func (c Convergence) Late() bool { return c == ConvergenceBehind || c == ConvergenceStuck }

// MaxAlertAfter bounds an environment's alert-after: a threshold of more than a week would alarm
// about nothing anyone still waits for.
const MaxAlertAfter = 7 * 24 * time.Hour

// Lag is a scope's convergence as Judge found it.
type Lag struct {
	State Convergence
	// Since is when the scope began to wait (Scope.WaitingSince); zero when current.
	Since time.Time
	// Waited is how long it has waited, now less Since; zero when current.
	Waited time.Duration
	// AlertAfter is the threshold it was judged against; zero: none (a pending scope is waiting).
	AlertAfter time.Duration
	// Generation and Sha are the newest pending commit's: what the scope should reach.
	Generation int64
	Sha        string
	// Lease is the live lease of a pass deploying a pending commit (ConvergenceBehind).
	Lease Lease
}

// Judge is the convergence of scope s at now against alertAfter (zero or less: no alarm). A scope
// is late only once it has waited strictly longer than alertAfter; it is behind when a pass holds
// a lease that has not expired at now for one of its pending commits, stuck otherwise. nil s (no
// such scope) is current.
func Judge(s *Scope, now time.Time, alertAfter time.Duration) Lag {
	lag := Lag{AlertAfter: max(alertAfter, 0)}
	if s == nil {
		return lag
	}
	since, ok := s.WaitingSince()
	if !ok {
		return lag
	}
	entries := s.Entries()
	newest := entries[len(entries)-1]
	lag.State, lag.Since, lag.Waited = ConvergenceWaiting, since, max(now.Sub(since), 0)
	lag.Generation, lag.Sha = newest.Generation, newest.Sha
	if lag.AlertAfter == 0 || lag.Waited <= lag.AlertAfter {
		return lag
	}
	if l := s.Lease; l.Holder != "" && now.Before(l.ExpiresAt) && s.position(l.Generation) >= 0 {
		lag.State, lag.Lease = ConvergenceBehind, l
		return lag
	}
	lag.State = ConvergenceStuck
	return lag
}

// Judge is the convergence of the scope named scope against the environment's alert-after.
func (e *Env) Judge(scope string, now time.Time) Lag {
	return Judge(e.Scopes[scope], now, e.AlertAfter)
}

// setAlertAfter replaces the environment's alert-after with what an intent carries (nil keeps it;
// zero removes it).
func (e *Env) setAlertAfter(d *time.Duration) {
	if d != nil {
		e.AlertAfter = max(*d, 0)
	}
}

// validateAlertAfter checks an intent's alert-after.
func validateAlertAfter(d *time.Duration) error {
	if d != nil && (*d < 0 || *d > MaxAlertAfter) {
		return &InputError{Field: "alert-after", Value: d.String(), Fix: fmt.Sprintf("give a positive duration of at most %s (such as 30m), or 0 for no alarm", MaxAlertAfter)}
	}
	return nil
}
