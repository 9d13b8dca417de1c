package authority

import (
	"context"
	"fmt"
	"time"
)

// DeliveriesKey is the document key of the App's cursor over its webhook delivery log.
const DeliveriesKey = "deliveries#app"

// maxDeliveryGUIDLen bounds a delivery's guid as the App bounds X-GitHub-Delivery.
const maxDeliveryGUIDLen = 100

// DeliveryMark is a place in the App's webhook delivery log: when GitHub delivered an attempt, and
// the delivery's guid (the X-GitHub-Delivery it carries), which orders the deliveries of one second.
type DeliveryMark struct {
	At   time.Time `json:"at"`
	GUID string    `json:"guid"`
}

// IsZero reports whether m is the place before every delivery.
func (m DeliveryMark) IsZero() bool { return m.At.IsZero() && m.GUID == "" }

// Before reports whether m comes before o in the log: by time, then by guid.
func (m DeliveryMark) Before(o DeliveryMark) bool {
	if !m.At.Equal(o.At) {
		return m.At.Before(o.At)
	}
	return m.GUID < o.GUID
}

// Equal reports whether m and o are the same place.
func (m DeliveryMark) Equal(o DeliveryMark) bool { return m.At.Equal(o.At) && m.GUID == o.GUID }

func (m DeliveryMark) String() string {
	if m.IsZero() {
		return "the start of the log"
	}
	return fmt.Sprintf("%s at %s", m.GUID, m.At.UTC().Format(time.RFC3339))
}

// DeliveryCursor is how far the App has handled its webhook delivery log: every delivery at or
// before Handled was processed (live, or replayed from the log), or reported as not replayed.
type DeliveryCursor struct {
	Handled DeliveryMark `json:"handled"`
	// MovedAt is when Handled last moved, by the Authority's clock.
	MovedAt time.Time `json:"moved_at"`
	// Failing is the delivery right after Handled that could not be handled, while it fails.
	Failing *DeliveryFailure `json:"failing,omitempty"`
}

// DeliveryFailure is a delivery the App failed to handle, from the first failure on.
type DeliveryFailure struct {
	Mark     DeliveryMark `json:"mark"`
	Since    time.Time    `json:"since"`
	Attempts int          `json:"attempts"`
	Reason   string       `json:"reason"`
}

// DeliveryCursor reads the cursor over the App's delivery log, from the store (never a remembered
// copy, since another process may have moved it); the zero mark when nothing was handled yet.
func (a *Authority) DeliveryCursor(ctx context.Context) (DeliveryCursor, error) {
	d, err := a.load(ctx, DeliveriesKey)
	if err != nil {
		return DeliveryCursor{}, fmt.Errorf("read the delivery cursor: %w", err)
	}
	if d.Deliveries == nil {
		return DeliveryCursor{}, nil
	}
	return *d.Deliveries, nil
}

// DeliveryFailed records that the delivery at m, the one after the cursor, could not be handled,
// and returns its failure: since when it fails and how many times it did. A failure of another
// delivery starts again from one; a delivery the cursor has passed is not recorded.
func (a *Authority) DeliveryFailed(ctx context.Context, m DeliveryMark, reason string) (DeliveryFailure, error) {
	m.At = m.At.UTC()
	reason = truncate(reason, maxMessageSize)
	var f DeliveryFailure
	_, err := a.update(ctx, DeliveriesKey, func(d *Doc, now time.Time) (bool, error) {
		if d.Deliveries == nil {
			d.Deliveries = &DeliveryCursor{}
		}
		c := d.Deliveries
		if !c.Handled.Before(m) {
			f = DeliveryFailure{Mark: m, Reason: reason}
			return false, nil
		}
		if c.Failing == nil || !c.Failing.Mark.Equal(m) {
			c.Failing = &DeliveryFailure{Mark: m, Since: now.UTC()}
		}
		c.Failing.Attempts++
		c.Failing.Reason = reason
		f = *c.Failing
		return true, nil
	})
	if err != nil {
		return DeliveryFailure{}, fmt.Errorf("record the failure of delivery %s: %w", m, err)
	}
	return f, nil
}

// AdvanceDeliveries moves the cursor forward to m, and returns where it stands after: m, or a later
// place another process already moved it to. It never moves the cursor back, so two processes that
// each handled every delivery from a cursor they read up to their own m leave the later of the two,
// and every delivery at or before it was handled by one of them. The write is conditional on the
// revision it read, so a concurrent advance is re-read, never overwritten.
func (a *Authority) AdvanceDeliveries(ctx context.Context, m DeliveryMark) (DeliveryMark, error) {
	switch {
	case m.At.IsZero():
		return DeliveryMark{}, &InputError{Field: "delivery cursor", Value: m.GUID, Fix: "give the time GitHub delivered it"}
	case m.GUID == "" || len(m.GUID) > maxDeliveryGUIDLen:
		return DeliveryMark{}, &InputError{Field: "delivery cursor", Value: m.GUID, Fix: fmt.Sprintf("give the delivery's guid, 1-%d characters", maxDeliveryGUIDLen)}
	}
	m.At = m.At.UTC()
	var stands DeliveryMark
	_, err := a.update(ctx, DeliveriesKey, func(d *Doc, now time.Time) (bool, error) {
		if d.Deliveries != nil && !d.Deliveries.Handled.Before(m) {
			stands = d.Deliveries.Handled
			return false, nil
		}
		next := &DeliveryCursor{Handled: m, MovedAt: now.UTC()}
		if f := d.Deliveries; f != nil && f.Failing != nil && m.Before(f.Failing.Mark) {
			next.Failing = f.Failing // still ahead: it still fails
		}
		d.Deliveries = next
		stands = m
		return true, nil
	})
	if err != nil {
		return DeliveryMark{}, fmt.Errorf("advance the delivery cursor to %s: %w", m, err)
	}
	return stands, nil
}
