package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// Generations from the counter (docs/design.md section 9): in the per-scope layout an accept of
// one scope takes its generation from the environment's counter and writes its scope alone, so
// passes on different scopes never race; an intent of several scopes is reserved in the head's
// log, then given its generation, and every scope still applies its intents in generation order.
func disjointCases() []testCase {
	return []testCase{
		{"DisjointScopesDoNotRace", testDisjointScopesDoNotRace},
		{"WideAcceptMeetsOneScope", testWideAcceptMeetsOneScope},
		{"MixedAcceptsKeepEachScopesOrder", testMixedAcceptsKeepOrder},
		{"OneScopeReadsTheHeadAfterItsGeneration", testHeadAfterGeneration},
		{"RepeatMeetsItsFirstDelivery", testRepeatMeetsFirstDelivery},
		{"WarmAcceptMeetsAChangedHead", testWarmAcceptMeetsAChangedHead},
		{"WarmJoinMeetsANewGate", testWarmJoinMeetsANewGate},
	}
}

// testWarmJoinMeetsANewGate: a process that remembers the environment accepts an intent that
// joins the pending generation (the same commit), asking to enter the deploy phase, after another
// process made the environment require an approval: the join decides on the head as it is, and
// enters nothing, since the commit is not approved. A join takes no generation, so in the
// per-scope layout it is what the accept decided on the head it remembered, read again.
func testWarmJoinMeetsANewGate(t *testing.T, h *harness) {
	warm := h.process()
	h.accept(warm, push("staging", "push", sha("p", 1), "api"), false)
	if _, err := h.process().SetGates(h.ctx, "staging", authority.Gates{Approvals: &authority.ApprovalRule{Count: 1}}, "ops"); err != nil {
		t.Fatal(err)
	}
	res, err := warm.Accept(h.ctx, push("staging", "run", sha("p", 1), "api"), true, authority.EnterDeploy("run-1", testTTL))
	if err != nil {
		t.Fatal(err)
	}
	if res.Entered != nil {
		t.Fatalf("the join entered the deploy phase past an approval another process required: %+v", res.Entered)
	}
	if l := h.scope("staging", "api").Lease; l.Holder != "" && l.Generation == res.Generation && !l.ExpiresAt.Before(h.clock.Now()) {
		t.Fatalf("api is leased to %+v though its commit waits for an approval", l)
	}
}

// testWarmAcceptMeetsAChangedHead: a process that remembers the environment (the App) accepts
// on one scope after another process changed the head (the policy, to queue): the accept decides
// on the head as it is, and its intent queues behind the one pending rather than superseding it.
// In the per-scope layout such an accept reads no head before it takes its generation, only after.
func testWarmAcceptMeetsAChangedHead(t *testing.T, h *harness) {
	warm := h.process()
	h.accept(warm, push("staging", "first", sha("f", 1), "api"), false)
	if _, err := h.process().SetPolicy(h.ctx, "staging", authority.PolicyQueue, "ops"); err != nil {
		t.Fatal(err)
	}
	res := h.accept(warm, push("staging", "second", sha("s", 2), "api"), false)
	if res.Ahead["api"] != 1 {
		t.Fatalf("the second accept, under the queue policy another process set: %+v; want it to wait behind the first", res)
	}
	entries := h.scope("staging", "api").Entries()
	if len(entries) != 2 || entries[0].IntentID != "first" || entries[1].IntentID != "second" {
		t.Fatalf("api holds %+v; want first, then second queued behind it", entries)
	}
}

// addPausingStore stops its process at its first addition to a counter, right before it or
// (after) right after its answer, until resumed.
type addPausingStore struct {
	authority.Store
	after   bool
	once    sync.Once
	paused  chan struct{}
	resumed chan struct{}
}

func newAddPausing(s authority.Store, after bool) *addPausingStore {
	return &addPausingStore{Store: s, after: after, paused: make(chan struct{}), resumed: make(chan struct{})}
}

func (s *addPausingStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	pause := func() {
		if delta > 0 {
			s.once.Do(func() {
				close(s.paused)
				<-s.resumed
			})
		}
	}
	if !s.after {
		pause()
	}
	n, err := s.Store.Add(ctx, key, delta)
	if s.after {
		pause()
	}
	return n, err
}

// putNthPausingStore stops its process right before its nth write of key, until resumed.
type putNthPausingStore struct {
	authority.Store
	key     string
	nth     int32
	seen    atomic.Int32
	puts    atomic.Int32 // every write, of any key
	paused  chan struct{}
	resumed chan struct{}
}

func newPutNthPausing(s authority.Store, key string, nth int32) *putNthPausingStore {
	return &putNthPausingStore{Store: s, key: key, nth: nth, paused: make(chan struct{}), resumed: make(chan struct{})}
}

func (s *putNthPausingStore) Put(ctx context.Context, d *authority.Doc) (int64, error) {
	s.puts.Add(1)
	if d.Key == s.key && s.seen.Add(1) == s.nth {
		close(s.paused)
		<-s.resumed
	}
	return s.Store.Put(ctx, d)
}

// acceptAsync accepts in through a in a goroutine of its own; the channel gets its result.
func acceptAsync(h *harness, a *authority.Authority, in authority.Intent) chan *authority.AcceptResult {
	done := make(chan *authority.AcceptResult, 1)
	go func() {
		res, err := a.Accept(h.ctx, in, false)
		if err != nil {
			h.t.Errorf("accept %s: %v", in.ID, err)
		}
		done <- res
	}()
	return done
}

// headRev is the stored revision of env's head.
func (h *harness) headRev(env string) int64 {
	h.t.Helper()
	d, err := h.store.inner.Get(h.ctx, authority.EnvKey(env))
	if err != nil {
		h.t.Fatalf("get the head of %s: %v", env, err)
	}
	return d.Rev
}

// testDisjointScopesDoNotRace: an accept on api that took its generation and stopped right
// before its scope's write, while a whole pass runs on web, writes once when it goes on: the
// pass on web wrote nothing it reads. Neither accept writes the head.
func testDisjointScopesDoNotRace(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document is one item: every transition writes it")
	}
	const env = "disjoint"
	h.live(h.process(), env, "warm", sha("w", 0), "api", "web")
	rev := h.headRev(env)

	ps := newPutNthPausing(h.store, authority.ScopeKey(env, "api"), 1)
	got := acceptAsync(h, h.authority(ps), push(env, "on-api", sha("a", 1), "api"))
	<-ps.paused
	p := h.process()
	gw := h.pass(p, env, "on-web", sha("b", 1), "run-web", "web")
	h.complete(p, gw, authority.OutcomeSuccess, "run-web")
	close(ps.resumed)
	res := <-got
	if t.Failed() {
		return
	}
	if n := ps.puts.Load(); n != 1 {
		t.Fatalf("the accept on api made %d writes while a pass ran on web; want 1: disjoint scopes do not race", n)
	}
	if after := h.headRev(env); after != rev {
		t.Fatalf("the head went from revision %d to %d through passes on one scope each; want it untouched", rev, after)
	}
	e := h.env(env)
	if m := e.Scopes["api"].Mailbox; m == nil || m.IntentID != "on-api" || m.Generation != res.Generation {
		t.Fatalf("api's pending intent %+v; want on-api at %d", m, res.Generation)
	}
	if res.Generation >= gw.Generation {
		t.Fatalf("on-api took generation %d before on-web took %d; want it older", res.Generation, gw.Generation)
	}
	// Observed, which the status shows, is derived: it settles once api's pass completes.
	g := h.pass(h.process(), env, "on-api", sha("a", 1), "run-api", "api")
	h.complete(h.process(), g, authority.OutcomeSuccess, "run-api")
	if e := h.env(env); e.Observed != e.Desired || e.Desired != gw.Generation {
		t.Fatalf("observed %d of %d after both passes; want %d of %d", e.Observed, e.Desired, gw.Generation, gw.Generation)
	}
}

// testWideAcceptMeetsOneScope: an intent of api and web stopped between taking its generation
// and writing it into its reserved entry of the head's log, while an intent of api alone is
// accepted: both reach api, the wide one first, each with its own generation, and web gets the
// wide one. The one-scope accept cannot go past the reserved entry: had it applied its own
// generation first, the wide one's older one would never reach api.
func testWideAcceptMeetsOneScope(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document has no log")
	}
	const env = "wide-meets-one"
	h.accept(h.process(), queued(env, "warm", sha("w", 0), "api", "web"), false)
	// The wide accept's writes of the head: the reservation, then the fill.
	ps := newPutNthPausing(h.store, authority.EnvKey(env), 2)
	wide := acceptAsync(h, h.authority(ps), queued(env, "wide", sha("a", 1), "api", "web"))
	<-ps.paused
	one := h.accept(h.process(), queued(env, "one", sha("b", 1), "api"), false)
	close(ps.resumed)
	res := <-wide
	if t.Failed() {
		return
	}
	if len(res.Accepted) != 2 || len(one.Accepted) != 1 {
		t.Fatalf("wide accepted on %v, one on %v; want api and web, and api", res.Accepted, one.Accepted)
	}
	e := h.env(env)
	var api, web []string
	for _, m := range e.Scopes["api"].Entries() {
		api = append(api, fmt.Sprintf("%s@%d", m.IntentID, m.Generation))
	}
	for _, m := range e.Scopes["web"].Entries() {
		web = append(web, fmt.Sprintf("%s@%d", m.IntentID, m.Generation))
	}
	first := e.Scopes["api"].Entries()[0].Generation
	wantAPI := []string{fmt.Sprintf("warm@%d", first), fmt.Sprintf("wide@%d", res.Generation), fmt.Sprintf("one@%d", one.Generation)}
	wantWeb := []string{fmt.Sprintf("warm@%d", first), fmt.Sprintf("wide@%d", res.Generation)}
	if !slices.Equal(api, wantAPI) || !slices.Equal(web, wantWeb) || res.Generation >= one.Generation {
		t.Fatalf("api holds %v and web %v; want %v and %v, in increasing generation", api, web, wantAPI, wantWeb)
	}
}

// testMixedAcceptsKeepOrder: processes accepting intents of one scope and of several at once,
// under the queue policy, leave every scope holding exactly the intents that name it, in
// increasing generation, each generation handed to one intent.
func testMixedAcceptsKeepOrder(t *testing.T, h *harness) {
	const env = "mixed"
	scopes := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	const procs = 8
	perProc := rounds(12, 5)
	type accepted struct {
		id     string
		scopes []string
		gen    int64
	}
	var mu sync.Mutex
	var all []accepted
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for p := range procs {
		a := h.authority(h.store, authority.WithQueueLimit(procs*perProc))
		wg.Go(func() {
			<-begin
			for i := range perProc {
				names := []string{scopes[(p+i)%len(scopes)]}
				if (p+i)%3 == 0 {
					names = append(names, scopes[(p+i+1+p%2)%len(scopes)])
				}
				id := fmt.Sprintf("p%d-%d", p, i)
				res, err := a.Accept(h.ctx, queued(env, id, sha(fmt.Sprintf("p%d", p), i), names...), false)
				if err != nil {
					t.Errorf("accept %s on %v: %v", id, names, err)
					return
				}
				if len(res.Accepted) != len(names) {
					t.Errorf("accept %s on %v: accepted on %v", id, names, res.Accepted)
				}
				mu.Lock()
				all = append(all, accepted{id: id, scopes: names, gen: res.Generation})
				mu.Unlock()
			}
		})
	}
	close(begin)
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[int64]string{}
	for _, r := range all {
		if other, ok := seen[r.gen]; ok {
			t.Fatalf("generation %d handed to %s and to %s; want each to one intent", r.gen, other, r.id)
		}
		seen[r.gen] = r.id
	}
	e := h.env(env)
	for _, s := range scopes {
		var want []string
		for _, r := range all {
			if slices.Contains(r.scopes, s) {
				want = append(want, fmt.Sprintf("%s@%d", r.id, r.gen))
			}
		}
		slices.SortFunc(want, func(x, y string) int { return cmpGen(x) - cmpGen(y) })
		var got []string
		for _, m := range e.Scopes[s].Entries() {
			got = append(got, fmt.Sprintf("%s@%d", m.IntentID, m.Generation))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s holds %v; want every intent that names it, in increasing generation: %v", s, got, want)
		}
	}
}

// cmpGen is the generation of an "id@gen" entry.
func cmpGen(s string) int {
	var gen int
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '@' {
			fmt.Sscanf(s[i+1:], "%d", &gen)
			break
		}
	}
	return gen
}

// testHeadAfterGeneration: an accept of api stopped right before taking its generation, or right
// after, while an intent of api and web is reserved, given its generation and stopped before its
// write of api. The accept of api, going on, reads the head after its generation, and applies
// the wide intent to api before its own, which is newer: stopped before, it took the newer one;
// stopped after, the wide one's is newer than the one it took, so it takes another. Had it
// decided on the head it read first, or kept the older one it took, a scope would apply a newer
// generation before an older one, and the older one would never reach it.
func testHeadAfterGeneration(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document has no log")
	}
	for _, after := range []bool{false, true} {
		env := fmt.Sprintf("head-after-generation-%v", after)
		h.accept(h.process(), queued(env, "warm", sha("w", 0), "api", "web"), false)
		pa := newAddPausing(h.store, after)
		one := acceptAsync(h, h.authority(pa), queued(env, "one", sha("b", 1), "api"))
		<-pa.paused
		pw := newPutNthPausing(h.store, authority.ScopeKey(env, "api"), 1)
		wide := acceptAsync(h, h.authority(pw), queued(env, "wide", sha("a", 1), "api", "web"))
		<-pw.paused
		close(pa.resumed)
		resOne := <-one
		close(pw.resumed)
		resWide := <-wide
		if t.Failed() {
			return
		}
		if resWide.Generation >= resOne.Generation || len(resWide.Accepted) != 2 {
			t.Fatalf("stopped after the counter %v: wide accepted at %d on %v, one at %d; want wide older, on api and web",
				after, resWide.Generation, resWide.Accepted, resOne.Generation)
		}
		var api []string
		for _, m := range h.env(env).Scopes["api"].Entries() {
			api = append(api, fmt.Sprintf("%s@%d", m.IntentID, m.Generation))
		}
		first := h.env(env).Scopes["web"].Entries()[0].Generation
		if want := []string{fmt.Sprintf("warm@%d", first), fmt.Sprintf("wide@%d", resWide.Generation), fmt.Sprintf("one@%d", resOne.Generation)}; !slices.Equal(api, want) {
			t.Fatalf("stopped after the counter %v: api holds %v; want %v, in increasing generation", after, api, want)
		}
	}
}

// hookStore runs its hooks right before each write of a document and right after each addition
// to a counter.
type hookStore struct {
	authority.Store
	beforePut func(key string)
	afterAdd  func()
}

func (s *hookStore) Put(ctx context.Context, d *authority.Doc) (int64, error) {
	s.beforePut(d.Key)
	return s.Store.Put(ctx, d)
}

func (s *hookStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	n, err := s.Store.Add(ctx, key, delta)
	if delta > 0 {
		s.afterAdd()
	}
	return n, err
}

// testRepeatMeetsFirstDelivery: a delivery of intent x whose accept lost api's race (to another
// intent), took a new generation and stopped right after it, while another delivery of x is
// accepted, is a repeat when it goes on: it reads what it decides on again, and x is on api once.
func testRepeatMeetsFirstDelivery(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document takes no generation from the counter")
	}
	const env = "repeat-meets-first"
	h.accept(h.process(), queued(env, "warm", sha("w", 0), "api"), false)
	api := authority.ScopeKey(env, "api")
	pausedPut, resumePut := make(chan struct{}), make(chan struct{})
	pausedAdd, resumeAdd := make(chan struct{}), make(chan struct{})
	var puts, adds atomic.Int32
	s := &hookStore{Store: h.store,
		beforePut: func(key string) {
			if key == api && puts.Add(1) == 1 {
				close(pausedPut)
				<-resumePut
			}
		},
		afterAdd: func() {
			if adds.Add(1) == 2 {
				close(pausedAdd)
				<-resumeAdd
			}
		}}
	second := acceptAsync(h, h.authority(s), queued(env, "x", sha("x", 1), "api"))
	<-pausedPut
	h.accept(h.process(), queued(env, "y", sha("y", 1), "api"), false)
	close(resumePut)
	<-pausedAdd
	first := h.accept(h.process(), queued(env, "x", sha("x", 1), "api"), false)
	close(resumeAdd)
	res := <-second
	if t.Failed() {
		return
	}
	if !res.Duplicate || res.Generation != first.Generation {
		t.Fatalf("the second delivery of x: %+v; want a repeat of generation %d", res, first.Generation)
	}
	var xs int
	for _, m := range h.env(env).Scopes["api"].Entries() {
		if m.IntentID == "x" {
			xs++
		}
	}
	if xs != 1 {
		t.Fatalf("api holds x %d times; want once", xs)
	}
}
