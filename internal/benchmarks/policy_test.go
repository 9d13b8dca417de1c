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
	// window: the environment's change window is closed when A arrives and opens windowOpens
	// later, while all three wait at their deploy gates.
	window bool
	// deployed is what must deploy, in order.
	deployed []string
}

var policyModels = []policyModel{
	{"latest", authority.PolicyLatest, "", false, []string{"C"}},
	{"latest-B-barrier", authority.PolicyLatest, "B", false, []string{"B", "C"}},
	{"queue", authority.PolicyQueue, "", false, []string{"A", "B", "C"}},
	{"window-latest", authority.PolicyLatest, "", true, []string{"C"}},
	{"window-queue", authority.PolicyQueue, "", true, []string{"A", "B", "C"}},
}

// windowOpens is how long after A's arrival a closed change window opens in the window models:
// after every build has ended, so all three wait for it.
const windowOpens = 400 * time.Millisecond

// raceWindows opens for the first minute of every even minute; the window models run on a clock
// set so that an even minute begins windowOpens after A arrives.
var raceWindows = &authority.Windows{Allow: []authority.WindowPeriod{{Start: "*/2 * * * *", Duration: time.Minute}}}

// offsetClock is the real clock moved by a fixed offset: real time passes, from another instant.
type offsetClock struct{ d time.Duration }

func (c offsetClock) Now() time.Time { return time.Now().Add(c.d) }

// windowClock is a clock on which an even minute, when raceWindows opens, begins in wait.
func windowClock(wait time.Duration) offsetClock {
	now := time.Now()
	opens := now.Truncate(2 * time.Minute).Add(2 * time.Minute)
	return offsetClock{d: opens.Sub(now) - wait}
}

// policyTiming is C's time from its arrival to live, the time from A's arrival until every pass
// has ended, and, in the window models, C's time to live from when the window opened.
type policyTiming struct {
	cToLive, total, fromOpen time.Duration
}

// policyRace stages A, B and C arriving gap apart (each accepted before the next arrives), each a process of its own that accepts and
// claims, builds for build, waits at its deploy gate as long as the protocol says (asking again
// every poll), deploys for deploy and completes; a superseded pass stops. It checks that exactly
// the model's passes deployed, in order.
func policyRace(ctx context.Context, newStore func() authority.Store, env string, m policyModel, gap, build, deploy, poll time.Duration) (policyTiming, error) {
	names := []string{"A", "B", "C"}
	var mu sync.Mutex
	var deployed []string
	var cLive time.Duration
	var cLiveAt time.Time
	errs := make([]error, len(names))
	start := time.Now()
	opensAt := start.Add(windowOpens)
	var opts []authority.Option
	if m.window {
		opts = append(opts, authority.WithClock(windowClock(windowOpens)))
	}
	newAuth := func() *authority.Authority { return authority.New(newStore(), opts...) }
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
		if m.window {
			in.Gates = &authority.Gates{Windows: raceWindows}
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
				cLive, cLiveAt = time.Since(arrived), time.Now()
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
	tm := policyTiming{cToLive: cLive, total: total}
	if m.window {
		if cLiveAt.Before(opensAt) {
			return policyTiming{}, fmt.Errorf("%s race: C went live %s before the window opened", m.name, opensAt.Sub(cLiveAt))
		}
		tm.fromOpen = cLiveAt.Sub(opensAt)
	}
	return tm, nil
}

// TestPolicyRaces runs the race under each policy once on every store with short steps and checks
// what deployed.
func TestPolicyRaces(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			clients := k.open(t)
			for _, m := range policyModels {
				newStore := func() authority.Store { return clients(t) }
				if _, err := policyRace(t.Context(), newStore, "policy-"+m.name, m, 5*time.Millisecond, 40*time.Millisecond, 20*time.Millisecond, 2*time.Millisecond); err != nil {
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
			openMs := map[string][]float64{}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, m := range policyModels {
					newStore := func() authority.Store { return clients(b) }
					tm, err := policyRace(b.Context(), newStore, fmt.Sprintf("policy-%s-%d", m.name, i), m, 10*time.Millisecond, raceBuild, raceDeploy, 10*time.Millisecond)
					if err != nil {
						b.Fatal(err)
					}
					cMs[m.name] = append(cMs[m.name], ms(tm.cToLive))
					totalMs[m.name] = append(totalMs[m.name], ms(tm.total))
					if m.window {
						openMs[m.name] = append(openMs[m.name], ms(tm.fromOpen))
					}
				}
			}
			b.StopTimer()
			for _, m := range policyModels {
				b.ReportMetric(median(cMs[m.name]), m.name+"-C-ms")
				b.ReportMetric(median(totalMs[m.name]), m.name+"-all-ms")
				if m.window {
					b.ReportMetric(median(openMs[m.name]), m.name+"-open-to-C-ms")
				}
			}
		})
	}
}
