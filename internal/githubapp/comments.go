package githubapp

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v60/github"
)

// commentsPerPage is the page size when searching a conversation for a marker (GitHub's maximum).
const commentsPerPage = 100

// UpsertComment keeps one comment per marker on issue or pull request number: it updates the oldest
// bot comment whose body contains marker (a hidden HTML comment such as <!-- latestwins:prod -->), or
// creates one. body gets the marker appended when it lacks it, so that the next call finds it. An
// unchanged comment is not written again. It returns the comment's ID.
func (c *Client) UpsertComment(ctx context.Context, owner, repo string, number int, marker, body string) (int64, error) {
	op := fmt.Sprintf("upsert comment on %s/%s#%d", owner, repo, number)
	if err := requireNames(op, "owner", owner, "repo", repo, "marker", marker); err != nil {
		return 0, err
	}
	if number <= 0 {
		return 0, fmt.Errorf("%s: the issue or pull request number must be positive", op)
	}
	if !strings.Contains(body, marker) {
		body = strings.TrimRight(body, "\n") + "\n\n" + marker + "\n"
	}
	existing, err := c.findComment(ctx, owner, repo, number, marker)
	if err != nil {
		return 0, c.wrap(op, err)
	}
	if existing == nil {
		return c.CreateComment(ctx, owner, repo, number, body)
	}
	if existing.GetBody() == body {
		return existing.GetID(), nil
	}
	updated, _, err := c.gh.Issues.EditComment(ctx, owner, repo, existing.GetID(), &github.IssueComment{Body: github.String(body)})
	if err != nil {
		return 0, c.wrap(fmt.Sprintf("%s: update comment %d", op, existing.GetID()), err)
	}
	return updated.GetID(), nil
}

// findComment returns the oldest comment by a bot (an App, such as this one) containing marker, or
// nil, reading page after page. A person's comment never matches: pasting the hidden marker must not
// capture the sticky comment, nor block it by failing every update.
func (c *Client) findComment(ctx context.Context, owner, repo string, number int, marker string) (*github.IssueComment, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: commentsPerPage}}
	for {
		comments, resp, err := c.gh.Issues.ListComments(ctx, owner, repo, number, opts)
		if err != nil {
			return nil, fmt.Errorf("list comments (page %d): %w", max(opts.Page, 1), err)
		}
		for _, cm := range comments {
			if cm.GetUser().GetType() == "Bot" && strings.Contains(cm.GetBody(), marker) {
				return cm, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// CreateComment adds a comment to issue or pull request number and returns its ID.
func (c *Client) CreateComment(ctx context.Context, owner, repo string, number int, body string) (int64, error) {
	op := fmt.Sprintf("create comment on %s/%s#%d", owner, repo, number)
	if err := requireNames(op, "owner", owner, "repo", repo, "body", body); err != nil {
		return 0, err
	}
	if number <= 0 {
		return 0, fmt.Errorf("%s: the issue or pull request number must be positive", op)
	}
	created, _, err := c.gh.Issues.CreateComment(ctx, owner, repo, number, &github.IssueComment{Body: github.String(body)})
	if err != nil {
		return 0, c.wrap(op, err)
	}
	return created.GetID(), nil
}

// Reactions GitHub accepts on a comment.
const (
	ReactionPlusOne  = "+1"
	ReactionMinusOne = "-1"
	ReactionLaugh    = "laugh"
	ReactionConfused = "confused"
	ReactionHeart    = "heart"
	ReactionHooray   = "hooray"
	ReactionRocket   = "rocket"
	ReactionEyes     = "eyes"
)

// AddReaction reacts to an issue or pull request comment with content, one of the Reaction constants.
// Adding a reaction that is already there succeeds.
func (c *Client) AddReaction(ctx context.Context, owner, repo string, commentID int64, content string) error {
	op := fmt.Sprintf("react %q to comment %d in %s/%s", content, commentID, owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo); err != nil {
		return err
	}
	switch content {
	case ReactionPlusOne, ReactionMinusOne, ReactionLaugh, ReactionConfused, ReactionHeart, ReactionHooray, ReactionRocket, ReactionEyes:
	default:
		return fmt.Errorf("%s: unknown reaction; use one of +1, -1, laugh, confused, heart, hooray, rocket, eyes", op)
	}
	if _, _, err := c.gh.Reactions.CreateIssueCommentReaction(ctx, owner, repo, commentID, content); err != nil {
		return c.wrap(op, err)
	}
	return nil
}
