// Package pass holds the steps of one pass that the command line and the Action share: accepting
// and claiming an intent, entering a phase while waiting on a held lease, and running a command
// under renewed, fenced leases until it completes.
package pass

import (
	"context"
	"errors"
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

// Renewer extends leases.
type Renewer interface {
	Renew(ctx context.Context, g *authority.Grant, ttl time.Duration) error
}

var (
	_ Gater   = (*authority.Authority)(nil)
	_ Renewer = (*authority.Authority)(nil)
)

// Local runs a pass's steps on a local Authority (a store this process opens).
func Local(a *authority.Authority) Authority { return local{a} }

type local struct{ a *authority.Authority }

func (l local) Claim(ctx context.Context, in authority.Intent) (*authority.AcceptResult, error) {
	return Claim(ctx, l.a, in)
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
// its own pass.
func Claim(ctx context.Context, a *authority.Authority, in authority.Intent) (*authority.AcceptResult, error) {
	res, err := a.Accept(ctx, in, true)
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

// HeldFunc is told about each refusal while Gate waits: who holds the lease, how long Gate pauses
// before it asks again, and how much of the wait is left.
type HeldFunc func(held *authority.HeldError, pause, left time.Duration)

// Gate enters the phase, waiting up to wait while another holder has the lease and honouring its
// retry_after. It returns the last refusal when the wait runs out, and ctx's error when ctx ends.
func Gate(ctx context.Context, a Gater, req authority.GateRequest, wait time.Duration, onHeld HeldFunc) (*authority.Grant, error) {
	deadline := time.Now().Add(wait)
	for {
		g, err := a.Gate(ctx, req)
		var held *authority.HeldError
		if !errors.As(err, &held) {
			return g, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, err
		}
		pause := min(held.RetryAfter, left)
		if onHeld != nil {
			onHeld(held, pause, left)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
