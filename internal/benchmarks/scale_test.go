package benchmarks

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// The scale baseline (spec section 9: cost per pass proportional to the scopes it touches; passes on
// disjoint scopes never conflict). It records what one environment document costs today, for the
// per-scope layout to be measured against.

// httpBytes counts the bodies of the write requests (PutItem, BatchWriteItem) a DynamoDB client
// sends.
type httpBytes struct{ n atomic.Int64 }

func (h *httpBytes) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Header.Get("X-Amz-Target") {
	case "DynamoDB_20120810.PutItem", "DynamoDB_20120810.BatchWriteItem":
		h.n.Add(max(r.ContentLength, 0))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// scaleStore is a store of the scale benchmarks: bolt or dynalite, with the bytes dynalite's
// write requests carry (0 for bolt, whose bytes are the stored forms countingStore counts).
type scaleStore struct {
	name   string
	client func(tb testing.TB) authority.Store
	http   *httpBytes
}

func scaleStores(tb testing.TB) []scaleStore {
	path := filepath.Join(tb.TempDir(), "latestwins.db")
	boltClient := func(tb testing.TB) authority.Store {
		s, err := bolt.Open(path)
		if err != nil {
			tb.Fatalf("open bolt store: %v", err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s
	}
	ep := dynalitetest.Endpoint(tb)
	table := dynalitetest.TableName(tb)
	ctx, cancel := context.WithTimeout(tb.Context(), time.Minute)
	defer cancel()
	if _, err := dynamo.New(dynalitetest.NewClient(ep, nil), table).Migrate(ctx); err != nil {
		tb.Fatalf("create table: %v", err)
	}
	hb := &httpBytes{}
	dynaliteClient := func(testing.TB) authority.Store {
		return dynamo.New(dynalitetest.NewClient(ep, &http.Client{Transport: hb}), table)
	}
	return []scaleStore{{"bolt", boltClient, nil}, {"dynalite", dynaliteClient, hb}}
}

func scopeNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("svc-%02d", i)
	}
	return out
}

// deployAll makes every scope of env live with one pass over all of them.
func deployAll(ctx context.Context, a *authority.Authority, env string, scopes []string) error {
	res, err := pass.Claim(ctx, a, authority.Intent{ID: env + "-all", Environment: env, Scopes: scopes,
		Sha: fmt.Sprintf("%040x", 1<<30), Ref: "refs/heads/main"})
	if err != nil {
		return fmt.Errorf("claim every scope of %s: %w", env, err)
	}
	g, err := a.Gate(ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: scopes, Phase: "deploy",
		Holder: "all", LeaseTTL: authority.DefaultLeaseTTL})
	if err != nil {
		return fmt.Errorf("gate every scope of %s: %w", env, err)
	}
	_, err = a.Complete(ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: scopes, Holder: g.Holder,
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess})
	return err
}

// BenchmarkScopePass: one single-scope pass (a latestwins run: claim, gate, complete) on an
// environment of 1 or 64 scopes, all of them live: bytes written (stored forms; on dynalite also
// the write requests' bodies) and requests per pass, and the size of the document.
func BenchmarkScopePass(b *testing.B) {
	for _, ss := range scaleStores(b) {
		for _, l := range scaleLayouts {
			for _, n := range l.sizes {
				b.Run(fmt.Sprintf("%s/%s/scopes=%d", ss.name, l.name, n), func(b *testing.B) {
					scopePass(b, ss, l.opts, n)
				})
			}
		}
	}
}

// scaleLayouts are the two layouts side by side: the single document (at most 64 scopes) and the
// per-scope layout.
var scaleLayouts = []struct {
	name  string
	opts  []authority.Option
	sizes []int
}{
	{"single", nil, []int{1, 64}},
	{"per-scope", []authority.Option{authority.WithScopeDocuments()}, []int{1, 64, 300, 1000}},
}

func scopePass(b *testing.B, ss scaleStore, opts []authority.Option, n int) {
	ctx := b.Context()
	var c counts
	store := &countingStore{Store: ss.client(b), c: &c}
	env := fmt.Sprintf("scale-%d-%d", n, runs.Add(1))
	if err := deployAll(ctx, authority.New(store, opts...), env, scopeNames(n)); err != nil {
		b.Fatal(err)
	}
	p := newPasser(store, "run", opts...)
	if err := p.pass(ctx, env, "svc-00", 1<<20); err != nil {
		b.Fatal(err)
	}
	before := c.snapshot()
	var httpBefore int64
	if ss.http != nil {
		httpBefore = ss.http.n.Load()
	}
	i := 0
	for b.Loop() {
		if err := p.pass(ctx, env, "svc-00", i); err != nil {
			b.Fatal(err)
		}
		i++
	}
	s := c.snapshot().since(before)
	b.ReportMetric(float64(s.bytes)/float64(i), "B-written/pass")
	if ss.http != nil {
		b.ReportMetric(float64(ss.http.n.Load()-httpBefore)/float64(i), "http-B-written/pass")
	}
	b.ReportMetric(float64(s.requests())/float64(i), "req/pass")
	d, err := store.Get(ctx, authority.EnvKey(env))
	if err != nil {
		b.Fatal(err)
	}
	doc, err := authority.EncodeDoc(d)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(doc)), "doc-B")
	if n > 1 {
		sd, err := store.Get(ctx, authority.ScopeKey(env, "svc-00"))
		if err == nil {
			if doc, err = authority.EncodeDoc(sd); err == nil {
				b.ReportMetric(float64(len(doc)), "scope-doc-B")
			}
		}
	}
}

// Disjoint passes: 32 goroutines, each a latestwins run of its own (a new Authority per pass) on a
// scope of its own, released together.
const disjoint = 32

// disjointRound runs one pass on each goroutine's (env, scope) at once, and returns how long the
// round took.
func disjointRound(ctx context.Context, stores []authority.Store, target func(g int) (env, scope string), round int, opts ...authority.Option) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	begin := make(chan struct{})
	for g := range stores {
		wg.Go(func() {
			<-begin
			env, scope := target(g)
			errs[g] = newPasser(stores[g], "run", opts...).pass(ctx, env, scope, round)
		})
	}
	t0 := time.Now()
	close(begin)
	wg.Wait()
	elapsed := time.Since(t0)
	for g, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("goroutine %d: %w", g, err)
		}
	}
	return elapsed, nil
}

// BenchmarkDisjointScopes: 32 concurrent passes each on a different scope of one 64-scope
// environment, beside (in the same iteration, on the same store) 32 concurrent passes on 32
// environments. Reported: passes per second of each, their ratio (spec section 9 wants at least
// 0.8), and conditional writes that lost a revision race per pass.
func BenchmarkDisjointScopes(b *testing.B) {
	for _, ss := range scaleStores(b) {
		for _, lay := range scaleLayouts {
			b.Run(ss.name+"/"+lay.name, func(b *testing.B) { disjointScopes(b, ss, lay.opts) })
		}
	}
}

func disjointScopes(b *testing.B, ss scaleStore, opts []authority.Option) {
	ctx := b.Context()
	run := runs.Add(1)
	shared := fmt.Sprintf("shared-%d", run)
	own := func(g int) string { return fmt.Sprintf("own-%d-%02d", run, g) }
	setup := authority.New(ss.client(b), opts...)
	if err := deployAll(ctx, setup, shared, scopeNames(64)); err != nil {
		b.Fatal(err)
	}
	for g := range disjoint {
		if err := deployAll(ctx, setup, own(g), []string{"svc-00"}); err != nil {
			b.Fatal(err)
		}
	}
	layouts := []struct {
		name   string
		target func(g int) (string, string)
	}{
		{"one-env", func(g int) (string, string) { return shared, fmt.Sprintf("svc-%02d", g) }},
		{"32-envs", func(g int) (string, string) { return own(g), "svc-00" }},
	}
	cs := make([]counts, len(layouts))
	stores := make([][]authority.Store, len(layouts))
	for k := range layouts {
		for range disjoint {
			stores[k] = append(stores[k], &countingStore{Store: ss.client(b), c: &cs[k]})
		}
	}
	elapsed := make([]time.Duration, len(layouts))
	rounds := 0
	for b.Loop() {
		for k, l := range layouts {
			d, err := disjointRound(ctx, stores[k], l.target, rounds, opts...)
			if err != nil {
				b.Fatalf("%s round %d: %v", l.name, rounds, err)
			}
			elapsed[k] += d
		}
		rounds++
	}
	passes := float64(rounds * disjoint)
	rate := make([]float64, len(layouts))
	for k, l := range layouts {
		rate[k] = passes / elapsed[k].Seconds()
		b.ReportMetric(rate[k], l.name+"-passes/s")
		b.ReportMetric(float64(cs[k].conflicts.Load())/passes, l.name+"-conflicts/pass")
		b.ReportMetric(float64(cs[k].snapshot().requests())/passes, l.name+"-req/pass")
	}
	b.ReportMetric(rate[0]/rate[1], "ratio")
}
