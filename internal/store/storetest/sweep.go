package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
		{"SweepersMeetOnAnIntentOfSeveralScopes", testSweepersMeetOnAnIntent},
		{"ReadsThePendingScopesOnly", testSweepReadsPendingScopes},
		{"FinishesAWideAcceptThatStopped", testSweepFinishesWideAccept},
		{"RedrivesWhenTheLogCannotBeApplied", testSweepRedrivesDespiteTheLog},
	}
}

// writesFail fails every write of a document whose key fails says.
type writesFail struct {
	authority.Store
	fails func(key string) bool
}

func (s *writesFail) Put(ctx context.Context, d *authority.Doc) (int64, error) {
	if s.fails(d.Key) {
		return 0, fmt.Errorf("write %s: the store refused it", d.Key)
	}
	return s.Store.Put(ctx, d)
}

// scopeWritesFail fails every write of a scope's document of env in the per-scope layout: an
// accepter that stops right after the head's write.
func scopeWritesFail(s authority.Store, env string) *writesFail {
	return &writesFail{Store: s, fails: func(key string) bool { return strings.HasPrefix(key, authority.ScopeKey(env, "")) }}
}

// keyWritesFail fails every write of keys, as a store that throttles them.
func keyWritesFail(s authority.Store, keys ...string) *writesFail {
	return &writesFail{Store: s, fails: func(key string) bool { return slices.Contains(keys, key) }}
}

// testSweepFinishesWideAccept: an intent of several scopes is accepted by the head's write; if
// its accepter stops there and no one writes its scopes again, the sweep applies it to them
// and, once it stalls, re-drives it on every one.
func testSweepFinishesWideAccept(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document accepts an intent of several scopes in one write")
	}
	const env, stall = "staging", 10 * time.Minute
	a := h.process()
	h.live(a, env, "first", sha("a", 1), "api", "web", "worker")
	in := push(env, "wide", sha("b", 1), "api", "web")
	if _, err := h.authority(scopeWritesFail(h.store, env)).Accept(h.ctx, in, false); err == nil {
		t.Fatal("the accept succeeded though none of its scopes could be written")
	}
	sweep := func() []authority.StalledWork {
		rep, err := h.process().Sweep(h.ctx, stall, 3, func(context.Context, authority.StalledWork) error { return nil })
		if err != nil || len(rep.Failed) > 0 {
			t.Fatalf("sweep: %+v, %v", rep, err)
		}
		return rep.Redriven
	}
	sweep() // applies the log's entry: the scopes are active from now
	head, err := h.store.inner.Get(h.ctx, authority.EnvKey(env))
	if err != nil {
		t.Fatal(err)
	}
	if len(head.Env.Log) != 0 || head.Pending {
		t.Fatalf("the head's log holds %d entries (pending %v) after the sweep applied them to their scopes; want it trimmed", len(head.Env.Log), head.Pending)
	}
	h.clock.Advance(stall + time.Minute)
	got := sweep()
	if len(got) != 1 || !slices.Equal(got[0].Scopes, []string{"api", "web"}) {
		t.Fatalf("re-driven %+v; want the wide intent on api and web", got)
	}
	for _, name := range []string{"api", "web"} {
		if m := h.scope(env, name).Mailbox; m == nil || m.Sha != sha("b", 1) || m.Generation != got[0].Generation {
			t.Fatalf("%s: pending %+v; want the wide intent at %d", name, m, got[0].Generation)
		}
	}
}

// testSweepRedrivesDespiteTheLog: a sweep that records the re-drive of stalled work and then
// cannot apply the head's log to other scopes (their writes fail) still re-drives the work it
// recorded, whose attempt it counted, and reports the failure.
func testSweepRedrivesDespiteTheLog(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document has no log of intents of several scopes")
	}
	const env, stall = "staging", 10 * time.Minute
	a := h.process()
	h.live(a, env, "first", sha("a", 1), "api", "web", "worker")
	h.accept(a, push(env, "one", sha("b", 1), "api"), false) // stalls
	wide := push(env, "wide", sha("c", 1), "web", "worker")
	if _, err := h.authority(scopeWritesFail(h.store, env)).Accept(h.ctx, wide, false); err == nil {
		t.Fatal("the accept succeeded though none of its scopes could be written")
	}
	h.clock.Advance(stall + time.Minute)
	failing := keyWritesFail(h.store, authority.ScopeKey(env, "web"), authority.ScopeKey(env, "worker"))
	var redriven []string
	rep, err := h.authority(failing).Sweep(h.ctx, stall, 3, func(_ context.Context, w authority.StalledWork) error {
		redriven = append(redriven, w.Scopes...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(redriven, []string{"api"}) {
		t.Fatalf("re-driven %v; want api, whose re-drive the sweep recorded before the head's log failed", redriven)
	}
	if m := h.scope(env, "api").Mailbox; m == nil || m.Attempt != 1 {
		t.Fatalf("api pending %+v; want its first re-drive counted", m)
	}
	if len(rep.Failed) == 0 {
		t.Fatalf("sweep report %+v; want the failure to apply the head's log reported", rep)
	}
}

// testSweepersMeetOnAnIntent: in the per-scope layout a sweep records the re-drive of an intent
// stalled on several scopes in one write of each. When another sweeper, which read one of them
// after the first sweep's write and the other before it, re-drives the other in between, each
// scope is still re-driven exactly once: the first sweep re-drives the scope it wrote though its
// retry finds nothing stalled any more.
func testSweepersMeetOnAnIntent(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document records every re-drive of an environment in one write")
	}
	const env, stall = "staging", 10 * time.Minute
	a := h.process()
	res := h.accept(a, push(env, "wide", sha("w", 1), "api", "web"), true)
	h.gate(a, env, res.Generation, "crashed", "api", "web") // took the leases, then died
	h.clock.Advance(testTTL + h.skew + stall)

	var mu sync.Mutex
	redriven := map[string]int{}
	count := func(_ context.Context, w authority.StalledWork) error {
		mu.Lock()
		defer mu.Unlock()
		for _, name := range w.Scopes {
			redriven[name]++
		}
		return nil
	}
	paused := newPutPausing(h.store, authority.ScopeKey(env, "web"))
	done := make(chan error, 1)
	go func() {
		rep, err := h.authority(paused).Sweep(h.ctx, stall, 3, count)
		if err == nil && len(rep.Failed) > 0 {
			err = fmt.Errorf("failed: %v", rep.Failed)
		}
		done <- err
	}()
	<-paused.paused // api's re-drive is written, web's not yet
	if rep, err := h.process().Sweep(h.ctx, stall, 3, count); err != nil || len(rep.Failed) > 0 {
		t.Fatalf("second sweep: %+v, %v", rep, err)
	}
	close(paused.resumed)
	if err := <-done; err != nil {
		t.Fatalf("first sweep: %v", err)
	}
	if redriven["api"] != 1 || redriven["web"] != 1 {
		t.Fatalf("re-drives per scope by two sweeps that met: %v; want api once and web once", redriven)
	}
}

// readRecorder records the keys of the documents its process reads.
type readRecorder struct {
	authority.Store
	mu   sync.Mutex
	keys []string
}

func (s *readRecorder) Get(ctx context.Context, key string) (*authority.Doc, error) {
	s.mu.Lock()
	s.keys = append(s.keys, key)
	s.mu.Unlock()
	return s.Store.Get(ctx, key)
}

// testSweepReadsPendingScopes: in the per-scope layout the sweep reads the documents of the
// scopes the pending index lists, not every scope of the environment: one stalled scope of 40
// costs the head and that scope's document.
func testSweepReadsPendingScopes(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document is one read whatever its scopes")
	}
	const env, stall = "staging", 10 * time.Minute
	a := h.process()
	all := scopeNames(0, 40)
	h.live(a, env, "everything", sha("a", 1), all...)
	stalled := all[7]
	h.accept(a, push(env, "one", sha("b", 1), stalled), false)
	h.clock.Advance(stall + time.Minute)

	rec := &readRecorder{Store: h.store}
	var redriven []string
	rep, err := h.authority(rec).Sweep(h.ctx, stall, 3, func(_ context.Context, w authority.StalledWork) error {
		redriven = append(redriven, w.Scopes...)
		return nil
	})
	if err != nil || len(rep.Failed) > 0 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	if len(redriven) != 1 || redriven[0] != stalled {
		t.Fatalf("re-driven %v; want %s alone", redriven, stalled)
	}
	for _, k := range rec.keys {
		if strings.HasPrefix(k, authority.ScopeKey(env, "")) && k != authority.ScopeKey(env, stalled) {
			t.Fatalf("the sweep read %s (all its reads: %v); want only the pending scope's document %s", k, rec.keys, authority.ScopeKey(env, stalled))
		}
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
