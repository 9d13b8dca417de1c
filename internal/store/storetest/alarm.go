package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// testAlarmKeptWithItsLease: what the alert notifier told is kept in its alarm's named lease, read
// back exactly by another process (times to the nanosecond, in UTC), kept across the lease's release
// and the next grant, and written only by the lease's holder.
func testAlarmKeptWithItsLease(t *testing.T, h *harness) {
	a, b := h.process(), h.process()
	name := authority.AlarmLease("prod/eu")
	g, err := a.Acquire(h.ctx, name, "notifier-1", "alert", testTTL)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	since := time.Date(2026, 12, 1, 11, 18, 0, 123456789, time.UTC)
	told := authority.Alarm{
		Webhook:     []authority.AlarmScope{{Scope: "api", State: "stuck", Since: since}, {Scope: "web", State: "behind", Since: since.Add(time.Minute)}},
		Issue:       []authority.AlarmScope{{Scope: "api", State: "behind", Since: since}},
		IssueNumber: 42, IssueRepo: "acme/ops",
	}
	if err := a.RecordAlarm(h.ctx, g, name, told); err != nil {
		t.Fatalf("record: %v", err)
	}
	if err := b.RecordAlarm(h.ctx, &authority.Grant{Holder: "notifier-2", Tokens: g.Tokens}, name, authority.Alarm{}); !errors.Is(err, authority.ErrLeaseLost) {
		t.Fatalf("record by a non-holder: %v; want ErrLeaseLost", err)
	}
	if err := a.ReleaseNamed(h.ctx, g); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := b.Acquire(h.ctx, name, "notifier-2", "alert", testTTL); err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	nl, err := b.LeaseStatus(h.ctx, name)
	if err != nil {
		t.Fatalf("lease status: %v", err)
	}
	if nl.Alarm == nil {
		t.Fatal("the alarm was lost with the lease's release or grant")
	}
	if diff := cmp.Diff(told, *nl.Alarm); diff != "" {
		t.Fatalf("alarm read back (-told +read):\n%s", diff)
	}
}
