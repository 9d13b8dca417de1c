package benchmarks

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
)

// How a pass's processes hold its state, from the warmest to the coldest:
//   - warm: one Authority for every pass (the App, latestwins serve);
//   - run: a new Authority per pass (one latestwins run process: claim, gate, complete);
//   - steps: a new Authority per phase (the Action's separate claim, gate and complete steps).
var passModes = []string{"warm", "run", "steps"}

// passer runs uncontended single-scope passes on one environment, counting their store requests.
type passer struct {
	store authority.Store // a countingStore
	mode  string
	warm  *authority.Authority
	opts  []authority.Option // the Authorities' (the layout)
}

func newPasser(store authority.Store, mode string, opts ...authority.Option) *passer {
	return &passer{store: store, mode: mode, warm: authority.New(store, opts...), opts: opts}
}

// pass runs pass i of scope in env: claim (accept and claim), the deploy gate with a lease, complete
// with success, as latestwins run does (lease renewals aside): in mode run the claim enters the
// deploy phase in its own write, as run's does; elsewhere the gate is asked apart, as the Action's
// steps and the App's API ask it.
func (p *passer) pass(ctx context.Context, env, scope string, i int) error {
	var own *authority.Authority
	proc := func() *authority.Authority {
		switch p.mode {
		case "warm":
			return p.warm
		case "run":
			if own == nil {
				own = authority.New(p.store, p.opts...)
			}
			return own
		}
		return authority.New(p.store, p.opts...)
	}
	holder := fmt.Sprintf("run-%d", i)
	var opts []authority.AcceptOption
	if p.mode == "run" {
		opts = append(opts, authority.EnterDeploy(holder, authority.DefaultLeaseTTL)) // as latestwins run claims
	}
	res, err := pass.Claim(ctx, proc(), authority.Intent{ID: fmt.Sprintf("%s-%s-%d", env, scope, i), Environment: env,
		Scopes: []string{scope}, Sha: fmt.Sprintf("%040x", i+1), Ref: "refs/heads/main"}, opts...)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if res.Claim == nil || len(res.Claim.Claimed) != 1 {
		return fmt.Errorf("pass %d did not claim %s: %+v", i, scope, res)
	}
	g := res.Entered
	if g == nil {
		if g, err = pass.Gate(ctx, proc(), authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: []string{scope},
			Phase: "deploy", Holder: holder, LeaseTTL: authority.DefaultLeaseTTL}, time.Minute, nil); err != nil {
			return fmt.Errorf("gate: %w", err)
		}
	}
	out, err := proc().Complete(ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: []string{scope},
		Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeSuccess})
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if out.Overall() != authority.ResultDeployed {
		return fmt.Errorf("pass %d completed as %s", i, out.Overall())
	}
	return nil
}

// runs numbers the runs of a benchmark (-count runs each again on the same store), so that each
// has environments of its own.
var runs atomic.Int64

// reportRequests reports the requests of n passes by kind.
func reportRequests(b *testing.B, s snapshot, n int) {
	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per(s.requests()), "req/pass")
	b.ReportMetric(per(s.gets), "get/pass")
	b.ReportMetric(per(s.puts), "put/pass")
	b.ReportMetric(per(s.putRecs), "putrecords/pass")
	b.ReportMetric(per(s.getRecs), "getrecords/pass")
	b.ReportMetric(per(s.adds), "add/pass")
}

// BenchmarkRoundTrips reports the store requests of one uncontended pass by kind (document reads
// and conditional writes, record writes and reads), on every store, for each way a pass's
// processes hold the state, in each layout (the single document's names carry none, as they did
// before the per-scope layout). The environment has had passes before, so its outbox holds the
// previous pass's events, as it does in use.
func BenchmarkRoundTrips(b *testing.B) {
	for _, sk := range storeKinds {
		client := sk.open(b)
		for _, l := range scaleLayouts {
			for _, mode := range passModes {
				name := sk.name + "/" + mode
				if l.opts != nil {
					name = sk.name + "/" + l.name + "/" + mode
				}
				b.Run(name, func(b *testing.B) { roundTrips(b, client, mode, l.opts) })
			}
		}
	}
}

func roundTrips(b *testing.B, client func(testing.TB) authority.Store, mode string, opts []authority.Option) {
	ctx := b.Context()
	var c counts
	p := newPasser(&countingStore{Store: client(b), c: &c}, mode, opts...)
	env := fmt.Sprintf("trips-%s-%d", mode, runs.Add(1))
	for i := range 2 {
		if err := p.pass(ctx, env, "api", 1<<20+i); err != nil {
			b.Fatal(err)
		}
	}
	before := c.snapshot()
	n := 0
	for b.Loop() {
		if err := p.pass(ctx, env, "api", n); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportRequests(b, c.snapshot().since(before), n)
}
