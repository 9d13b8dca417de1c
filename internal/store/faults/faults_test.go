package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
	"github.com/latestwins/latestwins/internal/testutil/faultproxy"
)

func TestMain(m *testing.M) { dynalitetest.Main(m) }

func isPutItem(r *http.Request, _ []byte) bool {
	return r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.PutItem"
}

// faultyStore returns a store whose client goes through a fault proxy to dynalite, with the SDK's
// own retries (which turn a lost response into an ambiguous write) and no retry quota, so that the
// proxy's faults reach the adapter rather than exhausting the client.
func faultyStore(t *testing.T, seed uint64) (*dynamo.Store, *faultproxy.Proxy) {
	t.Helper()
	ep := dynalitetest.Endpoint(t)
	table := dynalitetest.TableName(t)
	if _, err := dynamo.New(dynalitetest.NewClient(ep, nil), table).Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(ep, seed)
	t.Cleanup(proxy.Close)
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(proxy.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 4
			o.RateLimiter = ratelimit.None
			o.MaxBackoff = 20 * time.Millisecond
		}),
	})
	return dynamo.New(client, table), proxy
}

// TestAmbiguousAcceptsLoseNothingAndDuplicateNothing: concurrent accepts while a third of the writes
// lose their request or their response. Every intent ends with exactly one generation; none is lost,
// none counted twice.
func TestAmbiguousAcceptsLoseNothingAndDuplicateNothing(t *testing.T) {
	st, proxy := faultyStore(t, 1)
	proxy.Set(faultproxy.Faults{Match: isPutItem, LoseResponse: 0.25, LoseRequest: 0.1})
	a := authority.New(st)
	ctx := context.Background()
	const workers, each = 16, 4
	reported := make(map[string]int64)
	var failed []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := fmt.Sprintf("intent-%d-%d", w, i)
				res, err := a.Accept(ctx, authority.Intent{ID: id, Environment: "prod", Scopes: []string{fmt.Sprintf("svc%d", w%4)}, Sha: fmt.Sprintf("%07d", w*100+i)}, false)
				mu.Lock()
				if err != nil {
					failed = append(failed, id)
				} else {
					reported[id] = res.Generation
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	c := proxy.Counts()
	if c.LostResponses == 0 {
		t.Fatalf("the proxy lost no response (%+v): the test did not exercise ambiguous writes", c)
	}
	t.Logf("proxy: %+v; accepts reported: %d, failed: %d", c, len(reported), len(failed))

	// The network heals; the callers retry what failed, with the same intent ids.
	proxy.Set(faultproxy.Faults{})
	for _, id := range failed {
		var w, i int
		fmt.Sscanf(id, "intent-%d-%d", &w, &i)
		res, err := a.Accept(ctx, authority.Intent{ID: id, Environment: "prod", Scopes: []string{fmt.Sprintf("svc%d", w%4)}, Sha: fmt.Sprintf("%07d", w*100+i)}, false)
		if err != nil {
			t.Fatalf("retry of %s after the faults: %v", id, err)
		}
		reported[id] = res.Generation
	}
	e, err := a.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if e.Desired != workers*each {
		t.Fatalf("desired generation %d after %d distinct intents: an intent was lost or counted twice", e.Desired, workers*each)
	}
	seen := map[int64]string{}
	for id, gen := range reported {
		if other, dup := seen[gen]; dup {
			t.Fatalf("generation %d reported to both %s and %s", gen, other, id)
		}
		seen[gen] = id
		if rec, ok := e.Intents[id]; !ok || rec.Generation != gen {
			t.Fatalf("intent %s was told generation %d, the store has %+v", id, gen, rec)
		}
	}
	for svc := range 4 {
		m := e.Scopes[fmt.Sprintf("svc%d", svc)].Mailbox
		var newest int64
		for id, gen := range reported {
			var w, i int
			fmt.Sscanf(id, "intent-%d-%d", &w, &i)
			if w%4 == svc && gen > newest {
				newest = gen
			}
		}
		if m == nil || m.Generation != newest {
			t.Fatalf("svc%d mailbox %+v, want the newest generation %d", svc, m, newest)
		}
	}
}

// TestAmbiguousLeaseRacesGrantOnce: rounds of racers for an expired lease while writes lose their
// requests and responses. At most one racer is told it won each round, and then it is the holder the
// store has; no racer is told the lease is held by itself (a false "locked"); tokens only grow.
func TestAmbiguousLeaseRacesGrantOnce(t *testing.T) {
	st, proxy := faultyStore(t, 2)
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := authority.New(st, authority.WithClock(clock), authority.WithSkew(time.Second))
	ctx := context.Background()
	proxy.Set(faultproxy.Faults{Match: isPutItem, LoseResponse: 0.2, LoseRequest: 0.1})
	const racers, rounds, ttl = 8, 60, time.Minute
	var lastToken int64
	var unknownRounds int
	for round := range rounds {
		clock.Advance(ttl + 2*time.Second) // the previous holder's lease is expired past the skew
		var winners []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		var errs atomic.Int64
		for r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				me := fmt.Sprintf("r%d", r)
				g, err := a.Acquire(ctx, "deploy-lock", me, "deploy", ttl)
				var held *authority.HeldError
				switch {
				case err == nil:
					mu.Lock()
					winners = append(winners, me)
					mu.Unlock()
					if g.Tokens["deploy-lock"] <= lastToken {
						t.Errorf("round %d: token %d not above the previous %d", round, g.Tokens["deploy-lock"], lastToken)
					}
				case errors.As(err, &held):
					if held.Holder == me {
						t.Errorf("round %d: %s was told the lease is held by itself: a false locked", round, me)
					}
				default:
					errs.Add(1)
				}
			}()
		}
		wg.Wait()
		if len(winners) > 1 {
			t.Fatalf("round %d: %d racers were granted the lease: %v", round, len(winners), winners)
		}
		proxy.Set(faultproxy.Faults{})
		l, err := a.LeaseStatus(ctx, "deploy-lock")
		proxy.Set(faultproxy.Faults{Match: isPutItem, LoseResponse: 0.2, LoseRequest: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		if len(winners) == 1 && (l.Lease.Holder != winners[0]) {
			t.Fatalf("round %d: %s was told it won, the store says %s", round, winners[0], l.Lease.Holder)
		}
		if len(winners) == 0 {
			unknownRounds++
		}
		if l.Lease.Token < lastToken {
			t.Fatalf("round %d: token went back from %d to %d", round, lastToken, l.Lease.Token)
		}
		lastToken = l.Lease.Token
		if errs.Load() > 0 {
			t.Logf("round %d: %d racers got an unresolved error", round, errs.Load())
		}
	}
	t.Logf("proxy: %+v; rounds without a known winner: %d of %d", proxy.Counts(), unknownRounds, rounds)
	if c := proxy.Counts(); c.LostResponses == 0 {
		t.Fatalf("no response was lost (%+v): ambiguous writes were not exercised", c)
	}
}

// --- linearizability of lease operations ------------------------------------------------------------

type leaseState struct {
	holder string
	token  int64
}

type leaseInput struct {
	op     string // "acquire" or "release"
	client string
	token  int64 // for release
}

type leaseOutput struct {
	unknown bool // the call failed: it may or may not have taken effect
	granted bool // acquire: granted; release: ok
	token   int64
	holder  string // acquire refused: who holds it
}

var leaseModel = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{leaseState{}} },
	Step: func(state, input, output interface{}) []interface{} {
		s, in, out := state.(leaseState), input.(leaseInput), output.(leaseOutput)
		switch in.op {
		case "acquire":
			if s.holder == "" || s.holder == in.client {
				next := leaseState{holder: in.client, token: s.token}
				if s.holder != in.client {
					next.token++
				}
				switch {
				case out.unknown:
					return []interface{}{next, s}
				case out.granted && out.token == next.token:
					return []interface{}{next}
				}
				return nil
			}
			switch {
			case out.unknown:
				return []interface{}{s}
			case !out.granted && out.holder == s.holder:
				return []interface{}{s}
			}
			return nil
		case "release":
			if s.holder == in.client && s.token == in.token {
				next := leaseState{token: s.token}
				switch {
				case out.unknown:
					return []interface{}{next, s}
				case out.granted:
					return []interface{}{next}
				}
				return nil
			}
			if out.unknown || !out.granted {
				return []interface{}{s}
			}
			return nil
		}
		return nil
	},
	DescribeOperation: func(input, output interface{}) string {
		return fmt.Sprintf("%+v -> %+v", input, output)
	},
}

func TestLeaseHistoryIsLinearizableUnderFaults(t *testing.T) {
	st, proxy := faultyStore(t, 3)
	proxy.Set(faultproxy.Faults{Match: isPutItem, LoseResponse: 0.15, LoseRequest: 0.1})
	// Leases never expire here: every change of holder is an acquire after a release.
	a := authority.New(st)
	ctx := context.Background()
	const clients, opsEach = 6, 25
	base := time.Now()
	stamp := func() int64 { return int64(time.Since(base)) }
	var mu sync.Mutex
	var history []porcupine.Operation
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := fmt.Sprintf("c%d", c)
			var mine *authority.Grant
			for range opsEach {
				var in leaseInput
				var out leaseOutput
				call := stamp()
				if mine == nil {
					in = leaseInput{op: "acquire", client: me}
					g, err := a.Acquire(ctx, "shared", me, "deploy", time.Hour)
					var held *authority.HeldError
					switch {
					case err == nil:
						mine, out = g, leaseOutput{granted: true, token: g.Tokens["shared"]}
					case errors.As(err, &held):
						out = leaseOutput{holder: held.Holder}
					default:
						out = leaseOutput{unknown: true}
					}
				} else {
					in = leaseInput{op: "release", client: me, token: mine.Tokens["shared"]}
					err := a.ReleaseNamed(ctx, mine)
					switch {
					case err == nil:
						out = leaseOutput{granted: true}
						mine = nil
					case errors.Is(err, authority.ErrLeaseLost):
						out = leaseOutput{}
						mine = nil
					default:
						out = leaseOutput{unknown: true}
					}
				}
				ret := stamp()
				if out.unknown {
					ret = 1 << 62 // an operation whose effect is unknown may take effect at any later time
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res := porcupine.CheckOperationsTimeout(leaseModel.ToModel(), history, time.Minute)
	if res != porcupine.Ok {
		t.Fatalf("lease history of %d operations is not linearizable (%s)", len(history), res)
	}
	t.Logf("%d operations, linearizable; proxy: %+v", len(history), proxy.Counts())
}

// TestLeaseModelRejectsTwoHolders makes sure the model can fail: two overlapping grants to different
// clients with no release between them are not linearizable.
func TestLeaseModelRejectsTwoHolders(t *testing.T) {
	history := []porcupine.Operation{
		{ClientId: 0, Input: leaseInput{op: "acquire", client: "c0"}, Call: 0, Output: leaseOutput{granted: true, token: 1}, Return: 10},
		{ClientId: 1, Input: leaseInput{op: "acquire", client: "c1"}, Call: 20, Output: leaseOutput{granted: true, token: 2}, Return: 30},
	}
	if porcupine.CheckOperations(leaseModel.ToModel(), history) {
		t.Fatal("a history with two holders was accepted as linearizable")
	}
}
