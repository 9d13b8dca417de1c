// Package core is what every door of the App shares: its dependencies (the Authority, the
// configuration source, the dispatcher, GitHub's commit order, the installations, the logger and
// the Authority's clock) and the actions several doors take: accepting and dispatching intents,
// rollback, promote, unfreeze's start of the held commit, redeploy, re-driving stalled work,
// reading environments and the ones they require, the configuration in force, and mapping errors
// to HTTP statuses. The doors (webhook intake, comment commands, the /v1 API, the status page and
// the GitHub surfaces) each hold an App and add their own ports.
package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
)

// App is what every door of the App shares: its dependencies and the actions several doors take.
type App struct {
	Auth     *authority.Authority
	Config   ConfigSource
	Dispatch Dispatcher
	Commits  Commits
	Envs     func(ctx context.Context) ([]string, error)
	Log      *slog.Logger

	Installations InstallationFinder
}

// ConfigSource gives the configuration in force for a repository at a ref (.github/latestwins.yml),
// read as the App's installation (0 when the delivery names none). An error matching
// authority.ErrInvalidInput is bad configuration (terminal); one matching ErrRefreshInProgress may
// come with the cached configuration, which the App then uses.
type ConfigSource interface {
	Config(ctx context.Context, installation int64, repo RepoRef, ref string) (*config.Config, error)
}

// Dispatcher starts workflows.
type Dispatcher interface {
	Dispatch(ctx context.Context, r DispatchRequest) error
}

// Commits orders two commits of a repository when the push payloads cannot: GitHub's compare API
// (head "ahead" of base is newer, "behind" older). Changes also says which files changed between
// them (the API's claims decide their barriers from it).
type Commits interface {
	Compare(ctx context.Context, installation int64, repo RepoRef, base, head string) (authority.CommitOrder, error)
	Changes(ctx context.Context, installation int64, repo RepoRef, base, head string) (Comparison, error)
}

// InstallationFinder finds the App's installation on a repository; a repository without the App is
// an error matching ErrNotInstalled.
type InstallationFinder interface {
	ForRepo(ctx context.Context, owner, repo string) (int64, error)
}

// ParseRepo reads OWNER/NAME.
func ParseRepo(full string) (RepoRef, error) {
	owner, name, ok := strings.Cut(full, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return RepoRef{}, &MalformedError{Reason: fmt.Sprintf("repository %q is not OWNER/NAME", full)}
	}
	return RepoRef{Owner: owner, Name: name}, nil
}

// Accept records one intent per selected environment and dispatches the workflows of the scopes
// it accepted. Each intent carries the environment's policy and promotion requirement, and is a barrier in the scopes whose
// barrier-paths the changed files touch (changed nil: not known, so a barrier wherever a scope has
// barrier-paths). A re-delivery (every intent a duplicate) dispatches nothing: the first delivery
// did, and work it failed to start stays in the mailbox for the recovery sweep. An environment
// whose scope's queue is full refuses its intent (nothing written there): the others go on, and the
// refusal is the delivery's answer (429, see Refused).
func (a *App) Accept(ctx context.Context, log *slog.Logger, sels []config.Selection, in authority.Intent, changed []string, dispatchRef string, installation int64, res *Result, opts ...authority.AcceptOption) error {
	if len(sels) == 0 {
		res.Outcome = OutcomeNoScopes
		return nil
	}
	allDup := true
	var dispatches []DispatchRequest
	for _, sel := range sels {
		in := in
		in.Environment, in.Scopes = sel.Environment, sel.ScopeNames()
		in.Policy, in.Barrier, in.Requires = authority.Policy(sel.Policy), sel.Barriers(changed), sel.Requires
		in.AlertAfter, in.Gates = sel.AlertAfter, sel.Gates
		if dispatchRef != "" && len(sel.Scopes) > 0 {
			// How the recovery sweep starts this work again if its run dies: see Redrive.
			in.Origin = OriginFor(installation, sel.Scopes[0].Repository, dispatchRef)
		}
		ar, err := a.Auth.Accept(ctx, in, false, opts...)
		var full *authority.QueueFullError
		if errors.As(err, &full) {
			res.Refused = append(res.Refused, Refusal{Environment: sel.Environment, Scope: full.Scope, Message: full.Error()})
			log.WarnContext(ctx, "intent refused: queue full", "environment", sel.Environment, "scope", full.Scope,
				"pending", full.Pending, "limit", full.Limit, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("accept %s for %s: %w", in.Sha, sel.Environment, err)
		}
		if ar.Joined {
			// The commit is already pending in every scope: nothing new to accept or dispatch; the
			// run started for it claims it.
			stale := map[string]int64{}
			for _, s := range ar.Accepted {
				stale[s] = ar.Generation
			}
			ar = &authority.AcceptResult{Generation: ar.Generation, Accepted: []string{}, Stale: stale}
		}
		res.Intents = append(res.Intents, IntentInfo{Environment: sel.Environment, Generation: ar.Generation,
			Duplicate: ar.Duplicate, Accepted: ar.Accepted, Stale: ar.Stale, Ahead: ar.Ahead, Barrier: in.Barrier})
		log.InfoContext(ctx, "intent accepted", "environment", sel.Environment, "generation", ar.Generation,
			"duplicate", ar.Duplicate, "accepted", ar.Accepted, "stale", ar.Stale, "ahead", ar.Ahead, "barrier", in.Barrier)
		if ar.Duplicate {
			continue
		}
		allDup = false
		if dispatchRef != "" {
			dispatches = append(dispatches, DispatchesFor(sel, ar, dispatchRef, installation)...)
		}
	}
	res.Outcome = OutcomeAccepted
	switch {
	case len(res.Refused) > 0:
		res.Outcome, res.Status = OutcomeQueueFull, http.StatusTooManyRequests
		msgs := make([]string, len(res.Refused))
		for i, r := range res.Refused {
			msgs[i] = r.Message
		}
		res.Message = "refused, nothing written for it: " + strings.Join(msgs, "; ")
	case allDup:
		res.Outcome, res.Message = OutcomeDuplicate, "already processed: this delivery's intents were accepted before"
		return nil
	}
	var errs []error
	for _, dr := range dispatches {
		res.Dispatched = append(res.Dispatched, dr)
		if a.Dispatch == nil {
			log.InfoContext(ctx, "dispatch skipped: no App credentials, not publishing to GitHub", "repo", dr.Repo.String(),
				"workflow", dr.Workflow, "ref", dr.Ref, "inputs", dr.Inputs)
			continue
		}
		if err := a.Dispatch.Dispatch(ctx, dr); err != nil {
			errs = append(errs, &DispatchError{fmt.Errorf("dispatch %s in %s for %s: %w", dr.Workflow, dr.Repo, dr.Inputs["environment"], err)})
		}
	}
	if len(errs) > 0 && len(res.Refused) > 0 {
		// The error is the delivery's answer: it keeps saying what was refused.
		errs = append(errs, fmt.Errorf("%s: %w", res.Message, authority.ErrQueueFull))
	}
	return errors.Join(errs...)
}

// DispatchesFor groups the accepted scopes of a selection by repository and workflow: one dispatch each.
func DispatchesFor(sel config.Selection, ar *authority.AcceptResult, ref string, installation int64) []DispatchRequest {
	accepted := map[string]bool{}
	for _, s := range ar.Accepted {
		accepted[s] = true
	}
	var out []DispatchRequest
	index := map[string]int{}
	for _, s := range sel.Scopes {
		if !accepted[s.Name] || s.Workflow == "" {
			continue
		}
		repo, err := ParseRepo(s.Repository)
		if err != nil {
			continue // the config validated OWNER/NAME
		}
		key := strings.ToLower(s.Repository) + "\x00" + s.Workflow
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, DispatchRequest{Installation: installation, Repo: repo, Workflow: s.Workflow, Ref: ref,
				Inputs: map[string]string{"environment": sel.Environment, "generation": fmt.Sprint(ar.Generation)}})
		}
		if prev := out[i].Inputs["scopes"]; prev != "" {
			out[i].Inputs["scopes"] = prev + "," + s.Name
		} else {
			out[i].Inputs["scopes"] = s.Name
		}
	}
	return out
}

// StatusFor maps a Handle error to an HTTP status: bad configuration is terminal (422), a full
// queue is a refusal worth a re-delivery once some commits deployed (429), the rest is worth a
// re-delivery (500, 502 for a failed dispatch, 503 when GitHub did not give the configuration or
// another process refreshes it).
func StatusFor(err error) int {
	var de *DispatchError
	switch {
	case errors.Is(err, authority.ErrQueueFull):
		return http.StatusTooManyRequests
	case errors.Is(err, authority.ErrInvalidInput):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrRefreshInProgress), errors.Is(err, ErrConfigUnavailable):
		return http.StatusServiceUnavailable
	case errors.As(err, &de):
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

type DispatchError struct{ Err error }

func (e *DispatchError) Error() string { return e.Err.Error() }

func (e *DispatchError) Unwrap() error { return e.Err }

// ConfigFor returns the repository's configuration. A refresh in progress elsewhere with a cached
// copy is not an error: the copy is used.
func (a *App) ConfigFor(ctx context.Context, log *slog.Logger, installation int64, repo RepoRef, ref string) (*config.Config, error) {
	cfg, err := a.Config.Config(ctx, installation, repo, ref)
	if errors.Is(err, ErrRefreshInProgress) && cfg != nil {
		log.InfoContext(ctx, "configuration refresh in progress elsewhere: using the cached copy", "repo", repo.String())
		return cfg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configuration of %s at %s: %w", repo, OrDefaultBranch(ref), err)
	}
	return cfg, nil
}

// IncidentConfig is ConfigFor for the tools of an incident (rollback, unfreeze): when the
// repository's own file is refused (the bad commit being rolled back may have broken it), the
// trusted configuration answers alone, so that the way back never depends on that file.
func (a *App) IncidentConfig(ctx context.Context, log *slog.Logger, installation int64, repo RepoRef) (*config.Config, error) {
	cfg, err := a.ConfigFor(ctx, log, installation, repo, "")
	var refused *config.NarrowError
	if errors.As(err, &refused) {
		log.WarnContext(ctx, "the repository's own configuration file is refused; the trusted configuration answers alone", "repo", repo.String(), "err", err)
		return a.ConfigFor(ctx, log, 0, repo, "")
	}
	return cfg, err
}

// ConfigWhere names where the environments are defined, for messages.
func (a *App) ConfigWhere() string {
	if w, ok := a.Config.(interface{ Where() string }); ok {
		return w.Where()
	}
	return "the configuration"
}

// Now is the Authority's clock, so that the page agrees with lease expiry.
func (a *App) Now() time.Time { return a.Auth.Now() }

// InstallationOf is the App's installation on repo, for a dispatch that no delivery names one for.
func (a *App) InstallationOf(ctx context.Context, repo RepoRef) (int64, error) {
	if a.Installations != nil {
		return a.Installations.ForRepo(ctx, repo.Owner, repo.Name)
	}
	return 0, nil // no App credentials: the dispatch is logged and skipped
}

// CompareTimeout bounds one call of GitHub's compare API.
const CompareTimeout = 5 * time.Second

// Comparer asks GitHub to order the commits of repo that the push payloads cannot. An answer it
// cannot get leaves them in arrival order, with a warning: a delivery is never refused for it.
type Comparer struct {
	Commits      Commits
	Installation int64
	Repo         RepoRef
	Log          *slog.Logger
}

func (c Comparer) Compare(ctx context.Context, in authority.Intent, base, head string) (authority.CommitOrder, error) {
	// Asked while the environment's updates in this process wait (see Authority.Accept): bounded,
	// so that a slow GitHub cannot hold up the renewals of running passes.
	ctx, cancel := context.WithTimeout(ctx, CompareTimeout)
	defer cancel()
	o, err := c.Commits.Compare(ctx, c.Installation, c.Repo, base, head)
	if err != nil {
		c.Log.WarnContext(ctx, "GitHub could not order two pushes; taking them in arrival order", "base", base, "head", head, "err", err)
		return authority.Diverged, nil
	}
	return o, nil
}

// PromotionCompare is the comparer of promotion gates (authority.WithPromotionComparer): where an
// environment accepts a descendant of a commit (requires-ancestor), it asks GitHub's compare API, as
// the installation on the repository the waiting intent's Origin names, whether the commit live in
// the required environment builds on it. An intent without an origin the App wrote (made on the
// command line) is not compared, nor is anything while Commits is nil (no App credentials): only the
// same commit counts then. Set Commits before the App takes requests.
type PromotionCompare struct {
	Commits Commits
	Log     *slog.Logger
}

// Compare implements authority.Comparer.
func (p *PromotionCompare) Compare(ctx context.Context, in authority.Intent, base, head string) (authority.CommitOrder, error) {
	if p.Commits == nil {
		return authority.Diverged, nil
	}
	installation, repo, _, err := ParseOrigin(in.Origin)
	if err != nil {
		return authority.Diverged, nil
	}
	log := p.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return Comparer{Commits: p.Commits, Installation: installation, Repo: repo, Log: log}.Compare(ctx, in, base, head)
}
