// Package surfaces is the App's door on GitHub's own surfaces: the deployment protection rule that
// lets a job deploy only the newest accepted commit (as the deploy gate decides), the Re-run button
// of latestwins' check runs, deployment statuses that close the loop, and the superseded
// deployments it marks inactive.
package surfaces

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/report"
)

// Handler answers the deliveries of GitHub's own surfaces: deployment protection rules, the
// Re-run button of latestwins' check runs, and deployment statuses.
type Handler struct {
	*core.App
	review ProtectionReviewer
}

// New is the surfaces' handler of app, answering protection rules through review (nil without
// App credentials: the answers are logged).
func New(app *core.App, review ProtectionReviewer) *Handler {
	return &Handler{App: app, review: review}
}

// Outcomes of a deployment_protection_rule delivery.
const (
	OutcomeApproved core.Outcome = "approved" // the job deploys the newest accepted commit: approved
	OutcomeRejected core.Outcome = "rejected" // superseded, not accepted, or not configured: rejected, with a comment
)

// ProtectionReviewer answers deployment protection rules, as the installation the event came with.
type ProtectionReviewer interface {
	// Review approves or rejects the rule for the run's environment.
	Review(ctx context.Context, installation int64, run core.ProtectionRun, a core.ProtectionAnswer) error
	// MarkInactive sets a deployment's status to inactive, saying why.
	MarkInactive(ctx context.Context, installation int64, repo core.RepoRef, deploymentID int64, description string) error
}

// callbackRE matches the path of a deployment_callback_url, on github.com or under a GitHub
// Enterprise Server's /api/v3.
var callbackRE = regexp.MustCompile(`/repos/([^/]+)/([^/]+)/actions/runs/([0-9]+)/deployment_protection_rule$`)

// parseCallback reads the repository and workflow run from a deployment_protection_rule event's
// deployment_callback_url. Only the run is taken from it: the answer goes to the App's configured
// GitHub API, never to a host named in a payload.
func parseCallback(rawURL string) (core.ProtectionRun, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return core.ProtectionRun{}, fmt.Errorf("deployment callback URL %q: %w", rawURL, err)
	}
	m := callbackRE.FindStringSubmatch(u.Path)
	if m == nil {
		return core.ProtectionRun{}, fmt.Errorf("deployment callback URL %q: want .../repos/OWNER/REPO/actions/runs/RUN_ID/deployment_protection_rule", rawURL)
	}
	id, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil || id <= 0 {
		return core.ProtectionRun{}, fmt.Errorf("deployment callback URL %q: run id %q is not a positive number", rawURL, m[3])
	}
	return core.ProtectionRun{Repo: core.RepoRef{Owner: m[1], Name: m[2]}, RunID: id}, nil
}

// verdict is the answer to one deployment protection rule.
type verdict struct {
	approve bool
	comment string
	// superseded is set when a newer commit was accepted: the deployment can be shown inactive.
	superseded bool
	// env and scopes: what an approval is for (recorded with it, Authority.Approve).
	env    string
	scopes []string
}

// HandleProtectionRule answers a deployment protection rule: it approves a job whose commit is the
// newest latestwins accepted for the environment's scopes built from the repository, and rejects,
// with a comment that says why, a superseded one, a commit latestwins never accepted, and a GitHub
// environment no latestwins environment answers (docs/config.md, "Deployment protection rules").
// It only reads the store: answering twice gives the same answer while nothing new is accepted.
func (a *Handler) HandleProtectionRule(ctx context.Context, log *slog.Logger, d core.Delivery, res *core.Result) error {
	ev, ok := d.Payload.(*core.ProtectionRuleEvent)
	if !ok {
		return &core.MalformedError{Reason: fmt.Sprintf("%s payload is a %T", core.EventProtectionRule, d.Payload)}
	}
	installation := ev.GetInstallation().GetID()
	ghEnv := ev.GetEnvironment()
	log = log.With("installation_id", installation, "repo", ev.GetRepo().GetFullName(), "github_environment", ghEnv, "action", ev.GetAction())
	if ev.GetAction() != "requested" {
		res.Outcome, res.Status, res.Message = core.OutcomeIgnored, http.StatusAccepted, fmt.Sprintf("%s %s: only a request is answered", core.EventProtectionRule, ev.GetAction())
		return nil
	}
	repo, err := core.ParseRepo(ev.GetRepo().GetFullName())
	if err != nil {
		return err
	}
	run, err := parseCallback(ev.GetDeploymentCallbackURL())
	if err != nil {
		return &core.MalformedError{Reason: err.Error()}
	}
	if !strings.EqualFold(run.Repo.String(), repo.String()) {
		return &core.MalformedError{Reason: fmt.Sprintf("the deployment callback URL names %s, the event %s", run.Repo, repo)}
	}
	sha := cmp.Or(ev.Sha, ev.GetDeployment().GetSHA())
	switch {
	case ghEnv == "":
		return &core.MalformedError{Reason: "the event names no environment"}
	case sha == "":
		return &core.MalformedError{Reason: "the event names no commit (neither sha nor deployment.sha)"}
	}
	log = log.With("sha", sha, "run_id", run.RunID)

	v, err := a.protectionVerdict(ctx, log, installation, repo, ghEnv, sha)
	if err != nil {
		return err
	}
	if dep := ev.GetDeployment().GetID(); v.approve && dep > 0 {
		// Recorded before GitHub hears of it: only a deployment approved here makes its commit
		// live when its status comes (Authority.Report).
		err := a.Auth.Approve(ctx, authority.Approval{Environment: v.env, Scopes: v.scopes, Sha: sha, Deployment: dep, Run: run.RunID, Actor: ev.GetSender().GetLogin()})
		switch {
		case errors.Is(err, authority.ErrInvalidInput):
			v = verdict{comment: fmt.Sprintf("latestwins cannot approve this deployment: %v", err)}
		case err != nil:
			return fmt.Errorf("record the approval of deployment %d: %w", dep, err)
		}
	}
	review := core.ProtectionAnswer{Environment: ghEnv, Approved: v.approve, Comment: v.comment}
	res.Outcome, res.Message = OutcomeRejected, v.comment
	if v.approve {
		res.Outcome = OutcomeApproved
	}
	log.InfoContext(ctx, "deployment protection rule answered", "outcome", res.Outcome, "comment", v.comment)
	if a.review == nil {
		log.InfoContext(ctx, "review skipped: no App credentials, not publishing to GitHub")
		return nil
	}
	if err := a.review.Review(ctx, installation, run, review); err != nil {
		return &core.DispatchError{Err: fmt.Errorf("%s: %w", core.EventProtectionRule, err)}
	}
	if v.superseded {
		a.markSuperseded(ctx, log, installation, repo, ev.GetDeployment(), v.comment)
	}
	return nil
}

// protectionVerdict decides. An error is worth a re-delivery (the store, GitHub); bad or missing
// configuration is a rejection that says what to fix, since a job left waiting helps nobody. The
// configuration is the default branch's, never the gated commit's: a branch's own file could map
// its GitHub environment onto any latestwins environment (github-environment) and approve itself.
func (a *Handler) protectionVerdict(ctx context.Context, log *slog.Logger, installation int64, repo core.RepoRef, ghEnv, sha string) (verdict, error) {
	cfg, err := a.ConfigFor(ctx, log, installation, repo, "")
	if errors.Is(err, authority.ErrInvalidInput) {
		return verdict{comment: fmt.Sprintf("latestwins cannot check this deployment: %s", err)}, nil
	}
	if err != nil {
		return verdict{}, err
	}
	envName, envCfg, found := cfg.ForGitHubEnvironment(ghEnv)
	if !found {
		return verdict{comment: fmt.Sprintf("No latestwins environment answers the GitHub environment %q: in %s of %s, name an environment %q, "+
			"or set `github-environment: %s` on the one it deploys (docs/config.md, \"Deployment protection rules\").",
			ghEnv, config.Path, repo, ghEnv, ghEnv)}, nil
	}
	scopes := envCfg.ScopesFedBy(repo.String())
	if len(scopes) == 0 {
		return verdict{comment: fmt.Sprintf("The latestwins environment %s has no scope built from %s: add one to %s, "+
			"or remove latestwins from the protection rules of the GitHub environment %q.", envName, repo, config.Path, ghEnv)}, nil
	}
	env, err := a.Auth.Status(ctx, envName)
	switch {
	case errors.Is(err, authority.ErrInvalidInput):
		env = &authority.Env{Name: envName} // nothing accepted yet
	case err != nil:
		return verdict{}, fmt.Errorf("status of %s: %w", envName, err)
	}
	required, err := a.RequiredOf(ctx, env, nil)
	if err != nil {
		return verdict{}, err
	}
	v := judge(env, scopes, sha, required)
	v.env, v.scopes = envName, scopes
	return v, nil
}

// judge approves sha for scopes of env when its pass could enter its deploy phase now, as the
// deploy gate decides it: sha was accepted, no scope has a commit accepted after it that supersedes
// it, and in every scope where it is pending it is at the head (not queued behind older intents or
// behind a barrier), not held by a rollback's freeze, and live in every environment env requires
// (required, as read). Scopes it did not touch (paths) have only older work. A commit the
// environment never accepted is rejected: latestwins cannot tell whether it is the newest, and
// approving it would let an unknown commit overwrite the newest. A commit that must wait is rejected
// with what it waits for, not marked superseded: the recovery sweep dispatches its workflow again
// once it may go.
func judge(env *authority.Env, scopes []string, sha string, required map[string]*authority.Env) verdict {
	acceptedAt := env.AcceptedGeneration(sha)
	var newer *authority.Ref // the newest commit that supersedes sha, over all scopes
	for _, name := range scopes {
		sc := env.Scopes[name]
		if sc == nil {
			continue
		}
		if ref := pendingAt(sc, sha); ref != nil {
			// The deploy gate's own decision for the commit's pass, as if it asked now.
			if d := authority.Hold(env.View(name, required), ref.Generation, time.Now(), 0); !d.Go() {
				return verdict{comment: fmt.Sprintf("%s/%s: %s; latestwins dispatches it again once it may go", env.Name, name, d.Text())}
			}
			continue
		}
		if n := env.SupersededIn(name, sha); n != nil && (newer == nil || n.Generation > newer.Generation) {
			newer = n
		}
	}
	switch {
	case newer != nil:
		return verdict{comment: fmt.Sprintf("Superseded by generation %d (%s)", newer.Generation, report.ShortSha(newer.Sha)), superseded: true}
	case acceptedAt == 0:
		return verdict{comment: fmt.Sprintf("latestwins has not accepted %s for %s (%s), so it cannot tell whether it is the newest commit. "+
			"Pushes to the branch configured for these scopes are accepted; re-run this job once its push is, or deploy the commit through latestwins.",
			report.ShortSha(sha), env.Name, strings.Join(scopes, ", "))}
	}
	return verdict{approve: true, comment: fmt.Sprintf("%s is the newest commit accepted for %s (%s) at generation %d", report.ShortSha(sha), env.Name, strings.Join(scopes, ", "), acceptedAt)}
}

// pendingAt finds sha among the scope's pending intents: the newest entry of it when it is
// pending more than once, nil when it is not pending.
func pendingAt(sc *authority.Scope, sha string) *authority.Ref {
	var found *authority.Ref
	for _, r := range sc.Entries() {
		if r.Sha == sha {
			found = r
		}
	}
	return found
}
