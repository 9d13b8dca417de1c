package githubapp

import (
	"context"
	"fmt"

	"github.com/google/go-github/v60/github"
)

// MaxComparedFiles is the most changed files GitHub's compare API lists for a comparison; one that
// lists this many may have more.
const MaxComparedFiles = 300

// Comparison is what GitHub's compare API says about two commits.
type Comparison struct {
	// Status is how head relates to base: "ahead" (head builds on base), "behind", "identical" or
	// "diverged".
	Status string
	// Files are the paths changed from base to head (a renamed file under both names); nil when
	// GitHub may not have listed them all (MaxComparedFiles or more).
	Files []string
}

// CompareCommits tells how head relates to base in owner/repo, as GitHub's compare API says:
// "ahead" (head builds on base), "behind", "identical" or "diverged".
func (c *Client) CompareCommits(ctx context.Context, owner, repo, base, head string) (string, error) {
	cmp, err := c.Compare(ctx, owner, repo, base, head)
	if err != nil {
		return "", err
	}
	return cmp.Status, nil
}

// Compare asks GitHub's compare API how head relates to base in owner/repo, and which files
// changed between them.
func (c *Client) Compare(ctx context.Context, owner, repo, base, head string) (*Comparison, error) {
	op := fmt.Sprintf("compare %s...%s in %s/%s", base, head, owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo, "base", base, "head", head); err != nil {
		return nil, err
	}
	// One commit listed at most: the status and the files (listed on the first page only, up to
	// MaxComparedFiles) are all that is needed.
	cmp, _, err := c.gh.Repositories.CompareCommits(ctx, owner, repo, base, head, &github.ListOptions{PerPage: 1})
	if err != nil {
		return nil, c.wrap(op, err)
	}
	switch s := cmp.GetStatus(); s {
	case "ahead", "behind", "identical", "diverged":
	default:
		return nil, fmt.Errorf("%s: GitHub answered status %q", op, s)
	}
	out := &Comparison{Status: cmp.GetStatus()}
	if len(cmp.Files) >= MaxComparedFiles {
		return out, nil
	}
	out.Files = []string{}
	for _, f := range cmp.Files {
		out.Files = append(out.Files, f.GetFilename())
		if p := f.GetPreviousFilename(); p != "" {
			out.Files = append(out.Files, p)
		}
	}
	return out, nil
}
