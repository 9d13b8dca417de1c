package dynamo

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// requestCounter counts the HTTP requests a client sends, per operation, through SDK middleware
// placed after the retry loop (so that every attempt counts).
type requestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *requestCounter) option() Option {
	return WithClientOptions(func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("countRequests",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					c.mu.Lock()
					if c.counts == nil {
						c.counts = map[string]int{}
					}
					c.counts[middleware.GetOperationName(ctx)]++
					c.mu.Unlock()
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	})
}

// take returns the counts so far and starts again.
func (c *requestCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := maps.Clone(c.counts)
	c.counts = nil
	if out == nil {
		out = map[string]int{}
	}
	return out
}

func total(counts map[string]int) int {
	n := 0
	for _, v := range counts {
		n += v
	}
	return n
}

// phases of one uncontended pass.
var phases = []string{"accept", "gate", "complete"}

// runner runs uncontended passes (accept with claim, gate deploy with a lease, complete with
// success) in one of three ways:
//   - warm: one process for everything (the App); every phase writes from what it remembers.
//   - cold-pass: a new process per pass (latestwins run); its first phase reads first, and its
//     claim enters the deploy phase in its own write (authority.EnterDeploy).
//   - cold: a new process per phase, as the Action's steps are; every phase reads first.
type runner struct {
	s    *Store
	mode string
	warm *authority.Authority
}

func newRunner(s *Store, mode string) *runner {
	return &runner{s: s, mode: mode, warm: authority.New(s)}
}

// pass runs pass i on env and returns the requests of each phase.
func (r *runner) pass(ctx context.Context, counter *requestCounter, env string, i int) (map[string]int, error) {
	var own *authority.Authority
	proc := func() *authority.Authority {
		switch r.mode {
		case "warm":
			return r.warm
		case "cold-pass":
			if own == nil {
				own = authority.New(r.s)
			}
			return own
		}
		return authority.New(r.s)
	}
	per := map[string]int{}
	counter.take()
	holder := fmt.Sprintf("run-%d", i)
	var opts []authority.AcceptOption
	if r.mode == "cold-pass" {
		opts = append(opts, authority.EnterDeploy(holder, authority.DefaultLeaseTTL)) // as latestwins run claims
	}
	res, err := proc().Accept(ctx, authority.Intent{ID: fmt.Sprintf("delivery-%d", i), Environment: env, Scopes: []string{"api"},
		Sha: fmt.Sprintf("%040x", i+1), Ref: "refs/heads/main"}, true, opts...) // i is -1 for the first pass
	if err != nil {
		return nil, err
	}
	if res.Claim == nil || len(res.Claim.Claimed) != 1 {
		return nil, fmt.Errorf("pass %d: accept did not claim: %+v", i, res)
	}
	per["accept"] = total(counter.take())
	g := res.Entered
	if g == nil {
		if g, err = proc().Gate(ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: []string{"api"},
			Phase: "deploy", Holder: holder, LeaseTTL: authority.DefaultLeaseTTL}); err != nil {
			return nil, err
		}
	}
	per["gate"] = total(counter.take())
	out, err := proc().Complete(ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: []string{"api"},
		Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeSuccess})
	if err != nil {
		return nil, err
	}
	if out.Overall() != authority.ResultDeployed {
		return nil, fmt.Errorf("pass %d: completed as %s", i, out.Overall())
	}
	per["complete"] = total(counter.take())
	return per, nil
}

// TestRequestsPerPhase holds the adapter to its request budget per phase of an uncontended pass.
// Every phase is one conditional write of the small document. Accept also reads the intent's record
// (the duplicate check within the retention). A process that does not remember the document reads
// it first. The records the pass's events and intent become (the outbox) are stored in one batch
// write, before the pass's last write (complete) drops them from the document.
func TestRequestsPerPhase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	client, table := migrated(t)
	counter := &requestCounter{}
	s := New(client, table, counter.option())
	want := map[string]map[string]int{
		"warm":      {"accept": 2, "gate": 1, "complete": 2},
		"cold-pass": {"accept": 3, "gate": 0, "complete": 2},
		"cold":      {"accept": 3, "gate": 2, "complete": 3},
	}
	for mode, want := range want {
		r := newRunner(s, mode)
		env := "staging-" + mode
		// The first pass creates the document (accept reads nothing, then writes).
		if _, err := r.pass(ctx, counter, env, 0); err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			got, err := r.pass(ctx, counter, env, i)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s pass %d: requests per phase (-want +got):\n%s", mode, i, diff)
			}
		}
	}
}

// BenchmarkUncontendedPass reports the DynamoDB requests of each phase of one uncontended pass, as
// counted by SDK middleware, and the time of a whole pass against dynalite on loopback.
func BenchmarkUncontendedPass(b *testing.B) {
	client, table := migrated(b)
	counter := &requestCounter{}
	s := New(client, table, counter.option())
	for _, mode := range []string{"warm", "cold-pass", "cold"} {
		b.Run(mode, func(b *testing.B) {
			ctx := b.Context()
			env := "bench-" + mode
			r := newRunner(s, mode)
			// The environment exists before the timed passes, as it does after its first deploy.
			if _, err := r.pass(ctx, counter, env, -1); err != nil {
				b.Fatal(err)
			}
			sums := map[string]int{}
			i := 0
			for b.Loop() {
				per, err := r.pass(ctx, counter, env, i)
				if err != nil {
					b.Fatal(err)
				}
				for ph, n := range per {
					sums[ph] += n
				}
				i++
			}
			for _, ph := range phases {
				b.ReportMetric(float64(sums[ph])/float64(i), ph+"-req/op")
			}
		})
	}
}
