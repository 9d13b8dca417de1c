package report

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// benchEvents is the number of events of the benchmarks: what a busy environment keeps within the
// retention.
const benchEvents = 100_000

// syntheticTimeline serves a timeline of n events over 90 days and 4 scopes, made page by page as
// asked (never held whole): per push an accepted event, a claim, a lease, every fifth push a retry
// and every fiftieth a terminal failure, every hundredth a rollback, and a deploy every other push
// (the other is coalesced into it).
type syntheticTimeline struct{ n int64 }

func (s syntheticTimeline) event(seq int64) authority.Event {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := 90 * 24 * time.Hour / time.Duration(s.n)
	push := (seq - 1) / 5
	scope := []string{"api", "web", "worker", "db"}[(push/2)%4]
	ev := authority.Event{Seq: seq, At: start.Add(time.Duration(seq) * step), Scope: scope, Generation: push + 1}
	switch (seq - 1) % 5 {
	case 0:
		ev.Kind, ev.Message = authority.EventAccepted, "Accepted"
	case 1:
		ev.Kind, ev.Message = authority.EventClaimed, "Claimed"
	case 2:
		ev.Kind, ev.Message = authority.EventLeased, "Leased"
		if push%5 == 0 {
			ev.Kind, ev.Message = authority.EventFailed, "Attempt 1 of 3 failed; will retry: flaky"
		}
	case 3:
		ev.Kind, ev.Message = authority.EventReleased, "Released"
		if push%50 == 0 {
			ev.Kind, ev.Message = authority.EventFailed, "Failed on the final attempt (3 of 3): broken"
		}
		if push%100 == 1 {
			ev.Kind, ev.Message = authority.EventRollback, "Rollback"
		}
	case 4:
		ev.Kind, ev.Message = authority.EventLeased, "Leased"
		if push%2 == 1 {
			ev.Kind, ev.Message = authority.EventDeployed, "Deployed"
		}
	}
	return ev
}

func (s syntheticTimeline) History(_ context.Context, _ string, before int64, limit int) (*authority.HistoryPage, error) {
	to := s.n
	if before > 0 {
		to = min(to, before-1)
	}
	from := max(1, to-int64(limit)+1)
	page := &authority.HistoryPage{Events: make([]authority.Event, 0, max(0, to-from+1)), Newest: s.n}
	for seq := from; seq <= to; seq++ {
		page.Events = append(page.Events, s.event(seq))
	}
	if from > 1 {
		page.Before = from
	}
	return page, nil
}

// BenchmarkRollupAdd folds 100,000 events into a rollup and reports the last 30 days of it.
func BenchmarkRollupAdd(b *testing.B) {
	tl := syntheticTimeline{n: benchEvents}
	events := make([]authority.Event, benchEvents)
	for i := range events {
		events[i] = tl.event(int64(i + 1))
	}
	var r *Rollup
	b.ReportAllocs()
	for b.Loop() {
		r = NewRollup("staging")
		for _, ev := range events {
			r.Add(ev)
		}
		_ = r.Report(r.Until.AddDate(0, 0, -30), r.Until)
	}
	reportRollupSize(b, r)
}

// BenchmarkReadRollup reads 100,000 events page by page through a TimelineReader, as the command
// and the API do, and reports the last 30 days: what it costs besides the store's own reads.
func BenchmarkReadRollup(b *testing.B) {
	tl := syntheticTimeline{n: benchEvents}
	var r *Rollup
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if r, err = ReadRollup(b.Context(), tl, "staging", nil); err != nil {
			b.Fatal(err)
		}
		_ = r.Report(r.Until.AddDate(0, 0, -30), r.Until)
	}
	if r.Through != benchEvents {
		b.Fatalf("read through event %d of %d", r.Through, benchEvents)
	}
	reportRollupSize(b, r)
}

func reportRollupSize(b *testing.B, r *Rollup) {
	j, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(j)), "rollup-json-bytes")
	b.ReportMetric(float64(len(r.Days)), "rollup-days")
}

// The synthetic timeline adds up to what it was built to: the benchmark measures real work.
func TestSyntheticTimelineFigures(t *testing.T) {
	r, err := ReadRollup(t.Context(), syntheticTimeline{n: 1000}, "staging", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := r.Report(r.From, r.Until)
	// 200 pushes, 100 deploys (odd pushes), each carrying the even push before it except after a
	// rollback (push 1, 101 roll back: their deploys carry none, and drop what waited).
	if d.Total.Deploys != 100 || d.Total.Rollbacks != 2 || d.Total.Failures != 4 {
		t.Errorf("synthetic figures: %d deploys, %d rollbacks, %d failures; want 100, 2, 4", d.Total.Deploys, d.Total.Rollbacks, d.Total.Failures)
	}
}

// BenchmarkReadRollupFromStore reads 100,000 event records of one environment from the in-memory
// store through the Authority's History, as the command does on a store: the Authority's and the
// store's own costs included (the memory store copies each record through JSON, as a real one
// decodes it).
func BenchmarkReadRollupFromStore(b *testing.B) {
	ctx := b.Context()
	auth, env, now := benchStore(b)
	var d *Delivery
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if d, err = wholeDelivery(ctx, auth, "staging", env, DefaultSince, now); err != nil {
			b.Fatal(err)
		}
	}
	if d.Through != benchEvents || d.Total.Deploys == 0 {
		b.Fatalf("read through event %d of %d, %d deploys", d.Through, benchEvents, d.Total.Deploys)
	}
}

// BenchmarkKeptDeliveryFromStore: the same report from the rollup kept in the store, once a first
// report kept it: what every report after the first costs (the days of the window as records, the
// kept head, and the events since the report before: none here).
func BenchmarkKeptDeliveryFromStore(b *testing.B) {
	ctx := b.Context()
	auth, env, now := benchStore(b)
	want, err := KeptDelivery(ctx, auth, auth, "staging", env, DefaultSince, now)
	if err != nil {
		b.Fatal(err)
	}
	var d *Delivery
	b.ReportAllocs()
	for b.Loop() {
		if d, err = KeptDelivery(ctx, auth, auth, "staging", env, DefaultSince, now); err != nil {
			b.Fatal(err)
		}
	}
	if d.Through != benchEvents || d.Total.Deploys != want.Total.Deploys || d.Total.Commits != want.Total.Commits {
		b.Fatalf("read through event %d of %d, %+v; want %+v", d.Through, benchEvents, d.Total, want.Total)
	}
}

// benchStore is a memory store holding the synthetic timeline's benchEvents events as records, and
// an Authority over it at an hour past the last.
func benchStore(b *testing.B) (*authority.Authority, *authority.Env, time.Time) {
	ctx := b.Context()
	st := memory.New()
	tl := syntheticTimeline{n: benchEvents}
	last := tl.event(benchEvents)
	clock := storetest.NewClock(last.At.Add(time.Hour))
	recs := make([]authority.Record, 0, 1000)
	for seq := int64(1); seq <= benchEvents; seq++ {
		ev := tl.event(seq)
		recs = append(recs, authority.Record{Key: authority.EventKey("staging", seq), ExpiresAt: ev.At.Add(authority.DefaultRetention), Event: &ev})
		if len(recs) == cap(recs) {
			if err := st.PutRecords(ctx, recs); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	env := &authority.Env{Name: "staging", EventSeq: benchEvents, Scopes: map[string]*authority.Scope{}}
	if _, err := st.Put(ctx, &authority.Doc{Key: authority.EnvKey("staging"), Env: env}); err != nil {
		b.Fatal(err)
	}
	return authority.New(st, authority.WithClock(clock)), env, clock.Now()
}
