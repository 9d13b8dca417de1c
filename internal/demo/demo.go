// Package demo stages the forced A -> B -> C race: three commits deploy into one environment; A and B
// are held inside their builds while C, accepted later, builds, deploys and goes live; then A and B
// finish their builds and deploy nothing. It checks the guarantees on the way and reports breaks.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// Options sets the environment and how long the simulated build and deploy steps take.
type Options struct {
	Environment string
	Scope       string
	Build       time.Duration
	Deploy      time.Duration
	LeaseTTL    time.Duration
}

// DefaultOptions are quick enough for a terminal and slow enough to read.
func DefaultOptions() Options {
	return Options{Environment: "demo", Scope: "api", Build: 400 * time.Millisecond, Deploy: 200 * time.Millisecond, LeaseTTL: 30 * time.Second}
}

// Result is what the demo observed.
type Result struct {
	Env        *authority.Env
	Violations []string
	// CToLive is C's time from acceptance to live; COwnWork is its own build plus deploy time.
	CToLive  time.Duration
	COwnWork time.Duration
	Log      []string
}

type pass struct {
	name   string
	sha    string
	parent string
	gen    int64
	// built is closed when the pass has finished its build and asked to deploy.
	deployed bool
	stopped  error
}

// Run stages the race on a, writing a narrative to w.
func Run(ctx context.Context, a *authority.Authority, w io.Writer, o Options) (*Result, error) {
	res := &Result{}
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf(format, args...)
		res.Log = append(res.Log, line)
		fmt.Fprintf(w, "  %s\n", line)
	}
	violate := func(format string, args ...any) {
		mu.Lock()
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	env := o.Environment
	passes := []*pass{
		{name: "A", sha: "aaaaaaa1" + strings.Repeat("0", 32), parent: "0000000" + strings.Repeat("0", 33)},
		{name: "B", sha: "bbbbbbb2" + strings.Repeat("0", 32)},
		{name: "C", sha: "ccccccc3" + strings.Repeat("0", 32)},
	}
	passes[1].parent, passes[2].parent = passes[0].sha, passes[1].sha

	cLive := make(chan struct{})    // closed when C is done: A and B are held in their builds until then
	inBuild := make(chan string, 3) // each pass says when it has entered its build
	// A pass that fails stops the others (cancel), and C's end always frees A and B (closeLive),
	// so that an error ends the demo with a non-zero exit instead of a hang.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var once sync.Once
	closeLive := func() { once.Do(func() { close(cLive) }) }
	var wg sync.WaitGroup
	start := func(p *pass) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p.name == "C" {
				defer closeLive()
			}
			if err := runPass(ctx, a, o, p, cLive, inBuild, say, res); err != nil {
				violate("pass %s: %v", p.name, err)
				cancel()
			}
		}()
	}
	fmt.Fprintf(w, "Forced race in %q, scope %q: A and B are held in their builds until C is live.\n\n", env, o.Scope)
	start(passes[0])
	err := waitFor(ctx, inBuild, "A")
	if err == nil {
		start(passes[1])
		err = waitFor(ctx, inBuild, "B")
	}
	if err == nil {
		start(passes[2])
	}
	wg.Wait()
	if err != nil {
		return nil, fmt.Errorf("the race did not get under way: %w (%s)", err, strings.Join(res.Violations, "; "))
	}

	e, err := a.Status(ctx, env)
	if err != nil {
		return nil, err
	}
	res.Env = e
	check(res, e, passes, o, violate)
	fmt.Fprintln(w, "\nTimeline:")
	_ = report.TimelineText(&indent{w: w}, e.Events)
	fmt.Fprintln(w, "\nStatus:")
	_ = report.StatusText(&indent{w: w}, e, a.Now())
	fmt.Fprintf(w, "\nC went live %s after it was accepted; its own build and deploy took %s (%.0f%% overhead), while A and B were still building.\n",
		res.CToLive.Round(time.Millisecond), res.COwnWork.Round(time.Millisecond), 100*(float64(res.CToLive)/float64(res.COwnWork)-1))
	return res, nil
}

func waitFor(ctx context.Context, ch <-chan string, name string) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case got := <-ch:
		if got != name {
			return fmt.Errorf("expected %s to enter its build, got %s", name, got)
		}
		return nil
	}
}

func runPass(ctx context.Context, a *authority.Authority, o Options, p *pass, cLive chan struct{}, inBuild chan<- string, say func(string, ...any), res *Result) error {
	accepted := time.Now()
	ar, err := a.Accept(ctx, authority.Intent{ID: "demo-" + p.name + "-" + fmt.Sprint(time.Now().UnixNano()), Environment: o.Environment,
		Scopes: []string{o.Scope}, Sha: p.sha, Ref: "refs/heads/main", Before: p.parent, Source: "push", Actor: "demo"}, true)
	if err != nil {
		return err
	}
	p.gen = ar.Generation
	if ar.Claim == nil || len(ar.Claim.Claimed) != 1 {
		return fmt.Errorf("accept did not claim %s", o.Scope)
	}
	say("%s (%s) accepted as generation %d and claimed %s", p.name, p.sha[:7], p.gen, o.Scope)
	if _, err := a.Gate(ctx, authority.GateRequest{Environment: o.Environment, Generation: p.gen, Scopes: []string{o.Scope}, Phase: "build"}); err != nil {
		return fmt.Errorf("gate build: %w", err)
	}
	say("%s entered its build", p.name)
	buildStart := time.Now()
	inBuild <- p.name
	if p.name == "C" {
		if err := pause(ctx, o.Build); err != nil {
			return err
		}
	} else {
		// A and B: the build is held until C is live, then takes its normal time.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-cLive:
		}
		if err := pause(ctx, o.Build); err != nil {
			return err
		}
	}
	buildTime := time.Since(buildStart)
	say("%s finished its build", p.name)
	holder := "demo-" + p.name
	g, err := a.Gate(ctx, authority.GateRequest{Environment: o.Environment, Generation: p.gen, Scopes: []string{o.Scope}, Phase: "deploy",
		Holder: holder, LeaseTTL: o.LeaseTTL})
	if err != nil {
		if errors.Is(err, authority.ErrSuperseded) {
			p.stopped = err
			say("%s stopped at the deploy gate: %v", p.name, unwrapSuperseded(err))
			return nil
		}
		return fmt.Errorf("gate deploy: %w", err)
	}
	say("%s entered deploy with fencing token %d", p.name, g.Tokens[o.Scope])
	deployStart := time.Now()
	if err := pause(ctx, o.Deploy); err != nil {
		return err
	}
	deployTime := time.Since(deployStart)
	cr, err := a.Complete(ctx, authority.Completion{Environment: o.Environment, Generation: p.gen, Scopes: []string{o.Scope},
		Holder: holder, Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3, Run: "demo/" + p.name})
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if cr.Results[o.Scope] == authority.ResultDeployed {
		p.deployed = true
		say("%s is live (generation %d)", p.name, p.gen)
	} else {
		say("%s finished deploying but was superseded: %s", p.name, cr.Results[o.Scope])
	}
	if p.name == "C" {
		res.CToLive = time.Since(accepted)
		res.COwnWork = buildTime + deployTime
	}
	return nil
}

func unwrapSuperseded(err error) error {
	var sup *authority.SupersededError
	if errors.As(err, &sup) {
		return sup
	}
	return err
}

// check verifies what the race must show.
func check(res *Result, e *authority.Env, passes []*pass, o Options, violate func(string, ...any)) {
	a, b, c := passes[0], passes[1], passes[2]
	if !(a.gen < b.gen && b.gen < c.gen) {
		violate("generations not strictly increasing: A=%d B=%d C=%d", a.gen, b.gen, c.gen)
	}
	for _, p := range []*pass{a, b} {
		if p.deployed {
			violate("%s deployed stale output after C", p.name)
		}
		if p.stopped == nil {
			violate("%s was not stopped at its deploy gate", p.name)
		}
	}
	if !c.deployed {
		violate("C, the newest commit, did not deploy")
	}
	sc := e.Scopes[o.Scope]
	if sc == nil || sc.Live == nil || sc.Live.Sha != c.sha || sc.Live.Generation != c.gen {
		violate("live is not C at generation %d", c.gen)
	}
	if e.Observed != e.Desired {
		violate("not settled: observed %d of %d", e.Observed, e.Desired)
	}
	var lastLive int64
	for _, ev := range e.Events {
		if ev.Kind == authority.EventDeployed {
			if ev.Generation < lastLive {
				violate("live generation went back from %d to %d", lastLive, ev.Generation)
			}
			lastLive = ev.Generation
			if ev.Sha != c.sha {
				violate("deployed %s, which is not the newest commit", ev.Sha[:7])
			}
		}
	}
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// indent prefixes every line written through it with two spaces.
type indent struct {
	w     io.Writer
	begun bool
}

func (i *indent) Write(p []byte) (int, error) {
	var b strings.Builder
	for _, r := range string(p) {
		if !i.begun {
			b.WriteString("  ")
			i.begun = true
		}
		b.WriteRune(r)
		if r == '\n' {
			i.begun = false
		}
	}
	if _, err := io.WriteString(i.w, b.String()); err != nil {
		return 0, err
	}
	return len(p), nil
}
