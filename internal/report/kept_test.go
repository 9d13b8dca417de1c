package report

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// countingTimeline counts the events a report reads.
type countingTimeline struct {
	inner  TimelineReader
	events int
}

func (c *countingTimeline) History(ctx context.Context, env string, before int64, limit int) (*authority.HistoryPage, error) {
	p, err := c.inner.History(ctx, env, before, limit)
	if p != nil {
		c.events += len(p.Events)
	}
	return p, err
}

// TestKeptDeliveryReadsOnlyWhatIsNew: the report from the kept rollup says what the report from
// the whole timeline says, day after day, while a scope waits across midnight; after the first, a
// report reads only the events since the one before, and the kept head holds the open days only.
func TestKeptDeliveryReadsOnlyWhatIsNew(t *testing.T) {
	ctx := t.Context()
	start := time.Date(2026, 3, 14, 20, 0, 0, 0, time.UTC)
	clock := storetest.NewClock(start)
	auth := authority.New(memory.New(), authority.WithClock(clock))
	n := 0
	pass := func(scope string, deploy bool) {
		t.Helper()
		n++
		acc, err := auth.Accept(ctx, authority.Intent{ID: fmt.Sprintf("push-%d", n), Environment: "staging", Scopes: []string{scope}, Sha: fmt.Sprintf("%040x", n),
			Ref: "refs/heads/main", Source: "push", Order: authority.Order{CommittedAt: clock.Now().Add(-time.Hour)}}, true)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(20 * time.Minute)
		if !deploy {
			return
		}
		g, err := auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: acc.Generation, Scopes: []string{scope}, Phase: "deploy", Holder: "h", LeaseTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: acc.Generation, Scopes: []string{scope}, Holder: "h",
			Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
	}
	check := func(label string) int {
		t.Helper()
		state, err := auth.Status(ctx, "staging")
		if err != nil {
			t.Fatal(err)
		}
		tl := &countingTimeline{inner: auth}
		got, err := KeptDelivery(ctx, auth, tl, "staging", state, 7*24*time.Hour, clock.Now())
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		want, err := wholeDelivery(ctx, auth, "staging", state, 7*24*time.Hour, clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Figures{}, "LeadFromCommit")); diff != "" {
			t.Errorf("%s: kept (-whole timeline +kept):\n%s", label, diff)
		}
		return tl.events
	}
	for range 3 {
		pass("api", true)
		pass("web", true)
	}
	check("the first report")
	before, _ := auth.Status(ctx, "staging")
	pass("web", false) // web waits across midnight, while the next report closes the day before
	clock.Advance(24 * time.Hour)
	pass("api", true)
	pass("api", true)
	state, _ := auth.Status(ctx, "staging")
	newEvents := int(state.EventSeq - before.EventSeq)
	if read := check("the next day's report"); read > newEvents+2 {
		t.Errorf("the second report read %d events; want only the %d since the first (and two to learn where they are)", read, newEvents)
	}
	pass("web", true) // web's wait ends: its time behind goes back to the day before
	clock.Advance(48 * time.Hour)
	check("two days later")
	raw, _, err := auth.ReadKept(ctx, "staging", keptName)
	if err != nil || len(raw) == 0 {
		t.Fatalf("nothing kept: %v", err)
	}
	var head Rollup
	if err := jsonUnmarshal(raw, &head); err != nil {
		t.Fatal(err)
	}
	today := clock.Now().UTC().Format(dayLayout)
	for _, d := range head.Days {
		if d.Date < today {
			t.Errorf("the kept head still holds the closed day %s of %s", d.Date, d.Scope)
		}
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
