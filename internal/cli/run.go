package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
)

// SignalCause is the context cause main sets when the process gets SIGINT or SIGTERM, so that run
// forwards the same signal to its command.
type SignalCause = pass.SignalCause

func runRun(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("run")
	c.intentFlags()
	c.stateFlag()
	c.str(&c.s.holder, "holder", "", "lease holder id (default: the GitHub job, or host and pid)")
	c.str(&c.s.run, "run", "", "run id or URL to record with the live state (default: the GitHub run)")
	c.s.lease = true // run always holds the deploy leases: its success is recorded with their tokens
	c.apiFlags()
	c.s.phase = "deploy"
	c.int64Var(&c.s.generation, "generation", 0, 0, "the pass's generation (one accepted before, e.g. by the App, a rollback or a promotion: run claims its scopes); without it, run accepts and claims a new intent")
	c.durVar(&c.s.leaseTTL, "lease-ttl", authority.DefaultLeaseTTL, "lease length; renewed every third of it")
	c.durVar(&c.s.wait, "wait", 10*time.Minute, "how long to wait for a held lease")
	c.durVar(&c.s.skew, "lease-skew", authority.DefaultSkew, "margin past a lease's expiry before it is taken over")
	c.durVar(&c.s.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the command must stop; at most a third of --lease-ttl")
	c.attemptVar("attempt number (default $GITHUB_RUN_ATTEMPT, else 1)")
	c.intVar(&c.s.maxAttempts, "max-attempts", 3, 1, "attempts before a failure is terminal")
	if err := c.parse(args); err != nil {
		return err
	}
	argv, err := c.command()
	if err != nil {
		return err
	}
	if len(argv) == 0 {
		return usageErrorf("give the command to run after --, e.g. latestwins run --environment staging --scopes api -- ./deploy.sh")
	}
	for _, check := range []func() error{c.checkLeaseTTL, c.checkGrace} {
		if err := check(); err != nil {
			return err
		}
	}
	st, err := c.loadState()
	if err != nil {
		return err
	}
	c.fromState(st)
	if err := c.requireEnvironment(); err != nil {
		return err
	}
	var in authority.Intent
	if c.s.generation == 0 {
		if in, err = c.intent(); err != nil {
			return err
		}
		c.mode = storeCreate
	} else {
		c.githubDefaults()
		if err := c.requireScopes(); err != nil {
			return err
		}
		c.mode = storeMustExist
	}
	if c.s.holder == "" {
		c.s.holder = c.defaultHolder()
	}
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()

	var entered *authority.Grant // the deploy phase, entered by the claim's own write
	if c.s.generation == 0 {
		var res *authority.AcceptResult
		if e, ok := c.pass.(pass.Enterer); ok {
			res, err = e.ClaimAndEnter(ctx, in, c.s.holder, c.s.leaseTTL)
		} else {
			res, err = c.pass.Claim(ctx, in)
		}
		if err != nil {
			return c.orderError(err)
		}
		entered = res.Entered
		c.s.generation = res.Generation
		if res.Claim == nil || len(res.Claim.Claimed) == 0 {
			c.progress("generation %d: nothing to deploy: superseded on arrival", res.Generation)
			return &exitError{code: ExitSuperseded}
		}
		c.s.scopes = strings.Join(res.Claim.Scopes(), ",")
		c.deploys = res.Claim.Claimed
		c.progress("generation %d claimed %s", res.Generation, c.s.scopes)
	} else {
		// A generation accepted elsewhere (the App's push, a rollback, a promotion): the pass claims
		// its scopes first, as the Action's generation input does. Claiming again what this pass
		// claimed already changes nothing; what became of a pass that may not go, the gate says.
		cr, err := c.claimGeneration(ctx, c.s.environment, c.s.generation, splitList(c.s.scopes))
		if err != nil {
			return err
		}
		c.deploys = cr.Claimed
	}
	g := entered
	if g == nil {
		if g, err = c.gate(ctx); err != nil {
			if interrupted(ctx, err) {
				return &exitError{code: ExitInterrupted, msg: "interrupted while waiting for the lease; nothing was taken, and the pass can be retried"}
			}
			return c.reportRefusal(err)
		}
	}
	if err := c.saveState(&passState{Environment: g.Environment, Generation: g.Generation, Scopes: splitList(c.s.scopes),
		Holder: g.Holder, Tokens: g.Tokens, ExpiresAt: g.ExpiresAt}); err != nil {
		return err
	}
	for _, s := range g.TookOver {
		c.progress("%s/%s: recovered an interrupted operation (the previous holder's lease had expired)", g.Environment, s)
	}
	c.progress("generation %d entered deploy; tokens %s", g.Generation, tokenList(g.Tokens))

	sup := &pass.Supervisor{Auth: c.pass, Grant: g, TTL: c.s.leaseTTL, Grace: c.s.grace,
		Stdin: c.io.Stdin, Stdout: c.io.Stdout, Stderr: c.io.Stderr, Progress: c.progress, Commits: c.deploys,
		Complete: func(ctx context.Context, o authority.Outcome, msg string) (*authority.CompleteResult, error) {
			return c.completeWith(ctx, o, g.Tokens, msg)
		}}
	res, err := sup.Run(ctx, argv)
	var start *pass.StartError
	switch {
	case errors.As(err, &start):
		return usageErrorf("%v", start)
	case errors.Is(err, authority.ErrLeaseLost):
		return &exitError{code: ExitLeaseLost, msg: fmt.Sprintf("lease lost before the result was recorded (retryable): %v", err)}
	case err != nil:
		return err
	}
	switch res.Ending {
	case pass.LeaseLost:
		return &exitError{code: ExitLeaseLost, msg: fmt.Sprintf("lease lost while the command ran (retryable): %v", res.Lost)}
	case pass.Interrupted:
		return &exitError{code: ExitInterrupted, msg: "interrupted; the lease was released and the pass can be retried"}
	}
	return c.reportCompletion(res.Completion)
}

func tokenList(t map[string]int64) string {
	parts := make([]string, 0, len(t))
	for _, s := range sortedScopes(t) {
		parts = append(parts, fmt.Sprintf("%s=%d", s, t[s]))
	}
	return strings.Join(parts, ",")
}

func (c *cmdEnv) completeWith(ctx context.Context, o authority.Outcome, tokens map[string]int64, msg string) (*authority.CompleteResult, error) {
	c.s.message, c.s.outcome = msg, string(o)
	return c.complete(ctx, o, tokens)
}
