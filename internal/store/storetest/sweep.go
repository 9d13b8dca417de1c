package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 14: the recovery sweep finds stalled work through the pending index, re-drives it once
// per stall period however many sweepers run, and ends it with one terminal error when its attempts
// run out.
func sweepCases() []testCase {
	return []testCase{
		{"ConcurrentSweepersRedriveOnce", testSweepersRedriveOnce},
	}
}

func testSweepersRedriveOnce(t *testing.T, h *harness) {
	const stall, sweepers = 10 * time.Minute, 8
	a := h.process()
	for i, env := range []string{"staging", "preview/pr-7"} {
		res := h.accept(a, push(env, "d"+env, sha("s", i), "api", "web"), true)
		h.gate(a, env, res.Generation, "crashed", "api") // took the lease, then died
	}
	h.accept(a, push("prod", "dprod", sha("p", 1), "api"), false) // pending, but it will not stall: see below
	h.clock.Advance(testTTL + h.skew + stall)
	h.accept(a, push("prod", "dprod2", sha("p", 2), "api"), false) // activity: prod is not idle

	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for range sweepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := h.process().Sweep(h.ctx, stall, 2, func(_ context.Context, w authority.StalledWork) error {
				mu.Lock()
				defer mu.Unlock()
				counts[w.Environment] += len(w.Scopes)
				return nil
			})
			if err != nil || len(rep.Failed) > 0 {
				t.Errorf("sweep: %+v, %v", rep, err)
			}
		}()
	}
	wg.Wait()
	if counts["staging"] != 2 || counts["preview/pr-7"] != 2 || counts["prod"] != 0 {
		t.Fatalf("scopes re-driven per environment by %d sweepers: %v; want staging 2, preview/pr-7 2, prod 0", sweepers, counts)
	}
	for _, env := range []string{"staging", "preview/pr-7"} {
		if m := h.scope(env, "api").Mailbox; m == nil || m.Attempt != 1 {
			t.Fatalf("%s api after one re-drive: %+v; want attempt 1", env, m)
		}
	}
	// Two more stall periods: attempt 2, then the attempts are spent and the work ends terminally.
	for round, want := range []int{2, 3} {
		h.clock.Advance(stall)
		rep, err := h.process().Sweep(h.ctx, stall, 2, func(context.Context, authority.StalledWork) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if want <= 2 && len(rep.Redriven) != 3 { // staging, preview/pr-7 and (now idle) prod
			t.Fatalf("round %d: re-driven %+v", round, rep.Redriven)
		}
		if want == 3 && len(rep.Exhausted) != 4 {
			t.Fatalf("round %d: exhausted %+v; want the 4 scopes of staging and preview/pr-7", round, rep.Exhausted)
		}
	}
	for _, env := range []string{"staging", "preview/pr-7"} {
		if e := h.env(env); e.Observed != e.Desired || e.Scopes["api"].Failure == nil {
			t.Fatalf("%s after its attempts ran out: %d/%d, failure %+v", env, e.Observed, e.Desired, e.Scopes["api"].Failure)
		}
	}
	if got := h.pending(); len(got) != 1 || got[0] != "prod" {
		t.Fatalf("pending index after the sweep: %v; want only prod", got)
	}
}
