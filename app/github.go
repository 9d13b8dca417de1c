package app

import (
	"context"
	"fmt"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp"
)

// Installations gives the GitHub client of an App installation; *githubapp.Installations is one.
type Installations interface {
	Client(installationID int64) (*githubapp.Client, error)
}

var _ Installations = (*githubapp.Installations)(nil)

// GitHubDispatcher starts workflows with workflow_dispatch, as the installation of each request.
type GitHubDispatcher struct {
	Installations Installations
}

var _ Dispatcher = (*GitHubDispatcher)(nil)

// Dispatch starts r.Workflow on r.Ref of r.Repo with r.Inputs (environment, generation, scopes).
func (d *GitHubDispatcher) Dispatch(ctx context.Context, r DispatchRequest) error {
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

// GitHubConversation answers comment commands through the installation the comment came with.
type GitHubConversation struct {
	Installations Installations
}

var _ Conversation = (*GitHubConversation)(nil)

// React adds a reaction (githubapp.ReactionEyes, ...) to the comment.
func (g *GitHubConversation) React(ctx context.Context, at CommentRef, content string) error {
	c, err := g.Installations.Client(at.Installation)
	if err != nil {
		return fmt.Errorf("react to comment %d in %s: %w", at.CommentID, at.Repo, err)
	}
	return c.AddReaction(ctx, at.Repo.Owner, at.Repo.Name, at.CommentID, content)
}

// Reply comments on the comment's pull request.
func (g *GitHubConversation) Reply(ctx context.Context, at CommentRef, body string) error {
	c, err := g.Installations.Client(at.Installation)
	if err != nil {
		return fmt.Errorf("reply on %s#%d: %w", at.Repo, at.Number, err)
	}
	_, err = c.CreateComment(ctx, at.Repo.Owner, at.Repo.Name, at.Number, body)
	return err
}

// CanWrite asks GitHub whether user has at least write permission on the comment's repository.
func (g *GitHubConversation) CanWrite(ctx context.Context, at CommentRef, user string) (bool, error) {
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

// GitHubCommits orders commits with GitHub's compare API, as the installation of each request.
type GitHubCommits struct {
	Installations Installations
}

var _ Commits = (*GitHubCommits)(nil)

// Compare tells how head relates to base in repo.
func (g *GitHubCommits) Compare(ctx context.Context, installation int64, repo RepoRef, base, head string) (authority.CommitOrder, error) {
	c, err := g.Installations.Client(installation)
	if err != nil {
		return "", fmt.Errorf("compare %s...%s in %s: %w", base, head, repo, err)
	}
	s, err := c.CompareCommits(ctx, repo.Owner, repo.Name, base, head)
	return authority.CommitOrder(s), err
}
