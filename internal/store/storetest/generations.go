package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 1: every accepted intent gets a generation strictly greater than every earlier one of
// its environment; a re-delivered intent returns its first generation and changes nothing.
func generationCases() []testCase {
	return []testCase{
		{"StrictlyIncreasing", testGenerationsIncrease},
		{"Redelivery", testRedelivery},
		{"RedeliveryWithClaim", testRedeliveryWithClaim},
		{"LoserOfTheScopesRace", testLoserOfTheScopesRace},
	}
}

// newPutPausing stops its process right before its first write of key, until resumed.
func newPutPausing(s authority.Store, key string) *putNthPausingStore {
	return newPutNthPausing(s, key, 1)
}

// testLoserOfTheScopesRace: in the per-scope layout an accept takes its generation from the
// counter, then writes its scope's document; one that loses the scope's race decides again on what
// the winner left and takes a new generation, newer than every one taken so far. So the later
// arrival still wins when the winner was another accept, and observed, which the status shows,
// does not go back when the winner was a completion and other scopes settled meanwhile.
func testLoserOfTheScopesRace(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document takes a generation and changes the scope in one write")
	}
	const env = "staging"
	api := authority.ScopeKey(env, "api")
	pending := func() *authority.Ref { return h.env(env).Scopes["api"].Mailbox }

	// The winner is an accept: B takes its generation and stops before its scope's write; A takes
	// the next and writes api; B decides again on what A left.
	h.accept(h.process(), push(env, "seed", sha("s", 1), "api"), false)
	pb := newPutPausing(h.store, api)
	b := acceptAsync(h, h.authority(pb), push(env, "b", sha("b", 1), "api"))
	<-pb.paused
	resA := h.accept(h.process(), push(env, "a", sha("a", 1), "api"), false)
	close(pb.resumed)
	resB := <-b
	if t.Failed() {
		return
	}
	if resB.Generation <= resA.Generation {
		t.Fatalf("B lost api's race to A (generation %d) and was accepted at %d; want a generation newer than A's, as it arrived later", resA.Generation, resB.Generation)
	}
	if m := pending(); m == nil || m.Sha != sha("b", 1) || m.Generation != resB.Generation {
		t.Fatalf("api's pending intent %+v; want B's at %d, which superseded A", m, resB.Generation)
	}

	// The winner is a completion: C stops before api's write, the pass at B's generation
	// completes on api, and a pass on web settles the environment; then C decides again.
	a := h.process()
	h.claim(a, env, resB.Generation, "api")
	g := h.gate(a, env, resB.Generation, "run-b", "api")
	pc := newPutPausing(h.store, api)
	c := acceptAsync(h, h.authority(pc), push(env, "c", sha("c", 1), "api"))
	<-pc.paused
	h.complete(a, g, authority.OutcomeSuccess, "run-b")
	gw := h.pass(a, env, "w", sha("w", 1), "run-w", "web")
	h.complete(a, gw, authority.OutcomeSuccess, "run-w")
	settled := h.env(env)
	if settled.Observed != settled.Desired || settled.HasPending() {
		t.Fatalf("observed %d of %d with work pending before C's retry; want the environment settled", settled.Observed, settled.Desired)
	}
	close(pc.resumed)
	resC := <-c
	if t.Failed() {
		return
	}
	after := h.env(env)
	if after.Observed < settled.Observed {
		t.Fatalf("observed went back from %d to %d when C, which lost api's race, was accepted at %d; want C to take a generation past %d",
			settled.Observed, after.Observed, resC.Generation, settled.Desired)
	}
	if resC.Generation <= settled.Desired || after.Desired != resC.Generation {
		t.Fatalf("C accepted at %d after the environment settled at %d, desired now %d; want a new generation, the newest", resC.Generation, settled.Desired, after.Desired)
	}
	if m := pending(); m == nil || m.Sha != sha("c", 1) || m.Generation != resC.Generation {
		t.Fatalf("api's pending intent %+v; want C's at %d", m, resC.Generation)
	}
}

func testGenerationsIncrease(t *testing.T, h *harness) {
	// Two processes take turns, so that a generation can only come from the stored counter.
	procs := []*authority.Authority{h.process(), h.process()}
	scopeSets := [][]string{{"api"}, {"web"}, {"api", "web"}, {"worker"}}
	last := int64(0)
	for i := range 24 {
		in := push("staging", fmt.Sprintf("delivery-%d", i), sha("c", i), scopeSets[i%len(scopeSets)]...)
		res := h.accept(procs[i%2], in, i%3 == 0)
		if res.Duplicate || res.Generation <= last {
			t.Fatalf("intent %d: generation %d (duplicate %v) after %d; want a new generation greater than every earlier one", i, res.Generation, res.Duplicate, last)
		}
		last = res.Generation
		if got := h.env("staging").Desired; got != last {
			t.Fatalf("intent %d: stored desired generation %d, want %d", i, got, last)
		}
	}
	// Generations are per environment.
	if res := h.accept(procs[0], push("prod", "delivery-0", sha("c", 0), "api"), false); res.Generation != 1 || res.Duplicate {
		t.Fatalf("first intent of prod: generation %d (duplicate %v), want 1: counters are per environment", res.Generation, res.Duplicate)
	}
	if got := h.env("staging").Desired; got != last {
		t.Fatalf("staging's desired generation moved to %d by an intent of prod", got)
	}
}

func testRedelivery(t *testing.T, h *harness) {
	a := h.process()
	first := h.accept(a, push("staging", "delivery-x", sha("x", 1), "api", "web"), false)
	h.accept(a, push("staging", "delivery-y", sha("y", 1), "api"), false)
	h.accept(a, push("staging", "delivery-z", sha("z", 1), "worker"), true)
	h.clock.Advance(testTTL)

	before := h.doc(authority.EnvKey("staging"))
	_, putsBefore := h.store.requests()
	redelivered := []authority.Intent{
		push("staging", "delivery-x", sha("x", 1), "api", "web"),
		push("staging", "delivery-x", sha("x", 1), "web", "api"),
	}
	for _, p := range []*authority.Authority{a, h.process()} {
		// The same id with another commit is not a repeat: refused, and nothing changes.
		if _, err := p.Accept(h.ctx, push("staging", "delivery-x", sha("x", 2), "api", "web"), false); !errors.Is(err, authority.ErrInvalidInput) {
			t.Fatalf("delivery-x with another commit: %v; want bad input", err)
		}
		for _, in := range redelivered {
			res := h.accept(p, in, false)
			if !res.Duplicate || res.Generation != first.Generation {
				t.Fatalf("re-delivered %s: generation %d, duplicate %v; want generation %d, duplicate", in.ID, res.Generation, res.Duplicate, first.Generation)
			}
			// A repeat reports the scopes whose mailbox still holds the intent: delivery-y has since
			// superseded it in api, so only web is left for its pass to claim.
			if diff := cmp.Diff([]string{"web"}, res.Accepted); len(first.Accepted) != 2 || diff != "" {
				t.Fatalf("re-delivered %s: accepted scopes (-want +got):\n%s", in.ID, diff)
			}
		}
	}
	if _, puts := h.store.requests(); puts != putsBefore {
		t.Fatalf("re-deliveries wrote %d times; want no write", puts-putsBefore)
	}
	if diff := cmp.Diff(before, h.doc(authority.EnvKey("staging"))); diff != "" {
		t.Fatalf("re-deliveries changed the stored environment (-before +after):\n%s", diff)
	}
}

// testRedeliveryWithClaim: a pass that retries its accept+claim (its answer was lost) gets its
// generation and its claim back, and changes nothing.
func testRedeliveryWithClaim(t *testing.T, h *harness) {
	a := h.process()
	in := push("staging", "run-42/1", sha("r", 42), "api", "web")
	first := h.accept(a, in, true)
	if first.Claim == nil || len(first.Claim.Claimed) != 2 {
		t.Fatalf("accept+claim: claim %+v; want api and web claimed", first.Claim)
	}
	before := h.doc(authority.EnvKey("staging"))
	again := h.accept(h.process(), in, true)
	if !again.Duplicate || again.Generation != first.Generation {
		t.Fatalf("retried accept+claim: generation %d, duplicate %v; want %d, duplicate", again.Generation, again.Duplicate, first.Generation)
	}
	if again.Claim == nil || !slices.Equal(again.Claim.Scopes(), first.Claim.Scopes()) {
		t.Fatalf("retried accept+claim: claim %+v; want the first claim's scopes %v", again.Claim, first.Claim.Scopes())
	}
	if diff := cmp.Diff(before, h.doc(authority.EnvKey("staging"))); diff != "" {
		t.Fatalf("retried accept+claim changed the stored environment (-before +after):\n%s", diff)
	}
}

// Guarantee 2: a newer intent replaces its scope's mailbox entry only; every accepted intent ends
// in exactly one outcome.
func mailboxCases() []testCase {
	return []testCase{
		{"ReplacesOwnScopeOnly", testMailboxReplace},
		{"Concurrent64", testConcurrentAccept},
	}
}

func testMailboxReplace(t *testing.T, h *harness) {
	a := h.process()
	h.accept(a, push("staging", "d1", sha("a", 1), "api", "web"), false)
	h.clock.Advance(testTTL)
	webBefore := *h.scope("staging", "web").Mailbox

	second := h.accept(a, push("staging", "d2", sha("a", 2), "api"), false)
	env := h.env("staging")
	if m := env.Scopes["api"].Mailbox; m == nil || m.Generation != second.Generation || m.Sha != sha("a", 2) || m.IntentID != "d2" {
		t.Fatalf("api's mailbox holds %+v; want intent d2 at generation %d", m, second.Generation)
	}
	if diff := cmp.Diff(&webBefore, env.Scopes["web"].Mailbox); diff != "" {
		t.Fatalf("an intent for api changed web's mailbox entry (-before +after):\n%s", diff)
	}
	superseded := eventsOf(env, authority.EventSuperseded)
	if len(superseded) != 1 || superseded[0].Scope != "api" || superseded[0].Generation != 1 || superseded[0].Sha != sha("a", 1) ||
		!strings.Contains(superseded[0].Message, fmt.Sprintf("generation %d", second.Generation)) {
		t.Fatalf("superseded events %+v; want one for api's generation 1 naming generation %d", superseded, second.Generation)
	}

	apiBefore := *h.scope("staging", "api").Mailbox
	h.accept(a, push("staging", "d3", sha("a", 3), "web"), false)
	env = h.env("staging")
	if diff := cmp.Diff(&apiBefore, env.Scopes["api"].Mailbox); diff != "" {
		t.Fatalf("an intent for web changed api's mailbox entry (-before +after):\n%s", diff)
	}
	if m := env.Scopes["web"].Mailbox; m == nil || m.IntentID != "d3" {
		t.Fatalf("web's mailbox holds %+v; want intent d3", m)
	}
	// Intent d1 is now superseded in both its scopes, each recorded once.
	if got := countEvents(env, authority.EventSuperseded, func(e authority.Event) bool { return e.Generation == 1 }); got != 2 {
		t.Fatalf("intent d1 has %d superseded events; want 2 (api and web)", got)
	}
}

// testConcurrentAccept: 64 goroutines accept distinct intents on one environment, over four scopes.
func testConcurrentAccept(t *testing.T, h *harness) {
	h.singleDocument("generations 1 to 64 without a gap, and a claim at 64")
	const n = 64
	const env = "staging"
	scopes := []string{"api", "web", "worker", "db"}
	procs := make([]*authority.Authority, 48) // most goroutines are processes of their own; some share one
	for i := range procs {
		procs[i] = h.process()
	}
	type accepted struct {
		id, sha, scope string
		gen            int64
	}
	results := make([]accepted, n)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			in := push(env, fmt.Sprintf("delivery-%02d", i), sha("p", i), scopes[i%len(scopes)])
			<-begin
			res, err := procs[i%len(procs)].Accept(h.ctx, in, false)
			if err != nil {
				t.Errorf("accept %s: %v", in.ID, err)
				return
			}
			if res.Duplicate || len(res.Accepted) != 1 {
				t.Errorf("accept %s: %+v; want a new intent accepted for %s", in.ID, res, in.Scopes[0])
			}
			results[i] = accepted{id: in.ID, sha: in.Sha, scope: in.Scopes[0], gen: res.Generation}
		})
	}
	close(begin)
	wg.Wait()
	if t.Failed() {
		return
	}

	gens := make([]int64, 0, n)
	for _, r := range results {
		gens = append(gens, r.gen)
	}
	slices.Sort(gens)
	for i, g := range gens {
		if h.split && (i == 0 || g > gens[i-1]) {
			continue // the per-scope layout may skip a generation a raced accept took, never repeat one
		}
		if g != int64(i+1) {
			t.Fatalf("generations %v; want exactly 1..%d, each once", gens, n)
		}
	}

	e := h.env(env)
	if e.Desired != n && !(h.split && e.Desired > n) {
		t.Fatalf("desired generation %d, want %d", e.Desired, n)
	}
	newest := map[string]accepted{}
	for _, r := range results {
		if r.gen > newest[r.scope].gen {
			newest[r.scope] = r
		}
	}
	oldestPending := int64(n)
	for _, s := range scopes {
		m := e.Scopes[s].Mailbox
		if m == nil || m.IntentID != newest[s].id || m.Generation != newest[s].gen || m.Sha != newest[s].sha {
			t.Fatalf("scope %s: mailbox %+v; want its newest intent %+v", s, m, newest[s])
		}
		oldestPending = min(oldestPending, m.Generation)
	}
	if want := oldestPending - 1; e.Observed != want {
		t.Fatalf("observed %d; want %d (every intent below the oldest pending one has its outcome)", e.Observed, want)
	}
	// Every intent is in exactly one state: in its scope's mailbox, or superseded with an event.
	for _, r := range results {
		inMailbox := e.Scopes[r.scope].Mailbox.IntentID == r.id
		superseded := countEvents(e, authority.EventSuperseded, func(ev authority.Event) bool {
			return ev.Scope == r.scope && ev.Generation == r.gen && ev.Sha == r.sha
		})
		if inMailbox == (superseded == 1) || superseded > 1 {
			t.Fatalf("intent %s (generation %d): in mailbox %v, superseded events %d; want exactly one of the two", r.id, r.gen, inMailbox, superseded)
		}
	}
	if got := h.pending(); !slices.Contains(got, env) {
		t.Fatalf("pending %v; want %s listed", got, env)
	}
	// Every intent is remembered: a re-delivery through another process is a repeat of its generation.
	for _, r := range results {
		res, err := h.process().Accept(h.ctx, push(env, r.id, r.sha, r.scope), false)
		if err != nil || !res.Duplicate || res.Generation != r.gen {
			t.Fatalf("re-delivery of %s: %+v, %v; want a repeat of generation %d", r.id, res, err, r.gen)
		}
	}

	// One pass settles everything; then every intent is deployed or superseded, never both, never
	// neither.
	a := procs[0]
	res, err := a.Claim(h.ctx, env, n, nil)
	if err != nil || !slices.Equal(sortedCopy(res.Scopes()), sortedCopy(scopes)) {
		t.Fatalf("claim all pending at %d: %+v, %v; want %v claimed", n, res, err, scopes)
	}
	g := h.gate(a, env, n, "settler", scopes...)
	h.complete(a, g, authority.OutcomeSuccess, "run-settle")
	e = h.env(env)
	if e.Observed != n || e.Desired != n {
		t.Fatalf("after deploying everything: %d/%d; want %d/%d", e.Observed, e.Desired, n, n)
	}
	for _, r := range results {
		deployed := countEvents(e, authority.EventDeployed, func(ev authority.Event) bool { return ev.Scope == r.scope && ev.Sha == r.sha })
		superseded := countEvents(e, authority.EventSuperseded, func(ev authority.Event) bool {
			return ev.Scope == r.scope && ev.Generation == r.gen && ev.Sha == r.sha
		})
		if deployed+superseded != 1 {
			t.Fatalf("intent %s (generation %d): deployed %d times, superseded %d times; want exactly one outcome", r.id, r.gen, deployed, superseded)
		}
		if deployed == 1 && e.Scopes[r.scope].Live.Sha != r.sha {
			t.Fatalf("intent %s deployed, but %s's live sha is %s", r.id, r.scope, e.Scopes[r.scope].Live.Sha)
		}
	}
	if got := h.pending(); slices.Contains(got, env) {
		t.Fatalf("pending %v lists %s after everything was deployed", got, env)
	}
}

// timelineOf is what e tells of its timeline: the events read with it (h.env reads them all) and
// those still in its outbox, each once.
func timelineOf(e *authority.Env) []authority.Event {
	// The per-scope layout numbers the events of each scope on their own.
	type id struct {
		scope string
		seq   int64
	}
	key := func(ev authority.Event) id {
		if e.Split {
			return id{ev.Scope, ev.Seq}
		}
		return id{"", ev.Seq}
	}
	seen := map[id]bool{}
	var out []authority.Event
	for _, list := range [][]authority.Event{e.Events, e.Outbox} {
		for _, ev := range list {
			if k := key(ev); !seen[k] {
				seen[k] = true
				out = append(out, ev)
			}
		}
	}
	if e.Split {
		slices.SortStableFunc(out, func(a, b authority.Event) int {
			if c := a.At.Compare(b.At); c != 0 {
				return c
			}
			if c := strings.Compare(a.Scope, b.Scope); c != 0 {
				return c
			}
			return int(a.Seq - b.Seq)
		})
		return out
	}
	slices.SortFunc(out, func(a, b authority.Event) int { return int(a.Seq - b.Seq) })
	return out
}

func eventsOf(e *authority.Env, kind authority.EventKind) []authority.Event {
	var out []authority.Event
	for _, ev := range timelineOf(e) {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func countEvents(e *authority.Env, kind authority.EventKind, match func(authority.Event) bool) int {
	n := 0
	for _, ev := range timelineOf(e) {
		if ev.Kind == kind && match(ev) {
			n++
		}
	}
	return n
}
