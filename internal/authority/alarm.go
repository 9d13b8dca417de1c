package authority

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Alarm is what the alert notifier last told of an environment's convergence, per channel: kept in
// the named lease that serializes notifiers (AlarmLease), so that a notifier in another process
// tells each change once. It changes only under that lease (RecordAlarm).
type Alarm struct {
	// Webhook is the late scopes the outgoing webhook was last told of; empty: none, or told of the
	// recovery.
	Webhook []AlarmScope `json:"webhook,omitempty"`
	// Issue is the late scopes the open issue last said; IssueNumber is the issue, in IssueRepo,
	// kept open while the environment is late; 0: none is open.
	Issue       []AlarmScope `json:"issue,omitempty"`
	IssueNumber int          `json:"issue_number,omitempty"`
	IssueRepo   string       `json:"issue_repo,omitempty"`
}

// AlarmScope is one late scope as a notification told of it.
type AlarmScope struct {
	Scope string    `json:"scope"`
	State string    `json:"state"` // Convergence's name: behind or stuck
	Since time.Time `json:"since"`
}

// SameAlarm reports whether two lists of late scopes tell the same: the same scopes, each in the
// same state since the same time. A scope that stays late is told once, however long it stays.
func SameAlarm(a, b []AlarmScope) bool {
	return slices.EqualFunc(a, b, func(x, y AlarmScope) bool {
		return x.Scope == y.Scope && x.State == y.State && x.Since.Equal(y.Since)
	})
}

// AlarmLease is the name of the named lease that serializes the notifiers of env, and keeps what
// they told (NamedLease.Alarm).
func AlarmLease(env string) string { return "alert:" + env }

// RecordAlarm stores what the notifier holding g told of the alarm whose lease is name, fenced by
// the grant: a notifier whose lease was taken over (it ran past its TTL) writes nothing and gets a
// *LostError.
func (a *Authority) RecordAlarm(ctx context.Context, g *Grant, name string, alarm Alarm) error {
	tok, ok := g.Tokens[name]
	if !ok {
		return &InputError{Field: "lease", Value: name, Fix: "record an alarm under the grant of its own lease (AlarmLease)"}
	}
	_, err := a.update(ctx, LeaseKey(name), func(d *Doc, _ time.Time) (bool, error) {
		if d.Lease == nil || d.Lease.Lease.Holder != g.Holder || d.Lease.Lease.Token != tok {
			lost := &LostError{Resource: name, Token: tok, Reason: "taken over or released"}
			if d.Lease != nil {
				lost.Holder, lost.Current = d.Lease.Lease.Holder, d.Lease.Lease.Token
			}
			return false, lost
		}
		stored := alarm
		stored.Webhook, stored.Issue = slices.Clone(alarm.Webhook), slices.Clone(alarm.Issue)
		d.Lease.Alarm = &stored
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("record alarm %q: %w", name, err)
	}
	return nil
}

// SetAlertAfter sets an environment's alert-after (zero: none) and reports whether it changed: what
// the notifier does when the trusted configuration's differs from the stored one, so that every
// surface judges by the file's threshold within a sweep of its change. An environment nothing was
// ever accepted for is bad input, and nothing is written.
func (a *Authority) SetAlertAfter(ctx context.Context, env string, d time.Duration) (bool, error) {
	if err := ValidateEnvironment(env); err != nil {
		return false, err
	}
	if err := validateAlertAfter(&d); err != nil {
		return false, err
	}
	changed := false
	_, err := a.update(ctx, EnvKey(env), func(doc *Doc, _ time.Time) (bool, error) {
		if doc.Env == nil {
			return false, &InputError{Field: "environment", Value: env, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
		}
		changed = doc.Env.AlertAfter != d
		doc.Env.setAlertAfter(&d)
		return changed, nil
	})
	if err != nil {
		return false, fmt.Errorf("set the alert-after of %s: %w", env, err)
	}
	return changed, nil
}
