package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// drainDepth is how many intents the drained queue holds: the default queue limit.
const drainDepth = authority.DefaultQueueLimit

// drain fills one scope's queue (policy queue) with n intents, each claimed by a pass of its own,
// and drains it: in every round each waiting pass asks its deploy gate once, and the head deploys.
// It returns the timeline's events and the store's successful document writes, and checks that
// every intent deployed in generation order.
func drain(ctx context.Context, client func(testing.TB) authority.Store, tb testing.TB, env string, n int) (events, writes int64, err error) {
	var c counts
	a := authority.New(&countingStore{Store: client(tb), c: &c})
	sha := func(i int) string { return fmt.Sprintf("%040d", i) }
	for i := 1; i <= n; i++ {
		in := authority.Intent{ID: fmt.Sprintf("run-%d", i), Environment: env, Scopes: []string{"api"}, Sha: sha(i), Ref: "refs/heads/main", Policy: authority.PolicyQueue}
		if _, err := a.Accept(ctx, in, true); err != nil {
			return 0, 0, fmt.Errorf("accept %d: %w", i, err)
		}
	}
	before := c.puts.Load() - c.conflicts.Load()
	for head := 1; head <= n; head++ {
		for k := head + 1; k <= n; k++ {
			_, err := a.Gate(ctx, authority.GateRequest{Environment: env, Generation: int64(k), Scopes: []string{"api"}, Phase: "deploy", Holder: fmt.Sprintf("run-%d", k), LeaseTTL: time.Minute})
			if !errors.Is(err, authority.ErrLeaseHeld) {
				return 0, 0, fmt.Errorf("pass %d while %d is the head: %v; want it to wait", k, head, err)
			}
		}
		g, err := a.Gate(ctx, authority.GateRequest{Environment: env, Generation: int64(head), Scopes: []string{"api"}, Phase: "deploy", Holder: fmt.Sprintf("run-%d", head), LeaseTTL: time.Minute})
		if err != nil {
			return 0, 0, fmt.Errorf("head %d: %w", head, err)
		}
		res, err := a.Complete(ctx, authority.Completion{Environment: env, Generation: g.Generation, Scopes: []string{"api"}, Holder: g.Holder, Tokens: g.Tokens,
			Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3})
		if err != nil || res.Results["api"] != authority.ResultDeployed {
			return 0, 0, fmt.Errorf("head %d: %v %v", head, res, err)
		}
	}
	writes = c.puts.Load() - c.conflicts.Load() - before
	e, err := a.Status(ctx, env)
	if err != nil {
		return 0, 0, err
	}
	if e.Observed != int64(n) || e.Scopes["api"].Live.Sha != sha(n) {
		return 0, 0, fmt.Errorf("after the drain: %d/%d, live %s", e.Observed, e.Desired, e.Scopes["api"].Live.Sha)
	}
	return e.EventSeq, writes, nil
}

// BenchmarkQueueDrain drains a full queue of 100 intents while every waiting pass polls its gate
// once a round, and reports the timeline's events and the document writes it took: a waiting pass's
// refusal is recorded once, so both grow with the queue, not with its square. The counts are the
// domain's, the same on every store, so it runs on the memory store alone (about 5,000 gate calls).
func BenchmarkQueueDrain(b *testing.B) {
	for _, k := range storeKinds[:1] {
		b.Run(k.name, func(b *testing.B) {
			client := k.open(b)
			var events, writes int64
			for i := range b.N {
				ev, w, err := drain(b.Context(), client, b, strings.ToLower(fmt.Sprintf("drain-%d", i)), drainDepth)
				if err != nil {
					b.Fatal(err)
				}
				events, writes = events+ev, writes+w
			}
			b.ReportMetric(float64(events)/float64(b.N), "events/drain")
			b.ReportMetric(float64(writes)/float64(b.N), "writes/drain")
		})
	}
}
