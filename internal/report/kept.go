package report

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Keeper keeps values beside an environment in the store: the Authority (ReadKept and the rest).
type Keeper interface {
	ReadKept(ctx context.Context, env, name string) (json.RawMessage, int64, error)
	WriteKept(ctx context.Context, env, name string, rev int64, v json.RawMessage) (int64, error)
	KeepRecords(ctx context.Context, env, name string, values map[string]authority.KeptValue) error
	ReadKeptRecords(ctx context.Context, env, name string, ids []string) (map[string]json.RawMessage, error)
}

// keptName is the name the delivery rollup is kept under beside its environment.
const keptName = "rollup"

// keptDay is one closed UTC day of a kept rollup, every scope's sums, kept as a record.
type keptDay struct {
	Version int   `json:"version"`
	Days    []Day `json:"days"`
}

// KeptDelivery is ReadDelivery from a rollup kept in the store beside the environment, so that a
// report reads the days, not the events: the kept rollup's head (its carry and the days still
// open), brought up to date with the events after it, and the closed days of the window, each a
// record. The first report of an environment reads its whole timeline once (ReadRollup); every
// report after it reads only what happened since the one before. Writing the rollup back is
// best-effort: a report that loses the race to another, or cannot write (a store opened
// read-only), is still right, and the next one reads a little more. The passes' own writes are as
// they were (on a git store a report's records push and a pass's may race for the records ref:
// the loser pushes again).
func KeptDelivery(ctx context.Context, k Keeper, tl TimelineReader, env string, state *authority.Env, since time.Duration, now time.Time) (*Delivery, error) {
	r, rev, err := keptRollup(ctx, k, tl, env, state)
	if err != nil {
		return nil, fmt.Errorf("delivery report of %s: %w", env, err)
	}
	// A day is closed once nothing can add to it any more: it is over, and no scope still behind
	// since then (time behind is added to every day it spans).
	closed := startOfDay(now)
	for _, sc := range r.Scopes {
		if !sc.BehindSince.IsZero() && sc.BehindSince.Before(closed) {
			closed = startOfDay(sc.BehindSince)
		}
	}
	byDate := map[string][]Day{}
	r.Days = slices.DeleteFunc(r.Days, func(d Day) bool {
		if d.Date >= closed.Format(dayLayout) {
			return false
		}
		byDate[d.Date] = append(byDate[d.Date], d)
		return true
	})
	if len(byDate) > 0 {
		values := map[string]authority.KeptValue{}
		for date, days := range byDate {
			day, _ := time.Parse(dayLayout, date)
			if b, err := json.Marshal(keptDay{Version: RollupVersion, Days: days}); err == nil {
				values[date] = authority.KeptValue{Value: b, At: day.AddDate(0, 0, 1)}
			}
		}
		// The days must be stored before the head that no longer holds them; a store that takes
		// neither (a read-only one) still gets its report, computed afresh the next time.
		if err := k.KeepRecords(ctx, env, keptName, values); err != nil {
			rev = -1
		}
	}
	if b, err := json.Marshal(r); err == nil && rev >= 0 {
		_, _ = k.WriteKept(ctx, env, keptName, rev, b) // lost to another report, or refused: the next one reads a little more
	}
	// The report: the head's open days, and the window's closed days from their records.
	from := startOfDay(now.Add(-since).Add(24 * time.Hour))
	var dates []string
	for d := from; d.Before(closed); d = d.AddDate(0, 0, 1) {
		dates = append(dates, d.Format(dayLayout))
	}
	kept, err := k.ReadKeptRecords(ctx, env, keptName, dates)
	if err != nil {
		return nil, fmt.Errorf("delivery report of %s: %w", env, err)
	}
	full := &Rollup{Version: RollupVersion, Environment: env, Through: r.Through, From: r.From, Until: r.Until, Scopes: r.Scopes, Days: slices.Clone(r.Days)}
	for _, date := range dates {
		var kd keptDay
		if b, ok := kept[date]; ok && json.Unmarshal(b, &kd) == nil && kd.Version == RollupVersion {
			full.Days = append(full.Days, kd.Days...)
		} else if days, ok := byDate[date]; ok {
			full.Days = append(full.Days, days...) // kept just now, but not read back yet
		}
	}
	slices.SortFunc(full.Days, compareDays)
	return full.Report(from, now), nil
}

// keptRollup is the kept rollup's head brought up to date with the timeline, and the revision it
// was read at (0: none was kept, or one of another layout).
func keptRollup(ctx context.Context, k Keeper, tl TimelineReader, env string, state *authority.Env) (*Rollup, int64, error) {
	raw, rev, err := k.ReadKept(ctx, env, keptName)
	if err != nil {
		return nil, 0, err
	}
	var r Rollup
	if raw == nil || json.Unmarshal(raw, &r) != nil || r.Version != RollupVersion || r.Environment != env {
		full, err := ReadRollup(ctx, tl, env, state)
		return full, rev, err
	}
	if r.Scopes == nil {
		r.Scopes = map[string]*ScopeCarry{}
	}
	first, err := tl.History(ctx, env, 0, 1)
	if err != nil {
		return nil, 0, err
	}
	if first.Timed {
		// Numbered per scope: the kept head cannot say which events it holds.
		full, err := ReadRollup(ctx, tl, env, state)
		return full, rev, err
	}
	newest := first.Newest
	from := r.Through + 1
	if from <= newest {
		// Events the retention let expire since the last report are gone: carry on from the oldest kept.
		page, err := tl.History(ctx, env, from+1, 1)
		if err != nil {
			return nil, 0, err
		}
		if len(page.Events) == 0 {
			if from, err = oldestKept(ctx, tl, env, newest); err != nil {
				return nil, 0, err
			}
		}
	}
	if err := r.addRange(ctx, tl, env, state, from, newest+1); err != nil {
		return nil, 0, err
	}
	return &r, rev, nil
}
