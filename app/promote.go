package app

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

// promoteDone is what a promotion did.
type promoteDone struct {
	From       string
	Generation int64
	Sha        string
	Duplicate  bool
	Dispatched []DispatchRequest
	// NoBranch: the scope has no branch in the configuration to dispatch its workflow on.
	NoBranch bool
}

// promoteFrom is the environment a promotion of env takes its commit from: from when given, which
// must be one env requires, else the first env requires. A problem is said to the caller.
func promoteFrom(e *config.Environment, from string) (string, string) {
	if len(e.Requires) == 0 {
		return "", fmt.Sprintf("%s requires no environment in %s, so there is nothing to promote from (an administrator adds requires: [staging] to it).", e.Name, config.Path)
	}
	if from == "" {
		return e.Requires[0], ""
	}
	if !slices.Contains(e.Requires, from) {
		return "", fmt.Sprintf("%s does not require %s in %s: promote from an environment it requires (%s).", e.Name, quote(from), config.Path, strings.Join(e.Requires, ", "))
	}
	return from, ""
}

// promoteTarget is the scope of sel promoted in the configured environment e, dispatched as the
// App's installation: on the scope's branch, except in a pull request's preview, which has none.
// The comment command, the API and the status page's Promote button all promote through it and
// promote.
func promoteTarget(e *config.Environment, sel config.Selection, installation int64) rollbackTarget {
	t := rollbackTarget{sel: sel, installation: installation}
	if !e.Preview() {
		t.branch = t.scope().Branch
	}
	return t
}

// promote accepts the commit live in from's scope as a new intent of t's environment (asked for,
// like a redeploy, even if that environment has seen a newer one), then dispatches the scope's
// workflow on its configured branch for the new generation, as a rollback does: the dispatched run
// claims the generation and deploys the commit its sha output names. The intent carries the
// dispatch's origin, so the recovery sweep starts the workflow again if its run dies. A repeated
// request (the same delivery) changes nothing and dispatches nothing.
func (a *App) promote(ctx context.Context, log *slog.Logger, t rollbackTarget, from, actor, request, source string) (*promoteDone, error) {
	env, scope := t.sel.Environment, t.scope().Name
	origin := ""
	if t.branch != "" {
		origin = originFor(t.installation, t.scope().Repository, t.branch)
	}
	res, err := a.auth.Promote(ctx, authority.PromoteRequest{Environment: env, Scope: scope, From: from, Actor: actor,
		Request: request, Source: source, Origin: origin})
	if err != nil {
		return nil, err
	}
	done := &promoteDone{From: from, Generation: res.Generation, Sha: res.Sha, Duplicate: res.Duplicate}
	log.InfoContext(ctx, "promote", "environment", env, "scope", scope, "from", from, "generation", res.Generation, "sha", res.Sha, "duplicate", res.Duplicate)
	if res.Duplicate {
		return done, nil // the first request dispatched; what it failed to start, the sweep re-drives
	}
	if t.branch == "" {
		done.NoBranch = true
		return done, nil
	}
	var errs []error
	for _, dr := range dispatchesFor(t.sel, res.AcceptResult, t.branch, t.installation) {
		done.Dispatched = append(done.Dispatched, dr)
		if a.dispatch == nil {
			log.InfoContext(ctx, "dispatch skipped: no App credentials, not publishing to GitHub", "repo", dr.Repo.String(),
				"workflow", dr.Workflow, "ref", dr.Ref, "inputs", dr.Inputs)
			continue
		}
		if err := a.dispatch.Dispatch(ctx, dr); err != nil {
			errs = append(errs, &dispatchError{fmt.Errorf("dispatch %s in %s for the promotion of %s: %w", dr.Workflow, dr.Repo, t.resource(), err)})
		}
	}
	return done, errors.Join(errs...)
}

// promotionScopes selects, for /latestwins promote SCOPE, every environment that requires another
// and has SCOPE built from repo in the configuration. A problem is a reply for the commenter.
func promotionScopes(cfg *config.Config, repo RepoRef, scope string) ([]config.Selection, string) {
	var sels []config.Selection
	for i := range cfg.Environments {
		e := &cfg.Environments[i]
		if e.Preview() || len(e.Requires) == 0 {
			continue
		}
		for _, s := range e.Scopes {
			if s.Name == scope && s.FedBy(repo.String()) {
				sels = append(sels, config.Selection{Environment: e.Name, Policy: e.Policy, Requires: e.Requirements(), Scopes: []config.Scope{s}})
			}
		}
	}
	if len(sels) == 0 {
		return nil, fmt.Sprintf("No environment of %s that requires another builds %s from %s, so there is nothing to promote (name one as ENV/%s, or add requires: to an environment).",
			config.Path, quote(scope), repo, scope)
	}
	return sels, ""
}
