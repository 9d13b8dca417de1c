package githubapp

import (
	"context"
	"fmt"
	"net/url"
)

// Permission is a user's role on a repository.
type Permission string

// The repository roles, strongest first.
const (
	PermissionAdmin    Permission = "admin"
	PermissionMaintain Permission = "maintain"
	PermissionWrite    Permission = "write"
	PermissionTriage   Permission = "triage"
	PermissionRead     Permission = "read"
	PermissionNone     Permission = "none"
)

func (p Permission) rank() int {
	switch p {
	case PermissionAdmin:
		return 5
	case PermissionMaintain:
		return 4
	case PermissionWrite:
		return 3
	case PermissionTriage:
		return 2
	case PermissionRead:
		return 1
	}
	return 0
}

// AtLeast reports whether p grants everything min does.
func (p Permission) AtLeast(min Permission) bool { return p.rank() >= min.rank() }

// Permission returns user's role on owner/repo. GitHub's role_name tells maintain and triage apart;
// a custom role falls back to its base permission (admin, write, read). A user GitHub does not know
// on the repository (404) has PermissionNone.
func (c *Client) Permission(ctx context.Context, owner, repo, user string) (Permission, error) {
	op := fmt.Sprintf("permission of %s on %s/%s", user, owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo, "user", user); err != nil {
		return PermissionNone, err
	}
	// go-github v60 does not decode role_name, so the request is made here.
	req, err := c.gh.NewRequest("GET", fmt.Sprintf("repos/%s/%s/collaborators/%s/permission",
		url.PathEscape(owner), url.PathEscape(repo), url.PathEscape(user)), nil)
	if err != nil {
		return PermissionNone, fmt.Errorf("%s: %w", op, err)
	}
	var level struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	if _, err := c.gh.Do(ctx, req, &level); err != nil {
		if notFound(err) {
			return PermissionNone, nil
		}
		return PermissionNone, c.wrap(op, err)
	}
	if p := Permission(level.RoleName); p.rank() > 0 {
		return p, nil
	}
	if p := Permission(level.Permission); p.rank() > 0 {
		return p, nil
	}
	return PermissionNone, nil
}
