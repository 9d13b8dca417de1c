package pass

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
// command before they can expire, forwards signals, and completes the pass. The command never
// outlives Run, nor (on Linux) the process that runs the supervisor; see the package doc.
type Supervisor struct {
	Auth  Renewer
	Grant *authority.Grant
	TTL   time.Duration // lease length; renewed every third of it
	// Grace is the time between SIGTERM and SIGKILL when the command must stop. It is cut to
	// MaxGrace(TTL), and SIGKILL never waits past the lease.
	Grace time.Duration
	// Stdin, Stdout and Stderr are the command's; Env is its environment before the fencing
	// variables are added (nil: this process's environment).
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Env            []string
	// Commits are the commits the pass deploys, as claimed; the command gets them as LATESTWINS_SHA,
	// LATESTWINS_REF and LATESTWINS_SHAS (CommitEnv). Nil: none of those variables is set.
	Commits []authority.ClaimedScope
	// Progress reports what the supervisor does; nil discards it.
	Progress func(format string, args ...any)
	Complete CompleteFunc
	// Clock times renewals and the stop (nil: SystemClock).
	Clock Clock

	start starter // tests replace how the command is started
}

func (s *Supervisor) progress(format string, args ...any) {
	if s.Progress != nil {
		s.Progress(format, args...)
	}
}

// command is what a starter runs.
type command struct {
	argv           []string
	env            []string
	stdin          io.Reader
	stdout, stderr io.Writer
}

// child is a started command.
type child interface {
	// signal sends sig to every process of the command (its process group).
	signal(sig syscall.Signal) error
}

// starter starts a command and returns a channel that receives how it ended. By then every
// process of the command has been killed, not only the first one. A start that failed (the
// command was not found, or is not executable) returns an error and no child.
type starter func(c command) (child, <-chan error, error)

// Run runs argv and completes the pass. A command that cannot start completes the pass as invalid
// and returns a *StartError. When the command exits by itself, an
// error from Complete is returned as is (it matches authority.ErrLeaseLost when the leases were
// lost before the result was recorded).
func (s *Supervisor) Run(ctx context.Context, argv []string) (*Result, error) {
	if len(argv) == 0 {
		return nil, &authority.InputError{Field: "command", Fix: "give the command to run"}
	}
	if s.TTL <= 0 {
		return nil, &authority.InputError{Field: "lease-ttl", Value: s.TTL.String(), Fix: "supervise a command under a lease with a positive TTL"}
	}
	g := s.Grant
	base := s.Env
	if base == nil {
		base = os.Environ()
	}
	// A grant whose lease may already be over (the gate, or what ran between it and now, took most
	// of the TTL) must not start a deploy: the pass is completed as lost, and can be run again.
	if rq := g.RequestedAt; !rq.IsZero() && mutant != mutantOldStop &&
		!orSystem(s.Clock).Now().Before(rq.Add(s.TTL-killMargin(s.TTL)-min(max(s.Grace, 0), MaxGrace(s.TTL)))) {
		lost := fmt.Errorf("the lease granted at %s (TTL %s) would expire before the command could be stopped: not started", rq.Format(time.RFC3339Nano), s.TTL)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_, _ = s.Complete(cctx, authority.OutcomeLost, lost.Error())
		return &Result{Ending: LeaseLost, Lost: lost}, nil
	}
	start := s.start
	if start == nil {
		start = startCommand
	}
	ch, exited, err := start(command{argv: argv, env: append(append(append([]string(nil), base...), FencingEnv(g)...), CommitEnv(g, s.Commits)...),
		stdin: s.Stdin, stdout: s.Stdout, stderr: s.Stderr})
	if err != nil {
		// The command never ran: release the leases and report bad input.
		_, _ = s.Complete(context.WithoutCancel(ctx), authority.OutcomeInvalid, fmt.Sprintf("cannot start %q: %v", argv[0], err))
		return nil, &StartError{Command: argv[0], Err: err}
	}
	ending, lostErr, waitErr := s.supervise(ctx, ch, exited)

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

// CommitEnv is what a deploy command learns of the commits its pass deploys, as claimed (after a
// rollback or a promotion, the rollback's or the promoted commit, not the event's), for the scopes
// the grant leases: LATESTWINS_SHAS as SCOPE=SHA pairs (api=SHA,web=SHA), and LATESTWINS_SHA and
// LATESTWINS_REF when every scope deploys the same one. When they differ, LATESTWINS_SHA (or
// LATESTWINS_REF) is set empty, so that a value this process inherited never reaches the command.
// No commits: nothing.
func CommitEnv(g *authority.Grant, commits []authority.ClaimedScope) []string {
	byScope := map[string]authority.ClaimedScope{}
	for _, c := range commits {
		if _, leased := g.Tokens[c.Scope]; leased || len(g.Tokens) == 0 {
			byScope[c.Scope] = c
		}
	}
	if len(byScope) == 0 {
		return nil
	}
	scopes := make([]string, 0, len(byScope))
	for s := range byScope {
		scopes = append(scopes, s)
	}
	sort.Strings(scopes)
	pairs := make([]string, 0, len(scopes))
	sha, ref := byScope[scopes[0]].Sha, byScope[scopes[0]].Ref
	for _, s := range scopes {
		c := byScope[s]
		pairs = append(pairs, s+"="+c.Sha)
		if c.Sha != sha {
			sha = ""
		}
		if c.Ref != ref {
			ref = ""
		}
	}
	return []string{"LATESTWINS_SHA=" + sha, "LATESTWINS_REF=" + ref, "LATESTWINS_SHAS=" + strings.Join(pairs, ",")}
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

// MaxGrace is the longest grace period that fits a lease of ttl: a third of it. Renewals are due
// every third of the TTL; a grace of at most another third leaves failed renewals time to be
// retried before the command must be stopped.
func MaxGrace(ttl time.Duration) time.Duration { return ttl / 3 }

// CheckGrace refuses a grace period that does not fit a lease of ttl (see MaxGrace), with the
// fix. Callers check it before they write anything; the supervisor also cuts a longer grace.
func CheckGrace(grace, ttl time.Duration) error {
	if mutant == mutantOldStop {
		return nil
	}
	if grace < 0 {
		return &authority.InputError{Field: "grace", Value: grace.String(), Fix: "use a grace period of zero or more"}
	}
	if grace > MaxGrace(ttl) {
		return &authority.InputError{Field: "grace", Value: grace.String(),
			Fix: fmt.Sprintf("--grace %s does not fit a %s lease: use at most %s, or a --lease-ttl of at least %s",
				grace, ttl, MaxGrace(ttl).Truncate(time.Millisecond), 3*grace)}
	}
	return nil
}

// killMargin is how long before the lease's end the supervisor sends SIGKILL at the latest: room
// for a late timer and the signal's delivery.
func killMargin(ttl time.Duration) time.Duration { return min(ttl/20, time.Second) }

// renewal is the answer to one renewal request, and when that request was sent.
type renewal struct {
	sent time.Time
	err  error
}

// supervise watches the command until it exits. It renews the leases every third of the TTL and
// stops the command (SIGTERM, then SIGKILL after the grace period) when the store says they are
// lost, when ctx ends (with the signal that ended it), or when no renewal succeeded in time: the
// SIGKILL goes out no later than killMargin before the lease can end, counted from the send time
// of the newest successful request (the grant's, then each renewal's).
func (s *Supervisor) supervise(ctx context.Context, ch child, exited <-chan error) (ending Ending, lostErr, waitErr error) {
	clk := orSystem(s.Clock)
	ttl := s.TTL
	every := ttl / 3
	retry := max(every/4, 250*time.Millisecond)
	grace := min(max(s.Grace, 0), MaxGrace(ttl))
	if grace < s.Grace && mutant != mutantOldStop {
		s.progress("a grace period of %s does not fit a %s lease; the command gets %s between SIGTERM and SIGKILL", s.Grace, ttl, grace)
	}
	// lastOK is when the newest request that granted or renewed the leases was sent: the store
	// set their expiry from its clock no earlier than that, so they are ours until lastOK + TTL.
	lastOK := s.Grant.RequestedAt
	if lastOK.IsZero() {
		lastOK = clk.Now()
	}
	killBy := func() time.Time { return lastOK.Add(ttl - killMargin(ttl)) }
	stopBy := func() time.Time { return killBy().Add(-grace) }
	capKill := true
	if mutant == mutantOldStop {
		// The old rule: counted from now, the grace uncapped, and SIGKILL a full grace after SIGTERM.
		lastOK, grace, capKill = clk.Now(), max(s.Grace, 0), false
		stopBy = func() time.Time { return lastOK.Add(ttl - min(grace, ttl/2)) }
	}

	nextRenew := lastOK.Add(every)
	renewed := make(chan renewal, 1)
	var cancelRenew context.CancelFunc // set while a renewal is in flight
	defer func() {
		if cancelRenew != nil {
			cancelRenew()
		}
	}()
	var (
		stopping, killed  bool
		stoppedAt, killAt time.Time
		lastErr           = errNoAnswer
	)
	stop := func(now time.Time, sig syscall.Signal) {
		stopping, stoppedAt = true, now
		if cancelRenew != nil {
			cancelRenew()
		}
		killAt = now.Add(grace)
		if capKill && killBy().Before(killAt) {
			killAt = killBy()
		}
		_ = ch.signal(sig)
	}
	done := ctx.Done()
	ending = Exited
	for {
		now := clk.Now()
		if !stopping && !now.Before(stopBy()) {
			ending = LeaseLost
			lostErr = fmt.Errorf("no renewal succeeded in time; the lease (TTL %s) could expire before the command is stopped: %w", ttl, lastErr)
			s.progress("lease lost: %v; stopping the command", lostErr)
			stop(now, syscall.SIGTERM)
		}
		if stopping && !killed && !now.Before(killAt) {
			s.progress("the command did not stop within %s; sending SIGKILL", now.Sub(stoppedAt).Round(time.Millisecond))
			_ = ch.signal(syscall.SIGKILL)
			killed = true
		}
		if !stopping && cancelRenew == nil && !now.Before(nextRenew) {
			rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
			cancelRenew = cancel
			// A copy: a renewal that is given up on may still be running when Run returns.
			go func(sent time.Time, g authority.Grant) {
				renewed <- renewal{sent: sent, err: s.Auth.Renew(rctx, &g, ttl)}
			}(now, *s.Grant)
		}

		var wake time.Time
		switch {
		case !stopping:
			wake = stopBy()
			if cancelRenew == nil && nextRenew.Before(wake) {
				wake = nextRenew
			}
		case !killed:
			wake = killAt
		}
		var t Timer
		var fired <-chan time.Time
		if !wake.IsZero() {
			t = clk.NewTimer(wake.Sub(now))
			fired = t.C()
		}
		select {
		case waitErr = <-exited:
			if t != nil {
				t.Stop()
			}
			return ending, lostErr, waitErr
		case <-done:
			done = nil
			if !stopping {
				ending = Interrupted
				sig := signalOf(ctx)
				s.progress("received %v; forwarding it to the command", sig)
				stop(clk.Now(), sig)
			}
		case r := <-renewed:
			cancelRenew()
			cancelRenew = nil
			switch {
			case stopping:
			case r.err == nil:
				lastOK, nextRenew, lastErr = r.sent, r.sent.Add(every), errNoAnswer
			case errors.Is(r.err, authority.ErrLeaseLost):
				ending, lostErr = LeaseLost, r.err
				s.progress("lease lost: %v; stopping the command", lostErr)
				stop(clk.Now(), syscall.SIGTERM)
			default:
				// Try again soon: the lease is running out while the store does not answer.
				lastErr, nextRenew = r.err, clk.Now().Add(retry)
				s.progress("renewing the lease failed (will retry): %v", r.err)
			}
		case <-fired:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// errNoAnswer is why the leases were given up when no renewal answered before the deadline.
var errNoAnswer = errors.New("no renewal answered")

// signalOf is the signal that ended ctx (SIGTERM when it was not a signal).
func signalOf(ctx context.Context) syscall.Signal {
	var sc *SignalCause
	if errors.As(context.Cause(ctx), &sc) {
		if ss, ok := sc.Signal.(syscall.Signal); ok {
			return ss
		}
	}
	return syscall.SIGTERM
}
