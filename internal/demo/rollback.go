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
	passstep "github.com/latestwins/latestwins/internal/pass"
	"github.com/latestwins/latestwins/internal/report"
)

// RunRollback stages a rollback: A is live and B is building when an operator rolls back to A. The
// rollback jumps ahead (B is superseded and deploys nothing) and freezes the scope; C, pushed
// afterwards, is recorded but held at its deploy gate until the operator unfreezes the scope. It
// checks that and reports breaks.
func RunRollback(ctx context.Context, a *authority.Authority, w io.Writer, o Options) (*Result, error) {
	res := &Result{}
	var mu sync.Mutex // C's pass reports from its own goroutine
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		line := fmt.Sprintf(format, args...)
		res.Log = append(res.Log, line)
		fmt.Fprintf(w, "  %s\n", line)
	}
	violate := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
	A := &pass{name: "A", sha: "aaaaaaa1" + strings.Repeat("0", 32)}
	B := &pass{name: "B", sha: "bbbbbbb2" + strings.Repeat("0", 32)}
	C := &pass{name: "C", sha: "ccccccc3" + strings.Repeat("0", 32)}
	fmt.Fprintf(w, "Rollback in %q, scope %q: A is live, B is building, an operator rolls back to A; C is pushed while the scope is frozen.\n\n", o.Environment, o.Scope)
	run := fmt.Sprint(time.Now().UnixNano())
	accept := func(p *pass) error {
		ar, err := a.Accept(ctx, authority.Intent{ID: "demo-" + p.name + "-" + run, Environment: o.Environment, Scopes: []string{o.Scope},
			Sha: p.sha, Ref: "refs/heads/main", Source: "push", Actor: "demo", Order: authority.Order{PushedAt: a.Now()}}, true)
		if err != nil {
			return err
		}
		p.gen = ar.Generation
		say("%s (%s) pushed: accepted as generation %d", p.name, p.sha[:7], p.gen)
		return nil
	}
	deploy := func(name string, gen int64, wait func(*authority.HeldError)) error {
		holder := "demo-" + name
		req := authority.GateRequest{Environment: o.Environment, Generation: gen, Scopes: []string{o.Scope}, Phase: "deploy", Holder: holder, LeaseTTL: o.LeaseTTL}
		g, err := passstep.Gate(ctx, a, req, time.Minute, func(held *authority.HeldError, _, _ time.Duration) {
			if wait != nil {
				wait(held)
			}
		})
		if err != nil {
			return err
		}
		say("%s entered deploy with fencing token %d", name, g.Tokens[o.Scope])
		if err := pause(ctx, o.Deploy); err != nil {
			return err
		}
		cr, err := a.Complete(ctx, authority.Completion{Environment: o.Environment, Generation: gen, Scopes: []string{o.Scope},
			Holder: holder, Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3, Run: "demo/" + name})
		if err != nil {
			return err
		}
		if cr.Results[o.Scope] != authority.ResultDeployed {
			return fmt.Errorf("completed %s", cr.Results[o.Scope])
		}
		say("%s is live (generation %d)", name, gen)
		return nil
	}

	if err := accept(A); err != nil {
		return nil, err
	}
	if err := deploy("A", A.gen, nil); err != nil {
		return nil, fmt.Errorf("deploy A: %w", err)
	}
	if err := accept(B); err != nil {
		return nil, err
	}
	say("B entered its build")
	rb, err := a.Rollback(ctx, authority.RollbackRequest{Environment: o.Environment, Scope: o.Scope, To: A.sha, Actor: "oncall",
		Reason: "B breaks checkout", Request: "demo-" + run})
	if err != nil {
		return nil, err
	}
	say("oncall rolls %s back to A: generation %d, ahead of B; the scope is frozen", o.Scope, rb.Generation)
	if err := pause(ctx, o.Build); err != nil {
		return nil, err
	}
	say("B finished its build")
	_, err = a.Gate(ctx, authority.GateRequest{Environment: o.Environment, Generation: B.gen, Scopes: []string{o.Scope}, Phase: "deploy", Holder: "demo-B", LeaseTTL: o.LeaseTTL})
	var sup *authority.SupersededError
	if errors.As(err, &sup) {
		say("B stopped before deploy: %s", report.Escape(sup.Error()))
	} else {
		violate("B's deploy gate after the rollback answered %v; want superseded", err)
	}
	if err := deploy("the rollback to A", rb.Generation, nil); err != nil {
		return nil, fmt.Errorf("deploy the rollback: %w", err)
	}
	if err := accept(C); err != nil {
		return nil, err
	}
	say("C entered its build")
	if err := pause(ctx, o.Build); err != nil {
		return nil, err
	}
	say("C finished its build")
	held := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- deploy("C", C.gen, func(h *authority.HeldError) {
			if h.Frozen != nil {
				select {
				case held <- report.Waiting(h):
				default:
				}
			}
		})
	}()
	select {
	case why := <-held:
		say("C waits at the deploy gate: %s", why)
	case err := <-done:
		violate("C deployed while the scope was frozen (%v)", err)
		done <- err
	}
	if sc := mustScope(ctx, a, o, violate); sc != nil && (sc.Live == nil || sc.Live.Sha != A.sha) {
		violate("while frozen, live is not A")
	}
	f, err := a.Unfreeze(ctx, authority.UnfreezeRequest{Environment: o.Environment, Scope: o.Scope, Freeze: rb.Generation, Actor: "oncall", Reason: "fixed forward in C"})
	if err != nil {
		return nil, err
	}
	say("oncall unfreezes %s, naming freeze %d (the rollback to %s): C goes", o.Scope, f.Generation, f.Sha[:7])
	if err := <-done; err != nil {
		violate("C after unfreeze: %v", err)
	}
	e, err := a.Status(ctx, o.Environment)
	if err != nil {
		return nil, err
	}
	res.Env = e
	if sc := e.Scopes[o.Scope]; sc == nil || sc.Live == nil || sc.Live.Sha != C.sha || sc.Freeze != nil {
		violate("at the end, live is not C or the scope is still frozen")
	}
	for _, ev := range e.Events {
		if ev.Kind == authority.EventDeployed && ev.Sha == B.sha {
			violate("B deployed after the rollback")
		}
	}
	fmt.Fprintln(w, "\nTimeline:")
	_ = report.TimelineText(&indent{w: w}, e.Events)
	fmt.Fprintln(w, "\nStatus:")
	_ = report.StatusText(&indent{w: w}, e, a.Now())
	return res, nil
}

func mustScope(ctx context.Context, a *authority.Authority, o Options, violate func(string, ...any)) *authority.Scope {
	e, err := a.Status(ctx, o.Environment)
	if err != nil {
		violate("status: %v", err)
		return nil
	}
	return e.Scopes[o.Scope]
}
