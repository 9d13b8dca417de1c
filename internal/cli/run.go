package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// SignalCause is the context cause main sets when the process gets SIGINT or SIGTERM, so that run
// forwards the same signal to its command.
type SignalCause struct{ Signal os.Signal }

func (s *SignalCause) Error() string { return "received " + s.Signal.String() }

func runRun(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("run")
	c.intentFlags()
	c.stateFlag()
	c.str(&c.s.holder, "holder", "", "lease holder id (default: the GitHub job, or host and pid)")
	c.str(&c.s.run, "run", "", "run id or URL to record with the live state (default: the GitHub run)")
	c.boolean(&c.s.lease, "lease", true, "hold the scopes' leases while the command runs")
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
	if err := c.open(ctx); err != nil {
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

	sup := &supervisor{c: c, grant: g}
	return sup.run(ctx, argv)
}

func tokenList(t map[string]int64) string {
	parts := make([]string, 0, len(t))
	for _, s := range sortedScopes(t) {
		parts = append(parts, fmt.Sprintf("%s=%d", s, t[s]))
	}
	return strings.Join(parts, ",")
}

// supervisor runs the command under the grant's leases: it renews them every third of the TTL,
// stops the command when they are lost, forwards signals, and completes the pass.
type supervisor struct {
	c     *cmdEnv
	grant *authority.Grant
}

type exitReason int

const (
	exitedByItself exitReason = iota
	stoppedLeaseLost
	stoppedBySignal
)

func (s *supervisor) run(ctx context.Context, argv []string) error {
	c, g := s.c, s.grant
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.io.Stdin, c.io.Stdout, c.io.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), s.fencingEnv()...)
	if err := cmd.Start(); err != nil {
		// The command never ran: release the leases and report bad input.
		_, _ = c.completeWith(context.WithoutCancel(ctx), authority.OutcomeInvalid, g.Tokens, fmt.Sprintf("cannot start %q: %v", argv[0], err))
		return usageErrorf("cannot start %q: %v", argv[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	lost := make(chan error, 1)
	renewCtx, stopRenew := context.WithCancel(context.WithoutCancel(ctx))
	go s.renew(renewCtx, lost)

	var waitErr error
	reason := exitedByItself
	var lostErr error
	select {
	case waitErr = <-exited:
	case lostErr = <-lost:
		reason = stoppedLeaseLost
		c.progress("lease lost: %v; stopping the command", lostErr)
		waitErr = s.stop(cmd, exited, syscall.SIGTERM)
	case <-ctx.Done():
		reason = stoppedBySignal
		sig := syscall.Signal(syscall.SIGTERM)
		var sc *SignalCause
		if errors.As(context.Cause(ctx), &sc) {
			if ss, ok := sc.Signal.(syscall.Signal); ok {
				sig = ss
			}
		}
		c.progress("received %v; forwarding it to the command", sig)
		waitErr = s.stop(cmd, exited, sig)
	}
	stopRenew()

	// Completion must be written even when the process is being stopped.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	switch reason {
	case stoppedLeaseLost:
		_, _ = c.completeWith(cctx, authority.OutcomeLost, g.Tokens, lostErr.Error())
		return &exitError{code: ExitLeaseLost, msg: fmt.Sprintf("lease lost while the command ran (retryable): %v", lostErr)}
	case stoppedBySignal:
		if _, err := c.completeWith(cctx, authority.OutcomeInterrupted, g.Tokens, "stopped by a signal"); err != nil {
			c.progress("recording the interruption: %v", err)
		}
		return &exitError{code: ExitInterrupted, msg: "interrupted; the lease was released and the pass can be retried"}
	}
	outcome, msg := authority.OutcomeSuccess, ""
	if waitErr != nil {
		outcome, msg = authority.OutcomeFailure, fmt.Sprintf("%s: %v", argv[0], waitErr)
	}
	res, err := c.completeWith(cctx, outcome, g.Tokens, msg)
	if err != nil {
		if errors.Is(err, authority.ErrLeaseLost) {
			return &exitError{code: ExitLeaseLost, msg: fmt.Sprintf("lease lost before the result was recorded (retryable): %v", err)}
		}
		return err
	}
	return c.reportCompletion(res)
}

func (c *cmdEnv) completeWith(ctx context.Context, o authority.Outcome, tokens map[string]int64, msg string) (*authority.CompleteResult, error) {
	c.s.message, c.s.outcome = msg, string(o)
	return c.complete(ctx, o, tokens)
}

func (s *supervisor) fencingEnv() []string {
	g := s.grant
	tokens, _ := json.Marshal(g.Tokens)
	env := []string{
		fmt.Sprintf("LATESTWINS_ENVIRONMENT=%s", g.Environment),
		fmt.Sprintf("LATESTWINS_GENERATION=%d", g.Generation),
		fmt.Sprintf("LATESTWINS_SCOPES=%s", strings.Join(sortedScopes(g.Tokens), ",")),
		fmt.Sprintf("LATESTWINS_FENCING_TOKENS=%s", tokens),
	}
	if len(g.Tokens) == 1 {
		for _, t := range g.Tokens {
			env = append(env, fmt.Sprintf("LATESTWINS_FENCING_TOKEN=%d", t))
		}
	}
	return env
}

// renew extends the leases every third of the TTL. It reports loss when the store says the lease is
// no longer ours, or when no renewal has succeeded for the TTL less the skew margin (the store is
// unreachable, so another pass may take over).
func (s *supervisor) renew(ctx context.Context, lost chan<- error) {
	c, g := s.c, s.grant
	ttl := c.s.leaseTTL
	every := ttl / 3
	lastOK := time.Now()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, every)
		err := c.auth.Renew(rctx, g, ttl)
		cancel()
		switch {
		case err == nil:
			lastOK = time.Now()
		case ctx.Err() != nil:
			return
		case errors.Is(err, authority.ErrLeaseLost):
			lost <- err
			return
		default:
			c.progress("renewing the lease failed (will retry): %v", err)
			if time.Since(lastOK) >= ttl {
				lost <- fmt.Errorf("no renewal succeeded for %s, the lease TTL: %w", ttl, err)
				return
			}
		}
	}
}

// stop sends sig to the command's process group, then SIGKILL after the grace period.
func (s *supervisor) stop(cmd *exec.Cmd, exited <-chan error, sig syscall.Signal) error {
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	t := time.NewTimer(s.c.s.grace)
	defer t.Stop()
	select {
	case err := <-exited:
		return err
	case <-t.C:
		s.c.progress("the command did not stop within %s; sending SIGKILL", s.c.s.grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-exited
	}
}
