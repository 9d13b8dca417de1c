package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// flaky injects the faults of a network that drops connections: one request in eight is lost
// before it reaches the server (at most once per write, so that the store's bounded retries of a
// write that provably did not commit always suffice), and of the writes that commit, one in four
// loses its response and one in four is retried by the "SDK" and fails its condition on its own
// first attempt. The rest go through untouched.
type flaky struct {
	API
	mu        sync.Mutex
	calls     int
	committed int
	dropped   map[string]bool

	lost, retried, before atomic.Int64
}

func newFlaky(api API) *flaky { return &flaky{API: api, dropped: map[string]bool{}} }

func (f *flaky) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	wid := writeID(in)
	f.mu.Lock()
	f.calls++
	drop := f.calls%8 == 0 && !f.dropped[wid]
	if drop {
		f.dropped[wid] = true
	}
	f.mu.Unlock()
	if drop {
		f.before.Add(1)
		return nil, networkError("PutItem")
	}
	out, err := f.API.PutItem(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	f.mu.Lock()
	f.committed++
	k := f.committed % 4
	f.mu.Unlock()
	switch k {
	case 1:
		f.lost.Add(1)
		return nil, networkError("PutItem")
	case 2:
		f.retried.Add(1)
		return f.API.PutItem(ctx, in, optFns...)
	}
	return out, nil
}

func (f *flaky) requireFaults(t *testing.T) {
	t.Helper()
	t.Logf("faults injected: %d responses lost after commit, %d retries failing on their own write, %d requests lost before sending",
		f.lost.Load(), f.retried.Load(), f.before.Load())
	if f.lost.Load() == 0 || f.retried.Load() == 0 || f.before.Load() == 0 {
		t.Fatal("some kind of fault was never injected; the test proves nothing")
	}
}

// TestLeaseRaceOverFlakyStore: 16 processes race for one named lease, round after round, over a
// network that loses responses. Every round exactly one of them is granted the lease, the store
// holds that one's grant (no false "held" for a holder whose own grant committed), and its token is
// one more than the last round's.
func TestLeaseRaceOverFlakyStore(t *testing.T) {
	t.Parallel()
	const racers = 16
	rounds := 40
	if testing.Short() {
		rounds = 12
	}
	ctx := t.Context()
	client, table := migrated(t)
	f := newFlaky(client)
	clock := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	const ttl, skew = 30 * time.Second, 5 * time.Second
	procs := make([]*authority.Authority, racers)
	for i := range procs {
		procs[i] = authority.New(New(f, table), authority.WithClock(clock), authority.WithSkew(skew))
	}
	check := New(client, table)

	for round := 1; round <= rounds; round++ {
		clock.Advance(ttl + skew) // the last round's lease has expired: anyone may take it over
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
			tokens  []int64
		)
		start := make(chan struct{})
		for i, a := range procs {
			holder := fmt.Sprintf("run-%d-%d", round, i)
			wg.Go(func() {
				<-start
				g, err := a.Acquire(ctx, "deploy/prod", holder, "deploy", ttl)
				switch {
				case err == nil:
					mu.Lock()
					winners, tokens = append(winners, holder), append(tokens, g.Tokens["deploy/prod"])
					mu.Unlock()
				case !errors.Is(err, authority.ErrLeaseHeld):
					t.Errorf("round %d: %s: %v; want a grant or held", round, holder, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: granted to %v; want exactly one holder", round, winners)
		}
		if tokens[0] != int64(round) {
			t.Fatalf("round %d: token %d; want %d (one more per takeover)", round, tokens[0], round)
		}
		d, err := check.Get(ctx, authority.LeaseKey("deploy/prod"))
		if err != nil {
			t.Fatal(err)
		}
		if l := d.Lease.Lease; l.Holder != winners[0] || l.Token != int64(round) {
			t.Fatalf("round %d: stored holder %s with token %d; the grant went to %s with token %d", round, l.Holder, l.Token, winners[0], tokens[0])
		}
	}
	f.requireFaults(t)
}

// TestAcceptRaceOverFlakyStore: 16 processes accept intents for one environment at once, over a
// network that loses responses. Every intent gets its own generation, none is reported as a
// duplicate of itself, and every one is in the stored document: no intent is lost.
func TestAcceptRaceOverFlakyStore(t *testing.T) {
	t.Parallel()
	const racers = 16
	each := 5
	if testing.Short() {
		each = 2
	}
	ctx := t.Context()
	client, table := migrated(t)
	f := newFlaky(client)
	clock := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		gens = map[string]int64{}
	)
	for i := range racers {
		a := authority.New(New(f, table), authority.WithClock(clock))
		wg.Go(func() {
			for j := range each {
				in := authority.Intent{ID: fmt.Sprintf("delivery-%d-%d", i, j), Environment: "staging",
					Scopes: []string{"api", fmt.Sprintf("svc-%d", i)}, Sha: fmt.Sprintf("%040x", i*1000+j)}
				res, err := a.Accept(ctx, in, true)
				if err != nil {
					t.Errorf("accept %s: %v", in.ID, err)
					return
				}
				if res.Duplicate {
					t.Errorf("accept %s: reported as a duplicate of itself (generation %d)", in.ID, res.Generation)
				}
				mu.Lock()
				gens[in.ID] = res.Generation
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	total := racers * each
	seen := map[int64]string{}
	for id, g := range gens {
		if other, dup := seen[g]; dup {
			t.Fatalf("generation %d given to both %s and %s", g, id, other)
		}
		seen[g] = id
	}
	env, err := authority.New(New(client, table)).Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if env.Desired != int64(total) || len(gens) != total {
		t.Fatalf("desired generation %d after %d accepted intents (%d answered)", env.Desired, total, len(gens))
	}
	// Every intent is remembered with the generation it was answered: in the document's outbox, or
	// as its own record.
	stored := map[string]int64{}
	doc, err := New(client, table).Get(ctx, authority.EnvKey("staging"))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range doc.Env.Accepts {
		stored[in.ID] = in.Generation
	}
	var keys []string
	for id := range gens {
		keys = append(keys, authority.IntentKey("staging", id))
	}
	recs, err := New(client, table).GetRecords(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		stored[r.Intent.ID] = r.Intent.Generation
	}
	for id, g := range gens {
		if got, ok := stored[id]; !ok || got != g {
			t.Fatalf("intent %s: stored generation %d (present %v); it was answered generation %d", id, got, ok, g)
		}
	}
	// The newest intent holds the shared scope's mailbox; each racer's own scope holds its last one.
	if m := env.Scopes["api"].Mailbox; m == nil || m.Generation != int64(total) {
		t.Fatalf("mailbox of api: %+v; want generation %d", m, total)
	}
	for i := range racers {
		last := gens[fmt.Sprintf("delivery-%d-%d", i, each-1)]
		if m := env.Scopes[fmt.Sprintf("svc-%d", i)].Mailbox; m == nil || m.Generation != last {
			t.Fatalf("mailbox of svc-%d: %+v; want generation %d", i, m, last)
		}
	}
	// A re-delivery returns the first generation and changes nothing.
	before, err := New(client, table).Get(ctx, authority.EnvKey("staging"))
	if err != nil {
		t.Fatal(err)
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range gens {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids[:4] {
		var i, j int
		if _, err := fmt.Sscanf(id, "delivery-%d-%d", &i, &j); err != nil {
			t.Fatal(err)
		}
		res, err := authority.New(New(f, table), authority.WithClock(clock)).Accept(ctx, authority.Intent{ID: id, Environment: "staging",
			Scopes: []string{"api", fmt.Sprintf("svc-%d", i)}, Sha: fmt.Sprintf("%040x", i*1000+j)}, false)
		if err != nil || !res.Duplicate || res.Generation != gens[id] {
			t.Fatalf("re-delivered %s: %+v, %v; want a duplicate with generation %d", id, res, err, gens[id])
		}
	}
	after, err := New(client, table).Get(ctx, authority.EnvKey("staging"))
	if err != nil {
		t.Fatal(err)
	}
	if after.Rev != before.Rev {
		t.Fatalf("re-deliveries wrote: revision %d -> %d", before.Rev, after.Rev)
	}
	f.requireFaults(t)
}
