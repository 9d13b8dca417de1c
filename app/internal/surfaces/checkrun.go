package surfaces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
)

// checkRunPrefix starts the name of every check run latestwins publishes: "latestwins / ENV".
const checkRunPrefix = "latestwins / "

// HandleCheckRun turns "Re-run" on a latestwins check run into a redeploy intent: the check run's
// head commit, for the scopes of its environment that are built from the repository and that the
// store has seen at that commit (all of them when it has seen none).
func (a *Handler) HandleCheckRun(ctx context.Context, log *slog.Logger, d core.Delivery, res *core.Result) error {
	ev, ok := d.Payload.(*github.CheckRunEvent)
	if !ok {
		return &core.MalformedError{Reason: fmt.Sprintf("check_run payload is a %T", d.Payload)}
	}
	cr := ev.GetCheckRun()
	log = log.With("installation_id", ev.GetInstallation().GetID(), "repo", ev.GetRepo().GetFullName(), "check_run", cr.GetName(), "action", ev.GetAction())
	envName, ours := strings.CutPrefix(cr.GetName(), checkRunPrefix)
	switch {
	case ev.GetAction() != "rerequested":
		res.Outcome, res.Status, res.Message = core.OutcomeIgnored, http.StatusAccepted, fmt.Sprintf("check_run %s: only a re-run request redeploys", ev.GetAction())
		return nil
	case !ours:
		res.Outcome, res.Status, res.Message = core.OutcomeIgnored, http.StatusAccepted, fmt.Sprintf("check run %s is not one latestwins publishes", core.Quote(cr.GetName()))
		return nil
	}
	if err := authority.ValidateEnvironment(envName); err != nil {
		return fmt.Errorf("check run %s: %w", core.Quote(cr.GetName()), err)
	}
	repo, err := core.ParseRepo(ev.GetRepo().GetFullName())
	if err != nil {
		return err
	}
	sha := cr.GetHeadSHA()
	cfg, err := a.ConfigFor(ctx, log, ev.GetInstallation().GetID(), repo, sha)
	if err != nil {
		return err
	}
	envCfg, found := cfg.Environment(envName)
	if !found {
		return &authority.InputError{Field: "environment", Value: envName,
			Fix: fmt.Sprintf("the check run names an environment that %s of %s no longer has; add it back, or deploy another way", config.Path, repo)}
	}
	sel := config.Selection{Environment: envName, Policy: envCfg.Policy}
	for _, s := range envCfg.Scopes {
		if s.FedBy(repo.String()) {
			sel.Scopes = append(sel.Scopes, s)
		}
	}
	if len(sel.Scopes) == 0 {
		res.Outcome, res.Message = core.OutcomeNoScopes, fmt.Sprintf("no scope of %s is built from %s", envName, repo)
		return nil
	}
	if err := a.narrowToSha(ctx, &sel, sha); err != nil {
		return err
	}
	branch := cr.GetCheckSuite().GetHeadBranch()
	in := authority.Intent{ID: d.ID, Sha: sha, Redeploy: true, Source: "check run re-run " + repo.String(), Actor: ev.GetSender().GetLogin()}
	if branch != "" {
		in.Ref = "refs/heads/" + branch
	}
	// A redeploy's changes are not known: a barrier wherever the scope has barrier-paths.
	if err := a.Accept(ctx, log, []config.Selection{sel}, in, nil, branch, ev.GetInstallation().GetID(), res); err != nil {
		return err
	}
	if branch == "" && res.Outcome == core.OutcomeAccepted {
		res.Message = "accepted; the check suite names no branch, so nothing was dispatched: the workflow claims it when it runs"
	}
	return nil
}

// narrowToSha keeps the selection's scopes for which the store has seen sha (pending, live, failed
// or in the timeline); when it has seen it for none, the selection stays as it is.
func (a *Handler) narrowToSha(ctx context.Context, sel *config.Selection, sha string) error {
	env, err := a.Auth.Status(ctx, sel.Environment)
	if err != nil {
		if errors.Is(err, authority.ErrInvalidInput) {
			return nil
		}
		return err
	}
	seen := map[string]bool{}
	for name, sc := range env.Scopes {
		if (sc.Mailbox != nil && sc.Mailbox.Sha == sha) || (sc.Live != nil && sc.Live.Sha == sha) || (sc.Failure != nil && sc.Failure.Sha == sha) {
			seen[name] = true
		}
	}
	for _, ev := range env.Events {
		if ev.Sha == sha && ev.Scope != "" {
			seen[ev.Scope] = true
		}
	}
	kept := slices.DeleteFunc(slices.Clone(sel.Scopes), func(s config.Scope) bool { return !seen[s.Name] })
	if len(kept) > 0 {
		sel.Scopes = kept
	}
	return nil
}
