package ghadapter

import (
	"context"
	"fmt"
	"strings"

	"github.com/latestwins/latestwins/internal/githubapp"
)

// Issues keeps the alert notifier's issues (alert.Issues) as the App's installation on each
// repository.
type Issues struct {
	Installations interface {
		ForRepo(ctx context.Context, owner, repo string) (int64, error)
		Client(installationID int64) (*githubapp.Client, error)
	}
}

// Open opens an issue in repo (OWNER/NAME) and returns its number.
func (i *Issues) Open(ctx context.Context, repo, title, body string) (int, error) {
	c, owner, name, err := i.client(ctx, repo)
	if err != nil {
		return 0, err
	}
	return c.CreateIssue(ctx, owner, name, title, body)
}

// Comment adds body to issue number of repo.
func (i *Issues) Comment(ctx context.Context, repo string, number int, body string) error {
	c, owner, name, err := i.client(ctx, repo)
	if err != nil {
		return err
	}
	_, err = c.CreateComment(ctx, owner, name, number, body)
	return err
}

// Close comments body on issue number of repo, then closes it.
func (i *Issues) Close(ctx context.Context, repo string, number int, body string) error {
	c, owner, name, err := i.client(ctx, repo)
	if err != nil {
		return err
	}
	if _, err := c.CreateComment(ctx, owner, name, number, body); err != nil {
		return err
	}
	return c.CloseIssue(ctx, owner, name, number)
}

func (i *Issues) client(ctx context.Context, repo string) (*githubapp.Client, string, string, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" {
		return nil, "", "", fmt.Errorf("issues of %q: give the repository as OWNER/NAME", repo)
	}
	id, err := i.Installations.ForRepo(ctx, owner, name)
	if err != nil {
		return nil, "", "", fmt.Errorf("issues of %s: %w", repo, err)
	}
	c, err := i.Installations.Client(id)
	if err != nil {
		return nil, "", "", fmt.Errorf("issues of %s: %w", repo, err)
	}
	return c, owner, name, nil
}
