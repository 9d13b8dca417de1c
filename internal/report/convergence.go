package report

import (
	"fmt"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// lateText words a late scope's convergence (authority.Judge) for its row: how long it has waited
// against the environment's alert-after and what it waits for; "" unless it is behind or stuck.
// Behind: the pass that deploys it. Stuck: why nothing runs, and what brings it back (the freeze, the
// blocking failure and the promotion wait are the row's own words, which say what lifts them).
func (r *Row) lateText(env string) string {
	lag := r.Convergence
	if !lag.State.Late() {
		return ""
	}
	head := fmt.Sprintf("%s %s (alert after %s)", lag.State, Duration(lag.Waited), Duration(lag.AlertAfter))
	if lag.State == authority.ConvergenceBehind {
		sha := lag.Lease.Sha
		if sha == "" {
			sha = lag.Sha
		}
		return fmt.Sprintf("%s: a pass is deploying %s (generation %d, %s); it has not finished", head, ShortSha(sha), lag.Lease.Generation, orUnknown(lag.Lease.Holder))
	}
	target := ShortSha(lag.Sha)
	where := env + "/" + r.Scope
	switch {
	case r.Frozen != "":
		return fmt.Sprintf("%s: nothing deploys %s while it is %s", head, target, r.Frozen)
	case r.Blocked != "":
		return fmt.Sprintf("%s: nothing deploys %s: %s; decide with latestwins skip %s or latestwins retry %s", head, target, r.Blocked, where, where)
	case r.Promotion != "":
		return fmt.Sprintf("%s: nothing deploys %s: %s", head, target, r.Promotion)
	case r.Approval != "":
		return fmt.Sprintf("%s: nothing deploys %s: %s", head, target, r.Approval)
	case r.Lease.Holder != "" && !r.Lease.Held:
		return fmt.Sprintf("%s: nothing is running for %s; the lease of %s expired %s ago; the recovery sweep re-drives it, or run its deploy workflow again", head, target, r.Lease.Holder, Duration(r.Lease.Left))
	}
	return fmt.Sprintf("%s: nothing is running for %s; the recovery sweep re-drives it, or run its deploy workflow again", head, target)
}

// Duration is d for people, to the minute from a minute on (42m, 1h5m), else to the second (45s).
func Duration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	d = d.Truncate(time.Minute)
	h, m := d/time.Hour, (d%time.Hour)/time.Minute
	switch {
	case h == 0:
		return fmt.Sprintf("%dm", m)
	case m == 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}
