package githubapp

import (
	"context"
	"fmt"

	"github.com/google/go-github/v60/github"
)

// CompareCommits tells how head relates to base in owner/repo, as GitHub's compare API says:
// "ahead" (head builds on base), "behind", "identical" or "diverged".
func (c *Client) CompareCommits(ctx context.Context, owner, repo, base, head string) (string, error) {
	op := fmt.Sprintf("compare %s...%s in %s/%s", base, head, owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo, "base", base, "head", head); err != nil {
		return "", err
	}
	// Only the status is needed: one commit listed at most.
	cmp, _, err := c.gh.Repositories.CompareCommits(ctx, owner, repo, base, head, &github.ListOptions{PerPage: 1})
	if err != nil {
		return "", c.wrap(op, err)
	}
	switch s := cmp.GetStatus(); s {
	case "ahead", "behind", "identical", "diverged":
		return s, nil
	default:
		return "", fmt.Errorf("%s: GitHub answered status %q", op, s)
	}
}
