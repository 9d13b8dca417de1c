package surfaces

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
)

// HandleDeploymentStatus closes the loop of the deployment protection rule: a job gated only by the
// rule runs no latestwins step, so its deployment's status is how its outcome is recorded. A
// success makes the approved commit live; a failure or error counts an attempt (terminal on the
// last); other states are not outcomes. Only a scope whose pending intent is that very commit is
// changed (authority.Report).
func (a *Handler) HandleDeploymentStatus(ctx context.Context, log *slog.Logger, d core.Delivery, res *core.Result) error {
	ev, ok := d.Payload.(*github.DeploymentStatusEvent)
	if !ok {
		return &core.MalformedError{Reason: fmt.Sprintf("deployment_status payload is a %T", d.Payload)}
	}
	state := ev.GetDeploymentStatus().GetState()
	installation := ev.GetInstallation().GetID()
	ghEnv := ev.GetDeployment().GetEnvironment()
	sha := ev.GetDeployment().GetSHA()
	log = log.With("installation_id", installation, "repo", ev.GetRepo().GetFullName(), "github_environment", ghEnv, "state", state, "sha", sha)
	if state != "success" && state != "failure" && state != "error" {
		res.Outcome, res.Status, res.Message = core.OutcomeIgnored, http.StatusAccepted, fmt.Sprintf("deployment status %q is not an outcome", state)
		return nil
	}
	repo, err := core.ParseRepo(ev.GetRepo().GetFullName())
	if err != nil {
		return err
	}
	if ghEnv == "" || sha == "" {
		return &core.MalformedError{Reason: "the deployment names no environment or no commit"}
	}
	cfg, err := a.ConfigFor(ctx, log, installation, repo, "")
	if errors.Is(err, authority.ErrInvalidInput) {
		res.Outcome, res.Status, res.Message = core.OutcomeIgnored, http.StatusAccepted, fmt.Sprintf("not recorded: %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	envName, envCfg, found := cfg.ForGitHubEnvironment(ghEnv)
	var scopes []string
	if found {
		scopes = envCfg.ScopesFedBy(repo.String())
	}
	if len(scopes) == 0 {
		res.Outcome, res.Status = core.OutcomeIgnored, http.StatusAccepted
		res.Message = fmt.Sprintf("no latestwins scope of %s deploys to the GitHub environment %q", repo, ghEnv)
		return nil
	}
	run := cmp.Or(ev.GetDeploymentStatus().GetLogURL(), ev.GetDeploymentStatus().GetTargetURL())
	r, err := a.Auth.Report(ctx, authority.Report{ID: d.ID, Environment: envName, Scopes: scopes, Sha: sha, Deployment: ev.GetDeployment().GetID(), Success: state == "success",
		Run: run, Message: fmt.Sprintf("deployment %d %s: %s", ev.GetDeployment().GetID(), state, ev.GetDeploymentStatus().GetDescription())})
	if errors.Is(err, authority.ErrInvalidInput) {
		res.Outcome, res.Status, res.Message = core.OutcomeIgnored, http.StatusAccepted, fmt.Sprintf("not recorded: %v", err)
		return nil
	}
	if err != nil {
		return err
	}
	res.Outcome, res.Message = core.OutcomeRecorded, fmt.Sprintf("%s: %v", envName, r.Results)
	if r.Overall() == authority.ResultUnapproved {
		res.Outcome = core.OutcomeUnapproved
		res.Message = fmt.Sprintf("%s: deployment %d was not approved by latestwins' protection rule: recorded as a warning, not counted as live", envName, ev.GetDeployment().GetID())
		log.WarnContext(ctx, "deployment status of a deployment latestwins did not approve", "environment", envName, "deployment_id", ev.GetDeployment().GetID())
		return nil
	}
	log.InfoContext(ctx, "deployment outcome recorded", "environment", envName, "results", r.Results)
	return nil
}
