package demo_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/demo"
	"github.com/latestwins/latestwins/internal/store/memory"
)

func quick() demo.Options {
	o := demo.DefaultOptions()
	o.Build, o.Deploy = 20*time.Millisecond, 10*time.Millisecond
	return o
}

func TestDemoHoldsTheGuarantees(t *testing.T) {
	res, err := demo.Run(context.Background(), authority.New(memory.New()), io.Discard, quick())
	if err != nil || len(res.Violations) > 0 {
		t.Fatalf("demo: %v, violations %v", err, res.Violations)
	}
	if live := res.Env.Scopes["api"].Live; live == nil || live.Generation != 3 {
		t.Fatalf("live after the demo: %+v; want C at generation 3", live)
	}
}

// failingStore refuses every write after the first few, as a store that went away would.
type failingStore struct {
	*memory.Store
	puts, after atomic.Int64
}

func (f *failingStore) Put(ctx context.Context, d *authority.Doc) (int64, error) {
	if f.puts.Add(1) > f.after.Load() {
		return 0, errors.New("store unreachable")
	}
	return f.Store.Put(ctx, d)
}

// Whichever pass a store failure hits, the demo ends (with an error or a broken guarantee) instead
// of waiting forever for a pass that is gone. The test's own deadline is the only timer.
func TestDemoEndsWhenAPassFails(t *testing.T) {
	for after := int64(0); after < 7; after++ { // the race makes 7 writes
		st := &failingStore{Store: memory.New()}
		st.after.Store(after)
		done := make(chan struct{})
		var res *demo.Result
		var err error
		go func() {
			defer close(done)
			res, err = demo.Run(context.Background(), authority.New(st), io.Discard, quick())
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the demo hung when writes fail after %d", after)
		}
		if err == nil && len(res.Violations) == 0 {
			t.Fatalf("writes failing after %d: the demo reported success", after)
		}
	}
}

func TestQueueDemoDeploysInOrder(t *testing.T) {
	res, err := demo.RunQueue(context.Background(), authority.New(memory.New()), io.Discard, quick())
	if err != nil || len(res.Violations) > 0 {
		t.Fatalf("queue demo: %v, violations %v", err, res.Violations)
	}
	var order []string
	for _, ev := range res.Env.Events {
		if ev.Kind == authority.EventDeployed {
			order = append(order, ev.Sha[:1])
		}
	}
	if len(order) != 3 || order[0] != "a" || order[1] != "b" || order[2] != "c" {
		t.Fatalf("deployed %v; want a, b, c", order)
	}
}

func TestRollbackDemo(t *testing.T) {
	res, err := demo.RunRollback(context.Background(), authority.New(memory.New()), io.Discard, quick())
	if err != nil || len(res.Violations) > 0 {
		t.Fatalf("rollback demo: %v, violations %v", err, res.Violations)
	}
	sc := res.Env.Scopes["api"]
	if sc.Live == nil || !strings.HasPrefix(sc.Live.Sha, "ccccccc") || sc.Freeze != nil {
		t.Fatalf("after the rollback demo: live %+v, freeze %+v; want C live and no freeze", sc.Live, sc.Freeze)
	}
	held := false
	for _, line := range res.Log {
		held = held || strings.Contains(line, "C waits at the deploy gate: held by a freeze")
	}
	if !held {
		t.Fatalf("the demo never showed C held by the freeze:\n%s", strings.Join(res.Log, "\n"))
	}
}

// TestGatesDemoDeploysOnlyTheNewestOnceEveryGateLetsItGo: the gates scenario holds each commit
// while it soaks, the newest for its approval and then for the window, and deploys only C once the
// window opens; each hold is said in the gate's words.
func TestGatesDemoDeploysOnlyTheNewestOnceEveryGateLetsItGo(t *testing.T) {
	clk := demo.NewClock(demo.GatesStart)
	res, err := demo.RunGates(context.Background(), authority.New(memory.New(), authority.WithClock(clk)), clk, io.Discard, quick())
	if err != nil || len(res.Violations) > 0 {
		t.Fatalf("gates demo: %v, violations %v", err, res.Violations)
	}
	log := strings.Join(res.Log, "\n")
	for _, want := range []string{"soaking in demo-staging", "waiting for approval: 0 of 1", "outside the change window; opens Mon 09:00 Europe/Berlin", "C deploys to production"} {
		if !strings.Contains(log, want) {
			t.Errorf("the demo never said %q:\n%s", want, log)
		}
	}
	var deployed []string
	for _, ev := range res.Env.Events {
		if ev.Kind == authority.EventDeployed {
			deployed = append(deployed, ev.Sha[:1])
		}
	}
	if len(deployed) != 1 || deployed[0] != "c" {
		t.Fatalf("production deployed %v; want only C", deployed)
	}
}
