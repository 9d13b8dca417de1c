package githubapp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/google/go-github/v60/github"
)

// TeamMember reports whether user is an active member of the team slug of org (GitHub's team
// membership API): a pending invitation is not membership, and a user GitHub does not know in the
// team (404) is not a member. The installation needs the organization's members permission.
func (c *Client) TeamMember(ctx context.Context, org, slug, user string) (bool, error) {
	op := fmt.Sprintf("membership of %s in team %s/%s", user, org, slug)
	if err := requireNames(op, "org", org, "team", slug, "user", user); err != nil {
		return false, err
	}
	req, err := c.gh.NewRequest("GET", teamMembershipPath(org, slug, user), nil)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	active, err := teamMember(ctx, c.gh, req)
	if err != nil {
		return false, c.wrap(op, err)
	}
	return active, nil
}

// TeamMember is Client.TeamMember asked with the signed-in user's token, as GitHub tells the
// user: a team the user may not see answers 404, so its membership does not count.
func (o *OAuth) TeamMember(ctx context.Context, token, org, slug, user string) (bool, error) {
	op := fmt.Sprintf("membership of %s in team %s/%s, asked by the signed-in user", user, org, slug)
	if err := requireNames(op, "org", org, "team", slug, "user", user); err != nil {
		return false, err
	}
	gh, err := o.userClient(token)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	req, err := gh.NewRequest("GET", teamMembershipPath(org, slug, user), nil)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	active, err := teamMember(ctx, gh, req)
	if err != nil {
		return false, fmt.Errorf("%s: %w", op, err)
	}
	return active, nil
}

func teamMembershipPath(org, slug, user string) string {
	return fmt.Sprintf("orgs/%s/teams/%s/memberships/%s", url.PathEscape(org), url.PathEscape(slug), url.PathEscape(user))
}

// teamMember sends a team membership request: an active membership is membership; a pending
// invitation, or 404, is not.
func teamMember(ctx context.Context, gh *github.Client, req *http.Request) (bool, error) {
	var m struct {
		State string `json:"state"`
	}
	if _, err := gh.Do(ctx, req, &m); err != nil {
		if notFound(err) {
			return false, nil
		}
		return false, err
	}
	return m.State == "active", nil
}
