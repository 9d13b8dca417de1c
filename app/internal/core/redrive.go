package core

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
)

// originPrefix marks the intent origins the App writes: github:INSTALLATION:OWNER/NAME@BRANCH, the
// installation to act as, the repository whose configuration selected the scopes, and the branch
// its workflows were dispatched on.
const originPrefix = "github:"

// actionOrigin marks the origins the Action writes for the intents it accepts on a store:
// gha:OWNER/REPO/PATH@REF, its workflow (internal/action.OriginPrefix).
const actionOrigin = "gha:"

func OriginFor(installation int64, repo, branch string) string {
	return fmt.Sprintf("%s%d:%s@%s", originPrefix, installation, repo, branch)
}

func ParseOrigin(s string) (installation int64, repo RepoRef, branch string, err error) {
	rest, ok := strings.CutPrefix(s, originPrefix)
	inst, rest, ok2 := strings.Cut(rest, ":")
	full, branch, ok3 := strings.Cut(rest, "@")
	if !ok || !ok2 || !ok3 || branch == "" {
		return 0, RepoRef{}, "", fmt.Errorf("origin %q is not one the App wrote", s)
	}
	if installation, err = strconv.ParseInt(inst, 10, 64); err != nil {
		return 0, RepoRef{}, "", fmt.Errorf("origin %q: installation: %w", s, err)
	}
	if repo, err = ParseRepo(full); err != nil {
		return 0, RepoRef{}, "", fmt.Errorf("origin %q: %w", s, err)
	}
	return installation, repo, branch, nil
}

// Redrive starts stalled work again, for the recovery sweep: for each origin of the work's scopes it
// reads that repository's configuration and dispatches the workflows of those scopes on the same
// branch, as the same generation. Work that the App did not start (an Action run that claimed its
// own intent) has no origin the App can use: that is an error the sweep reports, and the work stays
// pending for its own workflow's re-run. Failures that retrying cannot cure (no or an unreadable
// origin, an environment or workflow the configuration no longer has, a branch or workflow GitHub
// no longer knows) match authority.ErrPermanent, so that the sweep counts their attempt; the rest
// (GitHub unreachable, rate limited, failing) are transient.
func (a *App) Redrive(ctx context.Context, w authority.StalledWork) error {
	byOrigin := map[string][]string{}
	for _, s := range w.Scopes {
		byOrigin[w.Origins[s]] = append(byOrigin[w.Origins[s]], s)
	}
	var errs []error
	for _, origin := range slices.Sorted(maps.Keys(byOrigin)) {
		scopes := byOrigin[origin]
		if err := a.redriveOrigin(ctx, w, origin, scopes); err != nil {
			errs = append(errs, fmt.Errorf("re-drive %s %s at generation %d: %w", w.Environment, strings.Join(scopes, ","), w.Generation, err))
		}
	}
	return errors.Join(errs...)
}

func (a *App) redriveOrigin(ctx context.Context, w authority.StalledWork, origin string, scopes []string) error {
	if origin == "" {
		return permanent(errors.New("the intent was not made by the App (no origin): re-run its workflow"))
	}
	if wf, ok := strings.CutPrefix(origin, actionOrigin); ok {
		return permanent(fmt.Errorf("the intent was not made by the App but by the Action in the workflow %s: re-run that workflow, "+
			"or let a scheduled latestwins sweep dispatch it (examples/state-in-the-repository-sweep.yml)", wf))
	}
	inst, repo, branch, err := ParseOrigin(origin)
	if err != nil {
		return permanent(err)
	}
	if a.Dispatch == nil {
		return errors.New("no App credentials: cannot dispatch workflows")
	}
	cfg, err := a.Config.Config(ctx, inst, repo, branch)
	if err != nil {
		return err
	}
	env, ok := cfg.Environment(w.Environment)
	if !ok {
		return permanent(&authority.InputError{Field: "environment", Value: w.Environment,
			Fix: fmt.Sprintf("%s of %s no longer has it; add it back, or end the work with latestwins unlock and a new push", config.Path, repo)})
	}
	sel := config.Selection{Environment: w.Environment, Policy: env.Policy}
	for _, sc := range env.Scopes {
		if slices.Contains(scopes, sc.Name) {
			sel.Scopes = append(sel.Scopes, sc)
		}
	}
	drs := DispatchesFor(sel, &authority.AcceptResult{Generation: w.Generation, Accepted: scopes}, branch, inst)
	if len(drs) == 0 {
		return permanent(fmt.Errorf("%s of %s names no workflow for %s: nothing to dispatch", config.Path, repo, strings.Join(scopes, ",")))
	}
	var errs []error
	// The same three inputs as the first dispatch (environment, generation, scopes): a workflow
	// declares them, and GitHub refuses inputs a workflow does not declare. The sweep counts attempts.
	for _, dr := range drs {
		err := a.Dispatch.Dispatch(ctx, dr)
		switch {
		case err == nil:
		case refusedDispatch(err):
			errs = append(errs, permanent(fmt.Errorf("dispatch %s on %s in %s: the branch or the workflow is gone, or the workflow no longer takes these inputs: %w",
				dr.Workflow, dr.Ref, dr.Repo, err)))
		default:
			errs = append(errs, fmt.Errorf("dispatch %s in %s: %w", dr.Workflow, dr.Repo, err))
		}
	}
	return errors.Join(errs...)
}

// permanent marks err as one retrying cannot cure.
func permanent(err error) error { return &permanentError{err} }

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() []error {
	return []error{e.err, authority.ErrPermanent}
}

// refusedDispatch reports whether GitHub refused a workflow_dispatch for good: 404 (the repository,
// the workflow or the App's access is gone) or 422 (the branch is gone, or the workflow has no
// workflow_dispatch trigger or rejects the inputs). Rate limits and 5xx answers are not.
func refusedDispatch(err error) bool {
	var resp *github.ErrorResponse
	if !errors.As(err, &resp) || resp.Response == nil {
		return false
	}
	code := resp.Response.StatusCode
	return code == http.StatusNotFound || code == http.StatusUnprocessableEntity
}
