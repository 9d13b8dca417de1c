package report

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// A delivery report (DORA's four keys, and the time spent behind) of one environment is computed
// from a Rollup: what the environment's timeline added up to, per scope and per UTC day, and the
// little a scope carries from one event to the next (the pushes waiting to go live, since when it
// is behind or failing). A rollup is a pure value: Add folds one event in, in timeline order, Merge
// combines two, and it round-trips through JSON, so that it can be kept beside the records and a
// report reads days, not events. Its size is bounded by scopes times days (and maxWaiting pushes
// per scope), never by the number of events.
//
// What the timeline says, and how each figure is read from it:
//
//   - A deploy is a deployed event of the scope.
//   - A push is an accepted event of the scope (an intent that joined a generation already pending
//     names no scope and is not a push of its own). It waits until a deploy of its generation or a
//     newer one makes it live: that deploy carries it, and every push it carries counts once as a
//     commit coalesced into it, with its lead time from the push's acceptance (the accepted event's
//     time) and, when known, from the commit's own time (its Order.CommittedAt, see AddOrdered). A
//     rollback supersedes what waits: those pushes are dropped, never live; the rollback's own
//     deploy carries none (what is accepted after it is newer).
//   - A change failure is a terminal failure (a failed event that does not retry) or a rollback.
//     The change failure rate is change failures per deploy.
//   - A scope fails at its first change failure after a deploy and is restored by its next deploy:
//     the time to restore is the time between the two.
//   - A scope is behind while some push waits: from the oldest waiting push's acceptance to the
//     deploy that carries the last of them (or a withdrawal or rollback that ends them). That time
//     is split over the UTC days it spans.
type Rollup struct {
	// Version is the layout's; a rollup of another layout is computed again from the events.
	Version     int    `json:"version"`
	Environment string `json:"environment"`
	// Through is the number of the newest event added: Add skips an event numbered at or below it,
	// so that adding the same outbox twice (a retried copy) counts it once.
	Through int64 `json:"through"`
	// From is the time of the oldest event added (zero: none).
	From time.Time `json:"from,omitzero"`
	// Until is the time of the newest event added.
	Until  time.Time              `json:"until,omitzero"`
	Scopes map[string]*ScopeCarry `json:"scopes,omitempty"`
	// Days are the per scope, per UTC day sums, sorted by day and scope.
	Days []Day `json:"days,omitempty"`

	last lastDate // the day of the newest event, formatted once: not part of the value
}

type lastDate struct {
	y    int
	m    time.Month
	d    int
	date string
}

// RollupVersion is the layout Rollup has.
const RollupVersion = 1

// maxWaiting bounds the pushes one scope's carry remembers: far above a scope's queue limit
// (authority.DefaultQueueLimit); past it the oldest is dropped (and counted) rather than the
// rollup growing with a timeline whose deploys were lost.
const maxWaiting = 1000

// ScopeCarry is what one scope carries from event to event.
type ScopeCarry struct {
	Waiting []WaitingPush `json:"waiting,omitempty"` // accepted, not yet live, oldest first
	// BehindSince is when the oldest push still waiting was accepted (zero: nothing waits).
	BehindSince time.Time `json:"behind_since,omitzero"`
	// FailingSince is when the scope's first change failure since its last deploy happened (zero:
	// none).
	FailingSince time.Time `json:"failing_since,omitzero"`
	// Dropped counts the pushes forgotten past maxWaiting.
	Dropped int `json:"dropped,omitempty"`
}

// WaitingPush is a push accepted for a scope and not yet live.
type WaitingPush struct {
	Generation  int64     `json:"generation"`
	AcceptedAt  time.Time `json:"accepted_at"`
	CommittedAt time.Time `json:"committed_at,omitzero"`
}

// Day is what one scope's timeline added up to on one UTC day.
type Day struct {
	Date  string `json:"date"` // 2006-01-02, UTC
	Scope string `json:"scope"`
	// Deploys counts deployed events; Commits the pushes they carried (coalesced).
	Deploys int `json:"deploys,omitempty"`
	Commits int `json:"commits,omitempty"`
	// Failures counts terminal failures, Rollbacks the rollbacks asked for.
	Failures  int `json:"failures,omitempty"`
	Rollbacks int `json:"rollbacks,omitempty"`
	// LeadFromAccept and LeadFromCommit: each carried push's time from its acceptance, and from its
	// commit's time (only the pushes whose commit time is known), to the deploy that carried it.
	LeadFromAccept Histogram `json:"lead_from_accept,omitzero"`
	LeadFromCommit Histogram `json:"lead_from_commit,omitzero"`
	// Restore: the times to restore of the restorations that happened that day.
	Restore Histogram `json:"restore,omitzero"`
	// BehindSeconds is how long, that day, some push of the scope waited to go live.
	BehindSeconds float64 `json:"behind_seconds,omitempty"`
}

const dayLayout = "2006-01-02"

// NewRollup returns the empty rollup of env.
func NewRollup(env string) *Rollup {
	return &Rollup{Version: RollupVersion, Environment: env, Scopes: map[string]*ScopeCarry{}}
}

// Add folds one event of the environment's timeline in; events must come in timeline order.
func (r *Rollup) Add(ev authority.Event) { r.AddOrdered(ev, authority.Order{}) }

// AddOrdered is Add with what GitHub told of the event's commit (an accepted event's Order, see
// OrderOf): its CommittedAt gives the lead time from the commit's time.
func (r *Rollup) AddOrdered(ev authority.Event, o authority.Order) {
	if ev.Seq != 0 && ev.Seq <= r.Through {
		return
	}
	r.Through = max(r.Through, ev.Seq)
	r.add(ev, o)
}

// add folds one event in, whatever its number: events of a timeline paged by time, whose numbers
// are per scope (authority.HistoryPage.Timed), each read once.
func (r *Rollup) add(ev authority.Event, o authority.Order) {
	if r.From.IsZero() || ev.At.Before(r.From) {
		r.From = ev.At
	}
	if ev.At.After(r.Until) {
		r.Until = ev.At
	}
	if ev.Scope == "" {
		return // environment-wide (policy, requires) or an intent that joined a pending generation
	}
	if r.Scopes == nil {
		r.Scopes = map[string]*ScopeCarry{}
	}
	sc := r.Scopes[ev.Scope]
	if sc == nil {
		sc = &ScopeCarry{}
		r.Scopes[ev.Scope] = sc
	}
	at := ev.At.UTC()
	switch ev.Kind {
	case authority.EventAccepted:
		if len(sc.Waiting) >= maxWaiting {
			sc.Waiting = slices.Delete(sc.Waiting, 0, 1)
			sc.Dropped++
		}
		sc.Waiting = append(sc.Waiting, WaitingPush{Generation: ev.Generation, AcceptedAt: at, CommittedAt: o.CommittedAt.UTC()})
		if sc.BehindSince.IsZero() {
			sc.BehindSince = at
		}
	case authority.EventDeployed:
		d := r.day(ev.Scope, at)
		d.Deploys++
		// A rollback's deploy carries nothing: what waited when it was asked for was dropped, and
		// what was accepted since is newer than it.
		sc.Waiting = slices.DeleteFunc(sc.Waiting, func(p WaitingPush) bool {
			if p.Generation > ev.Generation {
				return false
			}
			d.Commits++
			d.LeadFromAccept.Add(at.Sub(p.AcceptedAt))
			if !p.CommittedAt.IsZero() {
				d.LeadFromCommit.Add(at.Sub(p.CommittedAt))
			}
			return true
		})
		if !sc.FailingSince.IsZero() {
			d.Restore.Add(at.Sub(sc.FailingSince))
			sc.FailingSince = time.Time{}
		}
		r.settleBehind(ev.Scope, sc, at)
	case authority.EventFailed:
		if !Terminal(ev) {
			return
		}
		r.day(ev.Scope, at).Failures++
		if sc.FailingSince.IsZero() {
			sc.FailingSince = at
		}
	case authority.EventRollback:
		r.day(ev.Scope, at).Rollbacks++
		if sc.FailingSince.IsZero() {
			sc.FailingSince = at
		}
		// What waited is superseded by the rollback: never live.
		sc.Waiting = sc.Waiting[:0]
		r.settleBehind(ev.Scope, sc, at)
		// The rollback itself waits to go live, as a push would, but carries no commit.
		sc.BehindSince = at
	case authority.EventWithdrawn, authority.EventSkipped:
		// Its pending work ended without going live: a withdrawn intent (what asked for it is gone)
		// or a blocking failure someone skipped.
		sc.Waiting = slices.DeleteFunc(sc.Waiting, func(p WaitingPush) bool { return p.Generation == ev.Generation })
		r.settleBehind(ev.Scope, sc, at)
	}
}

// settleBehind ends or moves the scope's time behind at t: the time since BehindSince is added to
// the days it spans; if pushes still wait, the scope stays behind from t.
func (r *Rollup) settleBehind(scope string, sc *ScopeCarry, t time.Time) {
	if sc.BehindSince.IsZero() {
		return
	}
	r.addBehind(scope, sc.BehindSince, t)
	sc.BehindSince = time.Time{}
	if len(sc.Waiting) > 0 {
		sc.BehindSince = t
	}
}

// addBehind adds the interval [from, to) to the behind time of each UTC day it spans.
func (r *Rollup) addBehind(scope string, from, to time.Time) {
	for from.Before(to) {
		next := startOfDay(from).AddDate(0, 0, 1)
		end := minTime(next, to)
		r.day(scope, from).BehindSeconds += end.Sub(from).Seconds()
		from = end
	}
}

// day is the rollup's day of scope holding t, added if new; Days stay sorted.
func (r *Rollup) day(scope string, t time.Time) *Day {
	t = t.UTC()
	if y, m, d := t.Date(); y != r.last.y || m != r.last.m || d != r.last.d {
		r.last.y, r.last.m, r.last.d, r.last.date = y, m, d, t.Format(dayLayout)
	}
	return r.dayOf(scope, r.last.date)
}

func (r *Rollup) dayOf(scope, date string) *Day {
	i, found := slices.BinarySearchFunc(r.Days, Day{Date: date, Scope: scope}, compareDays)
	if !found {
		r.Days = slices.Insert(r.Days, i, Day{Date: date, Scope: scope})
	}
	return &r.Days[i]
}

func compareDays(a, b Day) int {
	return cmp.Or(strings.Compare(a.Date, b.Date), strings.Compare(a.Scope, b.Scope))
}

// Merge adds o's days to r's. o continues r (it was added the events after r's, as a later copy of
// the outbox does): its carry, when it added any event, replaces r's, and r's Through is the
// greater of the two.
func (r *Rollup) Merge(o *Rollup) {
	if o == nil {
		return
	}
	for _, d := range o.Days {
		x := r.dayOf(d.Scope, d.Date)
		x.Deploys += d.Deploys
		x.Commits += d.Commits
		x.Failures += d.Failures
		x.Rollbacks += d.Rollbacks
		x.LeadFromAccept.Merge(d.LeadFromAccept)
		x.LeadFromCommit.Merge(d.LeadFromCommit)
		x.Restore.Merge(d.Restore)
		x.BehindSeconds += d.BehindSeconds
	}
	if o.Through > r.Through {
		r.Through = o.Through
		if r.Scopes == nil {
			r.Scopes = map[string]*ScopeCarry{}
		}
		for name, c := range o.Scopes {
			cc := *c
			cc.Waiting = slices.Clone(c.Waiting)
			r.Scopes[name] = &cc
		}
	}
	if !o.From.IsZero() && (r.From.IsZero() || o.From.Before(r.From)) {
		r.From = o.From
	}
	if o.Until.After(r.Until) {
		r.Until = o.Until
	}
}

// Prune drops the days before the UTC day of t: what the retention let expire.
func (r *Rollup) Prune(t time.Time) {
	date := t.UTC().Format(dayLayout)
	r.Days = slices.DeleteFunc(r.Days, func(d Day) bool { return d.Date < date })
}

// Terminal reports whether a failed event ended its intent for good (its final attempt, or a
// configuration error) rather than saying it will retry. The event says it only in its words.
func Terminal(ev authority.Event) bool {
	return ev.Kind == authority.EventFailed && !strings.Contains(ev.Message, "; will retry")
}

// OrderOf is what e's state still tells of the commit of event ev: the Order of the entry of its
// scope and generation pending in the mailbox or the queue, or live. It is what a copy of the
// outbox passes to AddOrdered, since the document it copies from holds those entries; zero when
// the state no longer holds it.
func OrderOf(e *authority.Env, ev authority.Event) authority.Order {
	if e == nil || ev.Scope == "" {
		return authority.Order{}
	}
	sc := e.Scopes[ev.Scope]
	if sc == nil {
		return authority.Order{}
	}
	for _, m := range sc.Entries() {
		if m.Generation == ev.Generation {
			return m.Order
		}
	}
	if sc.Live != nil && sc.Live.Generation == ev.Generation {
		return sc.Live.Order
	}
	return authority.Order{}
}

func startOfDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Continue returns an empty rollup that carries on from r: r's carry and Through, no days. The
// events after r's added to it, and it merged into r (Merge), give what adding them to r gives.
func (r *Rollup) Continue() *Rollup {
	c := &Rollup{Version: RollupVersion, Environment: r.Environment, Through: r.Through, From: r.From, Until: r.Until,
		Scopes: make(map[string]*ScopeCarry, len(r.Scopes))}
	for name, sc := range r.Scopes {
		cc := *sc
		cc.Waiting = slices.Clone(sc.Waiting)
		c.Scopes[name] = &cc
	}
	return c
}
