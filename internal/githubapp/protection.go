package githubapp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
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

// ProtectionCallback is the workflow run a deployment_protection_rule event asks about.
type ProtectionCallback struct {
	Owner, Repo string
	RunID       int64
}

// callbackRE matches the path of a deployment_callback_url, on github.com or under a GitHub
// Enterprise Server's /api/v3.
var callbackRE = regexp.MustCompile(`/repos/([^/]+)/([^/]+)/actions/runs/([0-9]+)/deployment_protection_rule$`)

// ParseProtectionCallback reads the repository and workflow run from a deployment_protection_rule
// event's deployment_callback_url. Only the run is taken from it: the answer goes to this Client's
// API URL, never to a host named in a payload.
func ParseProtectionCallback(rawURL string) (ProtectionCallback, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ProtectionCallback{}, fmt.Errorf("deployment callback URL %q: %w", rawURL, err)
	}
	m := callbackRE.FindStringSubmatch(u.Path)
	if m == nil {
		return ProtectionCallback{}, fmt.Errorf("deployment callback URL %q: want .../repos/OWNER/REPO/actions/runs/RUN_ID/deployment_protection_rule", rawURL)
	}
	id, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil || id <= 0 {
		return ProtectionCallback{}, fmt.Errorf("deployment callback URL %q: run id %q is not a positive number", rawURL, m[3])
	}
	return ProtectionCallback{Owner: m[1], Repo: m[2], RunID: id}, nil
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
