package authority

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	// The release image has no time zone database: the one compiled in names every zone.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Windows are an environment's change windows: when a commit may deploy there. A commit deploys
// inside an allowed period and outside every deny period; deny wins over allow, and without allow
// periods every time is allowed but the deny ones. Each period starts when its cron expression
// fires, read in Timezone, and lasts Duration of absolute time, so a period that spans a
// daylight-saving change is as long as it says, not as long as the wall clock shows.
type Windows struct {
	// Timezone is the IANA time zone the periods' starts are read in (Europe/Berlin); empty: UTC.
	Timezone string         `json:"timezone,omitempty"`
	Allow    []WindowPeriod `json:"allow,omitempty"`
	Deny     []WindowPeriod `json:"deny,omitempty"`
}

// WindowPeriod is one allowed or denied period: it starts each time Start fires and lasts Duration.
type WindowPeriod struct {
	// Start is a standard five-field cron expression (minute hour day-of-month month day-of-week,
	// 0 9 * * 1-5) or a descriptor such as @daily.
	Start    string        `json:"start"`
	Duration time.Duration `json:"duration"`
}

// Limits of change windows: a period lasts at most MaxWindowDuration, an environment has at most
// MaxWindowPeriods of each kind, and the gate looks WindowHorizon ahead for the window to open.
const (
	MaxWindowDuration = 31 * 24 * time.Hour
	MinWindowDuration = time.Minute
	MaxWindowPeriods  = 32
	WindowHorizon     = 400 * 24 * time.Hour
)

// windowSteps bounds the work of one search for the opening: each step moves past a deny period
// or to the next allowed start, so a calendar of ordinary periods takes a handful; one that needs
// more (a deny period every minute) is answered as not opening within the horizon.
const windowSteps = 1024

// windowNeverRetry is how soon a pass is told to ask again when the window does not open within
// the horizon: only a change of the configuration can open it.
const windowNeverRetry = time.Hour

// cronParser reads standard cron expressions and descriptors, in the windows' time zone.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// CheckWindowTimezone checks a change window's time zone and returns it: an IANA name
// (Europe/Berlin, UTC); empty is UTC.
func CheckWindowTimezone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, &InputError{Field: "windows timezone", Value: name,
			Fix: "name the time zone (e.g. Europe/Berlin or UTC): Local is whatever the machine says"}
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, &InputError{Field: "windows timezone", Value: name,
			Fix: "not a known time zone; give an IANA name such as Europe/Berlin, America/New_York or UTC"}
	}
	return loc, nil
}

// CheckWindowStart checks a period's start, read in loc (nil: UTC): a five-field cron expression
// or a descriptor that fires at least once.
func CheckWindowStart(expr string, loc *time.Location) error {
	_, err := windowSchedule(expr, loc)
	return err
}

// windowSchedule reads a period's start in loc (nil: UTC).
func windowSchedule(expr string, loc *time.Location) (cron.Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	expr = strings.TrimSpace(expr)
	bad := func(fix string) error { return &InputError{Field: "windows start", Value: expr, Fix: fix} }
	switch {
	case expr == "":
		return nil, bad("give when the period starts as a cron expression: minute hour day-of-month month day-of-week, e.g. 0 9 * * 1-5")
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, bad("give the time zone once for all periods (windows timezone), not in the expression")
	case strings.HasPrefix(expr, "@every"):
		return nil, bad("@every counts from whenever it is read, not by the calendar; give a cron expression such as 0 9 * * 1-5")
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, bad(fmt.Sprintf("not a cron expression (%v); give five fields, minute hour day-of-month month day-of-week, e.g. 0 9 * * 1-5", err))
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, bad("give a cron expression such as 0 9 * * 1-5")
	}
	spec.Location = loc
	// The fields have no year, so an expression that fires at all fires within a leap cycle.
	if spec.Next(time.Date(2000, time.January, 1, 0, 0, 0, 0, loc)).IsZero() {
		return nil, bad("it never fires (no such day); check the day of the month and the month, e.g. 0 0 24 12 * for 24 December")
	}
	return spec, nil
}

// CheckWindowDuration checks how long a period lasts: from MinWindowDuration to MaxWindowDuration.
func CheckWindowDuration(d time.Duration) error {
	if d < MinWindowDuration || d > MaxWindowDuration {
		return &InputError{Field: "windows duration", Value: formatDuration(d),
			Fix: fmt.Sprintf("give how long the period lasts, from %s to %s (31 days), e.g. 8h", formatDuration(MinWindowDuration), formatDuration(MaxWindowDuration))}
	}
	return nil
}

// validate checks windows that do not come from a configuration file (which checks them with
// their lines): the time zone, each period's start and duration, and how many there are.
func (w *Windows) validate() error {
	if w == nil {
		return nil
	}
	_, err := w.compile()
	return err
}

// compile checks w and reads its calendar.
func (w *Windows) compile() (*calendar, error) {
	loc, err := CheckWindowTimezone(w.Timezone)
	if err != nil {
		return nil, err
	}
	c := &calendar{zone: w.zone()}
	for _, kind := range []struct {
		name    string
		periods []WindowPeriod
		to      *[]period
	}{{"allow", w.Allow, &c.allow}, {"deny", w.Deny, &c.deny}} {
		if len(kind.periods) > MaxWindowPeriods {
			return nil, &InputError{Field: "windows " + kind.name, Value: fmt.Sprint(len(kind.periods)),
				Fix: fmt.Sprintf("give at most %d %s periods; a cron expression can name several days or hours at once (0 9 * * 1-4)", MaxWindowPeriods, kind.name)}
		}
		for i, p := range kind.periods {
			s, err := windowSchedule(p.Start, loc)
			if err == nil {
				err = CheckWindowDuration(p.Duration)
			}
			var bad *InputError
			if errors.As(err, &bad) {
				// Name the period, as the command line and the API give them: windows allow[0] start.
				named := *bad
				named.Field = fmt.Sprintf("windows %s[%d] %s", kind.name, i, strings.TrimPrefix(bad.Field, "windows "))
				return nil, &named
			}
			*kind.to = append(*kind.to, period{s, p.Duration})
		}
	}
	return c, nil
}

// zone is the name the words give the time zone.
func (w *Windows) zone() string {
	if w.Timezone == "" {
		return "UTC"
	}
	return w.Timezone
}

// normal is w as stored: nil when it has no periods (a time zone alone holds for nothing).
func (w *Windows) normal() *Windows {
	if w == nil || (len(w.Allow) == 0 && len(w.Deny) == 0) {
		return nil
	}
	return &Windows{Timezone: w.Timezone, Allow: slices.Clone(w.Allow), Deny: slices.Clone(w.Deny)}
}

// String says what the windows are, for the timeline, in the syntax of the command line's
// --windows (ParseWindows reads it back).
func (w *Windows) String() string {
	if w = w.normal(); w == nil {
		return ""
	}
	return "windows " + w.Spec()
}

// Spec is w in the syntax of the command line's --windows: "tz=Europe/Berlin; allow=0 9 * * 1-4
// for 8h; deny=0 0 24 12 * for 72h"; "none" when it has no periods.
func (w *Windows) Spec() string {
	if w = w.normal(); w == nil {
		return "none"
	}
	parts := []string{"tz=" + w.zone()}
	for _, p := range w.Allow {
		parts = append(parts, "allow="+p.String())
	}
	for _, p := range w.Deny {
		parts = append(parts, "deny="+p.String())
	}
	return strings.Join(parts, "; ")
}

// String is the period as --windows spells it: "0 9 * * 1-4 for 8h".
func (p WindowPeriod) String() string { return p.Start + " for " + formatDuration(p.Duration) }

// ParseWindows reads the command line's --windows: parts separated by semicolons, each
// tz=ZONE, allow=CRON for DURATION or deny=CRON for DURATION (allow and deny as often as needed);
// "none" is no windows (an empty Windows, which removes the stored ones). The result is checked.
func ParseWindows(s string) (*Windows, error) {
	s = strings.TrimSpace(s)
	if s == "none" {
		return &Windows{}, nil
	}
	const form = "write it as tz=Europe/Berlin; allow=0 9 * * 1-4 for 8h; deny=0 0 24 12 * for 72h (allow and deny as often as needed), or none"
	w := &Windows{}
	tz := false
	for part := range strings.SplitSeq(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, val, ok := strings.Cut(part, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok {
			return nil, &InputError{Field: "windows", Value: part, Fix: "each part is key=value; " + form}
		}
		switch key {
		case "tz", "timezone":
			if tz {
				return nil, &InputError{Field: "windows", Value: part, Fix: "give the time zone once; " + form}
			}
			w.Timezone, tz = val, true
		case "allow", "deny":
			i := strings.LastIndex(val, " for ")
			if i < 0 {
				return nil, &InputError{Field: "windows", Value: part, Fix: "give the period's start and how long it lasts, e.g. " + key + "=0 9 * * 1-4 for 8h"}
			}
			d, err := time.ParseDuration(strings.TrimSpace(val[i+len(" for "):]))
			if err != nil {
				return nil, &InputError{Field: "windows", Value: part, Fix: "the duration after for is not one; write it as Go does, e.g. 8h or 72h"}
			}
			p := WindowPeriod{Start: strings.TrimSpace(val[:i]), Duration: d}
			if key == "allow" {
				w.Allow = append(w.Allow, p)
			} else {
				w.Deny = append(w.Deny, p)
			}
		default:
			return nil, &InputError{Field: "windows", Value: part, Fix: fmt.Sprintf("unknown key %q; %s", key, form)}
		}
	}
	if len(w.Allow) == 0 && len(w.Deny) == 0 {
		return nil, &InputError{Field: "windows", Value: s, Fix: "give at least one allow or deny period; " + form}
	}
	if err := w.validate(); err != nil {
		return nil, err
	}
	return w, nil
}

// formatDuration spells d as a Go duration without its zero tails: 8h, 1h30m, 72h.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// calendars remembers the calendars the gate read, by their windows' spelling: reading one loads
// its time zone and parses its expressions, which every gate of the environment would repeat.
var calendars = &calendarCache{read: map[string]*calendar{}}

// maxCalendars bounds the calendars remembered; past it they are all forgotten and read again.
const maxCalendars = 256

type calendarCache struct {
	mu   sync.Mutex
	read map[string]*calendar
}

// get returns the calendar of w, reading it the first time.
func (cc *calendarCache) get(w *Windows) (*calendar, error) {
	key := w.Spec()
	cc.mu.Lock()
	c := cc.read[key]
	cc.mu.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := w.compile()
	if err != nil {
		return nil, err
	}
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if len(cc.read) >= maxCalendars {
		clear(cc.read)
	}
	cc.read[key] = c
	return c, nil
}

// calendar is Windows read: the time zone and each period's schedule. It is read-only once read,
// so the gates of several environments may share it.
type calendar struct {
	zone  string
	allow []period
	deny  []period
}

type period struct {
	start cron.Schedule
	d     time.Duration
}

// covering returns the start of the earliest of p's periods that covers t: a period started
// after t-d (Next is strictly after) and no later than t. Zero: none does.
func (p period) covering(t time.Time) time.Time {
	s := p.start.Next(t.Add(-p.d))
	if s.IsZero() || s.After(t) {
		return time.Time{}
	}
	return s
}

// denied reports whether t is in a deny period, and then until when the deny period covering it
// lasts (the latest end, when several do).
func (c *calendar) denied(t time.Time) (time.Time, bool) {
	var until time.Time
	for _, p := range c.deny {
		if s := p.covering(t); !s.IsZero() {
			if end := s.Add(p.d); end.After(until) {
				until = end
			}
		}
	}
	return until, !until.IsZero()
}

// allowed reports whether t is in an allowed period; without allow periods every time is.
func (c *calendar) allowed(t time.Time) bool {
	if len(c.allow) == 0 {
		return true
	}
	for _, p := range c.allow {
		if !p.covering(t).IsZero() {
			return true
		}
	}
	return false
}

// nextAllow is the earliest start of an allowed period after t; zero: none.
func (c *calendar) nextAllow(t time.Time) time.Time {
	var next time.Time
	for _, p := range c.allow {
		if s := p.start.Next(t); !s.IsZero() && (next.IsZero() || s.Before(next)) {
			next = s
		}
	}
	return next
}

// opens finds the earliest instant at or after now inside an allowed period and outside every
// deny period: the instants where that can begin are now, the starts of allowed periods and the
// ends of deny periods, so the search moves from one to the next. denied: now is in a deny
// period, which ends at until (zero: not within the search). A zero opening: not within
// WindowHorizon.
func (c *calendar) opens(now time.Time) (opens, until time.Time, denied bool) {
	limit := now.Add(WindowHorizon)
	t := now
	leading := true // still moving through the deny periods that cover now
	for range windowSteps {
		if t.After(limit) {
			break
		}
		if end, in := c.denied(t); in {
			t, denied = end, denied || leading
			continue
		}
		if leading {
			leading = false
			if denied {
				until = t
			}
		}
		if c.allowed(t) {
			return t, until, denied
		}
		if t = c.nextAllow(t); t.IsZero() {
			break
		}
	}
	if leading && t.After(limit) {
		until = t // the deny periods covering now outlast the horizon
	}
	return time.Time{}, until, denied
}

// WindowWait is what a commit waits for outside the change window (ReasonWindow): when the window
// opens, in which time zone, and, when the environment is in a deny period, until when.
type WindowWait struct {
	// Opens is when the window opens; zero: not within WindowHorizon.
	Opens time.Time `json:"opens,omitzero"`
	// Timezone is the windows' time zone, which the words give times in.
	Timezone string `json:"timezone"`
	// Denied: the instant asked about is in a deny period, which ends at DenyUntil (zero: not
	// within the search).
	Denied    bool      `json:"denied,omitempty"`
	DenyUntil time.Time `json:"deny_until,omitzero"`
	// Asked is when the gate asked: the words name the day of an opening within a week of it and
	// the date of a later one.
	Asked time.Time `json:"asked"`
	// Problem says why the stored windows cannot be read; the gate then holds every commit.
	Problem string `json:"problem,omitempty"`
}

func (w *WindowWait) text() string {
	horizon := fmt.Sprintf("the change window does not open in the next %d days", WindowHorizon/(24*time.Hour))
	switch {
	case w.Problem != "":
		return "the change windows cannot be read (" + w.Problem + "); fix them in the configuration"
	case w.Denied && w.DenyUntil.IsZero():
		return "in a deny window; " + horizon
	case !w.DenyUntil.IsZero() && w.Opens.IsZero():
		return fmt.Sprintf("in a deny window until %s; %s", w.date(w.DenyUntil), horizon)
	case !w.DenyUntil.IsZero() && w.Opens.Equal(w.DenyUntil):
		return "in a deny window until " + w.date(w.DenyUntil)
	case !w.DenyUntil.IsZero():
		return fmt.Sprintf("in a deny window until %s; opens %s", w.date(w.DenyUntil), w.when(w.Opens))
	case w.Opens.IsZero():
		return "outside the change window; " + horizon
	}
	return "outside the change window; opens " + w.when(w.Opens)
}

// location is the time zone the words give times in.
func (w *WindowWait) location() *time.Location {
	if loc, err := CheckWindowTimezone(w.Timezone); err == nil {
		return loc
	}
	return time.UTC
}

// when names t by its day when it is within a week of when the gate asked (Mon 09:00
// Europe/Berlin), by its date otherwise.
func (w *WindowWait) when(t time.Time) string {
	if !w.Asked.IsZero() && t.Sub(w.Asked) < 7*24*time.Hour {
		return t.In(w.location()).Format("Mon 15:04") + " " + w.Timezone
	}
	return w.date(t)
}

// date names t by its day and date (Sun 27 Dec 00:00 Europe/Berlin), with the year when it is
// not the year asked in.
func (w *WindowWait) date(t time.Time) string {
	loc := w.location()
	layout := "Mon 2 Jan 15:04"
	if w.Asked.IsZero() || t.In(loc).Year() != w.Asked.In(loc).Year() {
		layout = "Mon 2 Jan 2006 15:04"
	}
	return t.In(loc).Format(layout) + " " + w.Timezone
}

// windowWait says whether the pass of ref waits for a change window; nil: it may go now. A
// rollback never asks (hold lets it go before any gate).
func windowWait(v View, ref *Ref, now time.Time) *WindowWait {
	if v.Gates == nil {
		return nil
	}
	w := v.Gates.Windows.normal()
	if w == nil {
		return nil
	}
	c, err := calendars.get(w)
	if err != nil {
		return &WindowWait{Timezone: w.zone(), Asked: now, Problem: err.Error()}
	}
	opens, until, denied := c.opens(now)
	if opens.Equal(now) {
		return nil
	}
	return &WindowWait{Opens: opens, Timezone: c.zone, Denied: denied, DenyUntil: until, Asked: now}
}

// retryAfter is how soon a pass outside the change window is told to ask again: when the window
// opens, in whole seconds, at least one (a caller may ask sooner, as a waiting pass does when its
// own wait ends first). A window that does not open within the horizon is asked about hourly.
func (w *WindowWait) retryAfter(now time.Time) time.Duration {
	if w.Opens.IsZero() {
		return windowNeverRetry
	}
	secs := (w.Opens.Sub(now) + time.Second - 1) / time.Second
	return max(secs, 1) * time.Second
}
