// Package pass holds the steps of one pass that the command line and the Action share: accepting
// and claiming an intent, entering a phase while waiting on a held lease, and running a command
// under renewed, fenced leases until it completes.
//
// # The command never outlives its lease
//
// A lease is the pass's own until TTL after the request that granted it, or last renewed it, was
// sent (Grant.RequestedAt, which Gate sets, then each successful renewal's send time): the store
// sets the expiry from its clock when it handles the request, no earlier than that. Another pass
// takes the lease over only past that expiry plus the store's skew margin. So the Supervisor
//
//   - renews every TTL/3, and retries a failed renewal sooner;
//   - gives the lease up when the store says it is lost, or when no renewal has succeeded by
//     (last send) + TTL - margin - grace, and then sends SIGTERM to the command's process group;
//   - sends SIGKILL at (last send) + TTL - margin at the latest, whatever the grace period
//     (margin: TTL/20, at most 1 s, for a late timer).
//
// The grace period must therefore fit the lease: at most TTL/3 (MaxGrace). CheckGrace refuses a
// longer one, with the fix, before anything is written; the Supervisor also cuts it.
//
// The command also never outlives the supervisor. It leads a process group of its own, which the
// supervisor signals. On Linux the supervisor starts this binary as a guard (MaybeGuard, called
// first by main) that starts the command: the guard, in another group, is a child subreaper and
// gets a parent-death signal, so when the supervisor's process dies (even by SIGKILL), or when the
// command exits, it kills every process of the command's group and every descendant of the
// command, even one that left the group, before it exits. The command gets SIGKILL as its own
// parent-death signal should the guard die. The supervisor signals the command through the guard:
// once a stop has been passed on, the command's exit kills nothing, so that the programs a wrapper
// (sh -c) started keep the grace period when the wrapper ends at once on SIGTERM; the guard waits
// for them to exit, and the supervisor's SIGKILL reaches the group at once and the guard as
// SIGUSR2, on which it kills every descendant. Without the guard (a binary whose main does not call
// MaybeGuard) the command is started directly with that parent-death signal, which does not reach
// its children, and its group is killed when it exits. Elsewhere than Linux the group is killed
// when the command exits, but a supervisor killed with SIGKILL leaves the command running.
package pass

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Authority is what a pass asks of the authority: a local *authority.Authority through Local, or
// the App's HTTP API (internal/apiclient). Refusals are the authority package's typed errors either way.
type Authority interface {
	// Claim accepts the intent and claims its scopes (see the function Claim).
	Claim(ctx context.Context, in authority.Intent) (*authority.AcceptResult, error)
	Gater
	Renewer
	Complete(ctx context.Context, c authority.Completion) (*authority.CompleteResult, error)
}

// Gater enters phases.
type Gater interface {
	Gate(ctx context.Context, r authority.GateRequest) (*authority.Grant, error)
}

// WaitGater is a Gater whose far end can hold a refused request until the lease is released (the
// App's API in serve): Gate then asks with GateWait instead of polling.
type WaitGater interface {
	Gater
	// GateWait is Gate answered once the lease is released or wait has passed, whichever is first.
	GateWait(ctx context.Context, r authority.GateRequest, wait time.Duration) (*authority.Grant, error)
	// LongPoll is the longest wait the far end honours; 0: it answers at once (Gate polls).
	LongPoll() time.Duration
}

// Enterer is an Authority that can claim an intent and enter its deploy phase in the same write
// when the gate lets the pass go at once (authority.EnterDeploy): Local is one. AcceptResult.Entered
// is the grant then; when it is nil, the pass asks Gate as usual.
type Enterer interface {
	ClaimAndEnter(ctx context.Context, in authority.Intent, holder string, ttl time.Duration) (*authority.AcceptResult, error)
}

// Renewer extends leases.
type Renewer interface {
	Renew(ctx context.Context, g *authority.Grant, ttl time.Duration) error
}

var (
	_ Gater   = (*authority.Authority)(nil)
	_ Renewer = (*authority.Authority)(nil)
	_ Enterer = local{}
)

// Local runs a pass's steps on a local Authority (a store this process opens).
func Local(a *authority.Authority) Authority { return local{a} }

type local struct{ a *authority.Authority }

func (l local) Claim(ctx context.Context, in authority.Intent) (*authority.AcceptResult, error) {
	return Claim(ctx, l.a, in)
}

func (l local) ClaimAndEnter(ctx context.Context, in authority.Intent, holder string, ttl time.Duration) (*authority.AcceptResult, error) {
	sent := SystemClock.Now()
	res, err := Claim(ctx, l.a, in, authority.EnterDeploy(holder, ttl))
	if err == nil && res.Entered != nil {
		res.Entered.RequestedAt = sent
	}
	return res, err
}

func (l local) Gate(ctx context.Context, r authority.GateRequest) (*authority.Grant, error) {
	return l.a.Gate(ctx, r)
}

func (l local) Renew(ctx context.Context, g *authority.Grant, ttl time.Duration) error {
	return l.a.Renew(ctx, g, ttl)
}

func (l local) Complete(ctx context.Context, c authority.Completion) (*authority.CompleteResult, error) {
	return l.a.Complete(ctx, c)
}

// Claim accepts the intent and claims its scopes in one write. A repeat of an accepted intent (a
// re-run, or a later job of the same run) claims again what it accepted, which is idempotent for
// its own pass. opts go to Accept.
func Claim(ctx context.Context, a *authority.Authority, in authority.Intent, opts ...authority.AcceptOption) (*authority.AcceptResult, error) {
	res, err := a.Accept(ctx, in, true, opts...)
	if err != nil {
		return nil, err
	}
	if res.Duplicate && res.Claim == nil {
		cr, err := a.Claim(ctx, in.Environment, res.Generation, res.Accepted)
		if err != nil {
			return nil, err
		}
		res.Claim = cr
	}
	return res, nil
}

// Gate's polling back-off while a lease is held: the first pause, doubled after each refusal up to
// the longest. The longest pause bounds how long a released lease waits for its next holder: with
// the request that takes it, under a second. Each pause is drawn from the last quarter of its
// value, so that waiters that started together do not ask in step, and is then capped by the
// refusal's retry_after and by the wait left.
const (
	firstPause = 250 * time.Millisecond
	maxPause   = 800 * time.Millisecond
)

// spread draws a pause from [3/4 d, d].
func spread(d time.Duration) time.Duration {
	if d < 4 {
		return d
	}
	return d - rand.N(d/4+1)
}

// HeldFunc is told about a refusal while Gate waits: who holds the lease, when at the latest it
// frees (the refusal's retry_after, capped by the wait left), and how much of the wait is left.
// Gate asks again sooner than that; it tells again when another holder has the lease, or once
// that time has passed.
type HeldFunc func(held *authority.HeldError, within, left time.Duration)

// Gate enters the phase, waiting up to wait while another holder has the lease. It asks again
// after a pause that grows from 250 ms to 800 ms (each drawn from its last quarter), capped by the
// refusal's retry_after and by the wait left: retry_after says when the lease frees at the latest,
// but a holder that finishes early releases it, and the next request after that gets it, within
// a second. A waiter asks about 1.4 times a second, each a read that writes nothing once its
// refusal is recorded. Over a far end that can wait for the release (WaitGater: the App's API in
// serve), each request after the first is held there until the lease is released, and Gate asks
// again at once. The grant's RequestedAt is when the request that succeeded was sent. Gate
// returns the last refusal when the wait runs out, or at once when it is a lasting hold that
// outlasts the wait (authority.HeldError.Outlasts), and ctx's error when ctx ends.
func Gate(ctx context.Context, a Gater, req authority.GateRequest, wait time.Duration, onHeld HeldFunc) (*authority.Grant, error) {
	return gate(ctx, SystemClock, spread, a, req, wait, onHeld)
}

// gate is Gate on clk, with each pause of the back-off drawn by jitter.
func gate(ctx context.Context, clk Clock, jitter func(time.Duration) time.Duration, a Gater, req authority.GateRequest, wait time.Duration, onHeld HeldFunc) (*authority.Grant, error) {
	deadline := clk.Now().Add(wait)
	backoff := firstPause
	var told *authority.HeldError // the refusal onHeld was last told about
	var tellAgain time.Time
	waiter, _ := a.(WaitGater)
	var longPoll time.Duration // > 0: the far end waits for the release; ask again at once
	for {
		sent := clk.Now()
		var (
			g   *authority.Grant
			err error
		)
		if longPoll > 0 {
			g, err = waiter.GateWait(ctx, req, min(longPoll, deadline.Sub(sent)))
		} else {
			g, err = a.Gate(ctx, req)
		}
		var held *authority.HeldError
		if !errors.As(err, &held) {
			if err == nil && g != nil {
				g.RequestedAt = sent
			}
			return g, err
		}
		now := clk.Now()
		left := deadline.Sub(now)
		if left <= 0 || held.Outlasts(deadline) {
			// A soak, an approval or a change window that lasts past the wait: the pass ends held
			// now rather than use up its runner, and the recovery sweep starts it again.
			return nil, err
		}
		within := min(held.RetryAfter, left)
		if onHeld != nil && (told == nil || !sameHolder(told, held) || !now.Before(tellAgain)) {
			onHeld(held, within, left)
			told, tellAgain = held, now.Add(within)
		}
		pause := min(jitter(backoff), within)
		waited := longPoll > 0 // this answer was a long poll's
		if waiter != nil {
			longPoll = waiter.LongPoll()
		}
		if longPoll > 0 {
			if !waited {
				continue // the first answer comes at once; the far end waits from the next
			}
			// A refusal sooner than the pause (a far end that stopped waiting) still waits out the
			// rest of it, so that no answer makes Gate ask in a tight loop.
			if pause -= now.Sub(sent); pause <= 0 {
				continue
			}
		}
		backoff = min(2*backoff, maxPause)
		t := clk.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C():
		}
	}
}

// sameHolder reports whether two refusals name the same holder of the same lease.
func sameHolder(a, b *authority.HeldError) bool {
	return a.Resource == b.Resource && a.Holder == b.Holder && a.Purpose == b.Purpose && a.Generation == b.Generation
}
