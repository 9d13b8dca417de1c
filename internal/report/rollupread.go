package report

import (
	"context"
	"fmt"

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
	r := NewRollup(env)
	newest := first.Newest
	for from := int64(1); from <= newest; from += RollupPage {
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
