package authority

import (
	"context"
	"fmt"
	"slices"
	"time"
)

const maxLeaseEvents = 32

// Acquire grants a named lease: a short fenced lock on any resource outside an environment's scopes
// (a remote refresh, say). It returns a *HeldError when another holder has it.
func (a *Authority) Acquire(ctx context.Context, name, holder, purpose string, ttl time.Duration) (*Grant, error) {
	if name == "" || len(name) > 256 {
		return nil, &InputError{Field: "lease", Value: name, Fix: "name the lease with 1-256 characters"}
	}
	if err := validateHolder(holder); err != nil {
		return nil, err
	}
	if ttl <= 0 {
		return nil, &InputError{Field: "lease-ttl", Value: ttl.String(), Fix: "give a positive lease TTL such as 2m"}
	}
	var g *Grant
	_, err := a.update(ctx, LeaseKey(name), func(d *Doc, now time.Time) (bool, error) {
		if d.Lease == nil {
			d.Lease = &NamedLease{Name: name}
		}
		l := &d.Lease.Lease
		if !leaseFree(l, holder, 0, now, a.skew) {
			return false, heldError(name, l, now, a.skew)
		}
		if prev := grant(l, holder, purpose, 0, ttl, now); prev != nil {
			d.Lease.record(now, Event{Kind: EventTookOver, Holder: holder, Token: l.Token,
				Message: fmt.Sprintf("Recovered an interrupted operation (Interrupted: %s) held by %s", prev.Purpose, prev.Holder)})
		}
		g = &Grant{Environment: "", Phase: purpose, Holder: holder, Tokens: map[string]int64{name: l.Token}, ExpiresAt: l.ExpiresAt}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("acquire lease %q: %w", name, err)
	}
	return g, nil
}

// RenewNamed extends a named lease the caller holds.
func (a *Authority) RenewNamed(ctx context.Context, g *Grant, ttl time.Duration) error {
	return a.namedOp(ctx, g, "renew", func(l *Lease, now time.Time) { l.ExpiresAt = now.Add(ttl); g.ExpiresAt = l.ExpiresAt })
}

// ReleaseNamed gives up a named lease the caller holds.
func (a *Authority) ReleaseNamed(ctx context.Context, g *Grant) error {
	return a.namedOp(ctx, g, "release", func(l *Lease, _ time.Time) { l.free() })
}

func (a *Authority) namedOp(ctx context.Context, g *Grant, op string, apply func(*Lease, time.Time)) error {
	for name, tok := range g.Tokens {
		_, err := a.update(ctx, LeaseKey(name), func(d *Doc, now time.Time) (bool, error) {
			if d.Lease == nil || d.Lease.Lease.Holder != g.Holder || d.Lease.Lease.Token != tok {
				lost := &LostError{Resource: name, Token: tok, Reason: "taken over or released"}
				if d.Lease != nil {
					lost.Holder, lost.Current = d.Lease.Lease.Holder, d.Lease.Lease.Token
				}
				return false, lost
			}
			apply(&d.Lease.Lease, now)
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("%s lease %q: %w", op, name, err)
		}
	}
	return nil
}

// LeaseStatus reads a named lease.
func (a *Authority) LeaseStatus(ctx context.Context, name string) (*NamedLease, error) {
	d, err := a.load(ctx, LeaseKey(name))
	if err != nil {
		return nil, err
	}
	if d.Lease == nil {
		return nil, fmt.Errorf("lease %q: %w", name, ErrNotFound)
	}
	return d.Lease, nil
}

func (n *NamedLease) record(now time.Time, ev Event) {
	n.Seq++
	ev.Seq, ev.At = n.Seq, now
	n.Events = append(n.Events, ev)
	if k := len(n.Events) - maxLeaseEvents; k > 0 {
		n.Events = slices.Delete(n.Events, 0, k)
	}
}
