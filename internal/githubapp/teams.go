package githubapp

import (
	"context"
	"fmt"
	"net/url"
)

// TeamMember reports whether user is an active member of the team slug of org (GitHub's team
// membership API): a pending invitation is not membership, and a user GitHub does not know in the
// team (404) is not a member. The installation needs the organization's members permission.
func (c *Client) TeamMember(ctx context.Context, org, slug, user string) (bool, error) {
	op := fmt.Sprintf("membership of %s in team %s/%s", user, org, slug)
	if err := requireNames(op, "org", org, "team", slug, "user", user); err != nil {
		return false, err
	}
	req, err := c.gh.NewRequest("GET", fmt.Sprintf("orgs/%s/teams/%s/memberships/%s",
		url.PathEscape(org), url.PathEscape(slug), url.PathEscape(user)), nil)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	var m struct {
		State string `json:"state"`
	}
	if _, err := c.gh.Do(ctx, req, &m); err != nil {
		if notFound(err) {
			return false, nil
		}
		return false, c.wrap(op, err)
	}
	return m.State == "active", nil
}
