package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
)

// Target is one scope of one environment to roll back: the selection names the scope as
// the configuration has it (its repository and workflow). Branch is the scope's configured branch
// for an environment that is not a preview: where its workflow is dispatched when the commit's own
// ref is no branch.
type Target struct {
	Sel          config.Selection
	Branch       string
	Installation int64
}

func (t Target) Scope() config.Scope { return t.Sel.Scopes[0] }

func (t Target) Resource() string { return t.Sel.Environment + "/" + t.Scope().Name }

// RollbackDone is what a rollback did.
type RollbackDone struct {
	Generation int64
	Sha        string
	Duplicate  bool
	Dispatched []DispatchRequest
	// Ref is the commit's ref when it is no branch of the repository: nothing was dispatched.
	NotBranch string
}

// Rollback accepts an older commit of one scope ahead of everything pending and freezes the scope
// (authority.Rollback), then dispatches the scope's workflow at once for the rollback's generation,
// on the commit's branch: the dispatched run claims that generation and checks out the commit the
// Action's sha output names. The intent carries the origin of that dispatch, so that the recovery
// sweep starts the workflow again if its run dies. to is empty (the commit live before the current
// one), or a full or abbreviated sha of a commit that was live in the scope. A repeated request
// (the same delivery or form) changes nothing and dispatches nothing.
func (a *App) Rollback(ctx context.Context, log *slog.Logger, t Target, to, actor, reason, request, source string) (*RollbackDone, error) {
	env, scope := t.Sel.Environment, t.Scope().Name
	doc, err := a.Auth.Status(ctx, env)
	if err != nil {
		return nil, err // an environment nothing was accepted for is an input error: nothing to roll back
	}
	sc := doc.Scopes[scope]
	if sc == nil {
		return nil, &authority.InputError{Field: "scope", Value: t.Resource(), Fix: "nothing was accepted for this scope yet: there is nothing to roll back"}
	}
	sha, ref, err := a.resolveCommit(ctx, env, scope, sc, to)
	if err != nil {
		return nil, err
	}
	branch, isBranch := strings.CutPrefix(ref, "refs/heads/")
	if !isBranch && t.Branch != "" {
		branch, ref, isBranch = t.Branch, "refs/heads/"+t.Branch, true
	}
	origin := ""
	if isBranch {
		origin = OriginFor(t.Installation, t.Scope().Repository, branch)
	}
	res, err := a.Auth.Rollback(ctx, authority.RollbackRequest{Environment: env, Scope: scope, To: sha, Ref: ref,
		Actor: actor, Reason: reason, Request: request, Source: source, Origin: origin})
	if err != nil {
		return nil, err
	}
	done := &RollbackDone{Generation: res.Generation, Sha: sha, Duplicate: res.Duplicate}
	if after, err := a.Auth.Status(ctx, env); err == nil && after.Scopes[scope] != nil && after.Scopes[scope].Freeze != nil &&
		after.Scopes[scope].Freeze.Generation == res.Generation {
		done.Sha = after.Scopes[scope].Freeze.Sha
	}
	log.InfoContext(ctx, "rollback", "environment", env, "scope", scope, "generation", res.Generation, "sha", done.Sha, "duplicate", res.Duplicate)
	if res.Duplicate {
		return done, nil // the first request dispatched; what it failed to start, the sweep re-drives
	}
	if !isBranch {
		done.NotBranch = ref
		return done, nil
	}
	var errs []error
	for _, dr := range DispatchesFor(t.Sel, res, branch, t.Installation) {
		done.Dispatched = append(done.Dispatched, dr)
		if a.Dispatch == nil {
			log.InfoContext(ctx, "dispatch skipped: no App credentials, not publishing to GitHub", "repo", dr.Repo.String(),
				"workflow", dr.Workflow, "ref", dr.Ref, "inputs", dr.Inputs)
			continue
		}
		if err := a.Dispatch.Dispatch(ctx, dr); err != nil {
			errs = append(errs, &DispatchError{fmt.Errorf("dispatch %s in %s for the rollback of %s: %w", dr.Workflow, dr.Repo, t.Resource(), err)})
		}
	}
	return done, errors.Join(errs...)
}

// resolveCommit finds the commit a rollback goes to, and its ref: to empty is the one live before
// the current one; otherwise to, a full sha or an abbreviation, must name exactly one commit that
// was live in the scope (authority.ResolveCommit). Through the App a rollback may only go back: a
// commit that never reached the scope would skip its review and the environments it requires (the
// command line, with the store's credentials, may name any).
func (a *App) resolveCommit(ctx context.Context, env, scope string, sc *authority.Scope, to string) (sha, ref string, err error) {
	liveRef := ""
	if sc.Live != nil {
		liveRef = sc.Live.Ref
	}
	if to == "" {
		if sc.Prev == nil {
			return "", "", nil // the authority says there is nothing to go back to
		}
		return "", sc.Prev.Ref, nil
	}
	c, err := a.Auth.ResolveCommit(ctx, env, scope, authority.CanonicalSha(to))
	var in *authority.InputError
	switch {
	case errors.As(err, &in) && in.Field == "sha":
		return "", "", &authority.InputError{Field: in.Field, Value: in.Value,
			Fix: strings.TrimSuffix(in.Fix, authority.AnyCommitHint) +
				": through the App a rollback goes back to a commit the scope ran; to deploy another, push it (or use the command line, which may name any)"}
	case err != nil:
		return "", "", err
	}
	return c.Sha, cmp.Or(c.Ref, liveRef), nil
}

// StartHeld starts, right after an unfreeze or a decision about a blocking failure, the commit that
// goes next in scope of env: its workflow is dispatched again from the origin the App recorded with
// it (as the recovery sweep would on its next round). Nothing is started while the rollback itself is still pending (its
// own dispatch is under way), for work the App did not start (no origin), or without App
// credentials. A failure is logged: the sweep starts the work on its next round.
func (a *App) StartHeld(ctx context.Context, log *slog.Logger, env, scope string) {
	if a.Dispatch == nil {
		return
	}
	e, err := a.Auth.Status(ctx, env)
	if err != nil {
		log.WarnContext(ctx, "unfreeze: read the scope to start what goes next", "environment", env, "scope", scope, "err", err)
		return
	}
	sc := e.Scopes[scope]
	if sc == nil || sc.Mailbox == nil || sc.Mailbox.Rollback || sc.Mailbox.Failed || sc.Mailbox.Origin == "" {
		return
	}
	m := sc.Mailbox
	w := authority.StalledWork{Environment: env, Generation: max(sc.Owner, m.Generation), Scopes: []string{scope}, Attempt: m.Attempt,
		Origins: map[string]string{scope: m.Origin}}
	if err := a.Redrive(ctx, w); err != nil {
		log.WarnContext(ctx, "unfreeze: could not start what goes next; the recovery sweep will", "environment", env, "scope", scope, "err", err)
	}
}
