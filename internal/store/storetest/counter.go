package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// The port's counters (Documents.Add), from which an environment's generations are to be taken
// without racing on its head (docs/design.md section 9): an Add is one atomic request, a value is
// handed to one caller only, and a counter is an item apart from the documents. The Counter group
// races a few adders; CounterRace races many, which on a store whose every request is slow (a git
// server, where a lost race costs a read and a push) takes minutes.
func counterCases() []testCase {
	return []testCase{
		{"StartsAtZero", testCounterStartsAtZero},
		{"Consecutive", testCounterConsecutive},
		{"KeysAreIndependent", testCounterKeysAreIndependent},
		{"NegativeRefused", testCounterNegativeRefused},
		{"NotADocument", testCounterNotADocument},
		{"Concurrent", func(t *testing.T, h *harness) { raceCounter(t, h, 8, 5) }},
		{"LostAnswers", func(t *testing.T, h *harness) { loseCounterAnswers(t, h, 4, 6) }},
	}
}

func counterRaceCases() []testCase {
	return []testCase{
		{"Concurrent", func(t *testing.T, h *harness) { raceCounter(t, h, 32, 20) }},
		{"LostAnswers", func(t *testing.T, h *harness) { loseCounterAnswers(t, h, 16, 10) }},
	}
}

// add adds delta to the counter under key and fails the test unless the store answers want.
func (h *harness) add(key string, delta, want int64) {
	h.t.Helper()
	got, err := h.store.Add(h.ctx, key, delta)
	if err != nil {
		h.t.Fatalf("Add(%s, %d): %v", key, delta, err)
	}
	if got != want {
		h.t.Fatalf("Add(%s, %d) = %d, want %d", key, delta, got, want)
	}
}

// testCounterStartsAtZero: a counter nobody added to reads 0, and reading it creates nothing
// that moves it.
func testCounterStartsAtZero(t *testing.T, h *harness) {
	key := authority.CounterKey("fresh")
	h.add(key, 0, 0)
	h.add(key, 0, 0)
	h.add(key, 1, 1)
}

// testCounterConsecutive: uncontended, each Add returns the value before it plus its delta, and a
// read in between moves nothing.
func testCounterConsecutive(t *testing.T, h *harness) {
	key := authority.CounterKey("staging")
	for want := int64(1); want <= 5; want++ {
		h.add(key, 1, want)
		h.add(key, 0, want)
	}
	h.add(key, 3, 8)
	h.add(key, 0, 8)
	h.add(key, 1, 9)
}

// testCounterKeysAreIndependent: each key has a counter of its own, under names a key encoding
// must keep apart.
func testCounterKeysAreIndependent(t *testing.T, h *harness) {
	keys := []string{authority.CounterKey("prod"), authority.CounterKey("prod/eu"), authority.CounterKey("prod#eu"),
		authority.CounterKey("Prod"), authority.CounterKey("preview/pr-803 ✓"), authority.CounterKey(strings.Repeat("long/", 60) + "a"),
		authority.CounterKey(strings.Repeat("long/", 60) + "b")}
	for i, k := range keys {
		h.add(k, int64(i+1), int64(i+1))
	}
	for i, k := range keys {
		h.add(k, 0, int64(i+1))
	}
	h.add(keys[0], 1, 2)
	for i, k := range keys[1:] {
		h.add(k, 0, int64(i+2))
	}
}

// testCounterNegativeRefused: a negative delta is bad input, and moves nothing.
func testCounterNegativeRefused(t *testing.T, h *harness) {
	key := authority.CounterKey("staging")
	h.add(key, 2, 2)
	if n, err := h.store.Add(h.ctx, key, -1); !errors.Is(err, authority.ErrInvalidInput) {
		t.Fatalf("Add(%s, -1) = %d, %v; want an error matching ErrInvalidInput", key, n, err)
	}
	if n, err := h.store.Add(h.ctx, authority.CounterKey("never"), -5); !errors.Is(err, authority.ErrInvalidInput) {
		t.Fatalf("Add of -5 to a new counter = %d, %v; want an error matching ErrInvalidInput", n, err)
	}
	h.add(key, 0, 2)
	h.add(authority.CounterKey("never"), 0, 0)
}

// testCounterNotADocument: a counter is no document and no environment: Get does not return it
// as one, the pending index and the listing of environments never show it, and an environment of
// the same name is untouched by it.
func testCounterNotADocument(t *testing.T, h *harness) {
	key := authority.CounterKey("staging")
	h.add(key, 7, 7)
	if d, err := h.store.Get(h.ctx, key); err == nil && d.Env != nil {
		t.Fatalf("Get(%s) returned a document with an environment: %+v", key, d)
	}
	if _, err := h.store.Get(h.ctx, authority.EnvKey("staging")); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("a counter made an environment: Get(%s) = %v", authority.EnvKey("staging"), err)
	}
	if p := h.pending(); len(p) != 0 {
		t.Fatalf("pending lists %v; a counter is no environment", p)
	}
	if l, ok := h.store.inner.(authority.Lister); ok {
		if envs, err := l.Environments(h.ctx); err != nil || len(envs) != 0 {
			t.Fatalf("Environments: %v, %v; a counter is no environment", envs, err)
		}
	}

	// An environment beside its counter: each keeps to itself.
	env := counterDoc(authority.EnvKey("staging"), 0, 3)
	env.Pending = true
	h.put(env, 1)
	h.add(key, 1, 8)
	want := counterDoc(authority.EnvKey("staging"), 1, 3)
	want.Pending = true
	h.wantDoc(want)
	if p := h.pending(); !slices.Equal(p, []string{"staging"}) {
		t.Fatalf("pending lists %v; want the environment staging alone", p)
	}
	h.add(key, 0, 8)
}

// raceCounter: goroutines add to one counter at once, each times each: no value is handed out
// twice, each goroutine's values increase, an Add that began after another returned is handed
// more, and the counter reads at least the largest value. The harness has one client of the
// store; the stores' own tests and internal/store/faults race one client a process.
func raceCounter(t *testing.T, h *harness, goroutines, each int) {
	clients := make([]authority.Store, goroutines)
	for i := range clients {
		clients[i] = h.store
	}
	res := RaceCounter(t, clients, authority.CounterKey("concurrent"), each)
	t.Logf("%d adds failed and were made again; %d values skipped", res.Failed, res.Skipped)
}

// loseCounterAnswers: when the answers of Adds that were applied are lost (every third) and the
// callers add again, values are skipped, never handed out twice.
func loseCounterAnswers(t *testing.T, h *harness, goroutines, each int) {
	lossy := &losesAddAnswers{Store: h.store, every: 3}
	clients := make([]authority.Store, goroutines)
	for i := range clients {
		clients[i] = lossy
	}
	res := RaceCounter(t, clients, authority.CounterKey("lossy"), each)
	if res.Skipped == 0 || res.Failed == 0 {
		t.Fatalf("%d adds failed, %d values skipped: the answers were not lost", res.Failed, res.Skipped)
	}
}

// losesAddAnswers applies every Add, and loses the answer of every n-th one that adds.
type losesAddAnswers struct {
	authority.Store
	every int64
	n     atomic.Int64
}

func (s *losesAddAnswers) Add(ctx context.Context, key string, delta int64) (int64, error) {
	v, err := s.Store.Add(ctx, key, delta)
	if err == nil && delta > 0 && s.n.Add(1)%s.every == 0 {
		return 0, fmt.Errorf("add %d to %s: the answer was lost", delta, key)
	}
	return v, err
}

// CounterResult is what RaceCounter saw besides the values.
type CounterResult struct {
	Values  [][]int64 // each client's values, in the order it got them
	Final   int64     // the counter read after the race
	Failed  int       // the Adds that failed and were made again
	Skipped int64     // the values no Add returned, up to Final
}

// maxCounterFailures bounds the Adds of one racer in a row that may fail before RaceCounter
// gives up on the store.
const maxCounterFailures = 50

// RaceCounter has each of clients (one per process, where the caller can give them; the same one
// several times otherwise) add 1 to the counter under key each times, all starting at once; an
// Add that fails is made again. It fails the test unless what every caller relies on holds: no
// value is returned twice, each client's values increase, and the counter reads at least the
// largest value afterwards (through clients[0], whose read is made again when it fails).
func RaceCounter(t *testing.T, clients []authority.Store, key string, each int) CounterResult {
	t.Helper()
	ctx := t.Context()
	res := CounterResult{Values: make([][]int64, len(clients))}
	spans := make([][]addSpan, len(clients))
	var failed atomic.Int64
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for c, st := range clients {
		wg.Go(func() {
			<-begin
			inRow := 0
			for len(res.Values[c]) < each {
				began := time.Now()
				v, err := st.Add(ctx, key, 1)
				ended := time.Now()
				if err != nil {
					failed.Add(1)
					if inRow++; inRow == maxCounterFailures || ctx.Err() != nil {
						t.Errorf("client %d: %d adds in a row failed, the last: %v", c, inRow, err)
						return
					}
					continue
				}
				inRow = 0
				res.Values[c] = append(res.Values[c], v)
				spans[c] = append(spans[c], addSpan{began: began, ended: ended, value: v, client: c})
			}
		})
	}
	close(begin)
	wg.Wait()
	res.Failed = int(failed.Load())
	if t.Failed() {
		return res
	}
	// The read goes through the same faults as the race, so it is made again as a failed Add is.
	var final int64
	for tries := 1; ; tries++ {
		v, err := clients[0].Add(ctx, key, 0)
		if err == nil {
			final = v
			break
		}
		if tries == maxCounterFailures || ctx.Err() != nil {
			t.Fatalf("read %s after the race: %d reads in a row failed, the last: %v", key, tries, err)
		}
	}
	res.Final = final
	owner := map[int64]int{}
	var largest int64
	for c, vs := range res.Values {
		for i, v := range vs {
			if prev, dup := owner[v]; dup {
				t.Fatalf("clients %d and %d were both handed %d", prev, c, v)
			}
			owner[v] = c
			if i > 0 && v <= vs[i-1] {
				t.Fatalf("client %d was handed %d after %d", c, v, vs[i-1])
			}
			if v < 1 {
				t.Fatalf("client %d was handed %d, which no Add of 1 to a counter at 0 or more returns", c, v)
			}
			largest = max(largest, v)
		}
	}
	if final < largest {
		t.Fatalf("%s reads %d after the race; %d was handed out", key, final, largest)
	}
	if a, b, ok := notLinearizable(slices.Concat(spans...)); !ok {
		t.Fatalf("client %d was handed %d by an Add that began after client %d's Add had returned %d", b.client, b.value, a.client, a.value)
	}
	res.Skipped = final - int64(len(owner))
	return res
}

// addSpan is one Add that returned: when it was called, when it returned, and its value.
type addSpan struct {
	began, ended time.Time
	value        int64
	client       int
}

// notLinearizable finds an Add b that began after another, a, had returned and was handed no
// more than a; ok when there is none.
func notLinearizable(spans []addSpan) (a, b addSpan, ok bool) {
	byEnd := slices.Clone(spans)
	slices.SortFunc(byEnd, func(x, y addSpan) int { return x.ended.Compare(y.ended) })
	// best[i] is the Add of the largest value among byEnd[:i+1].
	best := make([]addSpan, len(byEnd))
	for i, s := range byEnd {
		best[i] = s
		if i > 0 && best[i-1].value > s.value {
			best[i] = best[i-1]
		}
	}
	for _, s := range spans {
		// The Adds that had returned before s began.
		n := sort.Search(len(byEnd), func(i int) bool { return !byEnd[i].ended.Before(s.began) })
		if n > 0 && best[n-1].value >= s.value {
			return best[n-1], s, false
		}
	}
	return addSpan{}, addSpan{}, true
}
