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
	gen := c.int64Var(&c.s.generation, "generation", 0, "the pass's generation; without it, run claims first")
	ttl := c.durVar(&c.s.leaseTTL, "lease-ttl", authority.DefaultLeaseTTL, "lease length; renewed every third of it")
	wait := c.durVar(&c.s.wait, "wait", 10*time.Minute, "how long to wait for a held lease")
	skew := c.durVar(&c.s.skew, "lease-skew", authority.DefaultSkew, "margin past a lease's expiry before it is taken over")
	grace := c.durVar(&c.s.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the command must stop")
	att := c.intVar(&c.s.attempt, "attempt", 0, "attempt number (default $GITHUB_RUN_ATTEMPT, else 1)")
	maxAtt := c.intVar(&c.s.maxAttempts, "max-attempts", 3, "attempts before a failure is terminal")
	if err := c.parse(args, gen, ttl, wait, skew, grace, att, maxAtt); err != nil {
		return err
	}
	argv := c.positional
	if len(argv) == 0 {
		return usageErrorf("give the command to run after --, e.g. latestwins run --environment staging --scopes api -- ./deploy.sh")
	}
	st, err := c.loadState()
	if err != nil {
		return err
	}
	c.fromState(st)
	if err := c.requireEnvironment(); err != nil {
		return err
	}
	if c.s.holder == "" {
		c.s.holder = c.defaultHolder()
	}
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()

	if c.s.generation == 0 {
		res, err := c.claim(ctx)
		if err != nil {
			return err
		}
		c.s.generation = res.Generation
		if res.Claim == nil || len(res.Claim.Claimed) == 0 {
			c.progress("generation %d: nothing to deploy: superseded on arrival", res.Generation)
			return &exitError{code: ExitSuperseded}
		}
		c.s.scopes = strings.Join(res.Claim.Scopes(), ",")
		c.progress("generation %d claimed %s", res.Generation, c.s.scopes)
	} else {
		c.githubDefaults()
	}
	g, err := c.gate(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{code: ExitInterrupted, msg: "interrupted while waiting for the lease"}
		}
		return c.reportRefusal(err)
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
		Stdin: c.io.Stdin, Stdout: c.io.Stdout, Stderr: c.io.Stderr, Progress: c.progress,
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
