package githubapp

import "net/http"

// Endpoint is one REST operation of GitHub's API, named as GitHub's OpenAPI description names it: an
// upper-case HTTP method and a path template with {placeholders}.
type Endpoint struct {
	Method string
	Path   string
}

// Endpoints lists every operation this package calls. The trimmed API description under
// testdata/github/ is generated from this table (scripts/gen-openapi-testdata), and a test checks that
// each entry is in it, so calling a new endpoint means adding it here first.
func Endpoints() []Endpoint {
	return []Endpoint{
		{http.MethodGet, "/repos/{owner}/{repo}/issues/{issue_number}/comments"},
		{http.MethodPost, "/repos/{owner}/{repo}/issues/{issue_number}/comments"},
		{http.MethodPatch, "/repos/{owner}/{repo}/issues/comments/{comment_id}"},
		{http.MethodPost, "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions"},
		{http.MethodPost, "/repos/{owner}/{repo}/issues"},
		{http.MethodPatch, "/repos/{owner}/{repo}/issues/{issue_number}"},
		{http.MethodGet, "/repos/{owner}/{repo}/commits/{ref}/check-runs"},
		{http.MethodPost, "/repos/{owner}/{repo}/check-runs"},
		{http.MethodPatch, "/repos/{owner}/{repo}/check-runs/{check_run_id}"},
		{http.MethodPost, "/repos/{owner}/{repo}/actions/runs/{run_id}/cancel"},
		{http.MethodPost, "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches"},
		{http.MethodPost, "/repos/{owner}/{repo}/actions/runs/{run_id}/deployment_protection_rule"},
		{http.MethodGet, "/repos/{owner}/{repo}/collaborators/{username}/permission"},
		{http.MethodGet, "/orgs/{org}/teams/{team_slug}/memberships/{username}"},
		{http.MethodGet, "/repos/{owner}/{repo}/contents/{path}"},
		{http.MethodGet, "/repos/{owner}/{repo}/compare/{basehead}"},
		{http.MethodPost, "/app/installations/{installation_id}/access_tokens"},
		{http.MethodGet, "/repos/{owner}/{repo}/installation"},
		{http.MethodGet, "/app"},
		{http.MethodGet, "/app/hook/deliveries"},
		{http.MethodGet, "/app/hook/deliveries/{delivery_id}"},
		{http.MethodPost, "/repos/{owner}/{repo}/deployments"},
		{http.MethodPost, "/repos/{owner}/{repo}/deployments/{deployment_id}/statuses"},
		{http.MethodPost, "/app-manifests/{code}/conversions"},
		// With a signed-in user's token (OAuth): who signed in, and what they may do on a repository.
		{http.MethodGet, "/user"},
		{http.MethodGet, "/repos/{owner}/{repo}"},
	}
}
