package pass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// SignalCause is the context cause a main sets when the process gets SIGINT or SIGTERM, so that a
// supervised command gets the same signal.
type SignalCause struct{ Signal os.Signal }

func (s *SignalCause) Error() string { return "received " + s.Signal.String() }

// StartError says that the command could not be started (not found, not executable). It is bad
// input: it matches authority.ErrInvalidInput.
type StartError struct {
	Command string
	Err     error
}

func (e *StartError) Error() string { return fmt.Sprintf("cannot start %q: %v", e.Command, e.Err) }

func (e *StartError) Unwrap() error { return e.Err }

func (e *StartError) Is(target error) bool { return target == authority.ErrInvalidInput }

// Ending says how a supervised command ended.
type Ending int

// Endings of a supervised command.
const (
	Exited      Ending = iota // the command exited by itself; the pass was completed with its result
	LeaseLost                 // the leases were lost: the command was stopped, the pass completed as lost
	Interrupted               // a signal stopped the command: it was forwarded, the pass completed as interrupted
)

// Result is how a supervised pass ended.
type Result struct {
	Ending Ending
	// Lost is why the leases were lost (LeaseLost only).
	Lost error
	// Completion is what Complete recorded (Exited only).
	Completion *authority.CompleteResult
}

// CompleteFunc records how the pass ended; the supervisor calls it exactly once, after the command.
type CompleteFunc func(ctx context.Context, o authority.Outcome, msg string) (*authority.CompleteResult, error)

// Supervisor runs a command under a grant's leases: it renews them every third of the TTL, stops the
// command when they are lost, forwards signals, and completes the pass.
type Supervisor struct {
	Auth  Renewer
	Grant *authority.Grant
	TTL   time.Duration // lease length; renewed every third of it
	Grace time.Duration // time between SIGTERM and SIGKILL when the command must stop
	// Stdin, Stdout and Stderr are the command's; Env is its environment before the fencing
	// variables are added (nil: this process's environment).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Env            []string
	// Progress reports what the supervisor does; nil discards it.
	Progress func(format string, args ...any)
	Complete CompleteFunc
}

func (s *Supervisor) progress(format string, args ...any) {
	if s.Progress != nil {
		s.Progress(format, args...)
	}
}

// Run runs argv and completes the pass. A command that cannot start completes the pass as invalid
// and returns a *StartError. When the command exits by itself, an
// error from Complete is returned as is (it matches authority.ErrLeaseLost when the leases were
// lost before the result was recorded).
func (s *Supervisor) Run(ctx context.Context, argv []string) (*Result, error) {
	g := s.Grant
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s.Stdin, s.Stdout, s.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	base := s.Env
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = append(append([]string(nil), base...), FencingEnv(g)...)
	if err := cmd.Start(); err != nil {
		// The command never ran: release the leases and report bad input.
		_, _ = s.Complete(context.WithoutCancel(ctx), authority.OutcomeInvalid, fmt.Sprintf("cannot start %q: %v", argv[0], err))
		return nil, &StartError{Command: argv[0], Err: err}
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	lost := make(chan error, 1)
	renewCtx, stopRenew := context.WithCancel(context.WithoutCancel(ctx))
	go s.renew(renewCtx, lost)

	var waitErr, lostErr error
	ending := Exited
	select {
	case waitErr = <-exited:
	case lostErr = <-lost:
		ending = LeaseLost
		s.progress("lease lost: %v; stopping the command", lostErr)
		waitErr = s.stop(cmd, exited, syscall.SIGTERM)
	case <-ctx.Done():
		ending = Interrupted
		sig := syscall.SIGTERM
		var sc *SignalCause
		if errors.As(context.Cause(ctx), &sc) {
			if ss, ok := sc.Signal.(syscall.Signal); ok {
				sig = ss
			}
		}
		s.progress("received %v; forwarding it to the command", sig)
		waitErr = s.stop(cmd, exited, sig)
	}
	stopRenew()

	// Completion must be written even when the process is being stopped.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	switch ending {
	case LeaseLost:
		_, _ = s.Complete(cctx, authority.OutcomeLost, lostErr.Error())
		return &Result{Ending: LeaseLost, Lost: lostErr}, nil
	case Interrupted:
		if _, err := s.Complete(cctx, authority.OutcomeInterrupted, "stopped by a signal"); err != nil {
			s.progress("recording the interruption: %v", err)
		}
		return &Result{Ending: Interrupted}, nil
	}
	outcome, msg := authority.OutcomeSuccess, ""
	if waitErr != nil {
		outcome, msg = authority.OutcomeFailure, fmt.Sprintf("%s: %v", argv[0], waitErr)
	}
	res, err := s.Complete(cctx, outcome, msg)
	if err != nil {
		return nil, err
	}
	return &Result{Ending: Exited, Completion: res}, nil
}

// FencingEnv is what a deploy command learns of its pass: the environment, generation, scopes and
// fencing tokens (LATESTWINS_FENCING_TOKEN when there is one scope).
func FencingEnv(g *authority.Grant) []string {
	tokens, _ := json.Marshal(g.Tokens)
	env := []string{
		fmt.Sprintf("LATESTWINS_ENVIRONMENT=%s", g.Environment),
		fmt.Sprintf("LATESTWINS_GENERATION=%d", g.Generation),
		fmt.Sprintf("LATESTWINS_SCOPES=%s", strings.Join(TokenScopes(g.Tokens), ",")),
		fmt.Sprintf("LATESTWINS_FENCING_TOKENS=%s", tokens),
	}
	if len(g.Tokens) == 1 {
		for _, t := range g.Tokens {
			env = append(env, fmt.Sprintf("LATESTWINS_FENCING_TOKEN=%d", t))
		}
	}
	return env
}

// TokenScopes returns the scopes of a token map, sorted.
func TokenScopes(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// renew extends the leases every third of the TTL. It reports loss when the store says the lease is
// no longer ours, or when no renewal has succeeded for the TTL (the store is unreachable, so another
// pass may take over).
func (s *Supervisor) renew(ctx context.Context, lost chan<- error) {
	ttl := s.TTL
	every := ttl / 3
	// The lease was last known good when the grant, or the newest successful renewal, was asked
	// for: it expires TTL after that. The command must be stopped (SIGTERM, then SIGKILL after the
	// grace period) before then, or it could still be writing once another pass takes over.
	lastSent := time.Now()
	stopBy := func() time.Time { return lastSent.Add(ttl - min(s.Grace, ttl/2)) }
	wait := every
	var lastErr error
	for {
		t := time.NewTimer(min(wait, time.Until(stopBy())))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !time.Now().Before(stopBy()) {
			lost <- fmt.Errorf("no renewal succeeded in time; the lease (TTL %s) would expire before the command could be stopped: %w", ttl, lastErr)
			return
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, stopBy())
		err := s.Auth.Renew(rctx, s.Grant, ttl)
		cancel()
		switch {
		case err == nil:
			lastSent, wait, lastErr = sent, every, nil
		case ctx.Err() != nil:
			return
		case errors.Is(err, authority.ErrLeaseLost):
			lost <- err
			return
		default:
			// Try again soon: the lease is running out while the store does not answer.
			lastErr, wait = err, max(every/4, time.Second)
			s.progress("renewing the lease failed (will retry): %v", err)
		}
	}
}

// stop sends sig to the command's process group, then SIGKILL after the grace period.
func (s *Supervisor) stop(cmd *exec.Cmd, exited <-chan error, sig syscall.Signal) error {
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	t := time.NewTimer(s.Grace)
	defer t.Stop()
	select {
	case err := <-exited:
		return err
	case <-t.C:
		s.progress("the command did not stop within %s; sending SIGKILL", s.Grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return <-exited
	}
}
