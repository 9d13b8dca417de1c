package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
	"github.com/latestwins/latestwins/internal/store/memory"
)

// A busy day of a monorepo: one environment of 300 services (scopes), pushes arriving at random
// (a Poisson process, seeded) over a working day, each touching 1 to 20 services chosen at random,
// each service's deploy taking 2 to 10 minutes. Every duration below (arrivals, deploys, leases) is
// simulated time. Two such days are played: uniform, where a push's services are drawn uniformly,
// and hot, the same pushes at the same times with the same touch counts and deploy times but their
// services drawn by a Zipf-like law (hotSkew), so that a few services get most pushes. Each day is
// played under three models in one run, one after the other:
//
//   - latest: the real Authority, policy latest, on the per-scope layout of a memory store. The
//     App accepts each push's intent naming the services it touches; a job per service (its own
//     Authority, as a latestwins run process is) claims its service with the push's generation,
//     waits at its deploy gate, deploys while it renews its lease every third of the TTL, and
//     completes. A job superseded before it deploys stops at its claim or its gate.
//   - queue: the same with policy queue: every commit deploys, in order, per service. When the
//     intents waiting behind the services' heads would outgrow the environment's bound, the
//     Authority refuses the push (ErrQueueFull, retryable); the App asks again whenever a
//     service's state changes, and the pushes after it wait behind it, accepted in order.
//   - serialized-lock: one environment-wide lock (a named lease of the Authority, on a memory
//     store) held for a push's whole deploy, its services deployed in parallel under it; pushes
//     take it in arrival order, each hand-off immediate: the model's best case.
//
// The Authority's models are replayed at speed: the Authority and the jobs run on a clock that
// goes simMinute of real time per simulated minute, the jobs' deploys are sleeps, and the pushes
// arrive on time. The Authority's requests take real time, which the speed-up magnifies: a push's
// accept of a few milliseconds costs simulated seconds. A job waiting at its gate is woken whenever
// its service's state changes (an accept naming it, a completion): pass.Gate over a gater that
// holds a refused request until then, as the App's API long poll does; the sub-second polling of a
// run over a store would cost nothing against minutes of deploy either. The lock's model has
// nothing concurrent to replay, so it is played on a clock it sets from one event to the next
// (lockDay).
//
// Push-to-live is measured for every (push, service) pair: the simulated time from the push until
// the service runs its commit or a newer one (a superseded commit is live once a newer one is). The
// run fails when a service goes live on an older commit after a newer one, when a deploy that ran
// is not recorded as live, or when a pushed service does not end on the last commit pushed to it.

// daySetting is the shape of a simulated day.
type daySetting struct {
	services      int
	hours         int // pushes arrive during the first hours of the day
	pushesPerHour int
	maxTouch      int // a push touches 1 to maxTouch services
	minDeploy     time.Duration
	maxDeploy     time.Duration
	leaseTTL      time.Duration // of every lease, renewed every third of it
	simMinute     time.Duration // the real time a simulated minute takes under the Authority's models
	seed          uint64
	skew          float64 // 0: a push's services are drawn uniformly; else Zipf-like, service k weighing (k+1)^-skew
}

// monorepoDay is the benchmark's day: 8 hours at 50 pushes an hour, a simulated minute every
// 20 ms (an hour in 1.2 s).
var monorepoDay = daySetting{services: 300, hours: 8, pushesPerHour: 50, maxTouch: 20,
	minDeploy: 2 * time.Minute, maxDeploy: 10 * time.Minute, leaseTTL: 10 * time.Minute, simMinute: 20 * time.Millisecond, seed: 1}

// hotSkew is the hot day's: Zipf's law, service k (from 0) drawn with weight 1/(k+1). On
// monorepoDay it puts a third of the pairs on the 10 hottest services, which get 9 (the tenth) to
// 38 (the first) pushes an hour, every hour, and a push touches one of them 96% of the time; two
// services in three get at most a push an hour, the coldest a few a day or none. (Drawn uniformly,
// every service already gets a push in 83% of the day's hours, at 1.75 an hour.) A service's
// deploys take 6 minutes on average, so the 8 hottest get pushes faster than they can deploy
// each one.
const hotSkew = 1.0

// hotDay is monorepoDay with hot services: the same pushes at the same times, touching as many
// services with the same deploy times, but those services drawn by hotSkew.
var hotDay = withSkew(monorepoDay, hotSkew)

// testDay is TestMonorepoDay's: the first hour of such a day, at 30 pushes an hour; hotTestDay an
// hour at 15 pushes an hour on hot services, fewer because its hottest services' queues drain long
// after the hour, which the test waits for.
var testDay = daySetting{services: 300, hours: 1, pushesPerHour: 30, maxTouch: 20,
	minDeploy: 2 * time.Minute, maxDeploy: 10 * time.Minute, leaseTTL: 10 * time.Minute, simMinute: 20 * time.Millisecond, seed: 1}

var hotTestDay = withSkew(daySetting{services: 300, hours: 1, pushesPerHour: 15, maxTouch: 20,
	minDeploy: 2 * time.Minute, maxDeploy: 10 * time.Minute, leaseTTL: 10 * time.Minute, simMinute: 20 * time.Millisecond, seed: 1}, hotSkew)

func withSkew(s daySetting, skew float64) daySetting {
	s.skew = skew
	return s
}

// dayPush is one push of the day.
type dayPush struct {
	at       time.Duration   // when it arrives, since the day began
	services []int           // the services it touches, ascending
	deploy   []time.Duration // each one's deploy time
}

// plan draws the day's pushes from the seed: the same day on every run.
func (s daySetting) plan() []dayPush {
	rng := rand.New(rand.NewPCG(s.seed, 0x6d6f6e6f7265706f))
	gap := float64(time.Hour) / float64(s.pushesPerHour)
	end := time.Duration(s.hours) * time.Hour
	hot := newSkewedPick(s)
	var out []dayPush
	for at := time.Duration(rng.ExpFloat64() * gap); at < end; at += time.Duration(rng.ExpFloat64() * gap) {
		svcs := rng.Perm(s.services)[:1+rng.IntN(s.maxTouch)]
		if s.skew > 0 {
			svcs = hot.pick(len(svcs))
		}
		slices.Sort(svcs)
		p := dayPush{at: at, services: svcs}
		for range svcs {
			p.deploy = append(p.deploy, s.minDeploy+time.Duration(rng.Int64N(int64(s.maxDeploy-s.minDeploy)+1)))
		}
		out = append(out, p)
	}
	return out
}

// skewedPick draws a push's services for a skewed day, from a stream of its own so that the day's
// arrivals, touch counts and deploy times stay those of the uniform day with the same seed.
type skewedPick struct {
	rng *rand.Rand
	cum []float64 // cum[k]: the weights of services 0 to k
}

func newSkewedPick(s daySetting) *skewedPick {
	p := &skewedPick{rng: rand.New(rand.NewPCG(s.seed, 0x686f742d73766373)), cum: make([]float64, s.services)}
	total := 0.0
	for k := range p.cum {
		total += math.Pow(float64(k+1), -s.skew)
		p.cum[k] = total
	}
	return p
}

// pick draws n distinct services, each draw by weight among those not drawn yet.
func (p *skewedPick) pick(n int) []int {
	total := p.cum[len(p.cum)-1]
	var out []int
	for len(out) < n {
		k, _ := slices.BinarySearch(p.cum, p.rng.Float64()*total)
		if k < len(p.cum) && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

func serviceName(i int) string { return fmt.Sprintf("svc-%03d", i) }

// pushSha is push i's commit; setupSha is what every service runs when the day begins.
func pushSha(i int) string { return fmt.Sprintf("%040x", i+1) }

var setupSha = fmt.Sprintf("%040x", uint64(1)<<40)

// pushOf is the push whose commit sha is.
func pushOf(sha string) (int, error) {
	n, err := strconv.ParseUint(sha, 16, 64)
	if err != nil || n == 0 || n >= 1<<40 {
		return 0, fmt.Errorf("commit %s is no push of the day", sha)
	}
	return int(n - 1), nil
}

// simClock is the real clock sped up: simulated time passes speed times as fast, from origin.
type simClock struct {
	start  time.Time // real, with its monotonic reading
	origin time.Time
	speed  time.Duration
}

func newSimClock(simMinute time.Duration) *simClock {
	now := time.Now()
	return &simClock{start: now, origin: now, speed: time.Minute / simMinute}
}

func (c *simClock) Now() time.Time { return c.origin.Add(time.Since(c.start) * c.speed) }

// sleepUntil waits until simulated time t: a step's work, or a push's arrival.
func (c *simClock) sleepUntil(ctx context.Context, t time.Time) error {
	return pause(ctx, max(0, t.Sub(c.Now())/c.speed))
}

// conflictStore counts the conditional writes that lost a revision race: each costs its writer a
// pause of real time (the Authority's back-off), which the sped-up clock magnifies.
type conflictStore struct {
	authority.Store
	conflicts atomic.Int64
}

func (s *conflictStore) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	rev, err := s.Store.Put(ctx, doc)
	if errors.Is(err, authority.ErrConflict) {
		s.conflicts.Add(1)
	}
	return rev, err
}

// scopeSignals wakes the jobs waiting at a service's gate when its state changed, and a push
// waiting for room in the queues (anyScope) when any service's did.
type scopeSignals struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

// watch returns a channel closed at the next signal of scope; take it before asking.
func (s *scopeSignals) watch(scope string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = map[string]chan struct{}{}
	}
	c, ok := s.ch[scope]
	if !ok {
		c = make(chan struct{})
		s.ch[scope] = c
	}
	return c
}

// anyScope is watched for a signal of any scope.
const anyScope = ""

func (s *scopeSignals) signal(scope string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sc := range []string{scope, anyScope} {
		if c, ok := s.ch[sc]; ok {
			close(c)
			delete(s.ch, sc)
		}
	}
}

// calls times the Authority's requests of a model (each one's real time).
type calls struct {
	n    atomic.Int64
	took atomic.Int64
}

func (c *calls) time(f func()) {
	t := time.Now()
	f()
	c.n.Add(1)
	c.took.Add(int64(time.Since(t)))
}

// mean is the mean request's time in simulated seconds.
func (c *calls) mean(clk *simClock) float64 {
	if c.n.Load() == 0 {
		return 0
	}
	return (time.Duration(c.took.Load()/c.n.Load()) * clk.speed).Seconds()
}

// wakingGater is a pass.WaitGater over a local Authority: a refused request is asked again each
// time the service's state changes, until it is granted, ends otherwise, or wait has passed.
type wakingGater struct {
	a       *authority.Authority
	signals *scopeSignals
	scope   string
	calls   *calls
}

func (g *wakingGater) Gate(ctx context.Context, r authority.GateRequest) (gr *authority.Grant, err error) {
	g.calls.time(func() { gr, err = g.a.Gate(ctx, r) })
	return gr, err
}

func (g *wakingGater) GateWait(ctx context.Context, r authority.GateRequest, wait time.Duration) (*authority.Grant, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		changed := g.signals.watch(g.scope)
		gr, err := g.Gate(ctx, r)
		if !errors.Is(err, authority.ErrLeaseHeld) {
			return gr, err
		}
		select {
		case <-changed:
		case <-t.C:
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (g *wakingGater) LongPoll() time.Duration { return time.Minute }

var _ pass.WaitGater = (*wakingGater)(nil)

// liveAt is a deploy's end: the target runs push's commit from at.
type liveAt struct {
	push int
	at   time.Time
}

// dayLog is what a model's day did: when each push arrived and what each service ran when.
type dayLog struct {
	mu         sync.Mutex
	arrived    []time.Time
	live       [][]liveAt // per service, in the order the deploys ended
	deploys    int
	superseded int // jobs that stopped without deploying
	lapses     int // jobs whose lease lapsed (their process stalled past its TTL) and was taken over
	errs       []error
}

func newDayLog(s daySetting, plan []dayPush) *dayLog {
	return &dayLog{arrived: make([]time.Time, len(plan)), live: make([][]liveAt, s.services)}
}

func (l *dayLog) arrive(i int, at time.Time) {
	l.mu.Lock()
	l.arrived[i] = at
	l.mu.Unlock()
}

// wentLive records that svc runs push's commit from at, and refuses a commit older than the one
// it ran before.
func (l *dayLog) wentLive(svc, push int, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.deploys++
	if n := len(l.live[svc]); n > 0 && l.live[svc][n-1].push >= push {
		l.errs = append(l.errs, fmt.Errorf("%s went live on push %d after push %d", serviceName(svc), push, l.live[svc][n-1].push))
	}
	l.live[svc] = append(l.live[svc], liveAt{push, at})
}

func (l *dayLog) lapsed() {
	l.mu.Lock()
	l.lapses++
	l.mu.Unlock()
}

func (l *dayLog) stopped() {
	l.mu.Lock()
	l.superseded++
	l.mu.Unlock()
}

// dayOutcome is what a model measured.
type dayOutcome struct {
	toLive     []float64 // simulated minutes per (push, service)
	deploys    int
	superseded int
	lapses     int     // jobs whose lease lapsed under a stalled process, and that published nothing
	callSimS   float64 // the mean Authority request, in simulated seconds
	requests   int64   // the Authority's requests
	conflicts  int64
	refused    int     // pushes the Authority refused at first for full queues (ErrQueueFull)
	acceptWait float64 // the longest a push waited from its arrival to its accept, in simulated minutes
}

// outcome checks the day's guarantees and measures push-to-live for every (push, service) pair.
func (l *dayLog) outcome(plan []dayPush) (*dayOutcome, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := errors.Join(l.errs...); err != nil {
		return nil, err
	}
	out := &dayOutcome{deploys: l.deploys, superseded: l.superseded, lapses: l.lapses}
	last := map[int]int{}
	for i, p := range plan {
		for _, svc := range p.services {
			last[svc] = i
			runs := l.live[svc]
			k := sort.Search(len(runs), func(k int) bool { return runs[k].push >= i })
			if k == len(runs) {
				return nil, fmt.Errorf("push %d never went live on %s", i, serviceName(svc))
			}
			out.toLive = append(out.toLive, runs[k].at.Sub(l.arrived[i]).Minutes())
		}
	}
	for svc, i := range last {
		if runs := l.live[svc]; runs[len(runs)-1].push != i {
			return nil, fmt.Errorf("%s ends on push %d, not on push %d, the last pushed to it", serviceName(svc), runs[len(runs)-1].push, i)
		}
	}
	return out, nil
}

// authorityDay plays the day under the Authority with policy p, on the per-scope layout of a
// memory store.
func authorityDay(ctx context.Context, s daySetting, plan []dayPush, p authority.Policy) (*dayOutcome, error) {
	store := &conflictStore{Store: memory.New()}
	clk := newSimClock(s.simMinute)
	opts := []authority.Option{authority.WithScopeDocuments(), authority.WithClock(clk)}
	env := fmt.Sprintf("monorepo-%s-%d", p, runs.Add(1))
	app := authority.New(store, opts...) // the App: it accepts the pushes
	names := make([]string, s.services)
	for i := range names {
		names[i] = serviceName(i)
	}
	// Every service runs the same commit when the day begins.
	res, err := app.Accept(ctx, authority.Intent{ID: env + "-setup", Environment: env, Scopes: names, Sha: setupSha,
		Ref: "refs/heads/main", Source: "bench", Policy: p}, true)
	if err != nil {
		return nil, fmt.Errorf("set up %s: %w", env, err)
	}
	g, err := app.Gate(ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: names, Phase: "deploy",
		Holder: "setup", LeaseTTL: s.leaseTTL})
	if err != nil {
		return nil, fmt.Errorf("set up %s: %w", env, err)
	}
	if _, err := app.Complete(ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: names, Holder: g.Holder,
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		return nil, fmt.Errorf("set up %s: %w", env, err)
	}
	conflictsBefore := store.conflicts.Load()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d := &authDay{s: s, store: store, opts: opts, clk: clk, env: env, log: newDayLog(s, plan), signals: &scopeSignals{}, calls: &calls{}}
	var wg sync.WaitGroup
	day := clk.Now()
	before := setupSha
	var door, prev time.Time // when the last push was accepted, and when it arrived
	refused, acceptWait := 0, time.Duration(0)
	for i, push := range plan {
		if err := clk.sleepUntil(ctx, day.Add(push.at)); err != nil {
			break
		}
		in := authority.Intent{ID: fmt.Sprintf("%s-push-%d", env, i), Environment: env, Sha: pushSha(i), Ref: "refs/heads/main",
			Before: before, Source: "push", Actor: "dev"}
		for _, svc := range push.services {
			in.Scopes = append(in.Scopes, serviceName(svc))
		}
		arrived := clk.Now()
		if planned := day.Add(push.at); planned.Before(door) {
			// It came while the App was busy with the pushes before it, and not before them:
			// the Authority orders a branch's pushes by the time they were pushed.
			arrived = later(planned, prev)
		}
		prev = arrived
		in.Order.PushedAt = arrived.Truncate(time.Second)
		d.log.arrive(i, arrived)
		// A push refused for full queues (retryable: nothing was written) is asked again whenever
		// a service's state changes, and the pushes after it wait behind it: the App accepts the
		// pushes of a branch in order.
		var res *authority.AcceptResult
		for tries := 0; ; tries++ {
			room := d.signals.watch(anyScope)
			d.calls.time(func() { res, err = app.Accept(ctx, in, false) })
			if !errors.Is(err, authority.ErrQueueFull) {
				break
			}
			if tries == 0 {
				refused++
			}
			select {
			case <-room:
				continue
			case <-ctx.Done():
				err = ctx.Err()
			}
			break
		}
		door = clk.Now()
		acceptWait = max(acceptWait, door.Sub(arrived))
		if err != nil {
			cancel(fmt.Errorf("accept push %d: %w", i, err))
			break
		}
		if len(res.Accepted) != len(in.Scopes) {
			cancel(fmt.Errorf("push %d was accepted for %v of %v", i, res.Accepted, in.Scopes))
			break
		}
		before = in.Sha
		for _, sc := range in.Scopes {
			d.signals.signal(sc) // waiting older commits of these services are superseded
		}
		for k, svc := range push.services {
			wg.Go(func() {
				if err := d.job(ctx, i, res.Generation, svc, push.deploy[k]); err != nil {
					cancel(fmt.Errorf("push %d, %s: %w", i, serviceName(svc), err))
				}
			})
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	out, err := d.log.outcome(plan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	// What the Authority says agrees with what the services run.
	e, err := app.State(ctx, env)
	if err != nil {
		return nil, err
	}
	if e.Observed != e.Desired {
		return nil, fmt.Errorf("%s: observed %d of %d at the end of the day", p, e.Observed, e.Desired)
	}
	for svc, runs := range d.log.live {
		sc := e.Scopes[serviceName(svc)]
		want := setupSha
		if len(runs) > 0 {
			want = pushSha(runs[len(runs)-1].push)
		}
		if sc == nil || sc.Live == nil || sc.Live.Sha != want || sc.Mailbox != nil {
			return nil, fmt.Errorf("%s: the Authority says %s is %+v, the service runs %s", p, serviceName(svc), sc, want)
		}
	}
	out.callSimS = d.calls.mean(clk)
	out.requests = d.calls.n.Load()
	out.conflicts = store.conflicts.Load() - conflictsBefore
	out.refused, out.acceptWait = refused, acceptWait.Minutes()
	return out, nil
}

type authDay struct {
	s       daySetting
	store   authority.Store
	opts    []authority.Option
	clk     *simClock
	env     string
	log     *dayLog
	signals *scopeSignals
	calls   *calls
}

// job is the workflow job of push i for service svc: a latestwins run of the push's generation.
func (d *authDay) job(ctx context.Context, i int, gen int64, svc int, deploy time.Duration) error {
	a := authority.New(d.store, d.opts...)
	scope := serviceName(svc)
	var cr *authority.ClaimResult
	var err error
	d.calls.time(func() { cr, err = a.Claim(ctx, d.env, gen, []string{scope}) })
	if err != nil {
		return err
	}
	if len(cr.Claimed) == 0 {
		d.log.stopped() // a newer push took the service before this job started
		return nil
	}
	target, err := pushOf(cr.Claimed[0].Sha)
	if err != nil {
		return err
	}
	holder := fmt.Sprintf("push-%d-%s", i, scope)
	g, err := pass.Gate(ctx, &wakingGater{a: a, signals: d.signals, scope: scope, calls: d.calls},
		authority.GateRequest{Environment: d.env, Generation: gen, Scopes: []string{scope}, Phase: "deploy", Holder: holder, LeaseTTL: d.s.leaseTTL},
		time.Hour, nil)
	if errors.Is(err, authority.ErrSuperseded) {
		d.log.stopped()
		return nil
	}
	if err != nil {
		return err
	}
	// The deploy, renewing the lease every third of its TTL.
	start := d.clk.Now()
	end := start.Add(deploy)
	for renew := start.Add(d.s.leaseTTL / 3); renew.Before(end); renew = renew.Add(d.s.leaseTTL / 3) {
		if err := d.clk.sleepUntil(ctx, renew); err != nil {
			return err
		}
		d.calls.time(func() { err = a.Renew(ctx, g, d.s.leaseTTL) })
		if errors.Is(err, authority.ErrLeaseLost) {
			d.log.lapsed() // the machine stalled past the TTL and a newer push took the service
			return nil
		}
		if err != nil {
			return err
		}
	}
	if err := d.clk.sleepUntil(ctx, end); err != nil {
		return err
	}
	live := d.clk.Now()
	var res *authority.CompleteResult
	d.calls.time(func() {
		res, err = a.Complete(ctx, authority.Completion{Environment: d.env, Generation: gen, Scopes: []string{scope}, Holder: holder,
			Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3, Run: holder})
	})
	if errors.Is(err, authority.ErrLeaseLost) {
		// The deploy publishes under its lease, as a fenced deploy does: one whose lease lapsed
		// publishes nothing, and the newer push that took the service deploys it.
		d.log.lapsed()
		return nil
	}
	if err != nil {
		return err
	}
	d.log.wentLive(svc, target, live)
	if res.Results[scope] != authority.ResultDeployed {
		return fmt.Errorf("the service runs push %d, but its completion was recorded as %s", target, res.Results[scope])
	}
	d.signals.signal(scope)
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// stepClock is a clock that stands still until set: the serialized-lock model's.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// lockDay plays the day under the serialized-lock model. Push i takes the environment's lock (a
// named lease of the Authority, on a memory store) once it has arrived and push i-1 released it,
// deploys all its services in parallel, renewing the lock every third of its TTL, and releases it
// when the last of them is done; the next push to arrive meanwhile asks for the lock first and is
// refused. The lock's turns follow one another with nothing between them, so the day is played on
// a clock the model sets from one event to the next rather than in real time: every hand-off is
// immediate, the model's best case, and a day that takes days to drain costs milliseconds.
func lockDay(ctx context.Context, s daySetting, plan []dayPush) (*dayOutcome, error) {
	clk := &stepClock{t: time.Now()}
	store := &conflictStore{Store: memory.New()}
	a := authority.New(store, authority.WithClock(clk))
	lock := fmt.Sprintf("monorepo-lock-%d", runs.Add(1))
	log := newDayLog(s, plan)
	day := clk.Now()
	free := day // when the lock was last released
	var token int64
	for i, push := range plan {
		arrived := day.Add(push.at)
		log.arrive(i, arrived)
		start := later(arrived, free)
		clk.set(start)
		g, err := a.Acquire(ctx, lock, fmt.Sprintf("push-%d", i), "deploy", s.leaseTTL)
		if err != nil {
			return nil, fmt.Errorf("serialized-lock: push %d: take the lock: %w", i, err)
		}
		if g.Tokens[lock] <= token {
			return nil, fmt.Errorf("serialized-lock: push %d took the lock with token %d after %d", i, g.Tokens[lock], token)
		}
		token = g.Tokens[lock]
		end := start
		for k, svc := range push.services {
			log.wentLive(svc, i, start.Add(push.deploy[k]))
			end = later(end, start.Add(push.deploy[k]))
		}
		// The next push, when it arrives before this one is done, asks for the lock and waits.
		var ask time.Time
		if i+1 < len(plan) {
			if next := day.Add(plan[i+1].at); next.Before(end) {
				ask = later(next, start)
			}
		}
		refused := func() error {
			clk.set(ask)
			ask = time.Time{}
			_, err := a.Acquire(ctx, lock, fmt.Sprintf("push-%d", i+1), "deploy", s.leaseTTL)
			if !errors.Is(err, authority.ErrLeaseHeld) {
				return fmt.Errorf("serialized-lock: push %d asked for the lock while push %d held it: %v", i+1, i, err)
			}
			return nil
		}
		for renew := start.Add(s.leaseTTL / 3); renew.Before(end); renew = renew.Add(s.leaseTTL / 3) {
			if !ask.IsZero() && !ask.After(renew) {
				if err := refused(); err != nil {
					return nil, err
				}
			}
			clk.set(renew)
			if err := a.RenewNamed(ctx, g, s.leaseTTL); err != nil {
				return nil, fmt.Errorf("serialized-lock: push %d: renew the lock: %w", i, err)
			}
		}
		if !ask.IsZero() {
			if err := refused(); err != nil {
				return nil, err
			}
		}
		clk.set(end)
		if err := a.ReleaseNamed(ctx, g); err != nil {
			return nil, fmt.Errorf("serialized-lock: push %d: release the lock: %w", i, err)
		}
		free = end
	}
	out, err := log.outcome(plan)
	if err != nil {
		return nil, fmt.Errorf("serialized-lock: %w", err)
	}
	out.conflicts = store.conflicts.Load()
	return out, nil
}

// dayModels are the models in the order they run and are reported.
var dayModels = []string{"latest", "queue", "serialized-lock"}

// playDay plays the day under every model, one after the other.
func playDay(ctx context.Context, s daySetting, plan []dayPush) (map[string]*dayOutcome, error) {
	out := map[string]*dayOutcome{}
	var err error
	if out["latest"], err = authorityDay(ctx, s, plan, authority.PolicyLatest); err != nil {
		return nil, err
	}
	if out["queue"], err = authorityDay(ctx, s, plan, authority.PolicyQueue); err != nil {
		return nil, err
	}
	if out["serialized-lock"], err = lockDay(ctx, s, plan); err != nil {
		return nil, err
	}
	return out, nil
}

func pairsOf(plan []dayPush) int {
	n := 0
	for _, p := range plan {
		n += len(p.services)
	}
	return n
}

// checkDeploys checks what each model must have deployed: every pair under queue and the lock,
// and under latest each pair either deployed or stopped. Under latest a job whose lease lapsed
// (its process stalled past the TTL on a loaded machine, and a newer push took the service)
// published nothing and is counted apart: outcome has already checked that a newer push went live
// in its place. Under queue nothing takes a lapsed lease (the next commit waits for the one
// ahead of it to end), so none may lapse.
func checkDeploys(plan []dayPush, out map[string]*dayOutcome) error {
	pairs := pairsOf(plan)
	for _, m := range []string{"queue", "serialized-lock"} {
		if o := out[m]; o.deploys != pairs || o.lapses != 0 || o.superseded != 0 {
			return fmt.Errorf("%s ran %d deploys, lost %d leases and stopped %d jobs; want all %d pairs deployed", m, o.deploys, o.lapses, o.superseded, pairs)
		}
	}
	if o := out["latest"]; o.deploys+o.superseded+o.lapses != pairs {
		return fmt.Errorf("latest ran %d deploys, lost %d leases and stopped %d jobs of %d pairs", o.deploys, o.lapses, o.superseded, pairs)
	}
	return nil
}

// TestMonorepoDay plays testDay (23 pushes in an hour on 300 services, 259 pairs), then hotTestDay
// (12 pushes in an hour on hot services, 130 pairs), under every model, and fails when a guarantee
// broke. It asserts nothing on time.
func TestMonorepoDay(t *testing.T) {
	for _, d := range []struct {
		name string
		s    daySetting
	}{{"uniform", testDay}, {"hot", hotTestDay}} {
		t.Run(d.name, func(t *testing.T) {
			plan := d.s.plan()
			out, err := playDay(t.Context(), d.s, plan)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkDeploys(plan, out); err != nil {
				t.Fatal(err)
			}
			for _, p := range []authority.Policy{authority.PolicyLatest, authority.PolicyQueue} {
				ideal, err := idealDay(d.s, plan, p)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("%s if requests took no time: p50 %.1f min, p95 %.1f min, %d deploys", p, percentile(ideal.toLive, 0.5), percentile(ideal.toLive, 0.95), ideal.deploys)
			}
			for _, m := range dayModels {
				o := out[m]
				t.Logf("%s: p50 %.1f min, p95 %.1f min, %d deploys of %d pairs (%d pushes), %d leases lapsed", m, percentile(o.toLive, 0.5), percentile(o.toLive, 0.95),
					o.deploys, pairsOf(plan), len(plan), o.lapses)
			}
		})
	}
}

// idealDay is what the Authority's model with policy p would measure if every request took no
// time: each service on its own, in simulated time alone. Under latest a service deploys one
// commit at a time; a push that arrives meanwhile waits, and supersedes the one waiting before it.
func idealDay(s daySetting, plan []dayPush, p authority.Policy) (*dayOutcome, error) {
	log := newDayLog(s, plan)
	var day time.Time
	type arrival struct {
		push int
		at   time.Duration
		dur  time.Duration
	}
	per := make([][]arrival, s.services)
	for i, push := range plan {
		log.arrive(i, day.Add(push.at))
		for k, svc := range push.services {
			per[svc] = append(per[svc], arrival{i, push.at, push.deploy[k]})
		}
	}
	for svc, arrivals := range per {
		var end time.Duration // when the deploy in flight ends
		var waiting *arrival
		deploy := func(w arrival, from time.Duration) {
			end = from + w.dur
			log.wentLive(svc, w.push, day.Add(end))
		}
		for _, a := range arrivals {
			if p == authority.PolicyQueue {
				deploy(a, max(a.at, end))
				continue
			}
			if waiting != nil && end <= a.at {
				deploy(*waiting, end)
				waiting = nil
			}
			switch {
			case end <= a.at:
				deploy(a, a.at)
			case waiting != nil:
				log.stopped()
				waiting = &a
			default:
				waiting = &a
			}
		}
		if waiting != nil {
			deploy(*waiting, end)
		}
	}
	return log.outcome(plan)
}

// ownDeploys are the deploy times of every (push, service) pair: the push-to-live a pair would
// have if it never waited and the Authority took no time.
func ownDeploys(plan []dayPush) []float64 {
	var out []float64
	for _, p := range plan {
		for _, d := range p.deploy {
			out = append(out, d.Minutes())
		}
	}
	return out
}

// hottest is how many pairs of the day fall on its n most pushed services, and how many pushes the
// most pushed one got.
func hottest(s daySetting, plan []dayPush, n int) (pairs, top int) {
	count := make([]int, s.services)
	for _, p := range plan {
		for _, svc := range p.services {
			count[svc]++
		}
	}
	slices.SortFunc(count, func(a, b int) int { return b - a })
	for _, c := range count[:n] {
		pairs += c
	}
	return pairs, count[0]
}

// BenchmarkMonorepoDay plays monorepoDay (uniform) and hotDay (hot) under the three models, one
// day after the other in the same run, and reports per day and model the p50 and p95 of
// push-to-live in simulated minutes over every (push, service) pair, the deploys it ran, and under
// the Authority's models the requests, the mean one in simulated seconds, and the conditional
// writes that lost a race; and, as the floor, the p50 and p95 of the pairs' own deploy times, and
// what the Authority's models would measure if its requests took no time (idealDay), which knows
// nothing of the bound on waiting intents. refused is how many pushes the Authority refused at
// first for full queues, accept-wait-max-min the longest a push waited from its arrival until it
// was accepted (behind a refused push, or behind slow accepts), which its push-to-live counts.
// hot10-pairs is how many pairs fall on the day's 10 most pushed services, hottest-pushes how many
// pushes its most pushed one got.
//
// By default it plays TestMonorepoDay's hours, so that every benchmark run once stays quick;
// LATESTWINS_BENCH_DAY=full plays the whole days, about 80 s on two cores.
func BenchmarkMonorepoDay(b *testing.B) {
	uniform, hot := testDay, hotTestDay
	switch v := os.Getenv("LATESTWINS_BENCH_DAY"); v {
	case "", "hour":
	case "full":
		uniform, hot = monorepoDay, hotDay
	default:
		b.Fatalf("LATESTWINS_BENCH_DAY is %q; set it to full (the 8-hour days) or hour (the default, an hour each)", v)
	}
	for _, d := range []struct {
		name string
		s    daySetting
	}{{"uniform", uniform}, {"hot", hot}} {
		b.Run(d.name, func(b *testing.B) { benchmarkDay(b, d.s) })
	}
}

func benchmarkDay(b *testing.B, s daySetting) {
	plan := s.plan()
	toLive := map[string][]float64{}
	deploys := map[string]int{}
	lapses := map[string]int{}
	callSimS := map[string]float64{}
	requests := map[string]int64{}
	conflicts := map[string]int64{}
	refused := map[string]int{}
	acceptWait := map[string]float64{}
	iterations := 0
	for b.Loop() {
		out, err := playDay(b.Context(), s, plan)
		if err != nil {
			b.Fatal(err)
		}
		if err := checkDeploys(plan, out); err != nil {
			b.Fatal(err)
		}
		for _, m := range dayModels {
			toLive[m] = append(toLive[m], out[m].toLive...)
			deploys[m] += out[m].deploys
			lapses[m] += out[m].lapses
			callSimS[m] += out[m].callSimS
			requests[m] += out[m].requests
			conflicts[m] += out[m].conflicts
			refused[m] += out[m].refused
			acceptWait[m] = max(acceptWait[m], out[m].acceptWait)
		}
		iterations++
	}
	for _, m := range dayModels {
		b.ReportMetric(percentile(toLive[m], 0.5), m+"-p50-min")
		b.ReportMetric(percentile(toLive[m], 0.95), m+"-p95-min")
		b.ReportMetric(float64(deploys[m])/float64(iterations), m+"-deploys")
		b.ReportMetric(float64(lapses[m])/float64(iterations), m+"-lapses")
		if m != "serialized-lock" { // its clock stands still while the Authority works
			b.ReportMetric(callSimS[m]/float64(iterations), m+"-call-sim-s")
			b.ReportMetric(float64(requests[m])/float64(iterations), m+"-requests")
			b.ReportMetric(float64(conflicts[m])/float64(iterations), m+"-conflicts")
			b.ReportMetric(float64(refused[m])/float64(iterations), m+"-refused")
			b.ReportMetric(acceptWait[m], m+"-accept-wait-max-min")
		}
	}
	for _, p := range []authority.Policy{authority.PolicyLatest, authority.PolicyQueue} {
		ideal, err := idealDay(s, plan, p)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(percentile(ideal.toLive, 0.5), string(p)+"-ideal-p50-min")
		b.ReportMetric(percentile(ideal.toLive, 0.95), string(p)+"-ideal-p95-min")
		b.ReportMetric(float64(ideal.deploys), string(p)+"-ideal-deploys")
	}
	own := ownDeploys(plan)
	b.ReportMetric(percentile(own, 0.5), "own-deploy-p50-min")
	b.ReportMetric(percentile(own, 0.95), "own-deploy-p95-min")
	b.ReportMetric(float64(len(plan)), "pushes")
	b.ReportMetric(float64(pairsOf(plan)), "pairs")
	hot10, top := hottest(s, plan, 10)
	b.ReportMetric(float64(hot10), "hot10-pairs")
	b.ReportMetric(float64(top), "hottest-pushes")
}
