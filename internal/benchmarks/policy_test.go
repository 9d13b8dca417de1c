package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// policyModel is one way the A -> B -> C race can be ordered.
type policyModel struct {
	name    string
	policy  authority.Policy
	barrier string // the pass whose commit is a barrier
	// deployed is what must deploy, in order.
	deployed []string
}

var policyModels = []policyModel{
	{"latest", authority.PolicyLatest, "", []string{"C"}},
	{"latest-B-barrier", authority.PolicyLatest, "B", []string{"B", "C"}},
	{"queue", authority.PolicyQueue, "", []string{"A", "B", "C"}},
}

// policyTiming is C's time from its arrival to live, and the time from A's arrival until every
// pass has ended.
type policyTiming struct {
	cToLive, total time.Duration
}

// policyRace stages A, B and C arriving gap apart (each accepted before the next arrives), each a process of its own that accepts and
// claims, builds for build, waits at its deploy gate as long as the protocol says (asking again
// every poll), deploys for deploy and completes; a superseded pass stops. It checks that exactly
// the model's passes deployed, in order.
func policyRace(ctx context.Context, newAuth func() *authority.Authority, env string, m policyModel, gap, build, deploy, poll time.Duration) (policyTiming, error) {
	names := []string{"A", "B", "C"}
	var mu sync.Mutex
	var deployed []string
	var cLive time.Duration
	errs := make([]error, len(names))
	start := time.Now()
	var wg sync.WaitGroup
	// A build ends only once all three are accepted: the race is about passes still building when
	// a newer commit arrives, which a loaded machine must not turn into another race by stretching
	// the arrivals past the builds.
	accepted := make(chan struct{})
	defer func() {
		select {
		case <-accepted:
		default:
			close(accepted)
		}
	}()
	for i, name := range names {
		if i > 0 {
			if err := pause(ctx, gap); err != nil {
				return policyTiming{}, err
			}
		}
		// Arrival is the accept: the next pass arrives only after this one's intent is accepted, so
		// that the generations follow A, B, C on every store whatever its latency.
		arrived := time.Now()
		a := newAuth()
		in := authority.Intent{ID: env + "-" + name, Environment: env, Scopes: []string{"api"}, Sha: fmt.Sprintf("%s%039d", string(rune('a'+i)), i),
			Ref: "refs/heads/main", Source: "bench", Policy: m.policy}
		if m.barrier == name {
			in.Barrier = []string{"api"}
		}
		res, err := a.Accept(ctx, in, true)
		if err != nil {
			return policyTiming{}, fmt.Errorf("%s race: accept %s: %w", m.name, name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := pause(ctx, build); err != nil {
				errs[i] = err
				return
			}
			select {
			case <-accepted:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			var g *authority.Grant
			for {
				g, err = a.Gate(ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy",
					Holder: name, LeaseTTL: time.Minute})
				var held *authority.HeldError
				if !errors.As(err, &held) {
					break
				}
				if err := pause(ctx, poll); err != nil {
					errs[i] = err
					return
				}
			}
			if errors.Is(err, authority.ErrSuperseded) {
				return
			}
			if err != nil {
				errs[i] = fmt.Errorf("pass %s: %w", name, err)
				return
			}
			if err := pause(ctx, deploy); err != nil {
				errs[i] = err
				return
			}
			cr, err := a.Complete(ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Holder: name,
				Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3})
			if err != nil || cr.Results["api"] != authority.ResultDeployed {
				errs[i] = fmt.Errorf("pass %s completed %+v: %v", name, cr, err)
				return
			}
			mu.Lock()
			deployed = append(deployed, name)
			if name == "C" {
				cLive = time.Since(arrived)
			}
			mu.Unlock()
		}()
	}
	close(accepted)
	wg.Wait()
	total := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return policyTiming{}, fmt.Errorf("%s race: %w", m.name, err)
	}
	if !slices.Equal(deployed, m.deployed) {
		return policyTiming{}, fmt.Errorf("%s race: deployed %v, want %v", m.name, deployed, m.deployed)
	}
	return policyTiming{cToLive: cLive, total: total}, nil
}

// TestPolicyRaces runs the race under each policy once on every store with short steps and checks
// what deployed.
func TestPolicyRaces(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			clients := k.open(t)
			for _, m := range policyModels {
				newAuth := func() *authority.Authority { return authority.New(clients(t)) }
				if _, err := policyRace(t.Context(), newAuth, "policy-"+m.name, m, 5*time.Millisecond, 40*time.Millisecond, 20*time.Millisecond, 2*time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPolicyRace measures, in one run on the same store, the A -> B -> C race (arrivals 10 ms
// apart, build 200 ms, deploy 100 ms, a waiting pass asks again every 10 ms) under policy latest,
// latest with B a barrier, and queue: the medians of C's time from arrival to live and of the time
// until every pass has ended.
func BenchmarkPolicyRace(b *testing.B) {
	for _, k := range storeKinds {
		b.Run(k.name, func(b *testing.B) {
			clients := k.open(b)
			cMs := map[string][]float64{}
			totalMs := map[string][]float64{}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, m := range policyModels {
					newAuth := func() *authority.Authority { return authority.New(clients(b)) }
					tm, err := policyRace(b.Context(), newAuth, fmt.Sprintf("policy-%s-%d", m.name, i), m, 10*time.Millisecond, raceBuild, raceDeploy, 10*time.Millisecond)
					if err != nil {
						b.Fatal(err)
					}
					cMs[m.name] = append(cMs[m.name], ms(tm.cToLive))
					totalMs[m.name] = append(totalMs[m.name], ms(tm.total))
				}
			}
			b.StopTimer()
			for _, m := range policyModels {
				b.ReportMetric(median(cMs[m.name]), m.name+"-C-ms")
				b.ReportMetric(median(totalMs[m.name]), m.name+"-all-ms")
			}
		})
	}
}
