// Package ghadapter implements the GitHub App's ports through GitHub's REST API, as the App's
// installations: workflow dispatches, comment replies and permissions, commit order, deployment
// protection answers, and the configuration files. It speaks the ports' own types
// (internal/appport) and does not depend on package app.
package ghadapter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/latestwins/latestwins/internal/alert"
	"github.com/latestwins/latestwins/internal/appport"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp"
)

// Installations gives the GitHub client of an App installation; *githubapp.Installations is one.
type Installations interface {
	Client(installationID int64) (*githubapp.Client, error)
}

var _ Installations = (*githubapp.Installations)(nil)

// Ports are the App's ports through GitHub, as the installations of one App.
type Ports struct {
	Dispatcher   *Dispatcher
	Conversation *Conversation
	Commits      *Commits
	Reviewer     *Reviewer
	// Files reads configuration files; Finder finds the installation on the trusted file's
	// repository, and AppOwner the account that owns the App (whose .github holds it by default).
	Files    *Files
	Finder   Finder
	AppOwner func(ctx context.Context) (string, error)
	// Deliveries is the App's webhook delivery log, which the App replays what it missed from.
	Deliveries *DeliveryLog
	// Issues keeps the alert notifier's issues (alert.Issues).
	Issues *Issues
}

// AlertIssues is the port the alert notifier keeps its issues through (alert.Options.Issues): the
// App's, and a nil interface, never a nil *Issues in one, when there are no Ports (no App
// credentials), so that the notifier says an alert-issue cannot be kept rather than failing on it.
func (p *Ports) AlertIssues() alert.Issues {
	if p == nil || p.Issues == nil {
		return nil
	}
	return p.Issues
}

// New builds the ports of the App whose installations inst makes clients for. auth holds the named
// leases that deduplicate configuration reads across processes.
func New(inst *githubapp.Installations, auth *authority.Authority, log *slog.Logger) (*Ports, error) {
	files, err := NewFiles(inst, auth, DefaultConfigTTL, log)
	if err != nil {
		return nil, err
	}
	return &Ports{Dispatcher: &Dispatcher{Installations: inst}, Conversation: &Conversation{Installations: inst},
		Commits: &Commits{Installations: inst}, Reviewer: &Reviewer{Installations: inst},
		Files: files, Finder: Finder{Installations: inst}, AppOwner: inst.AppOwner, Deliveries: &DeliveryLog{App: inst},
		Issues: &Issues{Installations: inst}}, nil
}

// Dispatcher starts workflows with workflow_dispatch, as the installation of each request.
type Dispatcher struct {
	Installations Installations
}

// Dispatch starts r.Workflow on r.Ref of r.Repo with r.Inputs (environment, generation, scopes).
func (d *Dispatcher) Dispatch(ctx context.Context, r appport.DispatchRequest) error {
	c, err := d.Installations.Client(r.Installation)
	if err != nil {
		return fmt.Errorf("dispatch %s in %s: %w", r.Workflow, r.Repo, err)
	}
	inputs := make(map[string]any, len(r.Inputs))
	for k, v := range r.Inputs {
		inputs[k] = v
	}
	return c.DispatchWorkflow(ctx, r.Repo.Owner, r.Repo.Name, r.Workflow, r.Ref, inputs)
}

// Conversation answers comment commands through the installation the comment came with.
type Conversation struct {
	Installations Installations
}

// React adds a reaction (eyes, +1, confused, ...) to the comment.
func (g *Conversation) React(ctx context.Context, at appport.CommentRef, content string) error {
	c, err := g.Installations.Client(at.Installation)
	if err != nil {
		return fmt.Errorf("react to comment %d in %s: %w", at.CommentID, at.Repo, err)
	}
	return c.AddReaction(ctx, at.Repo.Owner, at.Repo.Name, at.CommentID, content)
}

// Reply comments on the comment's pull request.
func (g *Conversation) Reply(ctx context.Context, at appport.CommentRef, body string) error {
	c, err := g.Installations.Client(at.Installation)
	if err != nil {
		return fmt.Errorf("reply on %s#%d: %w", at.Repo, at.Number, err)
	}
	_, err = c.CreateComment(ctx, at.Repo.Owner, at.Repo.Name, at.Number, body)
	return err
}

// CanWrite asks GitHub whether user has at least write permission on the comment's repository.
func (g *Conversation) CanWrite(ctx context.Context, at appport.CommentRef, user string) (bool, error) {
	c, err := g.Installations.Client(at.Installation)
	if err != nil {
		return false, fmt.Errorf("permission of %s on %s: %w", user, at.Repo, err)
	}
	p, err := c.Permission(ctx, at.Repo.Owner, at.Repo.Name, user)
	if err != nil {
		return false, err
	}
	return p.AtLeast(githubapp.PermissionWrite), nil
}

// HasPermission asks GitHub whether user has at least level (write, maintain, admin) on the
// comment's repository.
func (g *Conversation) HasPermission(ctx context.Context, at appport.CommentRef, user, level string) (bool, error) {
	c, err := g.Installations.Client(at.Installation)
	if err != nil {
		return false, fmt.Errorf("permission of %s on %s: %w", user, at.Repo, err)
	}
	p, err := c.Permission(ctx, at.Repo.Owner, at.Repo.Name, user)
	if err != nil {
		return false, err
	}
	return p.AtLeast(githubapp.Permission(level)), nil
}

// Commits orders commits with GitHub's compare API, as the installation of each request.
type Commits struct {
	Installations Installations
}

// Compare tells how head relates to base in repo.
func (g *Commits) Compare(ctx context.Context, installation int64, repo appport.RepoRef, base, head string) (authority.CommitOrder, error) {
	c, err := g.Installations.Client(installation)
	if err != nil {
		return "", fmt.Errorf("compare %s...%s in %s: %w", base, head, repo, err)
	}
	s, err := c.CompareCommits(ctx, repo.Owner, repo.Name, base, head)
	return authority.CommitOrder(s), err
}

// Changes tells how head relates to base in repo, and which files changed between them.
func (g *Commits) Changes(ctx context.Context, installation int64, repo appport.RepoRef, base, head string) (appport.Comparison, error) {
	c, err := g.Installations.Client(installation)
	if err != nil {
		return appport.Comparison{}, fmt.Errorf("compare %s...%s in %s: %w", base, head, repo, err)
	}
	cmp, err := c.Compare(ctx, repo.Owner, repo.Name, base, head)
	if err != nil {
		return appport.Comparison{}, err
	}
	return appport.Comparison{Order: authority.CommitOrder(cmp.Status), Files: cmp.Files}, nil
}

// Reviewer answers deployment protection rules and marks deployments inactive.
type Reviewer struct {
	Installations Installations
}

// Review posts the answer to the run's deployment_protection_rule endpoint.
func (g *Reviewer) Review(ctx context.Context, installation int64, run appport.ProtectionRun, a appport.ProtectionAnswer) error {
	c, err := g.Installations.Client(installation)
	if err != nil {
		return fmt.Errorf("review deployment to %s in run %d of %s: %w", a.Environment, run.RunID, run.Repo, err)
	}
	state := githubapp.ProtectionRejected
	if a.Approved {
		state = githubapp.ProtectionApproved
	}
	return c.ReviewProtectionRule(ctx, run.Repo.Owner, run.Repo.Name, run.RunID,
		githubapp.ProtectionReview{Environment: a.Environment, State: state, Comment: a.Comment})
}

// MarkInactive sets deployment deploymentID of repo to inactive with description.
func (g *Reviewer) MarkInactive(ctx context.Context, installation int64, repo appport.RepoRef, deploymentID int64, description string) error {
	c, err := g.Installations.Client(installation)
	if err != nil {
		return fmt.Errorf("mark deployment %d of %s inactive: %w", deploymentID, repo, err)
	}
	return c.CreateDeploymentStatus(ctx, repo.Owner, repo.Name, deploymentID, githubapp.DeploymentStatus{State: "inactive", Description: description})
}

// Finder finds the App's installation on a repository, answering an error that matches
// appport.ErrNotInstalled when it has none.
type Finder struct {
	Installations interface {
		ForRepo(ctx context.Context, owner, repo string) (int64, error)
	}
}

// ForRepo returns the id of the App's installation on owner/repo.
func (f Finder) ForRepo(ctx context.Context, owner, repo string) (int64, error) {
	id, err := f.Installations.ForRepo(ctx, owner, repo)
	if errors.Is(err, githubapp.ErrNotInstalled) {
		return 0, notInstalled{err}
	}
	return id, err
}

type notInstalled struct{ err error }

func (e notInstalled) Error() string        { return e.err.Error() }
func (e notInstalled) Unwrap() error        { return e.err }
func (e notInstalled) Is(target error) bool { return target == appport.ErrNotInstalled }

// TeamMember asks GitHub whether user is an active member of the team slug of org, as the
// installation the comment came with (which needs the organization's members permission).
func (g *Conversation) TeamMember(ctx context.Context, at appport.CommentRef, org, slug, user string) (bool, error) {
	c, err := g.Installations.Client(at.Installation)
	if err != nil {
		return false, fmt.Errorf("membership of %s in @%s/%s: %w", user, org, slug, err)
	}
	return c.TeamMember(ctx, org, slug, user)
}
