package githubapp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"unicode/utf8"
)

// Review states of a deployment protection rule.
const (
	ProtectionApproved = "approved"
	ProtectionRejected = "rejected"
)

// maxProtectionComment bounds a review's comment: GitHub shows it beside the waiting job, where a
// short sentence is what fits.
const maxProtectionComment = 1024

// ProtectionReview answers a deployment protection rule for one environment of a workflow run.
type ProtectionReview struct {
	// Environment is the GitHub environment, as the deployment_protection_rule event names it.
	Environment string
	// State is ProtectionApproved or ProtectionRejected.
	State string
	// Comment says why; GitHub shows it with the job. Longer than 1024 bytes is cut.
	Comment string
}

// ReviewProtectionRule approves or rejects the App's deployment protection rule for r.Environment
// in workflow run runID (POST /repos/{owner}/{repo}/actions/runs/{run_id}/deployment_protection_rule).
// GitHub answers 204; the waiting job starts, or fails, shortly after.
func (c *Client) ReviewProtectionRule(ctx context.Context, owner, repo string, runID int64, r ProtectionReview) error {
	op := fmt.Sprintf("%s deployment to %s in workflow run %d of %s/%s", verb(r.State), r.Environment, runID, owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo, "environment", r.Environment); err != nil {
		return err
	}
	if runID <= 0 {
		return fmt.Errorf("%s: the run id must be positive", op)
	}
	if r.State != ProtectionApproved && r.State != ProtectionRejected {
		return fmt.Errorf("%s: state %q is not known; use %s or %s", op, r.State, ProtectionApproved, ProtectionRejected)
	}
	body := struct {
		Environment string `json:"environment_name"`
		State       string `json:"state"`
		Comment     string `json:"comment,omitempty"`
	}{r.Environment, r.State, truncate(r.Comment, maxProtectionComment)}
	u := fmt.Sprintf("repos/%s/%s/actions/runs/%d/deployment_protection_rule", url.PathEscape(owner), url.PathEscape(repo), runID)
	req, err := c.gh.NewRequest(http.MethodPost, u, body)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if _, err := c.gh.Do(ctx, req, nil); err != nil {
		return c.wrap(op, err)
	}
	return nil
}

func verb(state string) string {
	switch state {
	case ProtectionApproved:
		return "approve"
	case ProtectionRejected:
		return "reject"
	}
	return "review"
}

// truncate cuts s to at most n bytes without splitting a character, marking the cut with an ellipsis.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	cut := n - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
