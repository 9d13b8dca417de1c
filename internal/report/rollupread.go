package report

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// TimelineReader pages through an environment's timeline: the Authority on a store, or the App's
// API client.
type TimelineReader interface {
	History(ctx context.Context, env string, before int64, limit int) (*authority.HistoryPage, error)
}

// RollupPage is how many events ReadRollup reads at a time: what it holds in memory at once.
const RollupPage = 1000

// ReadRollup computes env's rollup from its whole timeline within the retention, oldest event
// first, one page at a time: it holds one page of events and the rollup, whatever the number of
// events. state, the environment's current state (may be nil), gives the commit times of the
// intents it still holds (OrderOf); the records do not keep them.
func ReadRollup(ctx context.Context, tl TimelineReader, env string, state *authority.Env) (*Rollup, error) {
	first, err := tl.History(ctx, env, 0, 1)
	if err != nil {
		return nil, err
	}
	if first.Timed {
		return readRollupByTime(ctx, tl, env, state)
	}
	r := NewRollup(env)
	newest := first.Newest
	from, err := oldestKept(ctx, tl, env, newest)
	if err != nil {
		return nil, err
	}
	for ; from <= newest; from += RollupPage {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		page, err := tl.History(ctx, env, from+RollupPage, RollupPage)
		if err != nil {
			return nil, fmt.Errorf("read the events of %s from number %d: %w", env, from, err)
		}
		for _, ev := range page.Events {
			if ev.Seq > newest {
				break // newer than the report: the next report counts it
			}
			r.AddOrdered(ev, OrderOf(state, ev))
		}
	}
	return r, nil
}

// readRollupByTime is ReadRollup of a timeline that pages by time (the per-scope layout): the
// pages' cursors are found newest first, then each page read again and folded in, oldest first,
// so that it holds one page of events and one cursor per page.
func readRollupByTime(ctx context.Context, tl TimelineReader, env string, state *authority.Env) (*Rollup, error) {
	cursors := []int64{0}
	newest := int64(0)
	for before := int64(0); ; {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		page, err := tl.History(ctx, env, before, RollupPage)
		if err != nil {
			return nil, fmt.Errorf("read the events of %s: %w", env, err)
		}
		if before == 0 {
			newest = page.Newest
		}
		if page.Before == 0 {
			break
		}
		before = page.Before
		cursors = append(cursors, before)
	}
	r := NewRollup(env)
	// Through, here, is how many events the environment had numbered when the read began.
	r.Through = newest
	for i := len(cursors) - 1; i >= 0; i-- {
		// The events at or after the next older cursor and before this one: one page, unless
		// events of those times became visible since the first read (then a few).
		var events []authority.Event
		floor := int64(0)
		if i+1 < len(cursors) {
			floor = cursors[i+1]
		}
		for before := cursors[i]; ; {
			page, err := tl.History(ctx, env, before, RollupPage)
			if err != nil {
				return nil, fmt.Errorf("read the events of %s: %w", env, err)
			}
			older := slices.DeleteFunc(page.Events, func(ev authority.Event) bool { return ev.At.UnixNano() < floor })
			events = append(older, events...)
			if page.Before == 0 || page.Before <= floor || len(older) < len(page.Events) {
				break
			}
			before = page.Before
		}
		for _, ev := range events {
			r.add(ev, OrderOf(state, ev))
		}
	}
	return r, nil
}

// oldestKept is the number of env's oldest event within the retention (newest+1: none), found by
// bisection with one-event reads: events expire in the order they were numbered, so an environment
// whose older events expired is not read page by page from its first.
func oldestKept(ctx context.Context, tl TimelineReader, env string, newest int64) (int64, error) {
	lo, hi := int64(1), newest+1 // the answer is in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		page, err := tl.History(ctx, env, mid+1, 1)
		if err != nil {
			return 0, fmt.Errorf("find the oldest event of %s kept: %w", env, err)
		}
		if len(page.Events) > 0 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// DefaultSince is how far back a report looks unless told: 30 days.
const DefaultSince = 30 * 24 * time.Hour

// ParseSince reads how far back a report looks, in days ("30d") or as a Go duration ("720h"), from
// a day to MaxReportDays days; "" is DefaultSince.
func ParseSince(s string) (time.Duration, error) {
	if s == "" {
		return DefaultSince, nil
	}
	d, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 64)
		d = time.Duration(n) * 24 * time.Hour
		if n > MaxReportDays {
			err = errors.New("too long")
		}
	}
	if err != nil || d < 24*time.Hour || d > MaxReportDays*24*time.Hour {
		return 0, &authority.InputError{Field: "since", Value: s,
			Fix: fmt.Sprintf("give how far back the report looks, in days (30d) or as a duration (720h), from 1d to %dd", MaxReportDays)}
	}
	return d, nil
}

// ReadDelivery is env's delivery report over the UTC days since now-since, reported at now: from
// the rollup kept in the store when tl can keep one (the Authority: KeptDelivery), else from its
// rollup read from the whole timeline (ReadRollup) with the state's commit times.
func ReadDelivery(ctx context.Context, tl TimelineReader, env string, state *authority.Env, since time.Duration, now time.Time) (*Delivery, error) {
	if k, ok := tl.(Keeper); ok {
		return KeptDelivery(ctx, k, tl, env, state, since, now)
	}
	return wholeDelivery(ctx, tl, env, state, since, now)
}

// wholeDelivery is ReadDelivery from the whole timeline.
func wholeDelivery(ctx context.Context, tl TimelineReader, env string, state *authority.Env, since time.Duration, now time.Time) (*Delivery, error) {
	r, err := ReadRollup(ctx, tl, env, state)
	if err != nil {
		return nil, fmt.Errorf("delivery report of %s: %w", env, err)
	}
	return r.Report(now.Add(-since).Add(24*time.Hour), now), nil
}

// Update brings r up to date with e, a document whose outbox is being copied as records: the events
// of e's outbox newer than r's Through, each with its commit's Order from e (OrderOf), in order. It
// is what the copy of an outbox calls once the records landed, on the rollup kept for e's
// environment, before that rollup is written back. Events between r's Through and the outbox's
// oldest (copied by a write whose rollup update was lost) are read from tl first, so that a rollup
// never skips one; adding an event twice counts it once. A nil tl refuses such a gap instead.
func (r *Rollup) Update(ctx context.Context, tl TimelineReader, e *authority.Env) error {
	if e == nil || len(e.Outbox) == 0 {
		return nil
	}
	outbox := slices.SortedFunc(slices.Values(e.Outbox), func(a, b authority.Event) int { return cmp.Compare(a.Seq, b.Seq) })
	if first := outbox[0].Seq; first > r.Through+1 {
		if tl == nil {
			return fmt.Errorf("the rollup of %s ends at event %d and the outbox starts at %d: read the events between from the records", e.Name, r.Through, first)
		}
		if err := r.addRange(ctx, tl, e.Name, e, r.Through+1, first); err != nil {
			return err
		}
	}
	for _, ev := range outbox {
		r.AddOrdered(ev, OrderOf(e, ev))
	}
	return nil
}

// addRange adds env's events numbered from from to to (exclusive), a page at a time, each with
// what state tells of its commit (OrderOf).
func (r *Rollup) addRange(ctx context.Context, tl TimelineReader, env string, state *authority.Env, from, to int64) error {
	for ; from < to; from += RollupPage {
		end := min(from+RollupPage, to)
		page, err := tl.History(ctx, env, end, int(end-from))
		if err != nil {
			return fmt.Errorf("read the events of %s from number %d: %w", env, from, err)
		}
		for _, ev := range page.Events {
			if ev.Seq >= from && ev.Seq < end {
				r.AddOrdered(ev, OrderOf(state, ev))
			}
		}
	}
	return nil
}
