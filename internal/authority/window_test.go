package authority

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

var berlin = mustZone("Europe/Berlin")

func mustZone(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// at is a wall-clock time in Berlin.
func at(year int, month time.Month, day, hour, minute int) time.Time {
	return time.Date(year, month, day, hour, minute, 0, 0, berlin)
}

// workdays is the example: Monday to Thursday from 09:00 for 8h, never over Christmas.
var workdays = &Windows{Timezone: "Europe/Berlin",
	Allow: []WindowPeriod{{Start: "0 9 * * 1-4", Duration: 8 * time.Hour}},
	Deny:  []WindowPeriod{{Start: "0 0 24 12 *", Duration: 72 * time.Hour}},
}

// wait asks the gate about w at now, as the evaluator does.
func wait(t *testing.T, w *Windows, now time.Time) *WindowWait {
	t.Helper()
	if err := w.validate(); err != nil {
		t.Fatalf("windows %s: %v", w.Spec(), err)
	}
	return windowWait(View{Gates: &Gates{Windows: w}}, &Ref{Generation: 1, Sha: windowSha}, now)
}

const windowSha = "aaaa111000000000000000000000000000000000"

func wantOpen(t *testing.T, w *Windows, now time.Time) {
	t.Helper()
	if got := wait(t, w, now); got != nil {
		t.Fatalf("at %s: held (%s); want the window open", now, got.text())
	}
}

func wantClosed(t *testing.T, w *Windows, now, opens time.Time, text string) *WindowWait {
	t.Helper()
	got := wait(t, w, now)
	if got == nil {
		t.Fatalf("at %s: open; want closed until %s", now, opens)
	}
	if !got.Opens.Equal(opens) || got.text() != text {
		t.Fatalf("at %s: opens %s, %q; want %s, %q", now, got.Opens, got.text(), opens, text)
	}
	return got
}

func TestWindowsAllowPeriods(t *testing.T) {
	// Inside the period, from its first instant to just before its end; a period that started
	// before now counts.
	wantOpen(t, workdays, at(2026, time.December, 1, 9, 0))
	wantOpen(t, workdays, at(2026, time.December, 1, 16, 59))
	// Its end is outside: the next one opens the next workday.
	wantClosed(t, workdays, at(2026, time.December, 1, 17, 0), at(2026, time.December, 2, 9, 0),
		"outside the change window; opens Wed 09:00 Europe/Berlin")
	// Thursday evening: nothing until Monday.
	wantClosed(t, workdays, at(2026, time.December, 3, 17, 30), at(2026, time.December, 7, 9, 0),
		"outside the change window; opens Mon 09:00 Europe/Berlin")
	// Early in the morning of a workday: that morning.
	wantClosed(t, workdays, at(2026, time.December, 1, 8, 59), at(2026, time.December, 1, 9, 0),
		"outside the change window; opens Tue 09:00 Europe/Berlin")
}

func TestWindowsDenyWinsOverAllow(t *testing.T) {
	// Thursday 24 December is a workday inside the allowed hours, but denied until Sunday; the
	// allowed period opens on Monday.
	w := wantClosed(t, workdays, at(2026, time.December, 24, 10, 0), at(2026, time.December, 28, 9, 0),
		"in a deny window until Sun 27 Dec 00:00 Europe/Berlin; opens Mon 09:00 Europe/Berlin")
	if !w.DenyUntil.Equal(at(2026, time.December, 27, 0, 0)) {
		t.Fatalf("deny until %s; want Sun 27 Dec 00:00", w.DenyUntil)
	}
	// Without allow periods every time is allowed but the deny ones: it opens when the deny ends.
	denyOnly := &Windows{Timezone: "Europe/Berlin", Deny: workdays.Deny}
	wantOpen(t, denyOnly, at(2026, time.December, 23, 23, 59))
	wantClosed(t, denyOnly, at(2026, time.December, 24, 0, 0), at(2026, time.December, 27, 0, 0),
		"in a deny window until Sun 27 Dec 00:00 Europe/Berlin")
	wantOpen(t, denyOnly, at(2026, time.December, 27, 0, 0))
	wantOpen(t, denyOnly, at(2026, time.July, 1, 3, 0))
	// Overlapping deny periods: the window opens when the last of them ends.
	chained := &Windows{Timezone: "Europe/Berlin", Deny: []WindowPeriod{
		{Start: "0 0 24 12 *", Duration: 72 * time.Hour}, {Start: "0 0 26 12 *", Duration: 48 * time.Hour}}}
	wantClosed(t, chained, at(2026, time.December, 25, 12, 0), at(2026, time.December, 28, 0, 0),
		"in a deny window until Mon 28 Dec 00:00 Europe/Berlin")
}

// A period lasts its duration of absolute time, across a daylight-saving change: on the Sunday
// Berlin moves its clocks (29 March 2026 forward, 25 October 2026 back), a period that starts at
// 01:00 and lasts 3h ends at 05:00 and at 03:00 on the wall clock.
func TestWindowsDurationIsAbsoluteAcrossDaylightSaving(t *testing.T) {
	w := &Windows{Timezone: "Europe/Berlin", Allow: []WindowPeriod{{Start: "0 1 * * 0", Duration: 3 * time.Hour}}}
	// March: 01:00 CET + 3h is 05:00 CEST (the hour from 02:00 does not exist).
	wantOpen(t, w, at(2026, time.March, 29, 4, 30))
	wantClosed(t, w, at(2026, time.March, 29, 5, 0), at(2026, time.April, 5, 1, 0),
		"outside the change window; opens Sun 01:00 Europe/Berlin")
	// October: 01:00 CEST + 3h is 03:00 CET (the hour from 02:00 comes twice).
	wantOpen(t, w, time.Date(2026, time.October, 25, 2, 30, 0, 0, time.UTC).Add(-90*time.Minute)) // 02:00 CET
	wantClosed(t, w, at(2026, time.October, 25, 3, 0), at(2026, time.November, 1, 1, 0),
		"outside the change window; opens Sun 01:00 Europe/Berlin")
	wantClosed(t, w, at(2026, time.October, 25, 3, 30), at(2026, time.November, 1, 1, 0),
		"outside the change window; opens Sun 01:00 Europe/Berlin")
	// The starts themselves are wall-clock times: 09:00 in winter and in summer.
	day := &Windows{Timezone: "Europe/Berlin", Allow: []WindowPeriod{{Start: "0 9 * * *", Duration: time.Hour}}}
	for _, d := range []time.Time{at(2026, time.March, 28, 12, 0), at(2026, time.March, 29, 12, 0), at(2026, time.October, 25, 12, 0)} {
		w := wait(t, day, d)
		if got := w.Opens.In(berlin); got.Hour() != 9 || got.Minute() != 0 || got.Day() != d.Day()+1 {
			t.Fatalf("after %s the daily 09:00 window opens at %s; want 09:00 the next day", d, got)
		}
	}
}

func TestWindowsWording(t *testing.T) {
	monthly := &Windows{Timezone: "Europe/Berlin", Allow: []WindowPeriod{{Start: "0 9 1 * *", Duration: 8 * time.Hour}}}
	// More than a week ahead: the date; in another year, with the year.
	wantClosed(t, monthly, at(2026, time.November, 2, 9, 0), at(2026, time.December, 1, 9, 0),
		"outside the change window; opens Tue 1 Dec 09:00 Europe/Berlin")
	wantClosed(t, monthly, at(2026, time.December, 2, 9, 0), at(2027, time.January, 1, 9, 0),
		"outside the change window; opens Fri 1 Jan 2027 09:00 Europe/Berlin")
	// Without a time zone the periods are read in UTC, and the words say so.
	utc := &Windows{Allow: []WindowPeriod{{Start: "@daily", Duration: time.Hour}}}
	wantClosed(t, utc, time.Date(2026, time.December, 2, 9, 0, 0, 0, time.UTC), time.Date(2026, time.December, 3, 0, 0, 0, 0, time.UTC),
		"outside the change window; opens Thu 00:00 UTC")
	// Allowed periods entirely inside deny ones: it does not open within the horizon.
	never := &Windows{Timezone: "Europe/Berlin", Allow: []WindowPeriod{{Start: "0 9 * * 1", Duration: 8 * time.Hour}},
		Deny: []WindowPeriod{{Start: "0 0 * * 1", Duration: 24 * time.Hour}}}
	now := at(2026, time.December, 2, 9, 0)
	w := wantClosed(t, never, now, time.Time{}, "outside the change window; the change window does not open in the next 400 days")
	if r := w.retryAfter(now); r != windowNeverRetry {
		t.Fatalf("retry after %s for a window that does not open; want %s", r, windowNeverRetry)
	}
	// Nothing says when it ends, so no pass waits for it however long it may wait.
	v := windowView(never, false)
	if got := Hold(v, 3, now, 0); got.Reason != ReasonWindow || !got.Until.IsZero() || !got.Err().(*HeldError).Outlasts(now.Add(24*time.Hour)) {
		t.Fatalf("a window that does not open: %v until %s; want held with no end, outlasting any wait", got.Reason, got.Until)
	}
	wantClosed(t, never, at(2026, time.December, 7, 10, 0), time.Time{},
		"in a deny window until Tue 8 Dec 00:00 Europe/Berlin; the change window does not open in the next 400 days")
}

func TestWindowsRetryAfterIsUntilItOpens(t *testing.T) {
	now := at(2026, time.December, 1, 8, 0).Add(-300 * time.Millisecond)
	w := wait(t, workdays, now)
	if r := w.retryAfter(now); r != time.Hour+time.Second {
		t.Fatalf("retry after %s; want the hour and a bit until 09:00 in whole seconds, 1h0m1s", r)
	}
	now = at(2026, time.December, 1, 9, 0).Add(-time.Millisecond)
	if r := wait(t, workdays, now).retryAfter(now); r != time.Second {
		t.Fatalf("retry after %s a millisecond before it opens; want at least one second", r)
	}
}

func TestWindowsBadInput(t *testing.T) {
	ok := WindowPeriod{Start: "0 9 * * 1-5", Duration: 8 * time.Hour}
	for _, c := range []struct {
		w           Windows
		field, want string
	}{
		{Windows{Timezone: "Europe/Berln", Allow: []WindowPeriod{ok}}, "windows timezone", "not a known time zone"},
		{Windows{Timezone: "Local", Allow: []WindowPeriod{ok}}, "windows timezone", "name the time zone"},
		{Windows{Allow: []WindowPeriod{{Start: "0 9 * *", Duration: time.Hour}}}, "windows allow[0] start", "give five fields"},
		{Windows{Allow: []WindowPeriod{{Start: "0 25 * * *", Duration: time.Hour}}}, "windows allow[0] start", "not a cron expression"},
		{Windows{Deny: []WindowPeriod{{Start: "0 0 30 2 *", Duration: time.Hour}}}, "windows deny[0] start", "it never fires"},
		{Windows{Deny: []WindowPeriod{{Start: "TZ=UTC 0 0 * * *", Duration: time.Hour}}}, "windows deny[0] start", "give the time zone once"},
		{Windows{Allow: []WindowPeriod{ok, {Start: "@every 1h", Duration: time.Hour}}}, "windows allow[1] start", "@every counts from whenever"},
		{Windows{Allow: []WindowPeriod{{Start: "", Duration: time.Hour}}}, "windows allow[0] start", "give when the period starts"},
		{Windows{Allow: []WindowPeriod{{Start: "0 9 * * *"}}}, "windows allow[0] duration", "from 1m to 744h"},
		{Windows{Allow: []WindowPeriod{{Start: "0 9 * * *", Duration: -time.Hour}}}, "windows allow[0] duration", "from 1m to 744h"},
		{Windows{Deny: []WindowPeriod{{Start: "0 9 * * *", Duration: 32 * 24 * time.Hour}}}, "windows deny[0] duration", "(31 days)"},
		{Windows{Allow: make([]WindowPeriod, MaxWindowPeriods+1)}, "windows allow", "at most 32 allow periods"},
	} {
		err := c.w.validate()
		var bad *InputError
		if !errors.As(err, &bad) || !errors.Is(err, ErrInvalidInput) || bad.Field != c.field || !strings.Contains(bad.Fix, c.want) {
			t.Errorf("windows %+v: %v; want invalid input of %s saying %q", c.w, err, c.field, c.want)
		}
	}
	// Intents check their gates: a bad one is refused before anything is accepted.
	g := &Gates{Windows: &Windows{Timezone: "Mars/Olympus", Deny: []WindowPeriod{ok}}}
	if err := g.validate("prod", nil); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("gates with an unknown time zone: %v; want invalid input", err)
	}
}

func TestWindowsStoredAndRemoved(t *testing.T) {
	if (&Windows{Timezone: "Europe/Berlin"}).normal() != nil || (*Windows)(nil).normal() != nil {
		t.Fatal("windows without periods hold for nothing; want them normalised away")
	}
	g := &Gates{Windows: workdays}
	c := g.clone()
	if !g.equal(c) || c.Windows.Timezone != "Europe/Berlin" || len(c.Windows.Allow) != 1 || c.Windows.Deny[0].Duration != 72*time.Hour {
		t.Fatalf("gates cloned through JSON: %+v; want the windows kept", c.Windows)
	}
	want := "windows tz=Europe/Berlin; allow=0 9 * * 1-4 for 8h; deny=0 0 24 12 * for 72h"
	if s := g.String(); s != want {
		t.Fatalf("gates read %q; want %q", s, want)
	}
	// The timeline's words read back as the command line's flag.
	back, err := ParseWindows(workdays.Spec())
	if err != nil || !(&Gates{Windows: back}).equal(g) {
		t.Fatalf("ParseWindows(%q) = %+v, %v; want the same windows", workdays.Spec(), back, err)
	}
	// A wait survives the API's JSON, words and all.
	now := at(2026, time.December, 3, 17, 30)
	w := wait(t, workdays, now)
	b, _ := json.Marshal(&HeldError{Reason: ReasonWindow, Window: w})
	var h HeldError
	if err := json.Unmarshal(b, &h); err != nil || WaitText(&h) != w.text() {
		t.Fatalf("a window wait through JSON: %q, %v; want %q", WaitText(&h), err, w.text())
	}
}

func TestParseWindows(t *testing.T) {
	w, err := ParseWindows(" tz=Europe/Berlin; allow=0 9 * * 1-4 for 8h ; allow=0 10 * * 5 for 4h; deny=0 0 24 12 * for 72h;")
	if err != nil || w.Timezone != "Europe/Berlin" || len(w.Allow) != 2 || w.Allow[1] != (WindowPeriod{"0 10 * * 5", 4 * time.Hour}) || len(w.Deny) != 1 {
		t.Fatalf("ParseWindows: %+v, %v", w, err)
	}
	if w, err := ParseWindows("none"); err != nil || w == nil || w.normal() != nil {
		t.Fatalf("ParseWindows(none) = %+v, %v; want empty windows, which remove the stored ones", w, err)
	}
	for in, want := range map[string]string{
		"":                                   "give at least one allow or deny period",
		"tz=Europe/Berlin":                   "give at least one allow or deny period",
		"allow 0 9 * * * for 8h":             "each part is key=value",
		"allow=0 9 * * *":                    "give the period's start and how long it lasts",
		"allow=0 9 * * * for 8 hours":        "the duration after for is not one",
		"open=0 9 * * * for 8h":              `unknown key "open"`,
		"tz=UTC; tz=UTC; deny=@daily for 1h": "give the time zone once",
		"tz=Nowhere; deny=@daily for 1h":     "not a known time zone",
		"deny=0 0 31 4 * for 1h":             "it never fires",
		"deny=0 0 24 12 * for 0s":            "from 1m to 744h",
	} {
		_, err := ParseWindows(in)
		var bad *InputError
		if !errors.As(err, &bad) || !strings.Contains(bad.Fix, want) {
			t.Errorf("ParseWindows(%q): %v; want invalid input saying %q", in, err, want)
		}
	}
}

// windowView is a scope of prod with one pending commit at generation 3, its pass holding the
// scope, under the windows w.
func windowView(w *Windows, rollback bool) View {
	ref := &Ref{Generation: 3, Sha: windowSha, Rollback: rollback}
	return View{Environment: "prod", Scope: "api", Gates: &Gates{Windows: w},
		State: &Scope{Mailbox: ref, Owner: 3}}
}

func TestEvaluatorHoldsOutsideTheWindow(t *testing.T) {
	now := at(2026, time.December, 3, 17, 30).Add(250 * time.Millisecond)
	opens := at(2026, time.December, 7, 9, 0)
	text := "outside the change window; opens Mon 09:00 Europe/Berlin"
	v := windowView(workdays, false)
	for name, got := range map[string]Verdict{
		"Hold":     Hold(v, 3, now, time.Second),
		"Evaluate": Evaluate(v, Question{Generation: 3, Lease: true, Holder: "run-3", Now: now, Skew: time.Second}),
	} {
		if got.Reason != ReasonWindow || got.Window == nil || !got.Window.Opens.Equal(opens) || got.Text() != text {
			t.Fatalf("%s outside the window: %v %q (window %+v); want %s saying %q", name, got.Reason, got.Text(), got.Window, ReasonWindow, text)
		}
		if want := opens.Sub(now).Truncate(time.Second) + time.Second; got.RetryAfter != want || !got.Until.Equal(opens) {
			t.Fatalf("%s: retry after %s, until %s; want until it opens (%s), in whole seconds %s", name, got.RetryAfter, got.Until, opens, want)
		}
		// A pass that may wait past the opening waits; one whose wait ends first ends held.
		if held := got.Err().(*HeldError); held.Outlasts(opens.Add(time.Minute)) || !held.Outlasts(opens.Add(-time.Minute)) {
			t.Fatalf("%s: a pass waiting past the opening is told to end held, or one that cannot wait that long is not", name)
		}
		var held *HeldError
		if err := got.Err(); !errors.As(err, &held) || held.Window == nil || !strings.Contains(err.Error(), text) || !errors.Is(err, ErrLeaseHeld) {
			t.Fatalf("%s's error: %v; want a retryable refusal with the window, saying %q", name, err, text)
		}
	}
	// Inside the window nothing holds it.
	inside := at(2026, time.December, 7, 9, 0)
	if got := Evaluate(v, Question{Generation: 3, Lease: true, Holder: "run-3", Now: inside, Skew: time.Second}); !got.Go() {
		t.Fatalf("Evaluate inside the window: %v %q; want go", got.Reason, got.Text())
	}
	// A window never holds a pass that does not take the lease (a build).
	if got := Evaluate(v, Question{Generation: 3, Now: now}); !got.Go() {
		t.Fatalf("Evaluate without a lease: %v; want go", got.Reason)
	}
}

func TestRollbackIsNeverHeldByAWindow(t *testing.T) {
	v := windowView(workdays, true)
	for _, now := range []time.Time{at(2026, time.December, 3, 17, 30), at(2026, time.December, 24, 10, 0)} {
		if got := Hold(v, 3, now, time.Second); !got.Go() {
			t.Fatalf("Hold of a rollback at %s: %v %q; want go: a rollback is the way back from a bad deploy", now, got.Reason, got.Text())
		}
		if got := Evaluate(v, Question{Generation: 3, Lease: true, Holder: "run-3", Now: now, Skew: time.Second}); !got.Go() {
			t.Fatalf("Evaluate of a rollback at %s: %v %q; want go", now, got.Reason, got.Text())
		}
	}
}

// A deny period every hour, all hour, is more than the search takes in: the gate still says the
// environment is in a deny window.
func TestWindowsDenyBeyondTheSearch(t *testing.T) {
	hourly := &Windows{Deny: []WindowPeriod{{Start: "0 * * * *", Duration: time.Hour}}}
	now := time.Date(2026, time.December, 2, 9, 30, 0, 0, time.UTC)
	w := wantClosed(t, hourly, now, time.Time{}, "in a deny window; the change window does not open in the next 400 days")
	if !w.Denied || !w.DenyUntil.IsZero() {
		t.Fatalf("wait %+v; want denied with no end found", w)
	}
	// An allowed start that falls in a deny period is not a deny period at the instant asked about.
	w = wait(t, workdays, at(2026, time.December, 23, 17, 30))
	if w.Denied || !w.Opens.Equal(at(2026, time.December, 28, 9, 0)) || w.text() != "outside the change window; opens Mon 09:00 Europe/Berlin" {
		t.Fatalf("the evening before a deny period: %+v %q; want outside the window, opening Monday", w, w.text())
	}
}

// BenchmarkWindowWait measures what the gate spends on a change window: an ordinary calendar,
// and one that needs the whole search (a deny period every hour).
func BenchmarkWindowWait(b *testing.B) {
	hourly := &Windows{Deny: []WindowPeriod{{Start: "0 * * * *", Duration: time.Hour}}}
	now := at(2026, time.December, 3, 17, 30)
	for name, w := range map[string]*Windows{"workdays": workdays, "hourly-deny": hourly} {
		v := View{Gates: &Gates{Windows: w}}
		ref := &Ref{Generation: 1, Sha: windowSha}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if windowWait(v, ref, now) == nil {
					b.Fatal("open")
				}
			}
		})
	}
}
