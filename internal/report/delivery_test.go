package report

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// day1 is the fixture's first UTC day, 2026-03-14; the report is read at 06:00 on the next.
var (
	day1     = time.Date(2026, 3, 14, 0, 0, 0, 0, time.UTC)
	day2     = day1.AddDate(0, 0, 1)
	reportAt = day2.Add(6 * time.Hour)
)

func at(day time.Time, hhmm string) time.Time {
	t, err := time.Parse("15:04", hhmm)
	if err != nil {
		panic(err)
	}
	return day.Add(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute)
}

type fixtureEvent struct {
	ev        authority.Event
	committed time.Time
}

// fixture is a small timeline of staging, api and web, whose figures are computed by hand in
// TestDeliveryFiguresMatchTheHandComputedFixture. The failure messages are the Authority's own.
func fixture() []fixtureEvent {
	sha := func(c byte) string { return strings.Repeat(string(c), 40) }
	var out []fixtureEvent
	add := func(t time.Time, kind authority.EventKind, scope string, gen int64, committed time.Time, msg string) {
		out = append(out, fixtureEvent{ev: authority.Event{Seq: int64(len(out) + 1), At: t, Kind: kind, Scope: scope, Generation: gen,
			Sha: sha(byte('a' + gen)), Message: msg}, committed: committed})
	}
	var none time.Time
	// day 1, api
	add(at(day1, "09:00"), authority.EventAccepted, "api", 1, at(day1, "08:50"), "Accepted")
	add(at(day1, "09:10"), authority.EventAccepted, "api", 2, at(day1, "09:05"), "Accepted")
	add(at(day1, "09:10"), authority.EventSuperseded, "api", 1, none, "Superseded by generation 2")
	add(at(day1, "09:12"), authority.EventAccepted, "", 2, none, "joined generation 2, which already has it pending")
	add(at(day1, "09:30"), authority.EventDeployed, "api", 2, none, "Deployed")
	add(at(day1, "10:00"), authority.EventAccepted, "api", 3, none, "Accepted")
	add(at(day1, "10:05"), authority.EventFailed, "api", 3, none, "Attempt 1 of 3 failed; will retry: boom")
	add(at(day1, "10:15"), authority.EventFailed, "api", 3, none, "Failed on the final attempt (3 of 3): boom")
	add(at(day1, "10:20"), authority.EventPolicy, "", 0, none, "Policy changed from latest to queue by octocat")
	add(at(day1, "11:00"), authority.EventAccepted, "api", 4, at(day1, "10:58"), "Accepted")
	add(at(day1, "11:15"), authority.EventDeployed, "api", 4, none, "Deployed")
	add(at(day1, "23:00"), authority.EventAccepted, "api", 5, at(day1, "22:00"), "Accepted")
	// day 2, api
	add(at(day2, "01:00"), authority.EventDeployed, "api", 5, none, "Deployed")
	add(at(day2, "02:00"), authority.EventRollback, "api", 6, none, "Rollback to ccccccc (generation 6) by octocat: broken")
	add(at(day2, "02:10"), authority.EventDeployed, "api", 6, none, "Deployed")
	// day 2, web
	add(at(day2, "03:00"), authority.EventAccepted, "web", 7, at(day2, "02:30"), "Accepted")
	add(at(day2, "03:20"), authority.EventDeployed, "web", 7, none, "Deployed")
	add(at(day2, "04:00"), authority.EventAccepted, "web", 8, none, "Accepted") // still pending at the report
	return out
}

func fixtureRollup(events []fixtureEvent) *Rollup {
	r := NewRollup("staging")
	for _, f := range events {
		r.AddOrdered(f.ev, authority.Order{CommittedAt: f.committed})
	}
	return r
}

// The hand computation, the report read at day 2 06:00 over both days (a 30-hour window):
//
// api:
//   - deploys: generations 2, 4, 5, 6: 4, 2 a day.
//   - commits: 2 carries 1 and 2; 4 carries 3 (whose failure did not end it) and 4; 5 carries 5;
//     the rollback 6 carries none: 5, 1.25 a deploy.
//   - lead from acceptance: 1 30m, 2 20m, 3 1h15m, 4 15m, 5 2h. Sorted 15 20 30 75 120 (minutes):
//     p50 is the 3rd, 30m; p90 the 5th, 2h; mean 260/5 = 52m.
//   - lead from the commit: 1 40m, 2 25m, 4 17m, 5 3h (3 has no commit time). Sorted 17 25 40 180:
//     p50 the 2nd, 25m; p90 the 4th, 3h; mean 262/4 = 65.5m.
//   - change failures: the final failure of 3 (its retry does not count) and the rollback: 2 of 4
//     deploys, 0.5.
//   - restores: failure 10:15 to deploy 11:15, 1h; rollback 02:00 to its deploy 02:10, 10m. p50
//     10m, p90 1h, mean 35m.
//   - behind: 09:00-09:30 30m, 10:00-11:15 1h15m, 23:00-01:00 2h (1h each day), 02:00-02:10 10m:
//     day 1 2h45m, day 2 1h10m, 3h55m in all; a share of 235/1800.
//   - daily lead p50: day 1 samples 15 20 30 75, the 2nd, 20m; day 2 only 2h.
//
// web:
//   - 1 deploy (0.5 a day), 1 commit; lead 20m from acceptance, 50m from the commit; no failure.
//   - behind 03:00-03:20 20m, and 8 waits from 04:00 to the report, 2h: 2h20m, 140/1800.
//
// staging as a whole: 5 deploys (2.5 a day), 6 commits (1.2 a deploy); lead from acceptance 15 20
// 20 30 75 120: p50 the 3rd, 20m, p90 the 6th, 2h; from the commit 17 25 40 50 180: p50 40m, p90 3h;
// 2 change failures of 5 deploys, 0.4; restores as api's; behind 6h15m of twice 30 hours.
func TestDeliveryFiguresMatchTheHandComputedFixture(t *testing.T) {
	r := fixtureRollup(fixture())
	got := r.Report(day1.Add(15*time.Hour), reportAt) // any time of day 1 starts the window at its midnight
	m := time.Minute.Seconds()
	q := func(count uint64, p50, p90, mean float64) Quantiles {
		return Quantiles{Count: count, P50Seconds: p50 * m, P90Seconds: p90 * m, MeanSeconds: mean * m}
	}
	window := 30 * 60 * m
	want := &Delivery{Environment: "staging", Since: day1, Until: reportAt, Days: 2, Through: 18, QuantileError: HistogramError,
		Total: Figures{Deploys: 5, DeploysPerDay: 2.5, Commits: 6, CommitsPerDeploy: 1.2,
			LeadFromAccept: q(6, 20, 120, 280.0/6), LeadFromCommit: q(5, 40, 180, 312.0/5),
			Failures: 1, Rollbacks: 1, ChangeFailureRate: 0.4, Restore: q(2, 10, 60, 35),
			BehindSeconds: 375 * m, BehindShare: 375 * m / (2 * window),
			Daily: []DayFigures{
				{Date: "2026-03-14", Deploys: 2, Commits: 4, Failures: 1, LeadP50: 20 * m, BehindSeconds: 165 * m},
				{Date: "2026-03-15", Deploys: 3, Commits: 2, Rollbacks: 1, LeadP50: 20 * m, BehindSeconds: 210 * m},
			}},
		Scopes: []Figures{
			{Scope: "api", Deploys: 4, DeploysPerDay: 2, Commits: 5, CommitsPerDeploy: 1.25,
				LeadFromAccept: q(5, 30, 120, 52), LeadFromCommit: q(4, 25, 180, 65.5),
				Failures: 1, Rollbacks: 1, ChangeFailureRate: 0.5, Restore: q(2, 10, 60, 35),
				BehindSeconds: 235 * m, BehindShare: 235 * m / window,
				Daily: []DayFigures{
					{Date: "2026-03-14", Deploys: 2, Commits: 4, Failures: 1, LeadP50: 20 * m, BehindSeconds: 165 * m},
					{Date: "2026-03-15", Deploys: 2, Commits: 1, Rollbacks: 1, LeadP50: 120 * m, BehindSeconds: 70 * m},
				}},
			{Scope: "web", Deploys: 1, DeploysPerDay: 0.5, Commits: 1, CommitsPerDeploy: 1,
				LeadFromAccept: q(1, 20, 20, 20), LeadFromCommit: q(1, 50, 50, 50),
				BehindSeconds: 140 * m, BehindShare: 140 * m / window,
				Daily: []DayFigures{
					{Date: "2026-03-14"},
					{Date: "2026-03-15", Deploys: 1, Commits: 1, LeadP50: 20 * m, BehindSeconds: 140 * m},
				}},
		}}
	// Quantiles within the histogram's stated error; everything else exact (to float rounding).
	within := cmp.Comparer(func(a, b float64) bool {
		return a == b || math.Abs(a-b) <= HistogramError*math.Max(math.Abs(a), math.Abs(b))+1e-9
	})
	if diff := cmp.Diff(want, got, within); diff != "" {
		t.Errorf("report (-hand-computed +got):\n%s", diff)
	}
	// The mean and counts are exact, not within the error.
	if got.Scopes[0].LeadFromAccept.MeanSeconds != 52*m || got.Scopes[0].Restore.Count != 2 {
		t.Errorf("api's exact figures: mean lead %vs, %d restores; want 3120s and 2", got.Scopes[0].LeadFromAccept.MeanSeconds, got.Scopes[0].Restore.Count)
	}

	t.Run("window of one day", func(t *testing.T) {
		d := r.Report(day2, reportAt)
		api := d.Scopes[0]
		if d.Days != 1 || api.Deploys != 2 || api.Commits != 1 || api.Rollbacks != 1 || api.Failures != 0 || api.BehindSeconds != 70*m || api.Restore.Count != 1 {
			t.Errorf("day 2 alone: %d days, api %+v; want 1 day, 2 deploys, 1 commit, 1 rollback, 70m behind, 1 restore", d.Days, api)
		}
	})
}

// A rollup is a value: it survives JSON, adding an event twice (a repeated copy of the outbox)
// counts it once, and a rollup continued from another and merged into it is the whole.
func TestRollupIsAPureValue(t *testing.T) {
	events := fixture()
	whole := fixtureRollup(events)
	want := whole.Report(day1, reportAt)

	b, err := json.Marshal(whole)
	if err != nil {
		t.Fatal(err)
	}
	var back Rollup
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, back.Report(day1, reportAt)); diff != "" {
		t.Errorf("after a JSON round trip (-before +after):\n%s", diff)
	}

	twice := NewRollup("staging")
	for i, f := range events {
		twice.AddOrdered(f.ev, authority.Order{CommittedAt: f.committed})
		if i%3 == 0 {
			twice.AddOrdered(f.ev, authority.Order{CommittedAt: f.committed})
		}
	}
	if diff := cmp.Diff(want, twice.Report(day1, reportAt)); diff != "" {
		t.Errorf("events added twice (-once +twice):\n%s", diff)
	}

	for _, cut := range []int{0, 5, 9, 13, len(events)} {
		first := fixtureRollup(events[:cut])
		rest := first.Continue()
		for _, f := range events[cut:] {
			rest.AddOrdered(f.ev, authority.Order{CommittedAt: f.committed})
		}
		first.Merge(rest)
		if diff := cmp.Diff(want, first.Report(day1, reportAt)); diff != "" {
			t.Errorf("cut after %d events and merged (-whole +merged):\n%s", cut, diff)
		}
	}
}

// The histogram's quantiles are within its stated error of the exact ones, over durations from a
// second to a month.
func TestHistogramError(t *testing.T) {
	var h Histogram
	var all []time.Duration
	for d := time.Second; d < 30*24*time.Hour; d = d*21/20 + time.Second {
		h.Add(d)
		all = append(all, d)
	}
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99} {
		rank := int(math.Ceil(q*float64(len(all)))) - 1
		exact, got := all[rank].Seconds(), h.Quantile(q).Seconds()
		if math.Abs(got-exact) > HistogramError*exact {
			t.Errorf("quantile %v: %vs, exact %vs: off by more than %.2f%%", q, got, exact, 100*HistogramError)
		}
	}
	if HistogramError > 0.025 {
		t.Errorf("the stated error is %.2f%%", 100*HistogramError)
	}
}

func TestDeliveryText(t *testing.T) {
	var b strings.Builder
	if err := DeliveryText(&b, fixtureRollup(fixture()).Report(day1, reportAt)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"staging  delivery over 2 day(s), 2026-03-14 to 2026-03-15 06:00 UTC",
		"(all)  5        2.50     1.20",
		"40% (1 failed, 1 rolled back)",
		"6h15m (10%)",
		"25m (4 of 5)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report's text lacks %q:\n%s", want, out)
		}
	}
}
