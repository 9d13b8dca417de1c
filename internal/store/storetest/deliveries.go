package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// The App's cursor over its webhook delivery log: stored exactly, read by another process, never
// moved back, and advanced by racing processes (two App instances healing at once) to the furthest
// place any of them handled.
func deliveryCases() []testCase {
	return []testCase{
		{"RoundTrip", testDeliveriesRoundTrip},
		{"NeverBack", testDeliveriesNeverBack},
		{"Racers", testDeliveriesRacers},
		{"Failing", testDeliveriesFailing},
	}
}

func mark(sec int, guid string) authority.DeliveryMark {
	return authority.DeliveryMark{At: start.Truncate(time.Second).Add(time.Duration(sec) * time.Second), GUID: guid}
}

func (h *harness) cursor(a *authority.Authority) authority.DeliveryMark {
	h.t.Helper()
	c, err := a.DeliveryCursor(h.ctx)
	if err != nil {
		h.t.Fatalf("DeliveryCursor: %v", err)
	}
	return c.Handled
}

func testDeliveriesRoundTrip(t *testing.T, h *harness) {
	if m := h.cursor(h.process()); !m.IsZero() {
		t.Fatalf("a fresh store's cursor = %v, want the zero mark", m)
	}
	want := mark(5, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	if got, err := h.process().AdvanceDeliveries(h.ctx, want); err != nil || got != want {
		t.Fatalf("AdvanceDeliveries(%v) = %v, %v", want, got, err)
	}
	if diff := cmp.Diff(want, h.cursor(h.process())); diff != "" {
		t.Fatalf("another process reads the cursor (-want +got):\n%s", diff)
	}
	d := h.doc(authority.DeliveriesKey)
	if d.Deliveries == nil || d.Deliveries.MovedAt.IsZero() || d.Env != nil || d.Lease != nil || d.Pending {
		t.Fatalf("stored %s = %+v, want a delivery cursor and nothing else", authority.DeliveriesKey, d)
	}
}

func testDeliveriesNeverBack(t *testing.T, h *harness) {
	a := h.process()
	later := mark(10, "b")
	if _, err := a.AdvanceDeliveries(h.ctx, later); err != nil {
		t.Fatal(err)
	}
	// Earlier in time, and the same second with a guid that sorts first: both behind the cursor.
	for _, m := range []authority.DeliveryMark{mark(9, "z"), mark(10, "a"), later} {
		got, err := h.process().AdvanceDeliveries(h.ctx, m)
		if err != nil || got != later {
			t.Errorf("AdvanceDeliveries(%v) = %v, %v; want the cursor left at %v", m, got, err, later)
		}
	}
	if got := h.cursor(h.process()); got != later {
		t.Fatalf("cursor = %v, want %v", got, later)
	}
	if _, err := a.AdvanceDeliveries(h.ctx, authority.DeliveryMark{GUID: "x"}); err == nil {
		t.Fatal("AdvanceDeliveries to a mark without a time succeeded")
	}
}

// testDeliveriesRacers: processes with nothing remembered advance the one cursor at once, each to
// its own place; none is lost to a conflict and the cursor ends at the furthest.
func testDeliveriesRacers(t *testing.T, h *harness) {
	const racers = 8
	errs := make([]error, racers)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		a := h.process()
		wg.Go(func() {
			<-begin
			_, errs[i] = a.AdvanceDeliveries(h.ctx, mark(i, fmt.Sprintf("guid-%d", i)))
		})
	}
	close(begin)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("racer %d: %v", i, err)
		}
	}
	if got, want := h.cursor(h.process()), mark(racers-1, fmt.Sprintf("guid-%d", racers-1)); got != want {
		t.Fatalf("cursor after the race = %v, want the furthest, %v", got, want)
	}
}

// testDeliveriesFailing: the failures of the delivery after the cursor are counted from the first
// one, across processes; another delivery starts again; the cursor passing it forgets it.
func testDeliveriesFailing(t *testing.T, h *harness) {
	first, poison, later := mark(1, "a"), mark(2, "b"), mark(3, "c")
	if _, err := h.process().AdvanceDeliveries(h.ctx, first); err != nil {
		t.Fatal(err)
	}
	since := h.clock.Now()
	for i := 1; i <= 3; i++ {
		f, err := h.process().DeliveryFailed(h.ctx, poison, fmt.Sprintf("failure %d", i))
		if err != nil {
			t.Fatal(err)
		}
		if want := (authority.DeliveryFailure{Mark: poison, Since: since, Attempts: i, Reason: fmt.Sprintf("failure %d", i)}); !cmp.Equal(f, want) {
			t.Fatalf("failure %d = %+v, want %+v", i, f, want)
		}
		h.clock.Advance(time.Minute)
	}
	c, err := h.process().DeliveryCursor(h.ctx)
	if err != nil || c.Failing == nil || c.Failing.Attempts != 3 || !c.Failing.Since.Equal(since) {
		t.Fatalf("stored cursor %+v, %v; want three failures since %v", c, err, since)
	}
	if f, err := h.process().DeliveryFailed(h.ctx, later, "another"); err != nil || f.Attempts != 1 {
		t.Fatalf("a failure of another delivery = %+v, %v; want its first", f, err)
	}
	if _, err := h.process().AdvanceDeliveries(h.ctx, later); err != nil {
		t.Fatal(err)
	}
	if c, err := h.process().DeliveryCursor(h.ctx); err != nil || c.Failing != nil || c.Handled != later {
		t.Fatalf("after passing it: %+v, %v; want the failure forgotten", c, err)
	}
	if f, err := h.process().DeliveryFailed(h.ctx, poison, "behind the cursor"); err != nil || f.Attempts != 0 {
		t.Fatalf("a failure behind the cursor = %+v, %v; want nothing recorded", f, err)
	}
}
