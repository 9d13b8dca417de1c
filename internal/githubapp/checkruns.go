package githubapp

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/google/go-github/v60/github"
)

// CheckRun is the state of a check run to publish.
type CheckRun struct {
	// Status is queued, in_progress or completed; empty means completed when Conclusion is set and
	// in_progress otherwise.
	Status string
	// Conclusion is required when completed: success, failure, neutral, cancelled, skipped, timed_out
	// or action_required.
	Conclusion string
	// Title and Summary (Markdown) are the check run's output; both or neither. Text is optional
	// details (Markdown). Summary and Text are at most 65535 characters each.
	Title, Summary, Text string
	// DetailsURL links the check run to its details (the workflow run, the status page).
	DetailsURL string
}

// maxOutput is GitHub's limit on a check run's summary and text.
const maxOutput = 65535

// UpsertCheckRun keeps one check run per head sha and name: it lists the check runs named name on
// headSHA, updates the newest, or creates one when there is none. It returns the check run's ID.
func (c *Client) UpsertCheckRun(ctx context.Context, owner, repo, headSHA, name string, run CheckRun) (int64, error) {
	op := fmt.Sprintf("upsert check run %q on %s/%s@%s", name, owner, repo, headSHA)
	if err := requireNames(op, "owner", owner, "repo", repo, "head sha", headSHA, "check run name", name); err != nil {
		return 0, err
	}
	status, output, err := run.request()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	id, err := c.newestCheckRun(ctx, owner, repo, headSHA, name)
	if err != nil {
		return 0, c.wrap(op, err)
	}
	if id == 0 {
		created, _, err := c.gh.Checks.CreateCheckRun(ctx, owner, repo, github.CreateCheckRunOptions{
			Name:       name,
			HeadSHA:    headSHA,
			DetailsURL: optional(run.DetailsURL),
			Status:     github.String(status),
			Conclusion: optional(run.Conclusion),
			Output:     output,
		})
		if err != nil {
			return 0, c.wrap(op, err)
		}
		return created.GetID(), nil
	}
	updated, _, err := c.gh.Checks.UpdateCheckRun(ctx, owner, repo, id, github.UpdateCheckRunOptions{
		Name:       name,
		DetailsURL: optional(run.DetailsURL),
		Status:     github.String(status),
		Conclusion: optional(run.Conclusion),
		Output:     output,
	})
	if err != nil {
		return 0, c.wrap(fmt.Sprintf("%s: update check run %d", op, id), err)
	}
	return updated.GetID(), nil
}

// newestCheckRun returns the ID of the newest check run named name on headSHA, 0 when there is none.
func (c *Client) newestCheckRun(ctx context.Context, owner, repo, headSHA, name string) (int64, error) {
	opts := &github.ListCheckRunsOptions{
		CheckName:   github.String(name),
		Filter:      github.String("latest"),
		ListOptions: github.ListOptions{PerPage: 100},
	}
	var newest int64
	for {
		res, resp, err := c.gh.Checks.ListCheckRunsForRef(ctx, owner, repo, headSHA, opts)
		if err != nil {
			return 0, fmt.Errorf("list check runs (page %d): %w", max(opts.Page, 1), err)
		}
		for _, cr := range res.CheckRuns {
			if cr.GetName() == name && cr.GetHeadSHA() == headSHA && cr.GetID() > newest {
				newest = cr.GetID()
			}
		}
		if resp.NextPage == 0 {
			return newest, nil
		}
		opts.Page = resp.NextPage
	}
}

// request validates r and returns the status to send and the output, nil when there is none.
func (r CheckRun) request() (string, *github.CheckRunOutput, error) {
	status := r.Status
	if status == "" {
		status = "in_progress"
		if r.Conclusion != "" {
			status = "completed"
		}
	}
	switch status {
	case "queued", "in_progress":
		if r.Conclusion != "" {
			return "", nil, fmt.Errorf("conclusion %q given for status %s: a conclusion needs status completed", r.Conclusion, status)
		}
	case "completed":
		switch r.Conclusion {
		case "success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required":
		case "":
			return "", nil, fmt.Errorf("status completed needs a conclusion (success, failure, neutral, cancelled, skipped, timed_out or action_required)")
		default:
			return "", nil, fmt.Errorf("unknown conclusion %q: use success, failure, neutral, cancelled, skipped, timed_out or action_required", r.Conclusion)
		}
	default:
		return "", nil, fmt.Errorf("unknown status %q: use queued, in_progress or completed", r.Status)
	}
	if r.Title == "" && r.Summary == "" && r.Text == "" {
		return status, nil, nil
	}
	if r.Title == "" || r.Summary == "" {
		return "", nil, fmt.Errorf("a check run's output needs both a title and a summary")
	}
	for field, v := range map[string]string{"summary": r.Summary, "text": r.Text} {
		if n := utf8.RuneCountInString(v); n > maxOutput {
			return "", nil, fmt.Errorf("check run %s is %d characters; GitHub takes at most %d", field, n, maxOutput)
		}
	}
	return status, &github.CheckRunOutput{Title: github.String(r.Title), Summary: github.String(r.Summary), Text: optional(r.Text)}, nil
}

// optional returns nil for an empty string, so that it is left out of a request.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return github.String(s)
}
