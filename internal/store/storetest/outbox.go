package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// The outbox: events and intent ids are appended to the environment's document in the write that
// makes them, copied out as records after it, and dropped from the document only by a later write.
// Whatever fails or stops between those steps, nothing is lost and nothing is duplicated; the
// document stays small; the timeline pages through everything.
func outboxCases() []testCase {
	return []testCase{
		{"EveryEventOnce", testEveryEventOnce},
		{"RecordsRefusedForAWhile", testRecordsRefused},
		{"CrashAtEveryStep", testCrashAtEveryStep},
		{"SeveralScopesCrashAtEveryStep", testSeveralScopesCrash},
		{"RedeliveryRightAfterTheMove", testRedeliveryAfterMove},
		{"ConcurrentRedeliveries", testConcurrentRedeliveries},
		{"HistoryPages", testHistoryPages},
		{"HistoryPagesByTime", testHistoryPagesByTime},
		{"LargeTransition", testLargeTransition},
		{"RequestsPerPass", testRequestsPerPass},
	}
}

// wantTimeline fails the test unless env's whole timeline is events 1..newest, each exactly once.
func wantTimeline(t *testing.T, h *harness, env string) []authority.Event {
	t.Helper()
	e := h.env(env)
	if h.split {
		// Each scope's events, and the head's, are numbered on their own: each stream once, in
		// order, and the timeline in time order.
		next := map[string]int64{}
		for i, ev := range e.Events {
			// An event of no scope goes in the stream of a scope its transition wrote: a scope's
			// numbers may skip it, and the count below finds any event lost or repeated.
			if ev.Seq <= next[ev.Scope] && ev.Scope != "" {
				t.Fatalf("timeline of %s: event %d of scope %q at position %d after its event %d; want every event once, in order: %+v", env, ev.Seq, ev.Scope, i+1, next[ev.Scope], e.Events)
			}
			next[ev.Scope] = ev.Seq
			if i > 0 && ev.At.Before(e.Events[i-1].At) {
				t.Fatalf("timeline of %s: event %d at %s after one at %s", env, i+1, ev.At, e.Events[i-1].At)
			}
		}
		if int64(len(e.Events)) != e.EventSeq {
			t.Fatalf("timeline of %s holds %d events; want %d", env, len(e.Events), e.EventSeq)
		}
		return e.Events
	}
	for i, ev := range e.Events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("timeline of %s: event %d at position %d (of %d, newest %d); want every event once, in order", env, ev.Seq, i+1, len(e.Events), e.EventSeq)
		}
	}
	if int64(len(e.Events)) != e.EventSeq {
		t.Fatalf("timeline of %s holds %d events; want %d", env, len(e.Events), e.EventSeq)
	}
	return e.Events
}

// testEveryEventOnce: passes through many processes leave every event exactly once, and the
// document's outbox holds only the newest transition's events.
func testEveryEventOnce(t *testing.T, h *harness) {
	for i := range rounds(40, 12) {
		a := h.process()
		res := h.accept(a, push("staging", fmt.Sprintf("run-%d", i), sha("e", i), "api"), true)
		g := h.gate(h.process(), "staging", res.Generation, fmt.Sprintf("run-%d/1", i), "api")
		h.complete(h.process(), g, authority.OutcomeSuccess, fmt.Sprintf("run-%d", i))
	}
	events := wantTimeline(t, h, "staging")
	if n := len(h.doc(authority.EnvKey("staging")).Env.Outbox); n > 4 {
		t.Fatalf("the document's outbox holds %d events after %d passes; want only the newest write's", n, len(events))
	}
}

// failingRecords refuses records while failing is set, as a store that cannot take them would.
type failingRecords struct {
	authority.Store
	failing atomic.Bool
}

var errRecordsDown = errors.New("records unavailable")

func (s *failingRecords) PutRecords(ctx context.Context, recs []authority.Record) error {
	if s.failing.Load() {
		return errRecordsDown
	}
	return s.Store.PutRecords(ctx, recs)
}

// testRecordsRefused: while the store refuses records, transitions still succeed and their events
// wait in the outbox; once it takes records again, the next write moves them all, and the timeline
// is whole.
func testRecordsRefused(t *testing.T, h *harness) {
	h.singleDocument("the outbox of one document")
	f := &failingRecords{Store: h.store}
	proc := func() *authority.Authority {
		return h.authority(f)
	}
	h.accept(proc(), push("staging", "run-0", sha("f", 0), "api"), false)
	f.failing.Store(true)
	for i := 1; i <= 5; i++ {
		if _, err := proc().Accept(h.ctx, push("staging", fmt.Sprintf("run-%d", i), sha("f", i), "api"), false); err != nil {
			t.Fatalf("accept while records are refused: %v", err)
		}
	}
	if n := len(h.doc(authority.EnvKey("staging")).Env.Outbox); n < 10 {
		t.Fatalf("outbox holds %d events while records are refused; want them all kept", n)
	}
	// Records refused: the duplicate check still finds an intent in the outbox.
	if res, err := proc().Accept(h.ctx, push("staging", "run-3", sha("f", 3), "api"), false); err != nil || !res.Duplicate {
		t.Fatalf("re-delivery while records are refused: %+v, %v", res, err)
	}
	f.failing.Store(false)
	h.accept(proc(), push("staging", "run-6", sha("f", 6), "api"), false)
	if n := len(h.doc(authority.EnvKey("staging")).Env.Outbox); n > 3 {
		t.Fatalf("outbox holds %d events after records are taken again; want only the newest write's", n)
	}
	wantTimeline(t, h, "staging")
	for i := range 7 {
		if res := h.accept(h.process(), push("staging", fmt.Sprintf("run-%d", i), sha("f", i), "api"), false); !res.Duplicate {
			t.Fatalf("run-%d again: %+v; want a repeat", i, res)
		}
	}
}

// stoppingStore ends its process at step n of a pass: every store request after it fails, as if
// the process were killed there.
type stoppingStore struct {
	authority.Store
	mu    sync.Mutex
	steps int
	stop  int
}

var errStopped = errors.New("process stopped")

func (s *stoppingStore) step() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps++
	if s.stop > 0 && s.steps >= s.stop {
		return errStopped
	}
	return nil
}

func (s *stoppingStore) Get(ctx context.Context, key string) (*authority.Doc, error) {
	if err := s.step(); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

func (s *stoppingStore) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	if err := s.step(); err != nil {
		return 0, err
	}
	return s.Store.Put(ctx, doc)
}

func (s *stoppingStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := s.step(); err != nil {
		return 0, err
	}
	return s.Store.Add(ctx, key, delta)
}

func (s *stoppingStore) PutRecords(ctx context.Context, recs []authority.Record) error {
	if err := s.step(); err != nil {
		return err
	}
	return s.Store.PutRecords(ctx, recs)
}

func (s *stoppingStore) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	if err := s.step(); err != nil {
		return nil, err
	}
	return s.Store.GetRecords(ctx, keys)
}

// testCrashAtEveryStep: a pass (accept and claim, gate, complete) stopped at each of its store
// requests in turn, then retried by a new process, leaves every event once, every intent once,
// and the pass done.
func testCrashAtEveryStep(t *testing.T, h *harness) {
	// Count the steps of an uninterrupted pass on a fresh environment.
	count := &stoppingStore{Store: h.store}
	runPass(h, count, "count", 0)
	total := count.steps
	if total < 3 {
		t.Fatalf("a pass made %d store requests; want at least 3", total)
	}
	for stop := 1; stop <= total; stop++ {
		env := fmt.Sprintf("crash-%02d", stop)
		s := &stoppingStore{Store: h.store, stop: stop}
		if err := runPass(h, s, env, 0); err == nil {
			continue // the pass finished before the stop
		}
		// A new process retries the same pass from the start.
		if err := runPass(h, &stoppingStore{Store: h.store}, env, 0); err != nil && !errors.Is(err, authority.ErrSuperseded) {
			t.Fatalf("retry after a stop at request %d of %d: %v", stop, total, err)
		}
		events := wantTimeline(t, h, env)
		e := h.env(env)
		want := int64(1)
		if h.split {
			want = e.Desired // a stop after the head's write leaves its generation unused: the retry takes the next
		}
		if e.Desired != want || e.Observed != e.Desired || e.Scopes["api"].Live == nil || e.Scopes["api"].Live.Generation != want {
			t.Fatalf("stopped at request %d: %d/%d, live %+v; want the pass deployed at generation 1, observed", stop, e.Observed, e.Desired, e.Scopes["api"].Live)
		}
		if n := countEvents(e, authority.EventAccepted, func(authority.Event) bool { return true }); n != 1 {
			t.Fatalf("stopped at request %d: %d accepted events in %+v; want 1", stop, n, events)
		}
	}
}

// runPass runs one whole pass of env through store: accept and claim, gate deploy, complete.
func runPass(h *harness, s authority.Store, env string, _ int) error {
	a := h.authority(s)
	res, err := a.Accept(h.ctx, push(env, "run-1", sha("k", 1), "api"), true)
	if err != nil {
		return err
	}
	if res.Claim == nil || len(res.Claim.Claimed) == 0 {
		if _, err := a.Claim(h.ctx, env, res.Generation, []string{"api"}); err != nil {
			return err
		}
	}
	g, err := a.Gate(h.ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1/1", LeaseTTL: testTTL})
	if err != nil {
		return err
	}
	_, err = a.Complete(h.ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Holder: g.Holder,
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3})
	return err
}

// testRedeliveryAfterMove: an intent re-delivered right after its record landed and it left the
// document is still a repeat: the document is read before the record.
func testRedeliveryAfterMove(t *testing.T, h *harness) {
	a := h.process()
	for i := range rounds(20, 8) {
		id := fmt.Sprintf("delivery-%d", i)
		first := h.accept(a, push("staging", id, sha("m", i), "api"), false)
		h.accept(a, push("staging", id+"-next", sha("n", i), "web"), false) // moves id out of the document
		res := h.accept(h.process(), push("staging", id, sha("m", i), "api"), false)
		if !res.Duplicate || res.Generation != first.Generation {
			t.Fatalf("%s re-delivered right after it left the document: %+v; want a repeat of generation %d", id, res, first.Generation)
		}
	}
}

// testConcurrentRedeliveries: the same delivery arriving at 16 processes at once, while other
// intents are accepted and moved to records, gets one generation.
func testConcurrentRedeliveries(t *testing.T, h *harness) {
	for round := range rounds(8, 3) {
		env := fmt.Sprintf("redeliver-%d", round)
		h.accept(h.process(), push(env, "warm", sha("w", 0), "web"), false)
		var gens sync.Map
		var wg sync.WaitGroup
		begin := make(chan struct{})
		for i := range 16 {
			wg.Go(func() {
				<-begin
				p := h.process()
				if i%4 == 0 { // others move intents out of the document meanwhile
					h.accept(p, push(env, fmt.Sprintf("other-%d", i), sha("o", i), "web"), false)
				}
				res, err := p.Accept(h.ctx, push(env, "the-delivery", sha("d", round), "api"), false)
				if err != nil {
					t.Errorf("accept: %v", err)
					return
				}
				gens.Store(res.Generation, true)
			})
		}
		close(begin)
		wg.Wait()
		n := 0
		gens.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Fatalf("round %d: the same delivery got %d generations; want one", round, n)
		}
		wantTimeline(t, h, env)
	}
}

// testHistoryPages: the timeline pages from the newest back to the first event, across the outbox
// and the records, with --before and --limit semantics.
func testHistoryPages(t *testing.T, h *harness) {
	h.singleDocument("pages numbered by one event counter")
	a := h.process()
	for i := range rounds(60, 25) {
		h.accept(a, push("staging", fmt.Sprintf("run-%d", i), sha("h", i), "api"), false)
	}
	e := h.env("staging")
	newest := e.EventSeq
	var seen []int64
	before := int64(0)
	for pages := 0; ; pages++ {
		page, err := h.process().History(h.ctx, "staging", before, 7)
		if err != nil {
			t.Fatalf("history before %d: %v", before, err)
		}
		if page.Newest != newest || len(page.Events) > 7 || (page.Before != 0 && len(page.Events) != 7) {
			t.Fatalf("page before %d: %d events, next %d, newest %d", before, len(page.Events), page.Before, page.Newest)
		}
		for i := len(page.Events) - 1; i >= 0; i-- {
			seen = append(seen, page.Events[i].Seq)
		}
		if page.Before == 0 {
			break
		}
		before = page.Before
	}
	for i, seq := range seen {
		if seq != newest-int64(i) {
			t.Fatalf("paging newest first went %v; want %d down to 1, each once", seen, newest)
		}
	}
	if int64(len(seen)) != newest {
		t.Fatalf("paging saw %d events; want %d", len(seen), newest)
	}
	for _, bad := range []struct {
		before int64
		limit  int
	}{{-1, 10}, {0, 0}} {
		if _, err := a.History(h.ctx, "staging", bad.before, bad.limit); !errors.Is(err, authority.ErrInvalidInput) {
			t.Fatalf("history before %d limit %d: %v; want bad input", bad.before, bad.limit, err)
		}
	}
}

// testLargeTransition: one transition may write more events than the outbox keeps from earlier
// writes (accept and claim over 50 pending scopes: 150 events), and still goes through.
func testLargeTransition(t *testing.T, h *harness) {
	scopes := make([]string, 50)
	for i := range scopes {
		scopes[i] = fmt.Sprintf("svc-%02d", i)
	}
	h.accept(h.process(), push("staging", "first", sha("l", 1), scopes...), false)
	res := h.accept(h.process(), push("staging", "second", sha("l", 2), scopes...), true)
	if res.Claim == nil || len(res.Claim.Claimed) != len(scopes) {
		t.Fatalf("accept and claim over %d pending scopes: %+v", len(scopes), res)
	}
	wantTimeline(t, h, "staging")
}

// testRequestsPerPass: an uncontended single-scope pass on an environment with history makes at
// most 5 store requests in a process of its own (latestwins run: read the document, read the
// intent's record, two conditional writes, since the claim enters the deploy phase in its own
// write, one batch of records) and 5 in a process that remembers the document and asks the gate
// apart (the App: three conditional writes); the records of its events go in one batch. And the
// timeline stays whole.
func testRequestsPerPass(t *testing.T, h *harness) {
	h.singleDocument("the requests of a pass on one document")
	warm := h.process()
	for i, mode := range []string{"run", "run", "warm", "warm", "run"} {
		a := warm
		if mode == "run" {
			a = h.process()
		}
		gets, puts := h.store.requests()
		recPuts, recGets := h.store.recPuts.Load(), h.store.recGets.Load()
		if err := runPassOf(h, a, "staging", fmt.Sprintf("run-%d", i), sha("q", i), mode == "run"); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		g2, p2 := h.store.requests()
		got := map[string]int64{"get": g2 - gets, "put": p2 - puts, "putrecords": h.store.recPuts.Load() - recPuts, "getrecords": h.store.recGets.Load() - recGets}
		want := map[string]int64{"get": 1, "put": 2, "putrecords": 1, "getrecords": 1}
		if mode == "warm" {
			want["get"], want["put"] = 0, 3
		}
		if i == 0 || (mode == "warm" && i == 2) {
			continue // the first pass creates the document; the warm process's first reads it
		}
		for kind, n := range want {
			if got[kind] != n {
				t.Errorf("pass %d (%s): %v requests; want %v", i, mode, got, want)
				break
			}
		}
	}
	wantTimeline(t, h, "staging")
}

// runPassOf runs pass id of scope api in env through a: accept and claim, gate deploy, complete.
// With enter the claim enters the deploy phase in its own write, as latestwins run's does.
func runPassOf(h *harness, a *authority.Authority, env, id, sha string, enter bool) error {
	var opts []authority.AcceptOption
	if enter {
		opts = append(opts, authority.EnterDeploy(id, testTTL))
	}
	res, err := a.Accept(h.ctx, push(env, id, sha, "api"), true, opts...)
	if err != nil {
		return err
	}
	g := res.Entered
	if g == nil {
		if enter {
			return fmt.Errorf("the claim of an uncontended pass did not enter the deploy phase")
		}
		if g, err = a.Gate(h.ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: id, LeaseTTL: testTTL}); err != nil {
			return err
		}
	}
	_, err = a.Complete(h.ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Holder: g.Holder,
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3})
	return err
}

// testSeveralScopesCrash: an intent of three scopes accepted by a process that stops at each of
// its store requests in turn is, as far as any later reader sees, accepted on all three scopes or
// on none: the per-scope layout writes them one by one, and whoever writes one of them next (here
// a claim of one scope by a new process) completes the others from the head's log.
func testSeveralScopesCrash(t *testing.T, h *harness) {
	scopes := []string{"api", "db", "web"}
	count := &stoppingStore{Store: h.store}
	env0 := "several-count"
	if _, err := h.authority(count).Accept(h.ctx, push(env0, "i", sha("s", 1), scopes...), false); err != nil {
		t.Fatal(err)
	}
	total := count.steps
	for stop := 1; stop <= total; stop++ {
		env := fmt.Sprintf("several-%02d", stop)
		h.accept(h.process(), push(env, "before", sha("s", 2), "api", "db", "web"), false)
		s := &stoppingStore{Store: h.store, stop: stop}
		_, acceptErr := h.authority(s).Accept(h.ctx, push(env, "crashed", sha("s", 3), scopes...), false)
		// Any scope's reader: the claim of one scope, by a process of its own.
		for _, reader := range scopes {
			e := h.env(env)
			held := 0
			for _, sc := range scopes {
				if m := e.Scopes[sc].Mailbox; m != nil && m.IntentID == "crashed" {
					held++
				}
			}
			if held != 0 && held != len(scopes) {
				t.Fatalf("stopped at request %d of %d (%v), read before %s's claim: the intent is pending on %d of its %d scopes; want all or none", stop, total, acceptErr, reader, held, len(scopes))
			}
			if _, err := h.process().Claim(h.ctx, env, e.Desired, []string{reader}); err != nil {
				t.Fatalf("stopped at request %d: claim %s: %v", stop, reader, err)
			}
		}
		if acceptErr == nil {
			continue
		}
		// The accept's retry by a new process gets it on every scope, once.
		res := h.accept(h.process(), push(env, "crashed", sha("s", 3), scopes...), false)
		if len(res.Accepted) != len(scopes) {
			t.Fatalf("stopped at request %d: the retry accepted %v; want %v", stop, res.Accepted, scopes)
		}
		if n := countEvents(h.env(env), authority.EventAccepted, func(ev authority.Event) bool { return ev.Sha == sha("s", 3) }); n != len(scopes) {
			t.Fatalf("stopped at request %d: %d accepted events of the intent; want one per scope", stop, n)
		}
	}
}

// testHistoryPagesByTime: the per-scope layout's timeline pages by time from the newest back to
// the first event, each event once, however many share a time: a page holds every event of its
// oldest time, and the next one starts before it.
func testHistoryPagesByTime(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document pages by event number (HistoryPages)")
	}
	a := h.process()
	for i := range rounds(60, 25) {
		scopes := [][]string{{"api"}, {"web"}, {"api", "web", "worker"}}[i%3]
		h.accept(a, push("staging", fmt.Sprintf("run-%d", i), sha("h", i), scopes...), false)
		if i%4 == 0 {
			h.clock.Advance(time.Second) // the others share their time with the one before
		}
	}
	type id struct {
		scope string
		seq   int64
		kind  authority.EventKind
	}
	seen := map[id]bool{}
	before, newest := int64(0), int64(0)
	for pages := 0; ; pages++ {
		page, err := h.process().History(h.ctx, "staging", before, 7)
		if err != nil {
			t.Fatalf("history before %d: %v", before, err)
		}
		if !page.Timed || len(page.Events) == 0 || pages > 1000 {
			t.Fatalf("page %d before %d: %+v; want a page of events by time", pages, before, page)
		}
		if pages == 0 {
			newest = page.Newest
		}
		for _, ev := range page.Events {
			k := id{ev.Scope, ev.Seq, ev.Kind}
			if seen[k] || before > 0 && ev.At.UnixNano() >= before {
				t.Fatalf("page before %d: event %+v at %s is on an earlier page or not before the bound", before, k, ev.At)
			}
			seen[k] = true
		}
		if page.Before == 0 {
			break
		}
		before = page.Before
	}
	if int64(len(seen)) != newest {
		t.Fatalf("paging saw %d events; want %d", len(seen), newest)
	}
}
