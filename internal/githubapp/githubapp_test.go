package githubapp_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// call is what a test expects the code to have sent: method, path and decoded JSON body.
type call struct {
	Method, Path string
	Body         any
}

func calls(reqs []githubtest.Request) []call {
	out := make([]call, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, call{r.Method, r.Path, r.Body})
	}
	return out
}

func newClient(t *testing.T, opts ...githubapp.Option) (*githubtest.Server, *githubapp.Client) {
	t.Helper()
	gh := githubtest.New(t)
	return gh, githubapp.New(gh.Client, opts...)
}

func issueComment(t *testing.T, id int64, body string) map[string]any {
	c := githubtest.Example(t, "POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", http.StatusCreated, "")
	c["id"] = id
	c["body"] = body
	return c
}

func TestEndpointsAreDescribed(t *testing.T) {
	t.Parallel()
	doc, err := githubtest.Description()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, e := range githubapp.Endpoints() {
		key := e.Method + " " + e.Path
		if want[key] {
			t.Errorf("%s is listed twice in githubapp.Endpoints", key)
		}
		want[key] = true
		item := doc.Paths.Value(e.Path)
		if item == nil || item.GetOperation(e.Method) == nil {
			t.Errorf("%s is not in %s: run scripts/gen-openapi-testdata", key, githubtest.DescriptionPath)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if key := method + " " + path; !want[key] {
				t.Errorf("%s is in %s but not in githubapp.Endpoints: run scripts/gen-openapi-testdata", key, githubtest.DescriptionPath)
			}
		}
	}
}

func TestUpsertComment(t *testing.T) {
	t.Parallel()
	const marker = "<!-- latestwins:prod -->"
	const list = "/repos/o/r/issues/7/comments"

	t.Run("creates when no comment has the marker, after reading every page", func(t *testing.T) {
		t.Parallel()
		gh, c := newClient(t)
		gh.On("GET", list, http.StatusOK, []any{issueComment(t, 1, "lgtm")}).
			Header("Link", fmt.Sprintf(`<%s%s?page=2&per_page=100>; rel="next", <%s%s?page=2&per_page=100>; rel="last"`, gh.URL, list, gh.URL, list))
		gh.On("GET", list+"?page=2", http.StatusOK, []any{issueComment(t, 2, "<!-- other:marker -->")})
		gh.On("POST", list, http.StatusCreated, issueComment(t, 3, "created"))

		id, err := c.UpsertComment(context.Background(), "o", "r", 7, marker, "**prod** is live")
		if err != nil {
			t.Fatal(err)
		}
		if id != 3 {
			t.Errorf("id = %d, want 3", id)
		}
		want := []call{
			{"GET", list, nil},
			{"GET", list, nil},
			{"POST", list, map[string]any{"body": "**prod** is live\n\n" + marker + "\n"}},
		}
		if diff := cmp.Diff(want, calls(gh.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
		if q := gh.Requests()[0].Query.Get("per_page"); q != "100" {
			t.Errorf("per_page = %q, want 100", q)
		}
	})

	t.Run("updates the oldest comment with the marker in place", func(t *testing.T) {
		t.Parallel()
		gh, c := newClient(t)
		gh.On("GET", list, http.StatusOK, []any{issueComment(t, 1, "lgtm")}).
			Header("Link", fmt.Sprintf(`<%s%s?page=2&per_page=100>; rel="next"`, gh.URL, list))
		gh.On("GET", list+"?page=2", http.StatusOK, []any{
			botComment(t, 20, marker+"\nold"),
			botComment(t, 21, marker+"\nduplicate"),
		})
		gh.On("PATCH", "/repos/o/r/issues/comments/20", http.StatusOK, issueComment(t, 20, marker+"\nnew"))

		id, err := c.UpsertComment(context.Background(), "o", "r", 7, marker, marker+"\nnew")
		if err != nil {
			t.Fatal(err)
		}
		if id != 20 {
			t.Errorf("id = %d, want 20", id)
		}
		want := []call{
			{"GET", list, nil},
			{"GET", list, nil},
			{"PATCH", "/repos/o/r/issues/comments/20", map[string]any{"body": marker + "\nnew"}},
		}
		if diff := cmp.Diff(want, calls(gh.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})

	t.Run("leaves an unchanged comment alone", func(t *testing.T) {
		t.Parallel()
		gh, c := newClient(t)
		gh.On("GET", list, http.StatusOK, []any{botComment(t, 5, marker+"\nsame")})
		id, err := c.UpsertComment(context.Background(), "o", "r", 7, marker, marker+"\nsame")
		if err != nil {
			t.Fatal(err)
		}
		if id != 5 {
			t.Errorf("id = %d, want 5", id)
		}
		if n := len(gh.Requests()); n != 1 {
			t.Errorf("%d requests, want only the listing", n)
		}
	})
}

func TestCreateCommentAndReaction(t *testing.T) {
	t.Parallel()
	gh, c := newClient(t)
	gh.On("POST", "/repos/o/r/issues/9/comments", http.StatusCreated, issueComment(t, 90, "hi"))
	reaction := githubtest.Example(t, "POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", http.StatusCreated, "")
	reaction["content"] = "rocket"
	gh.On("POST", "/repos/o/r/issues/comments/90/reactions", http.StatusCreated, reaction)

	id, err := c.CreateComment(context.Background(), "o", "r", 9, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddReaction(context.Background(), "o", "r", id, githubapp.ReactionRocket); err != nil {
		t.Fatal(err)
	}
	want := []call{
		{"POST", "/repos/o/r/issues/9/comments", map[string]any{"body": "hi"}},
		{"POST", "/repos/o/r/issues/comments/90/reactions", map[string]any{"content": "rocket"}},
	}
	if diff := cmp.Diff(want, calls(gh.Requests())); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func checkRun(t *testing.T, id int64, name, sha string) map[string]any {
	cr := githubtest.Example(t, "PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}", http.StatusOK, "")
	cr["id"] = id
	cr["name"] = name
	cr["head_sha"] = sha
	return cr
}

func TestUpsertCheckRun(t *testing.T) {
	t.Parallel()
	const sha = "0123456789abcdef0123456789abcdef01234567"
	const list = "/repos/o/r/commits/" + sha + "/check-runs"
	superseded := githubapp.CheckRun{
		Conclusion: "neutral",
		Title:      "Superseded",
		Summary:    "Superseded by generation 9 (abc1234)",
		DetailsURL: "https://example.com/runs/1",
	}
	wantBody := map[string]any{
		"name":        "latestwins / prod",
		"status":      "completed",
		"conclusion":  "neutral",
		"details_url": "https://example.com/runs/1",
		"output":      map[string]any{"title": "Superseded", "summary": "Superseded by generation 9 (abc1234)"},
	}

	t.Run("creates the first", func(t *testing.T) {
		t.Parallel()
		gh, c := newClient(t)
		gh.On("GET", list+"?check_name=latestwins+%2F+prod&filter=latest", http.StatusOK, map[string]any{"total_count": 0, "check_runs": []any{}})
		gh.On("POST", "/repos/o/r/check-runs", http.StatusCreated, checkRun(t, 4, "latestwins / prod", sha))
		id, err := c.UpsertCheckRun(context.Background(), "o", "r", sha, "latestwins / prod", superseded)
		if err != nil {
			t.Fatal(err)
		}
		if id != 4 {
			t.Errorf("id = %d, want 4", id)
		}
		create := map[string]any{"head_sha": sha}
		for k, v := range wantBody {
			create[k] = v
		}
		want := []call{{"GET", list, nil}, {"POST", "/repos/o/r/check-runs", create}}
		if diff := cmp.Diff(want, calls(gh.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})

	t.Run("updates the newest", func(t *testing.T) {
		t.Parallel()
		gh, c := newClient(t)
		gh.On("GET", list, http.StatusOK, map[string]any{"total_count": 2, "check_runs": []any{
			checkRun(t, 5, "latestwins / prod", sha),
			checkRun(t, 9, "latestwins / prod", sha),
		}})
		gh.On("PATCH", "/repos/o/r/check-runs/9", http.StatusOK, checkRun(t, 9, "latestwins / prod", sha))
		id, err := c.UpsertCheckRun(context.Background(), "o", "r", sha, "latestwins / prod", superseded)
		if err != nil {
			t.Fatal(err)
		}
		if id != 9 {
			t.Errorf("id = %d, want 9", id)
		}
		want := []call{{"GET", list, nil}, {"PATCH", "/repos/o/r/check-runs/9", wantBody}}
		if diff := cmp.Diff(want, calls(gh.Requests())); diff != "" {
			t.Errorf("requests (-want +got):\n%s", diff)
		}
	})
}

func TestUpsertCheckRunRejectsBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		run  githubapp.CheckRun
		want string
	}{
		{"conclusion while running", githubapp.CheckRun{Status: "in_progress", Conclusion: "success"}, "a conclusion needs status completed"},
		{"completed without conclusion", githubapp.CheckRun{Status: "completed"}, "status completed needs a conclusion"},
		{"unknown conclusion", githubapp.CheckRun{Conclusion: "stale"}, `unknown conclusion "stale"`},
		{"unknown status", githubapp.CheckRun{Status: "done"}, `unknown status "done"`},
		{"title without summary", githubapp.CheckRun{Title: "x"}, "both a title and a summary"},
		{"summary too long", githubapp.CheckRun{Title: "x", Summary: strings.Repeat("é", 65536)}, "summary is 65536 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, c := newClient(t) // no stubs: a request would fail the test
			_, err := c.UpsertCheckRun(context.Background(), "o", "r", "abc", "latestwins", tt.run)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

func TestCancelAndDispatch(t *testing.T) {
	t.Parallel()
	gh, c := newClient(t)
	gh.On("POST", "/repos/o/r/actions/runs/77/cancel", http.StatusAccepted, `{}`)
	gh.On("POST", "/repos/o/r/actions/workflows/deploy.yml/dispatches", http.StatusOK,
		githubtest.Example(t, "POST", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches", http.StatusOK, ""))

	if err := c.CancelRun(context.Background(), "o", "r", 77); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	inputs := map[string]any{"environment": "prod", "generation": "9"}
	if err := c.DispatchWorkflow(context.Background(), "o", "r", "deploy.yml", "main", inputs); err != nil {
		t.Fatalf("DispatchWorkflow: %v", err)
	}
	want := []call{
		{"POST", "/repos/o/r/actions/runs/77/cancel", nil},
		{"POST", "/repos/o/r/actions/workflows/deploy.yml/dispatches", map[string]any{"ref": "main", "inputs": inputs}},
	}
	if diff := cmp.Diff(want, calls(gh.Requests())); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if err := c.DispatchWorkflow(context.Background(), "o", "r", ".github/workflows/deploy.yml", "main", nil); err == nil || !strings.Contains(err.Error(), "not a path") {
		t.Errorf("dispatching a path: error = %v, want it to ask for the file name", err)
	}
}

func TestCancelRunOfCompletedRunFails(t *testing.T) {
	t.Parallel()
	gh, c := newClient(t)
	gh.On("POST", "/repos/o/r/actions/runs/77/cancel", http.StatusConflict,
		`{"message":"Cannot cancel a workflow run that is completed.","documentation_url":"https://docs.github.com/rest"}`)
	err := c.CancelRun(context.Background(), "o", "r", 77)
	var resp *github.ErrorResponse
	if !errors.As(err, &resp) || resp.Response.StatusCode != http.StatusConflict {
		t.Errorf("error = %v, want GitHub's 409", err)
	}
}

func TestPermission(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		want   githubapp.Permission
	}{
		{"maintain told apart by role_name", 200, `{"permission":"write","role_name":"maintain","user":null}`, githubapp.PermissionMaintain},
		{"triage told apart by role_name", 200, `{"permission":"read","role_name":"triage","user":null}`, githubapp.PermissionTriage},
		{"custom role falls back to its base", 200, `{"permission":"write","role_name":"deployer","user":null}`, githubapp.PermissionWrite},
		{"none", 200, `{"permission":"none","role_name":"none","user":null}`, githubapp.PermissionNone},
		{"unknown user", 404, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`, githubapp.PermissionNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, c := newClient(t)
			gh.On("GET", "/repos/o/r/collaborators/octocat/permission", tt.status, tt.body)
			got, err := c.Permission(context.Background(), "o", "r", "octocat")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Permission = %q, want %q", got, tt.want)
			}
		})
	}
	if !githubapp.PermissionMaintain.AtLeast(githubapp.PermissionWrite) || githubapp.PermissionTriage.AtLeast(githubapp.PermissionWrite) {
		t.Error("AtLeast does not order maintain > write > triage")
	}
}

func TestFileContent(t *testing.T) {
	t.Parallel()
	const config = "environments:\n  prod: {}\n"
	gh, c := newClient(t)
	file := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/contents/{path}", http.StatusOK, "response-if-content-is-a-file")
	file["content"] = base64.StdEncoding.EncodeToString([]byte(config))
	file["path"] = ".github/latestwins.yml"
	gh.On("GET", "/repos/o/r/contents/.github/latestwins.yml?ref=main", http.StatusOK, file)
	gh.On("GET", "/repos/o/r/contents/.github/missing.yml", http.StatusNotFound,
		`{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)

	got, err := c.FileContent(context.Background(), "o", "r", ".github/latestwins.yml", "main")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(config, string(got)); diff != "" {
		t.Errorf("content (-want +got):\n%s", diff)
	}

	_, err = c.FileContent(context.Background(), "o", "r", ".github/missing.yml", "")
	var nf *githubapp.NotFoundError
	if !errors.Is(err, githubapp.ErrNotFound) || !errors.As(err, &nf) || nf.Path != ".github/missing.yml" {
		t.Errorf("error = %v, want a *NotFoundError for .github/missing.yml", err)
	}
}

func TestDeployments(t *testing.T) {
	t.Parallel()
	gh, c := newClient(t)
	gh.On("POST", "/repos/o/r/deployments", http.StatusCreated,
		githubtest.Example(t, "POST", "/repos/{owner}/{repo}/deployments", http.StatusCreated, ""))
	gh.On("POST", "/repos/o/r/deployments/{deployment_id}/statuses", http.StatusCreated,
		githubtest.Example(t, "POST", "/repos/{owner}/{repo}/deployments/{deployment_id}/statuses", http.StatusCreated, ""))

	id, err := c.CreateDeployment(context.Background(), "o", "r", githubapp.Deployment{
		Ref: "abc1234", Environment: "prod", Payload: map[string]any{"generation": 9}, Production: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CreateDeploymentStatus(context.Background(), "o", "r", id, githubapp.DeploymentStatus{State: "inactive", Description: "superseded"}); err != nil {
		t.Fatal(err)
	}
	want := []call{
		{"POST", "/repos/o/r/deployments", map[string]any{
			"ref": "abc1234", "environment": "prod", "auto_merge": false, "required_contexts": []any{},
			"payload": map[string]any{"generation": float64(9)}, "transient_environment": false, "production_environment": true,
		}},
		{"POST", fmt.Sprintf("/repos/o/r/deployments/%d/statuses", id), map[string]any{"state": "inactive", "description": "superseded"}},
	}
	if diff := cmp.Diff(want, calls(gh.Requests())); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name          string
		status        int
		headers       map[string]string
		body          string
		wantSecondary bool
		wantWait      time.Duration
		as            func(error) bool
	}{
		{
			name:     "primary",
			status:   http.StatusForbidden,
			headers:  map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Limit": "5000", "X-RateLimit-Reset": fmt.Sprint(now.Unix() + 90)},
			body:     `{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`,
			wantWait: 90 * time.Second,
			as:       func(err error) bool { var e *github.RateLimitError; return errors.As(err, &e) },
		},
		{
			name:          "secondary",
			status:        http.StatusForbidden,
			headers:       map[string]string{"Retry-After": "30"},
			body:          `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`,
			wantSecondary: true,
			wantWait:      30 * time.Second,
			as:            func(err error) bool { var e *github.AbuseRateLimitError; return errors.As(err, &e) },
		},
		{
			name:          "secondary without Retry-After waits a minute",
			status:        http.StatusForbidden,
			body:          `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`,
			wantSecondary: true,
			wantWait:      time.Minute,
			as:            func(err error) bool { var e *github.AbuseRateLimitError; return errors.As(err, &e) },
		},
		{
			name:          "429",
			status:        http.StatusTooManyRequests,
			headers:       map[string]string{"Retry-After": "7"},
			body:          `{"message":"Too many requests"}`,
			wantSecondary: true,
			wantWait:      7 * time.Second,
			as:            func(err error) bool { var e *github.ErrorResponse; return errors.As(err, &e) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, c := newClient(t, githubapp.WithClock(func() time.Time { return now }))
			stub := gh.On("POST", "/repos/o/r/issues/1/comments", tt.status, tt.body)
			for k, v := range tt.headers {
				stub.Header(k, v)
			}
			_, err := c.CreateComment(context.Background(), "o", "r", 1, "hi")
			var rl *githubapp.RateLimitedError
			if !errors.As(err, &rl) {
				t.Fatalf("error = %v, want a *RateLimitedError", err)
			}
			if rl.Secondary != tt.wantSecondary || rl.RetryAfter != tt.wantWait {
				t.Errorf("Secondary, RetryAfter = %v, %s; want %v, %s", rl.Secondary, rl.RetryAfter, tt.wantSecondary, tt.wantWait)
			}
			if !tt.as(err) {
				t.Errorf("error %v does not unwrap to go-github's error", err)
			}
		})
	}
}

func TestNewTokenClient(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	gh.On("POST", "/repos/o/r/issues/1/comments", http.StatusCreated, issueComment(t, 1, "hi"))
	c, err := githubapp.NewTokenClient(context.Background(), gh.URL, "ghs_workflowtoken")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateComment(context.Background(), "o", "r", 1, "hi"); err != nil {
		t.Fatal(err)
	}
	if got := gh.Requests()[0].Header.Get("Authorization"); got != "Bearer ghs_workflowtoken" {
		t.Errorf("Authorization = %q, want the workflow token", got)
	}

	for _, bad := range []struct{ url, token, want string }{
		{"https://api.github.com", "", "github token is empty"},
		{"ftp://example.com", "t", "want an http(s) URL"},
		{"https://", "t", "want an http(s) URL"},
	} {
		if _, err := githubapp.NewTokenClient(context.Background(), bad.url, bad.token); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("NewTokenClient(%q, %q) error = %v, want it to say %q", bad.url, bad.token, err, bad.want)
		}
	}
}

func TestInstallations(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})

	gh := githubtest.New(t)
	token := func(tok string) map[string]any {
		body := githubtest.Example(t, "POST", "/app/installations/{installation_id}/access_tokens", http.StatusCreated, "")
		body["token"] = tok
		body["expires_at"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		return body
	}
	// One token per installation, however many clients and requests.
	gh.On("POST", "/app/installations/7/access_tokens", http.StatusCreated, token("ghs_seven"))
	gh.On("POST", "/app/installations/8/access_tokens", http.StatusCreated, token("ghs_eight"))
	gh.On("POST", "/repos/o/r/issues/1/comments", http.StatusCreated, issueComment(t, 1, "hi")).Times(3)

	inst, err := githubapp.NewInstallations(42, keyPEM, gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []int64{7, 7, 8} {
		c, err := inst.Client(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateComment(context.Background(), "o", "r", 1, "hi"); err != nil {
			t.Fatalf("installation %d: %v", id, err)
		}
	}

	var got []string
	for _, r := range gh.Requests() {
		auth := r.Header.Get("Authorization")
		if strings.HasPrefix(r.Path, "/app/") {
			claims := &jwt.RegisteredClaims{}
			_, err := jwt.ParseWithClaims(strings.TrimPrefix(auth, "Bearer "), claims, func(*jwt.Token) (any, error) { return &key.PublicKey, nil })
			if err != nil {
				t.Errorf("%s: the App JWT does not verify with the App's key: %v", r.Path, err)
			}
			auth = "jwt iss=" + claims.Issuer
		}
		got = append(got, r.Method+" "+r.Path+" "+auth)
	}
	want := []string{
		"POST /app/installations/7/access_tokens jwt iss=42",
		"POST /repos/o/r/issues/1/comments token ghs_seven",
		"POST /repos/o/r/issues/1/comments token ghs_seven",
		"POST /app/installations/8/access_tokens jwt iss=42",
		"POST /repos/o/r/issues/1/comments token ghs_eight",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestNewInstallationsRejectsBadCredentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		appID int64
		key   []byte
		url   string
		want  string
	}{
		{"no app id", 0, []byte("x"), "", "set the App's numeric id"},
		{"no key", 1, nil, "", "private key is empty"},
		{"not a PEM key", 1, []byte("not a key"), "", "want the RSA PEM key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := githubapp.NewInstallations(tt.appID, tt.key, tt.url)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to say %q", err, tt.want)
			}
		})
	}
}
