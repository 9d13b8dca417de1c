package githubapp

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/go-github/v60/github"
)

// Deployment is a deployment to record in GitHub's environments view.
type Deployment struct {
	// Ref is the sha (or branch, tag) deployed; Environment its GitHub environment name.
	Ref, Environment, Description string
	// Payload is extra JSON-encodable data stored with the deployment, such as the generation.
	Payload any
	// Transient marks an environment that goes away (a preview); Production a production one.
	Transient, Production bool
}

// CreateDeployment records a deployment and returns its ID. It never merges the default branch into
// ref and asks for no commit status checks: latestwins has already decided what deploys.
func (c *Client) CreateDeployment(ctx context.Context, owner, repo string, d Deployment) (int64, error) {
	op := fmt.Sprintf("create deployment of %s to %s in %s/%s", d.Ref, d.Environment, owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo, "ref", d.Ref, "environment", d.Environment); err != nil {
		return 0, err
	}
	created, _, err := c.gh.Repositories.CreateDeployment(ctx, owner, repo, &github.DeploymentRequest{
		Ref:                   github.String(d.Ref),
		AutoMerge:             github.Bool(false),
		RequiredContexts:      &[]string{},
		Payload:               d.Payload,
		Environment:           github.String(d.Environment),
		Description:           optional(d.Description),
		TransientEnvironment:  github.Bool(d.Transient),
		ProductionEnvironment: github.Bool(d.Production),
	})
	var accepted *github.AcceptedError
	if errors.As(err, &accepted) {
		return 0, fmt.Errorf("%s: GitHub queued a merge instead of creating the deployment (202)", op)
	}
	if err != nil {
		return 0, c.wrap(op, err)
	}
	return created.GetID(), nil
}

// DeploymentStatus is a deployment's new state.
type DeploymentStatus struct {
	// State is error, failure, inactive, in_progress, queued, pending or success.
	State string
	// EnvironmentURL is where the deployed thing answers; LogURL where its log is.
	EnvironmentURL, LogURL, Description string
}

// CreateDeploymentStatus sets the state of deployment deploymentID. A success marks the environment's
// earlier deployments inactive, as GitHub does by default.
func (c *Client) CreateDeploymentStatus(ctx context.Context, owner, repo string, deploymentID int64, s DeploymentStatus) error {
	op := fmt.Sprintf("set deployment %d of %s/%s to %s", deploymentID, owner, repo, s.State)
	if err := requireNames(op, "owner", owner, "repo", repo); err != nil {
		return err
	}
	switch s.State {
	case "error", "failure", "inactive", "in_progress", "queued", "pending", "success":
	default:
		return fmt.Errorf("%s: unknown state; use error, failure, inactive, in_progress, queued, pending or success", op)
	}
	_, _, err := c.gh.Repositories.CreateDeploymentStatus(ctx, owner, repo, deploymentID, &github.DeploymentStatusRequest{
		State:          github.String(s.State),
		LogURL:         optional(s.LogURL),
		Description:    optional(s.Description),
		EnvironmentURL: optional(s.EnvironmentURL),
	})
	if err != nil {
		return c.wrap(op, err)
	}
	return nil
}
