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
}

// DeliveryCursor reads the cursor over the App's delivery log, from the store (never a remembered
// copy, since another process may have moved it); the zero mark when nothing was handled yet.
func (a *Authority) DeliveryCursor(ctx context.Context) (DeliveryMark, error) {
	d, err := a.load(ctx, DeliveriesKey)
	if err != nil {
		return DeliveryMark{}, fmt.Errorf("read the delivery cursor: %w", err)
	}
	if d.Deliveries == nil {
		return DeliveryMark{}, nil
	}
	return d.Deliveries.Handled, nil
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
		d.Deliveries = &DeliveryCursor{Handled: m, MovedAt: now.UTC()}
		stands = m
		return true, nil
	})
	if err != nil {
		return DeliveryMark{}, fmt.Errorf("advance the delivery cursor to %s: %w", m, err)
	}
	return stands, nil
}
