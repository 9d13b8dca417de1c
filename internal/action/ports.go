package action

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/internal/githubapp"
)

// RunCanceler cancels a workflow run (on-superseded: cancel).
type RunCanceler interface {
	CancelRun(ctx context.Context, owner, repo string, runID int64) error
}

// Commenter keeps one sticky comment per pull request and environment, found by a hidden marker
// (report.CommentMarker): it updates the comment holding marker in place, or creates it.
type Commenter interface {
	UpsertComment(ctx context.Context, owner, repo string, number int, marker, body string) (int64, error)
}

// CheckRunner keeps one check run per head sha and name: it updates the newest, or creates one.
type CheckRunner interface {
	UpsertCheckRun(ctx context.Context, owner, repo, headSHA, name string, run githubapp.CheckRun) (int64, error)
}

// The production implementation of both is the REST client NewTokenClient builds.
var (
	_ Commenter   = (*githubapp.Client)(nil)
	_ CheckRunner = (*githubapp.Client)(nil)
)

// GitHubCanceler cancels workflow runs through the REST API.
type GitHubCanceler struct {
	client *github.Client
}

var _ RunCanceler = (*GitHubCanceler)(nil)

// NewGitHubCanceler returns a canceler that calls apiURL (GITHUB_API_URL; empty: api.github.com)
// with token. hc may be nil.
func NewGitHubCanceler(token, apiURL string, hc *http.Client) (*GitHubCanceler, error) {
	if token == "" {
		return nil, fmt.Errorf("cancel needs a token: set the github-token input (default: github.token)")
	}
	c := github.NewClient(hc).WithAuthToken(token)
	if apiURL != "" {
		u, err := url.Parse(strings.TrimSuffix(apiURL, "/") + "/")
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("GITHUB_API_URL %q is not a URL", apiURL)
		}
		c.BaseURL = u
	}
	return &GitHubCanceler{client: c}, nil
}

// CancelRun asks GitHub to cancel the run. GitHub answers 202: the cancellation lands shortly after.
func (g *GitHubCanceler) CancelRun(ctx context.Context, owner, repo string, runID int64) error {
	_, err := g.client.Actions.CancelWorkflowRunByID(ctx, owner, repo, runID)
	var accepted *github.AcceptedError
	if err != nil && !errors.As(err, &accepted) {
		return fmt.Errorf("cancel workflow run %d of %s/%s: %w", runID, owner, repo, err)
	}
	return nil
}
