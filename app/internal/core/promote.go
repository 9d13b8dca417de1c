package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
)

// PromoteDone is what a promotion did.
type PromoteDone struct {
	From       string
	Generation int64
	Sha        string
	Duplicate  bool
	Dispatched []DispatchRequest
	// NoBranch: the scope has no branch in the configuration to dispatch its workflow on.
	NoBranch bool
}

// PromoteFrom is the environment a promotion of env takes its commit from: from when given, which
// must be one env requires, else the first env requires. A problem is said to the caller.
func PromoteFrom(e *config.Environment, from string) (string, string) {
	if len(e.Requires) == 0 {
		return "", fmt.Sprintf("%s requires no environment in %s, so there is nothing to promote from (an administrator adds requires: [staging] to it).", e.Name, config.Path)
	}
	if from == "" {
		return e.Requires[0], ""
	}
	if !slices.Contains(e.Requires, from) {
		return "", fmt.Sprintf("%s does not require %s in %s: promote from an environment it requires (%s).", e.Name, Quote(from), config.Path, strings.Join(e.Requires, ", "))
	}
	return from, ""
}

// PromoteTarget is the scope of sel promoted in the configured environment e, dispatched as the
// App's installation: on the scope's branch, except in a pull request's preview, which has none.
// The comment command, the API and the status page's Promote button all promote through it and
// Promote.
func PromoteTarget(e *config.Environment, sel config.Selection, installation int64) Target {
	t := Target{Sel: sel, Installation: installation}
	if !e.Preview() {
		t.Branch = t.Scope().Branch
	}
	return t
}

// Promote accepts the commit live in from's scope as a new intent of t's environment (asked for,
// like a redeploy, even if that environment has seen a newer one), then dispatches the scope's
// workflow on its configured branch for the new generation, as a rollback does: the dispatched run
// claims the generation and deploys the commit its sha output names. The intent carries the
// dispatch's origin, so the recovery sweep starts the workflow again if its run dies. A repeated
// request (the same delivery) changes nothing and dispatches nothing.
func (a *App) Promote(ctx context.Context, log *slog.Logger, t Target, from, actor, request, source string) (*PromoteDone, error) {
	env, scope := t.Sel.Environment, t.Scope().Name
	origin := ""
	if t.Branch != "" {
		origin = OriginFor(t.Installation, t.Scope().Repository, t.Branch)
	}
	res, err := a.Auth.Promote(ctx, authority.PromoteRequest{Environment: env, Scope: scope, From: from, Actor: actor,
		Request: request, Source: source, Origin: origin})
	if err != nil {
		return nil, err
	}
	done := &PromoteDone{From: from, Generation: res.Generation, Sha: res.Sha, Duplicate: res.Duplicate}
	log.InfoContext(ctx, "promote", "environment", env, "scope", scope, "from", from, "generation", res.Generation, "sha", res.Sha, "duplicate", res.Duplicate)
	if res.Duplicate {
		return done, nil // the first request dispatched; what it failed to start, the sweep re-drives
	}
	if t.Branch == "" {
		done.NoBranch = true
		return done, nil
	}
	var errs []error
	for _, dr := range DispatchesFor(t.Sel, res.AcceptResult, t.Branch, t.Installation) {
		done.Dispatched = append(done.Dispatched, dr)
		if a.Dispatch == nil {
			log.InfoContext(ctx, "dispatch skipped: no App credentials, not publishing to GitHub", "repo", dr.Repo.String(),
				"workflow", dr.Workflow, "ref", dr.Ref, "inputs", dr.Inputs)
			continue
		}
		if err := a.Dispatch.Dispatch(ctx, dr); err != nil {
			errs = append(errs, &DispatchError{fmt.Errorf("dispatch %s in %s for the promotion of %s: %w", dr.Workflow, dr.Repo, t.Resource(), err)})
		}
	}
	return done, errors.Join(errs...)
}
