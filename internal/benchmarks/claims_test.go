package benchmarks

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// claimers is how many passes accept and claim on one environment at the same moment.
const claimers = 64

// claimRound makes every client accept and claim its own intent on env at once, and returns the
// results in client order and the wall time from the start signal to the last answer.
func claimRound(ctx context.Context, clients []*authority.Authority, env string) ([]*authority.AcceptResult, time.Duration, error) {
	results := make([]*authority.AcceptResult, len(clients))
	errs := make([]error, len(clients))
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	for i, a := range clients {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			in := authority.Intent{ID: intentID(env, i), Environment: env, Scopes: []string{"api"},
				Sha: fmt.Sprintf("5a%038d", i), Ref: "refs/heads/main", Source: "bench"}
			ready.Done()
			<-start
			results[i], errs[i] = a.Accept(ctx, in, true)
		}()
	}
	ready.Wait()
	began := time.Now()
	close(start)
	done.Wait()
	elapsed := time.Since(began)
	for i, err := range errs {
		if err != nil {
			return nil, elapsed, fmt.Errorf("client %d: %w", i, err)
		}
	}
	return results, elapsed, nil
}

func intentID(env string, i int) string { return fmt.Sprintf("%s-intent-%02d", env, i) }

// verifyClaims checks a round against the stored state: generations exactly 1..n with none
// repeated, every intent recorded with the generation it was told, each claim owning its own intent
// at write time, and every intent but the newest superseded (none lost).
// In the per-scope layout (gapless false) generations are distinct and increasing but may skip:
// a head whose scope write lost its race leaves its generation unused.
func verifyClaims(ctx context.Context, a *authority.Authority, env string, results []*authority.AcceptResult, gapless bool) error {
	n := len(results)
	byGen := make(map[int64]int, n)
	newest := int64(0)
	for i, r := range results {
		if r.Duplicate {
			return fmt.Errorf("client %d: a new intent was taken for a duplicate", i)
		}
		if r.Generation < 1 || gapless && r.Generation > int64(n) {
			return fmt.Errorf("client %d: generation %d outside 1..%d", i, r.Generation, n)
		}
		newest = max(newest, r.Generation)
		if j, dup := byGen[r.Generation]; dup {
			return fmt.Errorf("clients %d and %d both got generation %d", j, i, r.Generation)
		}
		byGen[r.Generation] = i
		if r.Claim == nil || len(r.Claim.Claimed) != 1 || r.Claim.Claimed[0].IntentGen != r.Generation {
			return fmt.Errorf("client %d (generation %d) did not claim its own intent: %+v", i, r.Generation, r.Claim)
		}
	}
	e, err := a.Status(ctx, env)
	if err != nil {
		return err
	}
	if e.Desired != newest || gapless && newest != int64(n) {
		return fmt.Errorf("desired generation %d after %d intents, the newest told %d", e.Desired, n, newest)
	}
	ids := make([]string, len(results))
	for i := range results {
		ids[i] = intentID(env, i)
	}
	intents, err := a.Intents(ctx, env, ids)
	if err != nil {
		return err
	}
	for i, r := range results {
		rec, ok := intents[intentID(env, i)]
		if !ok || rec.Generation != r.Generation {
			return fmt.Errorf("client %d: intent recorded as %+v (found %v), told generation %d", i, rec, ok, r.Generation)
		}
	}
	sc := e.Scopes["api"]
	if sc == nil || sc.Mailbox == nil || sc.Mailbox.Generation != newest || sc.Owner != newest {
		return fmt.Errorf("scope api: %+v, want generation %d pending and owning", sc, newest)
	}
	superseded := map[int64]bool{}
	accepted := 0
	page, err := a.History(ctx, env, 0, 10*n)
	if err != nil {
		return err
	}
	for _, ev := range page.Events {
		switch ev.Kind {
		case authority.EventSuperseded:
			superseded[ev.Generation] = true
		case authority.EventAccepted:
			accepted++
		}
	}
	for g := range byGen {
		if g != newest && !superseded[g] {
			return fmt.Errorf("the intent of generation %d is lost: neither pending nor superseded", g)
		}
	}
	if accepted != n || len(superseded) != n-1 {
		return fmt.Errorf("%d accepted and %d superseded events, want %d and %d", accepted, len(superseded), n, n-1)
	}
	return nil
}

func newClaimers(tb testing.TB, client func(testing.TB) authority.Store, c *counts, opts ...authority.Option) []*authority.Authority {
	clients := make([]*authority.Authority, claimers)
	for i := range clients {
		clients[i] = authority.New(&countingStore{Store: client(tb), c: c}, opts...)
	}
	return clients
}

// claimLayouts are the two layouts side by side.
var claimLayouts = []struct {
	name    string
	opts    []authority.Option
	gapless bool
}{
	{"single", nil, true},
	{"per-scope", []authority.Option{authority.WithScopeDocuments()}, false},
}

// TestConcurrentClaimsLoseNothing runs one round of 64 concurrent claimers on every store.
func TestConcurrentClaimsLoseNothing(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			client := k.open(t)
			var c counts
			results, _, err := claimRound(t.Context(), newClaimers(t, client, &c), "claims")
			if err != nil {
				t.Fatal(err)
			}
			if err := verifyClaims(t.Context(), authority.New(client(t)), "claims", results, true); err != nil {
				t.Fatal(err)
			}
			if got := c.puts.Load() - c.conflicts.Load(); got != claimers {
				t.Fatalf("%d writes succeeded for %d intents (%d puts, %d conflicts)", got, claimers, c.puts.Load(), c.conflicts.Load())
			}
			results, _, err = claimRound(t.Context(), newClaimers(t, client, &c, authority.WithScopeDocuments()), "claims-per-scope")
			if err != nil {
				t.Fatal(err)
			}
			if err := verifyClaims(t.Context(), authority.New(client(t)), "claims-per-scope", results, false); err != nil {
				t.Fatalf("per-scope layout: %v", err)
			}
		})
	}
}

// BenchmarkConcurrentClaims: each op is one round of 64 concurrent Accept-with-claim calls on a fresh
// environment, each from its own client. It reports claims per second over the rounds' wall time,
// and store requests per claim; after every round it checks that no intent was lost and no
// generation repeated.
func BenchmarkConcurrentClaims(b *testing.B) {
	for _, k := range storeKinds {
		for _, l := range claimLayouts {
			b.Run(k.name+"/"+l.name, func(b *testing.B) { concurrentClaims(b, k.open, l.opts, l.gapless) })
		}
	}
}

func concurrentClaims(b *testing.B, open func(testing.TB) func(testing.TB) authority.Store, opts []authority.Option, gapless bool) {
	client := open(b)
	var c counts
	clients := newClaimers(b, client, &c, opts...)
	checker := authority.New(client(b), opts...)
	var total time.Duration
	skipped := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		env := fmt.Sprintf("claims-%d", i)
		results, elapsed, err := claimRound(b.Context(), clients, env)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if err := verifyClaims(b.Context(), checker, env, results, gapless); err != nil {
			b.Fatalf("round %d: %v", i, err)
		}
		total += elapsed
		newest := int64(0)
		for _, r := range results {
			newest = max(newest, r.Generation)
		}
		skipped += int(newest) - len(results) // taken by heads whose scope's write lost, unused
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N * claimers)
	b.ReportMetric(n/total.Seconds(), "claims/s")
	b.ReportMetric(float64(c.puts.Load())/n, "puts/claim")
	b.ReportMetric(float64(c.conflicts.Load())/n, "conflicts/claim")
	b.ReportMetric(float64(c.gets.Load())/n, "gets/claim")
	b.ReportMetric(float64(c.records.Load())/n, "record-calls/claim")
	b.ReportMetric(float64(skipped)/n, "skipped-gens/claim")
}
