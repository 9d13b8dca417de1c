package faults

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/internal/testutil"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
	"github.com/latestwins/latestwins/internal/testutil/faultproxy"
	"github.com/latestwins/latestwins/internal/testutil/leasemodel"
)

func TestMain(m *testing.M) { dynalitetest.Main(m) }

// Rounds of each race in a default run; LATESTWINS_SOAK_ROUNDS replaces them for a long run.
const (
	acceptRounds       = 3
	leaseRounds        = 40
	linearizableRounds = 4
)

// --- the network ------------------------------------------------------------------------------------

// network is one test's table behind a fault proxy. The test's processes reach the table through
// the proxy; the test itself checks the outcome straight on the table, never through the faults.
type network struct {
	table string
	proxy *faultproxy.Proxy
	// broken, when set, wraps each process's DynamoDB client: a deliberately broken adapter.
	broken func(dynamo.API) dynamo.API
	// check reads the table directly, without faults or breakage.
	check *authority.Authority
}

func newNetwork(t *testing.T, seed uint64, broken func(dynamo.API) dynamo.API) *network {
	t.Helper()
	ep := dynalitetest.Endpoint(t)
	table := dynalitetest.TableName(t)
	direct := dynalitetest.NewClient(ep, nil)
	if _, err := dynamo.New(direct, table).Migrate(t.Context()); err != nil {
		t.Fatalf("create table %s: %v", table, err)
	}
	proxy := faultproxy.Start(ep, seed)
	t.Cleanup(proxy.Close)
	return &network{table: table, proxy: proxy, broken: broken, check: authority.New(dynamo.New(direct, table))}
}

// process returns what a separate process has: its own SDK client (connection pool and retries)
// through the proxy, its own store (write-id memory) and its own Authority (remembered documents
// and per-document lock). The client keeps the SDK's retries, which turn a lost response into an
// ambiguous write, without a retry quota, so that the proxy's faults reach the adapter rather than
// exhausting the client.
func (n *network) process(opts ...authority.Option) *authority.Authority {
	return authority.New(n.store(), opts...)
}

// store is a process's store: its own SDK client through the proxy, as process describes.
func (n *network) store() *dynamo.Store {
	var api dynamo.API = dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(n.proxy.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 4
			o.RateLimiter = ratelimit.None
			o.MaxBackoff = 20 * time.Millisecond
		}),
	})
	if n.broken != nil {
		api = n.broken(api)
	}
	return dynamo.New(api, n.table)
}

func (n *network) processes(count int, opts ...authority.Option) []*authority.Authority {
	procs := make([]*authority.Authority, count)
	for i := range procs {
		procs[i] = n.process(opts...)
	}
	return procs
}

func isPutItem(r *http.Request, _ []byte) bool {
	return r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.PutItem"
}

// lossy loses a share of the writes' requests and, after the server committed them, of their
// responses. Reads go through: the adapter can always find out what became of a write.
func lossy(loseResponse, loseRequest float64) faultproxy.Faults {
	return faultproxy.Faults{Match: isPutItem, LoseResponse: loseResponse, LoseRequest: loseRequest}
}

// --- what a race found ------------------------------------------------------------------------------

// findings are the broken guarantees a race saw, by round.
type findings struct {
	mu         sync.Mutex
	rounds     int
	broken     map[int]bool
	violations []string
	notes      []string
}

func newFindings(rounds int) *findings { return &findings{rounds: rounds, broken: map[int]bool{}} }

// violation records a broken guarantee in round.
func (f *findings) violation(round int, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.broken[round] = true
	f.violations = append(f.violations, fmt.Sprintf("round %d: ", round)+fmt.Sprintf(format, args...))
}

func (f *findings) note(format string, args ...any) {
	f.notes = append(f.notes, fmt.Sprintf(format, args...))
}

// brokenRounds is how many rounds broke a guarantee.
func (f *findings) brokenRounds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.broken)
}

// summary lists the first violations.
func (f *findings) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	const show = 8
	v := f.violations[:min(len(f.violations), show)]
	s := strings.Join(v, "\n")
	if len(f.violations) > show {
		s += fmt.Sprintf("\n... and %d more", len(f.violations)-show)
	}
	return s
}

// requireNone fails the test when the race broke a guarantee.
func (f *findings) requireNone(t *testing.T) {
	t.Helper()
	t.Log(strings.Join(f.notes, "; "))
	if n := f.brokenRounds(); n > 0 {
		t.Fatalf("%d of %d rounds broke a guarantee:\n%s", n, f.rounds, f.summary())
	}
}

// --- accepts ----------------------------------------------------------------------------------------

// raceAccepts: in each round 16 processes accept 4 intents each for a fresh environment, at once,
// while a third of the writes lose their request or their response; then the network heals and the
// callers retry what failed, with the same intent ids. Every intent ends with exactly one
// generation, the one its caller was told; none is lost, none counted twice, none of the first
// calls is told its new intent is a duplicate, and each scope's mailbox holds its newest intent.
func raceAccepts(t *testing.T, n *network, rounds int) *findings {
	const racers, each, services = 16, 4, 4
	ctx := t.Context()
	procs := n.processes(racers)
	f := newFindings(rounds)
	intent := func(env string, w, i int) authority.Intent {
		return authority.Intent{ID: fmt.Sprintf("intent-%d-%d", w, i), Environment: env,
			Scopes: []string{fmt.Sprintf("svc%d", w%services)}, Sha: fmt.Sprintf("%040d", w*100+i)}
	}
	var failedTotal int
	for round := range rounds {
		env := fmt.Sprintf("prod-%d", round)
		n.proxy.Set(lossy(0.25, 0.1))
		var mu sync.Mutex
		reported := map[string]int64{} // intent id -> the generation its caller was told
		var failed [][2]int
		leasemodel.Together(racers, func(w int) {
			for i := range each {
				in := intent(env, w, i)
				res, err := procs[w].Accept(ctx, in, false)
				mu.Lock()
				switch {
				case err != nil:
					failed = append(failed, [2]int{w, i})
				case res.Duplicate:
					f.violation(round, "the first accept of %s was told it is a duplicate (generation %d): its own write was taken for another's", in.ID, res.Generation)
					reported[in.ID] = res.Generation
				default:
					reported[in.ID] = res.Generation
				}
				mu.Unlock()
			}
		})
		failedTotal += len(failed)

		n.proxy.Set(faultproxy.Faults{})
		for _, wi := range failed {
			in := intent(env, wi[0], wi[1])
			res, err := procs[wi[0]].Accept(ctx, in, false)
			if err != nil {
				f.violation(round, "retry of %s on a healed network: %v", in.ID, err)
				continue
			}
			reported[in.ID] = res.Generation
		}

		e, err := n.check.Status(ctx, env)
		if err != nil {
			t.Fatalf("round %d: read %s: %v", round, env, err)
		}
		if e.Desired != racers*each {
			f.violation(round, "desired generation %d after %d distinct intents: an intent was lost or counted twice", e.Desired, racers*each)
		}
		ids := make([]string, 0, len(reported))
		for id := range reported {
			ids = append(ids, id)
		}
		intents, err := n.check.Intents(ctx, env, ids)
		if err != nil {
			t.Fatalf("round %d: read the intents of %s: %v", round, env, err)
		}
		byGen := map[int64]string{}
		for id, gen := range reported {
			if other, dup := byGen[gen]; dup {
				f.violation(round, "generation %d was given to both %s and %s", gen, other, id)
			}
			byGen[gen] = id
			if rec, ok := intents[id]; !ok || rec.Generation != gen {
				f.violation(round, "intent %s was told generation %d; the table has %+v (found: %v)", id, gen, rec, ok)
			}
		}
		for svc := range services {
			var newest int64
			for w := svc; w < racers; w += services {
				for i := range each {
					newest = max(newest, reported[intent(env, w, i).ID])
				}
			}
			var m *authority.Ref
			if sc := e.Scopes[fmt.Sprintf("svc%d", svc)]; sc != nil {
				m = sc.Mailbox
			}
			if m == nil || m.Generation != newest {
				f.violation(round, "svc%d's mailbox holds %+v; want its newest generation %d", svc, m, newest)
			}
		}
	}
	c := n.proxy.Counts()
	if c.LostResponses == 0 {
		t.Fatalf("the proxy lost no response (%+v): the race did not exercise ambiguous writes", c)
	}
	f.note("%d rounds of %d accepts; %d failed under faults and were retried; proxy: %+v", rounds, racers*each, failedTotal, c)
	return f
}

func TestAmbiguousAcceptsLoseNothingAndDuplicateNothing(t *testing.T) {
	t.Parallel()
	raceAccepts(t, newNetwork(t, 1, nil), testutil.SoakRounds(t, acceptRounds)).requireNone(t)
}

// --- lease takeovers --------------------------------------------------------------------------------

// raceLease: in each round the lease has expired, and 8 processes, each with a new holder, race
// to take it over while writes lose their requests and responses. At most one racer is told it won,
// and then it is the holder the table has, with the next token; a racer told the lease is held is
// not the holder (no false "locked"), least of all by itself; the token never goes back and moves
// by one grant per round at most (no grant applied twice).
func raceLease(t *testing.T, n *network, rounds int) *findings {
	const racers, ttl, skew = 8, time.Minute, time.Second
	const lease = "deploy-lock"
	ctx := t.Context()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	procs := n.processes(racers, authority.WithClock(clock), authority.WithSkew(skew))
	f := newFindings(rounds)
	n.proxy.Set(lossy(0.2, 0.1))
	var lastToken int64
	var unknown, undecided int
	for round := range rounds {
		clock.Advance(ttl + 2*skew) // the last round's lease has expired past the skew
		type answer struct {
			won, held, failed bool
			token             int64
		}
		answers := make([]answer, racers)
		holder := func(r int) string { return fmt.Sprintf("pass-%d-%d", round, r) }
		leasemodel.Together(racers, func(r int) {
			g, err := procs[r].Acquire(ctx, lease, holder(r), "deploy", ttl)
			var held *authority.HeldError
			switch {
			case err == nil:
				answers[r] = answer{won: true, token: g.Tokens[lease]}
			case errors.As(err, &held):
				answers[r] = answer{held: true}
				if held.Holder == holder(r) {
					f.violation(round, "%s was told the lease is held by itself: a false locked", holder(r))
				}
			default:
				answers[r] = answer{failed: true} // the outcome is unknown: it may have been granted
			}
		})
		var winners []string
		var tokens []int64
		for r, a := range answers {
			if a.won {
				winners, tokens = append(winners, holder(r)), append(tokens, a.token)
			}
			if a.failed {
				unknown++
			}
		}
		l, err := n.check.LeaseStatus(ctx, lease)
		if err != nil && !errors.Is(err, authority.ErrNotFound) {
			t.Fatalf("round %d: read the lease: %v", round, err)
		}
		var stored authority.Lease
		if l != nil {
			stored = l.Lease
		}
		switch {
		case len(winners) > 1:
			f.violation(round, "%d racers were granted the lease: %v with tokens %v", len(winners), winners, tokens)
		case len(winners) == 1 && (stored.Holder != winners[0] || stored.Token != tokens[0]):
			f.violation(round, "%s was told it won with token %d; the table has %s with token %d", winners[0], tokens[0], stored.Holder, stored.Token)
		case len(winners) == 0:
			undecided++
		}
		for r, a := range answers {
			if a.held && stored.Holder == holder(r) {
				f.violation(round, "%s was told the lease is held by another, and holds it", holder(r))
			}
		}
		switch {
		case stored.Token < lastToken:
			f.violation(round, "the token went back from %d to %d", lastToken, stored.Token)
		case stored.Token > lastToken+1:
			f.violation(round, "the token moved from %d to %d in one round: a grant was applied twice", lastToken, stored.Token)
		case len(winners) == 1 && stored.Token != lastToken+1:
			f.violation(round, "%s won with token %d; want %d, the next", winners[0], stored.Token, lastToken+1)
		}
		lastToken = max(lastToken, stored.Token)
	}
	c := n.proxy.Counts()
	if c.LostResponses == 0 {
		t.Fatalf("no response was lost (%+v): ambiguous writes were not exercised", c)
	}
	f.note("%d rounds of %d racers; %d acquires ended in an error; rounds without a known winner: %d; proxy: %+v", rounds, racers, unknown, undecided, c)
	return f
}

func TestAmbiguousLeaseRacesGrantOnce(t *testing.T) {
	t.Parallel()
	raceLease(t, newNetwork(t, 2, nil), testutil.SoakRounds(t, leaseRounds)).requireNone(t)
}
