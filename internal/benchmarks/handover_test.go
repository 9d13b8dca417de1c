package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
)

// Lease hand-over: a holder with a 3 s lease releases it after a while; how soon does a waiter in
// Gate get it?
const handoverTTL = 3 * time.Second

// handoverHolds are how long the holder keeps the lease after the waiter's first refusal, one per
// iteration in turn: the release falls at different points of the waiter's polling schedule.
var handoverHolds = []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second}

// gateFunc waits for a lease the way a pass does.
type gateFunc func(ctx context.Context, a pass.Gater, req authority.GateRequest, wait time.Duration) (*authority.Grant, error)

// backoffGate is pass.Gate: polls from 250 ms growing to 2 s, each capped by retry_after.
func backoffGate(ctx context.Context, a pass.Gater, req authority.GateRequest, wait time.Duration) (*authority.Grant, error) {
	return pass.Gate(ctx, a, req, wait, nil)
}

// retryAfterGate is how Gate used to wait: after each refusal it slept the whole retry_after (the
// time until the holder's lease expires), capped by the wait left.
func retryAfterGate(ctx context.Context, a pass.Gater, req authority.GateRequest, wait time.Duration) (*authority.Grant, error) {
	deadline := time.Now().Add(wait)
	for {
		g, err := a.Gate(ctx, req)
		var held *authority.HeldError
		if !errors.As(err, &held) {
			return g, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, err
		}
		t := time.NewTimer(min(held.RetryAfter, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// notifyingGater tells, once, that the waiter was refused.
type notifyingGater struct {
	a       pass.Gater
	refused chan struct{}
	polls   int
}

func (n *notifyingGater) Gate(ctx context.Context, r authority.GateRequest) (*authority.Grant, error) {
	n.polls++
	g, err := n.a.Gate(ctx, r)
	if errors.Is(err, authority.ErrLeaseHeld) && n.polls == 1 {
		close(n.refused)
	}
	return g, err
}

// handover runs one hand-over: the holder takes the lease, the waiter starts waiting, the holder
// releases it hold after the waiter's first refusal. It returns the time from the release to the
// waiter's grant, and the waiter's requests.
func handover(ctx context.Context, holder, waiter *authority.Authority, req authority.GateRequest, hold time.Duration, wait gateFunc) (time.Duration, int, error) {
	hreq, wreq := req, req
	hreq.Holder, wreq.Holder = "holder", "waiter"
	hg, err := holder.Gate(ctx, hreq)
	if err != nil {
		return 0, 0, fmt.Errorf("holder gate: %w", err)
	}
	ng := &notifyingGater{a: waiter, refused: make(chan struct{})}
	type result struct {
		g   *authority.Grant
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		g, err := wait(ctx, ng, wreq, time.Minute)
		done <- result{g, err, time.Now()}
	}()
	select {
	case <-ng.refused:
	case r := <-done:
		return 0, 0, fmt.Errorf("the waiter was not refused while the lease was held: %+v, %v", r.g, r.err)
	}
	time.Sleep(hold) // the holder's work
	released := time.Now()
	if err := holder.Release(ctx, hg); err != nil {
		return 0, 0, fmt.Errorf("holder release: %w", err)
	}
	r := <-done
	if r.err != nil {
		return 0, 0, fmt.Errorf("waiter gate: %w", r.err)
	}
	if r.g.Tokens["api"] != hg.Tokens["api"]+1 {
		return 0, 0, fmt.Errorf("the waiter got token %d after the holder's %d", r.g.Tokens["api"], hg.Tokens["api"])
	}
	if err := waiter.Release(ctx, r.g); err != nil {
		return 0, 0, fmt.Errorf("waiter release: %w", err)
	}
	return r.at.Sub(released), ng.polls, nil
}

// BenchmarkHandover measures release-to-grant time on every store: a waiter in pass.Gate (polling
// with back-off) beside, in the same iteration and on the same store, the old wait (sleeping until
// retry_after). The skew margin is 0; the default 5 s would add 5 s to every old wait.
func BenchmarkHandover(b *testing.B) {
	for _, sk := range storeKinds {
		b.Run(sk.name, func(b *testing.B) {
			client := sk.open(b)
			ctx := b.Context()
			holder := authority.New(client(b), authority.WithSkew(0))
			waiter := authority.New(client(b), authority.WithSkew(0))
			res, err := holder.Accept(ctx, authority.Intent{ID: "push-1", Environment: "handover", Scopes: []string{"api"},
				Sha: "aaaaaaa1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Ref: "refs/heads/main"}, true)
			if err != nil {
				b.Fatalf("accept: %v", err)
			}
			req := authority.GateRequest{Environment: "handover", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", LeaseTTL: handoverTTL}
			var backoff, old []float64
			var polls int
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				hold := handoverHolds[i%len(handoverHolds)]
				d, n, err := handover(ctx, holder, waiter, req, hold, backoffGate)
				if err != nil {
					b.Fatalf("back-off: %v", err)
				}
				backoff, polls = append(backoff, ms(d)), polls+n
				d, _, err = handover(ctx, holder, waiter, req, hold, retryAfterGate)
				if err != nil {
					b.Fatalf("retry_after: %v", err)
				}
				old = append(old, ms(d))
			}
			b.StopTimer()
			b.ReportMetric(median(backoff), "backoff-median-ms")
			b.ReportMetric(slices.Max(backoff), "backoff-max-ms")
			b.ReportMetric(median(old), "retry-after-median-ms")
			b.ReportMetric(slices.Max(old), "retry-after-max-ms")
			b.ReportMetric(float64(polls)/float64(b.N), "backoff-polls/op")
		})
	}
}

// Several waiters on one lease: each hand-over goes to one of them, who holds the lease in turn.
const (
	waiters       = 3
	waitersTTL    = 10 * time.Second // longer than any hold: the lease frees by release, never by expiry
	minHold       = 200 * time.Millisecond
	maxHoldSpread = 1800 * time.Millisecond
)

// twoSecondGate is the poll schedule pass.Gate had before its pauses were capped under a second:
// 250 ms, doubling up to 2 s, each pause capped by retry_after and by the wait left. The benchmark
// runs it beside pass.Gate, in the same iteration and on the same store.
func twoSecondGate(ctx context.Context, a pass.Gater, req authority.GateRequest, wait time.Duration) (*authority.Grant, error) {
	deadline := time.Now().Add(wait)
	backoff := 250 * time.Millisecond
	for {
		g, err := a.Gate(ctx, req)
		var held *authority.HeldError
		if !errors.As(err, &held) {
			return g, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, err
		}
		t := time.NewTimer(min(backoff, held.RetryAfter, left))
		backoff = min(2*backoff, 2*time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// countingGater counts a waiter's requests and tells once that it was refused.
type countingGater struct {
	a       pass.Gater
	polls   atomic.Int64
	refused chan struct{}
	once    sync.Once
}

func (c *countingGater) Gate(ctx context.Context, r authority.GateRequest) (*authority.Grant, error) {
	c.polls.Add(1)
	g, err := c.a.Gate(ctx, r)
	if errors.Is(err, authority.ErrLeaseHeld) {
		c.once.Do(func() { close(c.refused) })
	}
	return g, err
}

// queueStats is what one run of handovers measured.
type queueStats struct {
	latencies []float64 // ms from each release to the next grant
	polls     int64     // the waiters' requests
	waited    time.Duration
}

// handoverQueue runs one round: a holder takes the lease, `waiters` processes wait for it with wait,
// and the lease is handed from one to the next, each holding it for a time drawn from rng, until
// every waiter has had it.
func handoverQueue(ctx context.Context, procs []*authority.Authority, req authority.GateRequest, rng *rand.Rand, wait gateFunc, st *queueStats) error {
	hreq := req
	hreq.Holder = "holder"
	cur, err := procs[0].Gate(ctx, hreq)
	if err != nil {
		return fmt.Errorf("holder gate: %w", err)
	}
	curProc := procs[0]
	type result struct {
		g   *authority.Grant
		err error
		at  time.Time
		who int
	}
	done := make(chan result, len(procs)-1)
	gaters := make([]*countingGater, len(procs))
	start := time.Now()
	for i := 1; i < len(procs); i++ {
		gaters[i] = &countingGater{a: procs[i], refused: make(chan struct{})}
		wreq := req
		wreq.Holder = fmt.Sprintf("waiter-%d", i)
		go func() {
			g, err := wait(ctx, gaters[i], wreq, time.Minute)
			done <- result{g, err, time.Now(), i}
		}()
	}
	for i := 1; i < len(procs); i++ {
		select {
		case <-gaters[i].refused:
		case r := <-done:
			return fmt.Errorf("waiter %d was not refused while the lease was held: %+v, %v", r.who, r.g, r.err)
		}
	}
	for range len(procs) - 1 {
		time.Sleep(minHold + time.Duration(rng.Int64N(int64(maxHoldSpread)))) // the holder's work
		released := time.Now()
		if err := curProc.Release(ctx, cur); err != nil {
			return fmt.Errorf("release: %w", err)
		}
		r := <-done
		if r.err != nil {
			return fmt.Errorf("waiter %d: %w", r.who, r.err)
		}
		if r.g.Tokens["api"] != cur.Tokens["api"]+1 {
			return fmt.Errorf("waiter %d got token %d after %d", r.who, r.g.Tokens["api"], cur.Tokens["api"])
		}
		st.latencies = append(st.latencies, ms(r.at.Sub(released)))
		st.waited += r.at.Sub(start)
		cur, curProc = r.g, procs[r.who]
	}
	for _, g := range gaters[1:] {
		st.polls += g.polls.Load()
	}
	return curProc.Release(ctx, cur)
}

func percentile(xs []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	return s[max(0, int(math.Ceil(p*float64(len(s))))-1)] // nearest rank
}

// BenchmarkHandoverWaiters: 3 waiters queue for one lease and it goes from one to the next, each
// holding it 0.2 to 2 s; reported, the distribution of release-to-grant times and each waiter's
// requests per second while it waits, for pass.Gate beside the 2 s schedule it replaced, in the
// same iteration and on the same store.
func BenchmarkHandoverWaiters(b *testing.B) {
	schedules := []struct {
		name string
		gate gateFunc
	}{{"gate", backoffGate}, {"2s", twoSecondGate}}
	for _, sk := range storeKinds {
		b.Run(sk.name, func(b *testing.B) {
			client := sk.open(b)
			ctx := b.Context()
			procs := make([]*authority.Authority, waiters+1)
			for i := range procs {
				procs[i] = authority.New(client(b), authority.WithSkew(0))
			}
			env := fmt.Sprintf("queue-%d", runs.Add(1))
			res, err := procs[0].Accept(ctx, authority.Intent{ID: "push-1", Environment: env, Scopes: []string{"api"},
				Sha: "aaaaaaa1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Ref: "refs/heads/main"}, true)
			if err != nil {
				b.Fatalf("accept: %v", err)
			}
			req := authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", LeaseTTL: waitersTTL}
			stats := make([]queueStats, len(schedules))
			rng := rand.New(rand.NewPCG(1, 2))
			for b.Loop() {
				for k, s := range schedules {
					if err := handoverQueue(ctx, procs, req, rng, s.gate, &stats[k]); err != nil {
						b.Fatalf("%s: %v", s.name, err)
					}
				}
			}
			for k, s := range schedules {
				b.ReportMetric(percentile(stats[k].latencies, 0.5), s.name+"-p50-ms")
				b.ReportMetric(percentile(stats[k].latencies, 0.95), s.name+"-p95-ms")
				b.ReportMetric(slices.Max(stats[k].latencies), s.name+"-max-ms")
				b.ReportMetric(float64(stats[k].polls)/stats[k].waited.Seconds(), s.name+"-req/s/waiter")
			}
		})
	}
}
