package demo

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	passstep "github.com/latestwins/latestwins/internal/pass"
	"github.com/latestwins/latestwins/internal/report"
)

// RunQueue stages the same three commits under policy queue: A, B and C are accepted in that
// order and build at once; each waits at its deploy gate until every older one has its outcome,
// so A, B and C deploy in order and none is superseded. It checks that and reports breaks.
func RunQueue(ctx context.Context, a *authority.Authority, w io.Writer, o Options) (*Result, error) {
	res := &Result{}
	var mu sync.Mutex
	var deployed []string
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
	passes := []*pass{
		{name: "A", sha: "aaaaaaa1" + strings.Repeat("0", 32)},
		{name: "B", sha: "bbbbbbb2" + strings.Repeat("0", 32)},
		{name: "C", sha: "ccccccc3" + strings.Repeat("0", 32)},
	}
	fmt.Fprintf(w, "Policy queue in %q, scope %q: A, B and C are pushed one after the other and build at once; each deploys only after every older one.\n\n", o.Environment, o.Scope)
	for _, p := range passes {
		ar, err := a.Accept(ctx, authority.Intent{ID: "demo-" + p.name + "-" + fmt.Sprint(time.Now().UnixNano()), Environment: o.Environment,
			Scopes: []string{o.Scope}, Sha: p.sha, Ref: "refs/heads/main", Source: "push", Actor: "demo", Policy: authority.PolicyQueue}, true)
		if err != nil {
			return nil, err
		}
		p.gen = ar.Generation
		if ar.Claim == nil || len(ar.Claim.Claimed) != 1 {
			return nil, fmt.Errorf("accept did not claim %s for %s", o.Scope, p.name)
		}
		place := "at the head of the queue"
		if n := ar.Ahead[o.Scope]; n > 0 {
			place = fmt.Sprintf("queued: %d ahead of this commit", n)
		}
		say("%s (%s) accepted as generation %d and claimed %s, %s", p.name, p.sha[:7], p.gen, o.Scope, place)
	}
	started := time.Now()
	var cLive time.Duration
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range passes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := queuePass(ctx, a, o, p, say, func() {
				mu.Lock()
				deployed = append(deployed, p.name)
				if p.name == "C" {
					cLive = time.Since(started)
				}
				mu.Unlock()
			}); err != nil {
				violate("pass %s: %v", p.name, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	e, err := a.Status(ctx, o.Environment)
	if err != nil {
		return nil, err
	}
	res.Env, res.CToLive = e, cLive
	if got := strings.Join(deployed, ", "); got != "A, B, C" {
		violate("deployed %s; want A, B, C in that order", got)
	}
	if sc := e.Scopes[o.Scope]; sc == nil || sc.Live == nil || sc.Live.Sha != passes[2].sha {
		violate("live is not C")
	}
	if e.Observed != e.Desired {
		violate("not settled: observed %d of %d", e.Observed, e.Desired)
	}
	for _, ev := range e.Events {
		if ev.Kind == authority.EventSuperseded {
			violate("generation %d was superseded under policy queue", ev.Generation)
		}
	}
	fmt.Fprintln(w, "\nTimeline:")
	_ = report.TimelineText(&indent{w: w}, e.Events)
	fmt.Fprintln(w, "\nStatus:")
	_ = report.StatusText(&indent{w: w}, e, a.Now())
	fmt.Fprintf(w, "\nA, B and C all deployed, in order; C went live %s after the builds began.\n", cLive.Round(time.Millisecond))
	return res, nil
}

// queuePass builds, waits its turn at the deploy gate, deploys and completes.
func queuePass(ctx context.Context, a *authority.Authority, o Options, p *pass, say func(string, ...any), live func()) error {
	say("%s entered its build", p.name)
	if err := pause(ctx, o.Build); err != nil {
		return err
	}
	say("%s finished its build", p.name)
	holder := "demo-" + p.name
	req := authority.GateRequest{Environment: o.Environment, Generation: p.gen, Scopes: []string{o.Scope}, Phase: "deploy", Holder: holder, LeaseTTL: o.LeaseTTL}
	g, err := passstep.Gate(ctx, a, req, time.Minute, func(held *authority.HeldError, _, _ time.Duration) {
		if wait := report.Waiting(held); wait != "" {
			say("%s waits at the deploy gate: %s", p.name, wait)
		}
	})
	if err != nil {
		return fmt.Errorf("gate deploy: %w", err)
	}
	say("%s entered deploy with fencing token %d", p.name, g.Tokens[o.Scope])
	if err := pause(ctx, o.Deploy); err != nil {
		return err
	}
	cr, err := a.Complete(ctx, authority.Completion{Environment: o.Environment, Generation: p.gen, Scopes: []string{o.Scope},
		Holder: holder, Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3, Run: "demo/" + p.name})
	if err != nil {
		return fmt.Errorf("complete: %w", err)
	}
	if cr.Results[o.Scope] != authority.ResultDeployed {
		return fmt.Errorf("completed %s", cr.Results[o.Scope])
	}
	p.deployed = true
	live()
	say("%s is live (generation %d)", p.name, p.gen)
	return nil
}
