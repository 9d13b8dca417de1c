package pass

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
)

// scriptedGater answers Gate from a script (nil: a grant) and records when each request came.
type scriptedGater struct {
	clk     Clock
	answers []error
	calls   []time.Time
}

func (g *scriptedGater) Gate(_ context.Context, r authority.GateRequest) (*authority.Grant, error) {
	g.calls = append(g.calls, g.clk.Now())
	if len(g.calls) > len(g.answers) {
		return nil, errors.New("the script ran out")
	}
	if err := g.answers[len(g.calls)-1]; err != nil {
		return nil, err
	}
	return &authority.Grant{Environment: r.Environment, Generation: r.Generation, Phase: r.Phase, Holder: r.Holder}, nil
}

func held(holder string, retryAfter time.Duration) *authority.HeldError {
	return &authority.HeldError{Resource: "prod/api", Holder: holder, Purpose: "deploy", Generation: 1, RetryAfter: retryAfter}
}

func refusals(n int, err error) []error {
	out := make([]error, n)
	for i := range out {
		out[i] = err
	}
	return out
}

var gateReq = authority.GateRequest{Environment: "prod", Generation: 2, Scopes: []string{"api"}, Phase: "deploy", Holder: "b", LeaseTTL: time.Minute}

// driveGate runs gate on a fake clock, firing each pause it waits as soon as it asks for it, and
// returns the pauses in order.
func driveGate(t *testing.T, clk *fakeClock, run func() (*authority.Grant, error)) ([]time.Duration, *authority.Grant, error) {
	t.Helper()
	type result struct {
		g   *authority.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := run()
		done <- result{g, err}
	}()
	var pauses []time.Duration
	for {
		select {
		case r := <-done:
			return pauses, r.g, r.err
		case tm := <-clk.created:
			pauses = append(pauses, tm.d)
			clk.fire(tm)
		case <-time.After(guard):
			t.Fatalf("gate neither waited nor returned within %s", guard)
		}
	}
}

func offsets(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, at := range ts {
		out[i] = since(at)
	}
	return out
}

// exact is a jitter that draws every pause at its full value.
func exact(d time.Duration) time.Duration { return d }

// TestGatePollsWithBackoff: while a lease is held, Gate asks again after 250 ms, 500 ms, then
// every 800 ms (at most: see TestGateSpreadsItsPauses), each pause capped by the refusal's
// retry_after and by the wait left; the grant records when the request that got it was sent.
func TestGatePollsWithBackoff(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name       string
		answers    []error
		wait       time.Duration
		wantPauses []time.Duration
		wantHeld   bool // the wait ran out
	}{
		{"long retry_after: the back-off decides", append(refusals(6, held("a", time.Minute)), nil), 10 * time.Minute,
			[]time.Duration{250 * ms, 500 * ms, 800 * ms, 800 * ms, 800 * ms, 800 * ms}, false},
		{"retry_after caps each pause", append(refusals(4, held("a", 600*ms)), nil), 10 * time.Minute,
			[]time.Duration{250 * ms, 500 * ms, 600 * ms, 600 * ms}, false},
		{"the wait left caps the last pause", refusals(10, held("a", time.Minute)), 1200 * ms,
			[]time.Duration{250 * ms, 500 * ms, 450 * ms}, true},
		{"free at once: no pause", []error{nil}, time.Minute, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := newFakeClock()
			gt := &scriptedGater{clk: clk, answers: c.answers}
			pauses, g, err := driveGate(t, clk, func() (*authority.Grant, error) {
				return gate(t.Context(), clk, exact, gt, gateReq, c.wait, nil)
			})
			if diff := cmp.Diff(c.wantPauses, pauses); diff != "" {
				t.Errorf("pauses (-want +got):\n%s", diff)
			}
			// Each request goes out when the pause before it ends.
			var at time.Duration
			want := []time.Duration{0}
			for _, p := range pauses {
				at += p
				want = append(want, at)
			}
			if diff := cmp.Diff(want, offsets(gt.calls)); diff != "" {
				t.Errorf("requests sent at (-want +got):\n%s", diff)
			}
			if c.wantHeld {
				if !errors.Is(err, authority.ErrLeaseHeld) || g != nil {
					t.Fatalf("after the wait ran out: grant %+v, error %v; want the last refusal", g, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("gate: %v", err)
			}
			if !g.RequestedAt.Equal(gt.calls[len(gt.calls)-1]) {
				t.Errorf("RequestedAt %s, want the send time of the granted request %s", since(g.RequestedAt), since(gt.calls[len(gt.calls)-1]))
			}
		})
	}
}

// TestGateSpreadsItsPauses: each pause is drawn from the last quarter of the back-off's value, so
// that waiters that started together drift apart, and none is longer than 800 ms: a released lease
// is taken within that of its release (plus one request). The cap of retry_after still holds.
func TestGateSpreadsItsPauses(t *testing.T) {
	ms := time.Millisecond
	clk := newFakeClock()
	gt := &scriptedGater{clk: clk, answers: append(refusals(40, held("a", time.Minute)), nil)}
	pauses, _, err := driveGate(t, clk, func() (*authority.Grant, error) {
		return gate(t.Context(), clk, spread, gt, gateReq, time.Hour, nil)
	})
	if err != nil {
		t.Fatalf("gate: %v", err)
	}
	full := []time.Duration{250 * ms, 500 * ms}
	distinct := map[time.Duration]bool{}
	for i, p := range pauses {
		want := maxPause
		if i < len(full) {
			want = full[i]
		}
		if p > want || p < want*3/4 {
			t.Fatalf("pause %d is %s; want within [%s, %s] (all: %v)", i, p, want*3/4, want, pauses)
		}
		distinct[p] = true
	}
	if len(distinct) < len(pauses)/2 {
		t.Errorf("%d distinct pauses of %d: %v; want them spread", len(distinct), len(pauses), pauses)
	}
	clk = newFakeClock()
	gt = &scriptedGater{clk: clk, answers: append(refusals(5, held("a", 100*ms)), nil)}
	pauses, _, _ = driveGate(t, clk, func() (*authority.Grant, error) {
		return gate(t.Context(), clk, spread, gt, gateReq, time.Hour, nil)
	})
	for i, p := range pauses {
		if p > 100*ms {
			t.Fatalf("pause %d is %s past a retry_after of 100ms", i, p)
		}
	}
}

// TestGateTellsOfNewHoldersAndAtRetryAfter: onHeld hears the first refusal, each change of holder,
// and again once the retry_after it was told has passed, not every poll.
func TestGateTellsOfNewHoldersAndAtRetryAfter(t *testing.T) {
	clk := newFakeClock()
	answers := append(append(refusals(4, held("a", time.Second)), refusals(2, held("c", time.Minute))...), nil)
	gt := &scriptedGater{clk: clk, answers: answers}
	type told struct {
		at     time.Duration
		holder string
		within time.Duration
	}
	var got []told
	var mu sync.Mutex
	_, _, err := driveGate(t, clk, func() (*authority.Grant, error) {
		return gate(t.Context(), clk, exact, gt, gateReq, 10*time.Minute, func(h *authority.HeldError, within, _ time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, told{since(clk.Now()), h.Holder, within})
		})
	})
	if err != nil {
		t.Fatalf("gate: %v", err)
	}
	ms := time.Millisecond
	// Requests at 0, 0.25, 0.75, 1.55 (a), 2.35 (c), 3.15, granted at 3.95.
	want := []told{{0, "a", time.Second}, {1550 * ms, "a", time.Second}, {2350 * ms, "c", time.Minute}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(told{})); diff != "" {
		t.Errorf("onHeld calls (-want +got):\n%s", diff)
	}
}

// TestGateStopsWhenCtxEnds: a wait is cut short by ctx, and other errors end Gate at once.
func TestGateStopsWhenCtxEnds(t *testing.T) {
	clk := newFakeClock()
	gt := &scriptedGater{clk: clk, answers: refusals(10, held("a", time.Minute))}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := gate(ctx, clk, exact, gt, gateReq, time.Hour, nil)
		done <- err
	}()
	clk.next(t) // waiting after the first refusal
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("gate after cancel: %v, want context.Canceled", err)
	}

	sup := &authority.SupersededError{Environment: "prod", Scope: "api", Generation: 2, By: 3}
	gt = &scriptedGater{clk: clk, answers: []error{sup}}
	if _, err := gate(t.Context(), clk, exact, gt, gateReq, time.Hour, nil); !errors.As(err, new(*authority.SupersededError)) || len(gt.calls) != 1 {
		t.Fatalf("superseded: %v after %d requests, want the refusal after one", err, len(gt.calls))
	}
}

// countingGater counts requests, and tells the test each refusal.
type countingGater struct {
	a       Gater
	mu      sync.Mutex
	polls   int
	refused chan int // the number of each refused poll
}

func (c *countingGater) Gate(ctx context.Context, r authority.GateRequest) (*authority.Grant, error) {
	g, err := c.a.Gate(ctx, r)
	c.mu.Lock()
	c.polls++
	n := c.polls
	c.mu.Unlock()
	if errors.Is(err, authority.ErrLeaseHeld) {
		c.refused <- n
	}
	return g, err
}

// TestGateTakesAReleasedLeaseAtTheNextPoll: two Authorities on one store, as two processes would
// be. The holder has a lease for an hour and releases it after the waiter's second refusal; the
// waiter gets it on its very next request, though every refusal told it to come back in an hour.
func TestGateTakesAReleasedLeaseAtTheNextPoll(t *testing.T) {
	ctx := t.Context()
	store := memory.New()
	holderAuth, waiterAuth := authority.New(store), authority.New(store)
	in := authority.Intent{ID: "push-1", Environment: "prod", Scopes: []string{"api"}, Sha: "aaaaaaa1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}
	res, err := holderAuth.Accept(ctx, in, true)
	if err != nil {
		t.Fatalf("accept: %v", err)
	}
	req := authority.GateRequest{Environment: "prod", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", LeaseTTL: time.Hour}
	hreq := req
	hreq.Holder = "holder"
	hg, err := Gate(ctx, holderAuth, hreq, 0, nil)
	if err != nil {
		t.Fatalf("holder gate: %v", err)
	}

	wreq := req
	wreq.Holder = "waiter"
	cg := &countingGater{a: waiterAuth, refused: make(chan int, 100)}
	var retryAfter []time.Duration
	type result struct {
		g   *authority.Grant
		err error
	}
	done := make(chan result, 1)
	sent := time.Now()
	// A bound on the whole wait, so that a waiter that sleeps until retry_after fails the test
	// rather than hanging it.
	waitCtx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	go func() {
		g, err := Gate(waitCtx, cg, wreq, 2*time.Hour, func(h *authority.HeldError, within, _ time.Duration) {
			retryAfter = append(retryAfter, h.RetryAfter)
		})
		done <- result{g, err}
	}()
	for n := 0; n < 2; {
		select {
		case n = <-cg.refused:
		case r := <-done:
			t.Fatalf("the waiter stopped waiting before its second request: %+v, %v", r.g, r.err)
		}
	}
	if err := holderAuth.Release(ctx, hg); err != nil {
		t.Fatalf("release: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("waiter gate: %v", r.err)
	}
	if cg.polls != 3 {
		t.Errorf("the waiter got the lease on request %d, want 3: the first after the release", cg.polls)
	}
	if len(retryAfter) == 0 || slices.Min(retryAfter) < 59*time.Minute {
		t.Errorf("retry_after told %v, want about an hour: the waiter must not have waited for it", retryAfter)
	}
	if r.g.Holder != "waiter" || r.g.Tokens["api"] != 2 {
		t.Errorf("grant %+v, want the waiter's with token 2", r.g)
	}
	if r.g.RequestedAt.Before(sent) || r.g.RequestedAt.After(time.Now()) {
		t.Errorf("RequestedAt %v is not within the wait", r.g.RequestedAt)
	}
}

// waitingGater is a scriptedGater whose far end can wait (WaitGater): each GateWait takes the
// time its script gives on the fake clock, and records the wait it was asked for.
type waitingGater struct {
	scriptedGater
	longPoll time.Duration
	took     []time.Duration // how long each GateWait takes, in order
	waits    []time.Duration
}

func (g *waitingGater) LongPoll() time.Duration { return g.longPoll }

func (g *waitingGater) GateWait(ctx context.Context, r authority.GateRequest, wait time.Duration) (*authority.Grant, error) {
	g.waits = append(g.waits, wait)
	clk := g.clk.(*fakeClock)
	clk.set(clk.Now().Add(g.took[len(g.waits)-1]))
	return g.Gate(ctx, r)
}

// TestGateLongPollsAFarEndThatWaits: over a far end that holds a refused request until the lease
// is released (the App's API in serve), Gate asks again at once after each answer, each wait
// bounded by the far end's longest and by the wait left; a far end that answers sooner than the
// back-off's pause still gets the rest of the pause, never a tight loop.
func TestGateLongPollsAFarEndThatWaits(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		name       string
		answers    []error
		took       []time.Duration
		wait       time.Duration
		wantWaits  []time.Duration
		wantPauses []time.Duration
	}{
		{"each refusal is held at the far end: no pause", append(refusals(3, held("a", time.Hour)), nil),
			[]time.Duration{20 * time.Second, 20 * time.Second, 3 * time.Second}, 10 * time.Minute,
			[]time.Duration{20 * time.Second, 20 * time.Second, 20 * time.Second}, nil},
		{"the wait left bounds the far end's wait", refusals(3, held("a", time.Hour)),
			[]time.Duration{20 * time.Second, 5 * time.Second}, 25 * time.Second,
			[]time.Duration{20 * time.Second, 5 * time.Second}, nil},
		{"a far end that answers at once gets the back-off", append(refusals(3, held("a", time.Hour)), nil),
			[]time.Duration{0, 0, 0}, 10 * time.Minute,
			[]time.Duration{20 * time.Second, 20 * time.Second, 20 * time.Second}, []time.Duration{250 * ms, 500 * ms}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := newFakeClock()
			gt := &waitingGater{scriptedGater: scriptedGater{clk: clk, answers: c.answers}, longPoll: 20 * time.Second, took: c.took}
			pauses, g, err := driveGate(t, clk, func() (*authority.Grant, error) {
				return gate(t.Context(), clk, exact, gt, gateReq, c.wait, nil)
			})
			if diff := cmp.Diff(c.wantWaits, gt.waits); diff != "" {
				t.Errorf("waits asked of the far end (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantPauses, pauses); diff != "" {
				t.Errorf("pauses (-want +got):\n%s", diff)
			}
			if len(c.answers) > 0 && c.answers[len(c.answers)-1] == nil {
				if err != nil || g == nil {
					t.Fatalf("gate: %+v, %v; want the grant", g, err)
				}
			} else if !errors.Is(err, authority.ErrLeaseHeld) {
				t.Fatalf("after the wait ran out: %v; want the last refusal", err)
			}
		})
	}
}

// TestGateEndsAtOnceOnAHoldThatOutlastsTheWait: a soak, an approval or a change window that does
// not end within the wait ends the gate at its first refusal (the pass ends held, and the sweep
// starts it again), while one that ends within the wait is waited for, asking again when it ends.
func TestGateEndsAtOnceOnAHoldThatOutlastsTheWait(t *testing.T) {
	clk := newFakeClock()
	lasting := func(reason authority.Reason, until time.Duration) *authority.HeldError {
		h := held("", until)
		h.Reason = reason
		if until > 0 {
			h.Until = clk.Now().Add(until)
		}
		return h
	}
	cases := []struct {
		name      string
		answers   []error
		wantCalls int
		wantGrant bool
	}{
		{"a window that opens after the wait", []error{lasting(authority.ReasonWindow, 2*time.Hour)}, 1, false},
		{"a soak that ends after the wait", []error{lasting(authority.ReasonSoaking, 11*time.Minute)}, 1, false},
		{"approvals, which end when someone acts", []error{lasting(authority.ReasonApproval, 0)}, 1, false},
		{"a soak that ends within the wait", []error{lasting(authority.ReasonSoaking, 2*time.Second), nil}, 2, true},
		{"a promotion is waited for, as before", append(refusals(3, &authority.HeldError{Reason: authority.ReasonPromotion, Resource: "prod/api",
			Promotion: &authority.PromotionWait{Environment: "staging"}, RetryAfter: time.Second}), nil), 4, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			gt := &scriptedGater{clk: clk, answers: c.answers}
			_, g, err := driveGate(t, clk, func() (*authority.Grant, error) {
				return gate(t.Context(), clk, exact, gt, gateReq, 10*time.Minute, nil)
			})
			if len(gt.calls) != c.wantCalls {
				t.Fatalf("%d requests; want %d", len(gt.calls), c.wantCalls)
			}
			if c.wantGrant {
				if err != nil || g == nil {
					t.Fatalf("gate: %v; want the grant once the hold ended", err)
				}
				return
			}
			var h *authority.HeldError
			if !errors.As(err, &h) || !h.Why().Lasting() {
				t.Fatalf("gate: grant %+v, error %v; want the lasting refusal at once", g, err)
			}
		})
	}
}
