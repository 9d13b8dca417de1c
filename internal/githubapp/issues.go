package githubapp

import (
	"context"
	"fmt"

	"github.com/google/go-github/v60/github"
)

// CreateIssue opens an issue in owner/repo and returns its number.
func (c *Client) CreateIssue(ctx context.Context, owner, repo, title, body string) (int, error) {
	op := fmt.Sprintf("open an issue in %s/%s", owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo, "title", title); err != nil {
		return 0, err
	}
	created, _, err := c.gh.Issues.Create(ctx, owner, repo, &github.IssueRequest{Title: github.String(title), Body: github.String(body)})
	if err != nil {
		return 0, c.wrap(op, err)
	}
	if created.GetNumber() <= 0 {
		return 0, fmt.Errorf("%s: GitHub answered no issue number", op)
	}
	return created.GetNumber(), nil
}

// CloseIssue closes issue number of owner/repo as completed. Closing a closed issue succeeds.
func (c *Client) CloseIssue(ctx context.Context, owner, repo string, number int) error {
	op := fmt.Sprintf("close %s/%s#%d", owner, repo, number)
	if err := requireNames(op, "owner", owner, "repo", repo); err != nil {
		return err
	}
	if number <= 0 {
		return fmt.Errorf("%s: the issue number must be positive", op)
	}
	_, _, err := c.gh.Issues.Edit(ctx, owner, repo, number, &github.IssueRequest{State: github.String("closed"), StateReason: github.String("completed")})
	if err != nil {
		return c.wrap(op, err)
	}
	return nil
}
