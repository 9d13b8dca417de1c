package githubapp

import (
	"context"
	"fmt"

	"github.com/google/go-github/v60/github"
)

// FileContent returns the file at path in owner/repo at ref (a branch, tag or sha; empty means the
// default branch). A missing file is a *NotFoundError (errors.Is(err, ErrNotFound)). A directory or a
// file over 1 MB, which this API does not return inline, is an error.
func (c *Client) FileContent(ctx context.Context, owner, repo, path, ref string) ([]byte, error) {
	op := fmt.Sprintf("read %s from %s/%s", path, owner, repo)
	if ref != "" {
		op += "@" + ref
	}
	if err := requireNames(op, "owner", owner, "repo", repo, "path", path); err != nil {
		return nil, err
	}
	file, dir, _, err := c.gh.Repositories.GetContents(ctx, owner, repo, path, &github.RepositoryContentGetOptions{Ref: ref})
	if err != nil {
		if notFound(err) {
			return nil, &NotFoundError{Owner: owner, Repo: repo, Path: path, Ref: ref, Err: err}
		}
		return nil, c.wrap(op, err)
	}
	if file == nil {
		return nil, fmt.Errorf("%s: it is a directory (%d entries), not a file", op, len(dir))
	}
	if file.GetType() != "file" {
		return nil, fmt.Errorf("%s: it is a %s, not a file", op, file.GetType())
	}
	content, err := file.GetContent()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return []byte(content), nil
}
