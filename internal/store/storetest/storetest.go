// Package storetest is the conformance suite that every authority.Store adapter runs: the Store
// port's own contract (revisions, isolation, the sparse pending index) and the product's guarantees
// (spec section 2: generations, mailbox, claim, authority, observed, leases, fencing, outcomes,
// selectivity, out-of-order deliveries) checked end to end through authority.Authority over the
// adapter.
//
// An adapter's test calls Run with a constructor of fresh, empty stores:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) authority.Store { return memory.New() })
//	}
//
// Time is a fake Clock injected with authority.WithClock: expiry is tested by advancing it, never by
// sleeping. Races run many goroutines, most with an Authority of their own (a separate process) over
// the one store. The suite is sized for a store reached over loopback HTTP: a full run makes a few
// tens of thousands of store requests; -short makes the long races and the property test shorter.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Run runs the conformance suite against the stores newStore makes. Every subtest gets a fresh,
// empty store of its own and runs in parallel with the others.
func Run(t *testing.T, newStore func(t *testing.T) authority.Store) {
	t.Helper()
	RunGroups(t, newStore)
}

// RunGroups runs the groups of the suite named in only (all of them when none is named): for a
// store whose every request is slow (a git server), the groups that hold its port's contract run
// by default and the rest under a long setting.
func RunGroups(t *testing.T, newStore func(t *testing.T) authority.Store, only ...string) {
	t.Helper()
	runGroups(t, newStore, false, only...)
}

// RunSplit runs the groups of the suite named in only (all of them when none is named) with
// every environment in the per-scope layout (authority.WithScopeDocuments).
func RunSplit(t *testing.T, newStore func(t *testing.T) authority.Store, only ...string) {
	t.Helper()
	runGroups(t, newStore, true, only...)
}

func runGroups(t *testing.T, newStore func(t *testing.T) authority.Store, split bool, only ...string) {
	t.Helper()
	groups := []struct {
		name  string
		cases []testCase
	}{
		{"Port", portCases()},
		{"Counter", counterCases()},
		{"CounterRace", counterRaceCases()},
		{"Generations", generationCases()},
		{"Mailbox", mailboxCases()},
		{"Claim", claimCases()},
		{"Authority", authorityCases()},
		{"Observed", observedCases()},
		{"Leases", leaseCases()},
		{"Fencing", fencingCases()},
		{"Outcomes", outcomeCases()},
		{"Selectivity", selectivityCases()},
		{"OutOfOrder", outOfOrderCases()},
		{"Outbox", outboxCases()},
		{"Pending", pendingCases()},
		{"Sweep", sweepCases()},
		{"Policy", policyCases()},
		{"Rollback", rollbackCases()},
		{"Promotion", promotionCases()},
		{"Soak", soakCases()},
		{"InputErrors", inputCases()},
		{"Property", propertyCases()},
		{"Deliveries", deliveryCases()},
		{"Windows", windowCases()},
		{"Approvals", approvalCases()},
		{"Held", heldCases()},
		{"Layout", layoutCases()},
		{"Disjoint", disjointCases()},
		{"Enter", enterCases()},
	}
	for _, g := range groups {
		if len(only) > 0 && !slices.Contains(only, g.name) {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					h := newHarness(t, newStore(t))
					h.split = split
					c.run(t, h)
				})
			}
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, h *harness)
}

// Clock is a fake authority.Clock that moves only when told to. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

var _ authority.Clock = (*Clock)(nil)

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now implements authority.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// start is the fake clock's first reading. Its nanoseconds check that stores keep times exactly.
var start = time.Date(2026, time.March, 1, 12, 0, 0, 123456789, time.UTC)

// Lease settings the suite uses: a TTL shorter than the default, and a skew that is not the default,
// so that a store or domain mixing them up is caught.
const (
	testTTL  = 30 * time.Second
	testSkew = 7 * time.Second
)

// harness is one subtest's world: a fresh store (behind a request counter), a fake clock, and
// Authorities over them.
type harness struct {
	t     *testing.T
	ctx   context.Context
	store *countingStore
	clock *Clock
	skew  time.Duration
	split bool // environments in the per-scope layout
}

// singleDocument skips the rest of a test that counts what the single document does (requests,
// revisions, event numbers, generations handed out without a gap) when the subtest runs on the
// per-scope layout; why says what it counts. design.md section 9 says what that layout does instead.
func (h *harness) singleDocument(why string) {
	h.t.Helper()
	if h.split {
		h.t.Skipf("counts the single document: %s", why)
	}
}

// authority returns a new Authority over s with the subtest's clock, skew and layout, and opts.
func (h *harness) authority(s authority.Store, opts ...authority.Option) *authority.Authority {
	base := []authority.Option{authority.WithClock(h.clock), authority.WithSkew(h.skew)}
	if h.split {
		base = append(base, authority.WithScopeDocuments())
	}
	return authority.New(s, append(base, opts...)...)
}

func newHarness(t *testing.T, s authority.Store) *harness {
	t.Helper()
	if s == nil {
		t.Fatal("newStore returned a nil store")
	}
	h := &harness{t: t, ctx: t.Context(), store: &countingStore{inner: s}, clock: NewClock(start), skew: testSkew}
	t.Cleanup(func() {
		t.Logf("store requests: %d get, %d put, %d pending, %d add", h.store.gets.Load(), h.store.puts.Load(), h.store.pendings.Load(), h.store.adds.Load())
	})
	return h
}

// process returns a new Authority over the subtest's store and clock: what a separate process
// would have, with nothing remembered.
func (h *harness) process() *authority.Authority {
	return h.authority(h.store)
}

// env reads an environment's stored state straight from the store, with its whole timeline (the
// outbox and the event records, through History) in Events.
func (h *harness) env(name string) *authority.Env {
	h.t.Helper()
	d := h.doc(authority.EnvKey(name))
	if d.Env == nil {
		h.t.Fatalf("document %s holds no environment", d.Key)
	}
	d.Env.Events = h.history(name)
	return d.Env
}

// history reads an environment's whole timeline, oldest first, page by page, without counting the
// requests.
func (h *harness) history(name string) []authority.Event {
	h.t.Helper()
	a := h.authority(h.store.inner)
	var all []authority.Event
	before := int64(0)
	for {
		page, err := a.History(h.ctx, name, before, 500)
		if err != nil {
			h.t.Fatalf("history of %s: %v", name, err)
		}
		all = append(page.Events, all...)
		if page.Before == 0 {
			return all
		}
		before = page.Before
	}
}

// doc reads a stored document straight from the store. An environment in the per-scope layout
// is read whole (splitDoc).
func (h *harness) doc(key string) *authority.Doc {
	h.t.Helper()
	d, err := h.store.Get(h.ctx, key)
	if err != nil {
		h.t.Fatalf("get %s: %v", key, err)
	}
	if env, ok := strings.CutPrefix(key, authority.EnvKey("")); ok && h.split {
		if d, err = h.splitDoc(env); err != nil {
			h.t.Fatalf("read %s: %v", env, err)
		}
	}
	return d
}

// splitDoc reads an environment of the per-scope layout as one document: the assembled state
// (Authority.State), every part's outbox and intents, and as its revision the sum of the
// revisions of the head, the directory and every scope, so that a test that checks that nothing
// was written sees a write of any of them. An error matching ErrNotFound when nothing is stored.
func (h *harness) splitDoc(env string) (*authority.Doc, error) {
	head, err := h.store.inner.Get(h.ctx, authority.EnvKey(env))
	if err != nil {
		return nil, err
	}
	e, err := h.authority(h.store.inner).State(h.ctx, env)
	if err != nil || e == nil {
		return head, err
	}
	if head.Env == nil {
		return head, nil
	}
	d := &authority.Doc{Key: head.Key, Rev: head.Rev, Pending: head.Pending, Env: e}
	e.Outbox, e.Accepts = slices.Clone(head.Env.Outbox), slices.Clone(head.Env.Accepts)
	keys := []string{authority.DirKey(env)}
	for _, name := range sortedKeys(e.Scopes) {
		keys = append(keys, authority.ScopeKey(env, name))
	}
	for _, k := range keys {
		p, err := h.store.inner.Get(h.ctx, k)
		if errors.Is(err, authority.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		d.Rev += p.Rev
		if p.Env != nil {
			e.Outbox, e.Accepts = append(e.Outbox, p.Env.Outbox...), append(e.Accepts, p.Env.Accepts...)
		}
	}
	return d, nil
}

// scope reads one scope's stored state.
func (h *harness) scope(env, name string) *authority.Scope {
	h.t.Helper()
	sc := h.env(env).Scopes[name]
	if sc == nil {
		h.t.Fatalf("%s has no scope %s", env, name)
	}
	return sc
}

// pending reads the store's pending index, sorted.
func (h *harness) pending() []string {
	h.t.Helper()
	envs, err := h.store.Pending(h.ctx)
	if err != nil {
		h.t.Fatalf("pending: %v", err)
	}
	if h.split {
		// The per-scope layout's scopes are listed as ENV#SCOPE.
		var out []string
		for _, n := range envs {
			if env, _, _ := strings.Cut(n, "#"); !slices.Contains(out, env) {
				out = append(out, env)
			}
		}
		envs = out
	}
	return sortedCopy(envs)
}

// accept accepts an intent and fails the test on an error.
func (h *harness) accept(a *authority.Authority, in authority.Intent, claim bool) *authority.AcceptResult {
	h.t.Helper()
	res, err := a.Accept(h.ctx, in, claim)
	if err != nil {
		h.t.Fatalf("accept %s: %v", in.ID, err)
	}
	return res
}

// claim claims scopes and fails the test unless every one of them was claimed.
func (h *harness) claim(a *authority.Authority, env string, gen int64, scopes ...string) *authority.ClaimResult {
	h.t.Helper()
	res, err := a.Claim(h.ctx, env, gen, scopes)
	if err != nil {
		h.t.Fatalf("claim %v at %d: %v", scopes, gen, err)
	}
	if len(res.Claimed) != len(scopes) {
		h.t.Fatalf("claim %v at %d: claimed %v, superseded %v, idle %v", scopes, gen, res.Scopes(), res.Superseded, res.Idle)
	}
	return res
}

// gate enters phase "deploy" with a lease and fails the test on an error.
func (h *harness) gate(a *authority.Authority, env string, gen int64, holder string, scopes ...string) *authority.Grant {
	h.t.Helper()
	g, err := a.Gate(h.ctx, authority.GateRequest{Environment: env, Generation: gen, Scopes: scopes, Phase: "deploy", Holder: holder, LeaseTTL: testTTL})
	if err != nil {
		h.t.Fatalf("gate deploy %v at %d for %s: %v", scopes, gen, holder, err)
	}
	return g
}

// complete completes a grant's scopes with an outcome and fails the test on an error.
func (h *harness) complete(a *authority.Authority, g *authority.Grant, outcome authority.Outcome, run string) *authority.CompleteResult {
	h.t.Helper()
	res, err := a.Complete(h.ctx, authority.Completion{Environment: g.Environment, Generation: g.Generation, Scopes: sortedKeys(g.Tokens),
		Holder: g.Holder, Tokens: g.Tokens, Outcome: outcome, Attempt: 1, MaxAttempts: 3, Run: run})
	if err != nil {
		h.t.Fatalf("complete %s at %d: %v", outcome, g.Generation, err)
	}
	return res
}

// deploy runs a whole uncontended pass at gen: claim, gate deploy with a lease, complete with success.
func (h *harness) deploy(a *authority.Authority, env string, gen int64, holder, run string, scopes ...string) *authority.Grant {
	h.t.Helper()
	h.claim(a, env, gen, scopes...)
	g := h.gate(a, env, gen, holder, scopes...)
	res := h.complete(a, g, authority.OutcomeSuccess, run)
	for _, s := range scopes {
		if res.Results[s] != authority.ResultDeployed {
			h.t.Fatalf("deploy %s at %d: result %s", s, gen, res.Results[s])
		}
	}
	return g
}

// push is an intent from a push to the main branch of a repository.
func push(env, id, sha string, scopes ...string) authority.Intent {
	return authority.Intent{ID: id, Environment: env, Scopes: scopes, Sha: sha, Ref: "refs/heads/main",
		Source: "example/app", Actor: "octocat"}
}

// countingStore counts the requests a subtest makes, so that budgets (one write for accept+claim)
// can be checked and the cost of a run reported.
type countingStore struct {
	inner    authority.Store
	gets     atomic.Int64
	puts     atomic.Int64
	pendings atomic.Int64
	recPuts  atomic.Int64
	recGets  atomic.Int64
	adds     atomic.Int64
}

var _ authority.Store = (*countingStore)(nil)

func (s *countingStore) Get(ctx context.Context, key string) (*authority.Doc, error) {
	s.gets.Add(1)
	return s.inner.Get(ctx, key)
}

func (s *countingStore) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	s.puts.Add(1)
	return s.inner.Put(ctx, doc)
}

func (s *countingStore) Pending(ctx context.Context) ([]string, error) {
	s.pendings.Add(1)
	return s.inner.Pending(ctx)
}

func (s *countingStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	s.adds.Add(1)
	return s.inner.Add(ctx, key, delta)
}

func (s *countingStore) PutRecords(ctx context.Context, recs []authority.Record) error {
	s.recPuts.Add(1)
	return s.inner.PutRecords(ctx, recs)
}

func (s *countingStore) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	s.recGets.Add(1)
	return s.inner.GetRecords(ctx, keys)
}

// requests returns the number of requests so far.
func (s *countingStore) requests() (gets, puts int64) { return s.gets.Load(), s.puts.Load() }

// rounds scales a loop count down under -short.
func rounds(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func sortedCopy(s []string) []string {
	out := append([]string{}, s...) // never nil, so that an empty list compares equal to []string{}
	slices.Sort(out)
	return out
}

// ceilSeconds is the retry_after rule: whole seconds until d has passed, at least one.
func ceilSeconds(d time.Duration) time.Duration {
	secs := (d + time.Second - 1) / time.Second
	return max(secs, 1) * time.Second
}

// sha is a full commit sha that reads as prefix and i: prefix's hex digits as they are, its other
// letters as their hex code (w: 77), then i in decimal digits.
func sha(prefix string, i int) string {
	var p strings.Builder
	for _, r := range prefix {
		if strings.ContainsRune("0123456789abcdef", r) {
			p.WriteRune(r)
		} else {
			fmt.Fprintf(&p, "%x", r)
		}
	}
	return fmt.Sprintf("%s%0*d", p.String(), 40-p.Len(), i)
}
