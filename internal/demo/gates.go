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

// Clock is the simulated time the gates scenario runs on: soak times and change windows pass in
// an instant. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now implements authority.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// GatesStart is when the gates scenario begins: a Monday, 07:00 in Berlin.
var GatesStart = time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)

// gatesProduction is the scenario's production: it requires staging, a commit soaks there for 30
// minutes, one person approves it, and it deploys from Monday to Thursday between 09:00 and 17:00
// Berlin time.
func gatesProduction() *authority.Gates {
	return &authority.Gates{
		Soak:      &authority.Soak{For: 30 * time.Minute},
		Approvals: &authority.ApprovalRule{Count: 1},
		Windows: &authority.Windows{Timezone: "Europe/Berlin",
			Allow: []authority.WindowPeriod{{Start: "0 9 * * 1-4", Duration: 8 * time.Hour}}},
	}
}

// RunGates stages the gates of a production that needs no Enterprise plan, on clk: commits A, B
// and C go live in staging one after the other before the change window opens; production holds
// each while it soaks (each newer one superseding the older), then the newest until someone
// approves it, then until the window opens; then C deploys, and A and B never do. The Authority must run on clk. It
// checks what each gate said and reports breaks.
func RunGates(ctx context.Context, a *authority.Authority, clk *Clock, w io.Writer, o Options) (*Result, error) {
	res := &Result{}
	say := func(format string, args ...any) {
		line := fmt.Sprintf(format, args...)
		res.Log = append(res.Log, line)
		fmt.Fprintf(w, "  %s %s\n", clk.Now().In(berlin()).Format("Mon 15:04"), line)
	}
	violate := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
	staging, prod := o.Environment+"-staging", o.Environment+"-production"
	req := &authority.Requirements{Environments: []string{staging}}
	commits := []*pass{
		{name: "A", sha: "aaaaaaa1" + strings.Repeat("0", 32)},
		{name: "B", sha: "bbbbbbb2" + strings.Repeat("0", 32)},
		{name: "C", sha: "ccccccc3" + strings.Repeat("0", 32)},
	}
	fmt.Fprintf(w, "Gates without an Enterprise plan, on a simulated clock (Europe/Berlin). %q requires %q, soaks there 30m, needs one approval, and deploys Mon-Thu 09:00-17:00.\n\n", prod, staging)
	deploy := func(env string, gen int64, holder string) (*authority.HeldError, error) {
		g, err := a.Gate(ctx, authority.GateRequest{Environment: env, Generation: gen, Scopes: []string{o.Scope}, Phase: "deploy", Holder: holder, LeaseTTL: o.LeaseTTL})
		var held *authority.HeldError
		if errors.As(err, &held) {
			return held, nil
		}
		if err != nil {
			return nil, err
		}
		if _, err := a.Complete(ctx, authority.Completion{Environment: env, Generation: gen, Scopes: []string{o.Scope}, Holder: holder,
			Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3, Run: "demo/" + holder}); err != nil {
			return nil, err
		}
		return nil, nil
	}
	intent := func(env, name, sha string, gates *authority.Gates, requires *authority.Requirements) authority.Intent {
		return authority.Intent{ID: fmt.Sprintf("demo-%s-%s-%d", env, name, time.Now().UnixNano()), Environment: env, Scopes: []string{o.Scope},
			Sha: sha, Ref: "refs/heads/main", Source: "push", Actor: "demo", Gates: gates, Requires: requires}
	}
	expect := func(held *authority.HeldError, reason authority.Reason, who string) {
		if held == nil || held.Why() != reason {
			violate("%s: the gate said %v; want it held for %s", who, held, reason)
			return
		}
		say("%s waits: %s", who, authority.WaitText(held))
	}
	var prodGen int64
	for i, c := range commits {
		clk.Set(GatesStart.Add(time.Duration(i) * 10 * time.Minute))
		ar, err := a.Accept(ctx, intent(staging, c.name, c.sha, nil, nil), true)
		if err != nil {
			return nil, err
		}
		if held, err := deploy(staging, ar.Generation, "staging-"+c.name); err != nil || held != nil {
			return nil, fmt.Errorf("deploy %s in staging: held %v, %w", c.name, held, err)
		}
		say("%s (%s) is live in staging", c.name, c.sha[:7])
		pr, err := a.Accept(ctx, intent(prod, c.name, c.sha, gatesProduction(), req), true)
		if err != nil {
			return nil, err
		}
		c.gen, prodGen = pr.Generation, pr.Generation
		held, err := deploy(prod, c.gen, "production-"+c.name)
		if err != nil {
			return nil, err
		}
		expect(held, authority.ReasonSoaking, c.name+" in production")
	}
	clk.Set(GatesStart.Add(50*time.Minute + time.Second)) // C has soaked
	held, err := deploy(prod, prodGen, "production-C")
	if err != nil {
		return nil, err
	}
	expect(held, authority.ReasonApproval, "C has soaked and")
	clk.Set(GatesStart.Add(time.Hour))
	if _, err := a.ApproveCommit(ctx, authority.CommitApprovalRequest{Environment: prod, Sha: commits[2].sha, Login: "alice", Door: authority.ApprovalDoorCLI}); err != nil {
		return nil, err
	}
	say("alice approves C")
	if held, err = deploy(prod, prodGen, "production-C"); err != nil {
		return nil, err
	}
	expect(held, authority.ReasonWindow, "C, approved,")
	clk.Set(time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)) // 09:00 in Berlin
	if held, err = deploy(prod, prodGen, "production-C"); err != nil {
		return nil, err
	}
	if held != nil {
		violate("C when the window opened: held %v; want it deployed", held)
	} else {
		say("the window opens: C deploys to production")
	}
	e, err := a.Status(ctx, prod)
	if err != nil {
		return nil, err
	}
	res.Env = e
	if sc := e.Scopes[o.Scope]; sc == nil || sc.Live == nil || sc.Live.Sha != commits[2].sha {
		violate("production's live commit is not C")
	}
	for _, ev := range e.Events {
		if ev.Kind == authority.EventDeployed && ev.Sha != commits[2].sha {
			violate("production deployed %s; only C should have", ev.Sha[:7])
		}
	}
	if e.HasPending() {
		violate("production still has work pending")
	}
	fmt.Fprintln(w, "\nProduction's timeline:")
	_ = report.TimelineText(&indent{w: w}, e.Events)
	fmt.Fprintln(w, "\nStatus:")
	_ = report.StatusText(&indent{w: w}, e, a.Now())
	return res, nil
}

func berlin() *time.Location {
	l, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		return time.UTC
	}
	return l
}
