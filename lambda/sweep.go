package lambda

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/heal"
	"github.com/latestwins/latestwins/internal/metrics"
)

// SweepResult is what a scheduled invocation answers.
type SweepResult struct {
	// DryRun is true when no re-drive is configured: nothing was changed.
	DryRun bool `json:"dry_run"`
	authority.SweepReport
	// Deliveries is what replaying the missed webhook deliveries did, before the sweep (with a
	// Healer).
	Deliveries *heal.Report `json:"deliveries,omitempty"`
}

// sweep replays the webhook deliveries the App missed, then runs one recovery sweep. A delivery
// that could not be handled, or environments the sweep could not handle, are logged and make the
// invocation fail (so that the failure shows in the function's error metrics); the next sweep
// retries them, and a failed re-drive costs no attempt.
func (h *Handler) sweep(ctx context.Context) (*SweepResult, error) {
	res, err := h.sweepOnce(ctx)
	// After the re-drives, so that a slow alarm receiver never holds them up; it logs what it
	// could not tell.
	_, _ = h.alerts.Tell(ctx)
	if h.metrics != nil {
		h.metrics.Swept(err)
		figures, _ := metrics.Behind(ctx, h.auth, h.envs, h.log)
		if werr := metrics.WriteBehind(h.emfOut, time.Now(), figures); werr != nil {
			h.log.WarnContext(ctx, "behind figures not written", "err", werr)
		}
	}
	return res, err
}

// sweepOnce replays the missed deliveries, then runs one recovery sweep.
func (h *Handler) sweepOnce(ctx context.Context) (*SweepResult, error) {
	healed, healErr := h.heal(ctx)
	res, err := h.recoverStalled(ctx)
	switch {
	case err != nil:
		return nil, errors.Join(err, healErr)
	case healErr != nil:
		return nil, healErr
	}
	res.Deliveries = healed
	return res, nil
}

// heal replays the missed deliveries; an error says the log could not be read or a delivery
// could not be handled (the next sweep tries again).
func (h *Handler) heal(ctx context.Context) (*heal.Report, error) {
	if h.healer == nil {
		return nil, nil
	}
	rep, err := h.healer.Run(ctx)
	if err != nil {
		h.log.ErrorContext(ctx, "sweep: missed deliveries not replayed; the next sweep tries again", "err", err)
		return rep, fmt.Errorf("replay missed deliveries: %w", err)
	}
	if rep.Stopped != nil {
		return rep, fmt.Errorf("replay missed deliveries: %s (%s at %s) could not be handled: %s; the next sweep tries again",
			rep.Stopped.GUID, rep.Stopped.Event, rep.Stopped.At.Format(time.RFC3339), rep.Stopped.Reason)
	}
	return rep, nil
}

// recoverStalled runs one recovery sweep.
func (h *Handler) recoverStalled(ctx context.Context) (*SweepResult, error) {
	if h.redrive == nil {
		work, exhausted, err := h.auth.Stalled(ctx, h.stall, h.maxAttempts)
		if err != nil {
			return nil, fmt.Errorf("recovery sweep (dry run): %w", err)
		}
		for _, w := range work {
			h.log.InfoContext(ctx, "sweep: would re-drive; no re-drive is configured", "environment", w.Environment,
				"generation", w.Generation, "scopes", w.Scopes, "attempt", w.Attempt)
		}
		for _, w := range exhausted {
			h.log.InfoContext(ctx, "sweep: would end with a terminal error; no re-drive is configured", "environment", w.Environment,
				"generation", w.Generation, "scopes", w.Scopes, "attempts", w.Attempt)
		}
		if work == nil {
			work = []authority.StalledWork{}
		}
		return &SweepResult{DryRun: true, SweepReport: authority.SweepReport{Redriven: work, Exhausted: exhausted}}, nil
	}
	rep, err := h.auth.Sweep(ctx, h.stall, h.maxAttempts, h.redrive)
	if err != nil {
		return nil, fmt.Errorf("recovery sweep: %w", err)
	}
	for _, w := range rep.Redriven {
		h.log.InfoContext(ctx, "sweep: re-driven", "environment", w.Environment, "generation", w.Generation,
			"scopes", w.Scopes, "attempt", w.Attempt)
	}
	for _, w := range rep.Exhausted {
		h.log.WarnContext(ctx, "sweep: ended with a terminal error after its attempts", "environment", w.Environment,
			"generation", w.Generation, "scopes", w.Scopes, "attempts", w.Attempt)
	}
	if len(rep.Failed) > 0 {
		envs := make([]string, 0, len(rep.Failed))
		for env, why := range rep.Failed {
			h.log.ErrorContext(ctx, "sweep: environment not handled; the next sweep retries", "environment", env, "err", why)
			envs = append(envs, env)
		}
		sort.Strings(envs)
		return nil, fmt.Errorf("recovery sweep: %d environment(s) could not be handled (%v); the next sweep retries them", len(envs), envs)
	}
	return &SweepResult{SweepReport: *rep}, nil
}
