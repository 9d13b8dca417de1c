package storetest

import (
	"fmt"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// A queue of passes polling their deploy gates, round after round, while the head deploys one at a
// time: each waiting pass's refusal is recorded once for what it waits for (the pass right ahead
// of it), however many others poll in between, and a round in which nothing changed writes nothing.
// The barrier a pass waits for and a freeze are each what it waits for in the same way.
func testRefusalRecordedOnce(t *testing.T, h *harness) {
	const n = 6
	app := h.process()
	passes := make([]*authority.Authority, n+1)
	for k := 1; k <= n; k++ {
		h.accept(app, queued("drain", fmt.Sprintf("push-%d", k), sha("d", k), "api"), false)
	}
	for k := 1; k <= n; k++ {
		passes[k] = h.process()
		h.accept(passes[k], queued("drain", fmt.Sprintf("run-%d", k), sha("d", k), "api"), true)
	}
	// poll asks every pass from first to last whose turn has not come yet; the head deploys.
	for head := 1; head <= n; head++ {
		for round := range 3 {
			before := h.store.puts.Load()
			for k := head + 1; k <= n; k++ {
				if held, err := h.tryDeploy(passes[k], "drain", int64(k), fmt.Sprintf("run-%d", k), "api"); err != nil || held == nil {
					t.Fatalf("pass %d while %d is the head: held %v, err %v; want it queued", k, head, held, err)
				} else if held.Why() != authority.ReasonQueued {
					t.Fatalf("pass %d while %d is the head: %v; want queued", k, head, held)
				}
			}
			if writes := h.store.puts.Load() - before; round > 0 && writes != 0 {
				t.Fatalf("round %d of polls while %d is the head wrote %d times; want nothing written for refusals recorded before", round, head, writes)
			}
		}
		if held, err := h.tryDeploy(passes[head], "drain", int64(head), fmt.Sprintf("run-%d", head), "api"); err != nil || held != nil {
			t.Fatalf("head %d: held %v, err %v; want it deployed", head, held, err)
		}
	}
	waits := map[int64]int{}
	for _, e := range h.history("drain") {
		if e.Kind == authority.EventLocked {
			waits[e.Generation]++
		}
	}
	for k := int64(2); k <= n; k++ {
		if waits[k] != 1 {
			t.Errorf("generation %d's refusal recorded %d times; want once: %v", k, waits[k], waits)
		}
	}
	if waits[1] != 0 {
		t.Errorf("the head was recorded waiting: %v", waits)
	}
}
