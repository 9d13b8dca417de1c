package githubtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// recorder stands in for the test the fake reports to, so that a test can check what the fake
// reports instead of failing itself.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	errors   []string
	cleanups []func()
}

func (r *recorder) Helper() {}

func (r *recorder) Error(args ...any) { r.record(fmt.Sprint(args...)) }

func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.TB.Fatalf("githubtest.New failed: "+format, args...)
}

func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recorder) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, msg)
}

// finish runs the fake's cleanups, as the end of a test would, and returns everything it reported.
func (r *recorder) finish() []string {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errors
}

const comment = `{
  "id": 11, "node_id": "IC_1", "url": "https://api.github.com/repos/o/r/issues/comments/11",
  "html_url": "https://github.com/o/r/pull/7#issuecomment-11", "body": "hello",
  "user": null, "created_at": "2026-01-02T03:04:05Z", "updated_at": "2026-01-02T03:04:05Z",
  "issue_url": "https://api.github.com/repos/o/r/issues/7", "author_association": "OWNER"
}`

func TestAnswersDocumentedRequests(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	stub := gh.On("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", http.StatusCreated, comment)
	gh.On("GET", "/repos/o/r/contents/.github/latestwins.yml?ref=main", http.StatusNotFound,
		`{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)

	got, _, err := gh.Client.Issues.CreateComment(context.Background(), "o", "r", 7, &github.IssueComment{Body: github.String("hello")})
	if err != nil {
		t.Fatalf("CreateComment: %v", err)
	}
	if got.GetID() != 11 {
		t.Errorf("comment id = %d, want 11", got.GetID())
	}
	_, _, _, err = gh.Client.Repositories.GetContents(context.Background(), "o", "r", ".github/latestwins.yml", &github.RepositoryContentGetOptions{Ref: "main"})
	var errResp *github.ErrorResponse
	if !errors.As(err, &errResp) || errResp.Response.StatusCode != http.StatusNotFound {
		t.Errorf("GetContents error = %v, want the stubbed 404", err)
	}

	calls := stub.Requests()
	if len(calls) != 1 {
		t.Fatalf("stub answered %d requests, want 1", len(calls))
	}
	if diff := cmp.Diff(map[string]any{"body": "hello"}, calls[0].Body); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"POST /repos/o/r/issues/7/comments", "GET /repos/o/r/contents/.github/latestwins.yml"}, paths(gh.Requests())); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestFailsTheTest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// stub registers answers; do makes requests (directly, to send what go-github would not).
		stub func(gh *githubtest.Server)
		do   func(gh *githubtest.Server) error
		want []string // one line per failure the fake must report
	}{
		{
			name: "unknown path",
			do:   func(gh *githubtest.Server) error { return send(gh, "GET", "/repos/o/r/no-such-thing", "") },
			want: []string{"GET /repos/o/r/no-such-thing is not an operation"},
		},
		{
			name: "method the path does not have",
			do:   func(gh *githubtest.Server) error { return send(gh, "DELETE", "/repos/o/r/check-runs", "") },
			want: []string{"DELETE /repos/o/r/check-runs is not an operation"},
		},
		{
			name: "wrong body shape",
			do: func(gh *githubtest.Server) error {
				return send(gh, "POST", "/repos/o/r/issues/7/comments", `{"body": 5}`)
			},
			want: []string{"does not match GitHub's description of POST /repos/{owner}/{repo}/issues/{issue_number}/comments"},
		},
		{
			name: "missing required field",
			do: func(gh *githubtest.Server) error {
				return send(gh, "POST", "/repos/o/r/check-runs", `{"name": "latestwins"}`)
			},
			want: []string{"does not match GitHub's description"},
		},
		{
			name: "invalid enum in query",
			do: func(gh *githubtest.Server) error {
				return send(gh, "GET", "/repos/o/r/commits/abc/check-runs?filter=newest", "")
			},
			want: []string{"does not match GitHub's description"},
		},
		{
			name: "no stub",
			do: func(gh *githubtest.Server) error {
				_, _, err := gh.Client.Repositories.GetPermissionLevel(context.Background(), "o", "r", "octocat")
				return err
			},
			want: []string{"no stub answers GET /repos/o/r/collaborators/octocat/permission"},
		},
		{
			name: "stub query not matched",
			stub: func(gh *githubtest.Server) {
				gh.On("GET", "/repos/o/r/issues/7/comments?page=2", http.StatusOK, `[]`)
			},
			do: func(gh *githubtest.Server) error {
				_, _, err := gh.Client.Issues.ListComments(context.Background(), "o", "r", 7, nil)
				return err
			},
			want: []string{
				"no stub answers GET /repos/o/r/issues/7/comments: register",
				"stub GET /repos/o/r/issues/7/comments?page=2 answered 0 of the 1 requests it expects",
			},
		},
		{
			name: "undocumented answer shape",
			stub: func(gh *githubtest.Server) {
				gh.On("POST", "/repos/o/r/issues/7/comments", http.StatusCreated, `{"id": 11}`)
			},
			do: func(gh *githubtest.Server) error {
				_, _, err := gh.Client.Issues.CreateComment(context.Background(), "o", "r", 7, &github.IssueComment{Body: github.String("x")})
				return err
			},
			want: []string{"answers 201 with a body GitHub does not document"},
		},
		{
			name: "undocumented status",
			stub: func(gh *githubtest.Server) {
				gh.On("POST", "/repos/o/r/issues/7/comments", http.StatusTeapot, `{"message":"teapot"}`)
			},
			do: func(gh *githubtest.Server) error {
				_, _, err := gh.Client.Issues.CreateComment(context.Background(), "o", "r", 7, &github.IssueComment{Body: github.String("x")})
				return err
			},
			want: []string{"answers 418 with a body GitHub does not document"},
		},
		{
			name: "rate limit answer that is not a basic-error",
			stub: func(gh *githubtest.Server) {
				gh.On("GET", "/repos/o/r/commits/abc/check-runs", http.StatusTooManyRequests, `{"error":"slow down"}`)
			},
			do: func(gh *githubtest.Server) error {
				_, _, err := gh.Client.Checks.ListCheckRunsForRef(context.Background(), "o", "r", "abc", nil)
				return err
			},
			want: []string{"not a basic-error"},
		},
		{
			name: "unused stub",
			stub: func(gh *githubtest.Server) {
				gh.On("POST", "/repos/o/r/actions/runs/{run_id}/cancel", http.StatusAccepted, `{}`)
			},
			do:   func(*githubtest.Server) error { return nil },
			want: []string{"stub POST /repos/o/r/actions/runs/{run_id}/cancel answered 0 of the 1 requests it expects"},
		},
		{
			name: "repeated stub never used",
			stub: func(gh *githubtest.Server) {
				gh.On("POST", "/repos/o/r/actions/runs/{run_id}/cancel", http.StatusAccepted, `{}`).Times(0)
			},
			do:   func(*githubtest.Server) error { return nil },
			want: []string{"stub POST /repos/o/r/actions/runs/{run_id}/cancel was never used"},
		},
		{
			name: "stub used fewer times than expected",
			stub: func(gh *githubtest.Server) {
				gh.On("POST", "/repos/o/r/actions/runs/{run_id}/cancel", http.StatusAccepted, `{}`).Times(2)
			},
			do: func(gh *githubtest.Server) error {
				_, err := gh.Client.Actions.CancelWorkflowRunByID(context.Background(), "o", "r", 5)
				return accepted(err)
			},
			want: []string{"answered 1 of the 2 requests it expects"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			gh := githubtest.New(rec)
			if tt.stub != nil {
				tt.stub(gh)
			}
			_ = tt.do(gh) // the client's own error is beside the point: the fake must report it
			reported := rec.finish()
			if len(reported) != len(tt.want) {
				t.Fatalf("the fake reported %d failures, want %d:\n%s", len(reported), len(tt.want), strings.Join(reported, "\n"))
			}
			for i, want := range tt.want {
				if !strings.Contains(reported[i], want) {
					t.Errorf("the fake reported:\n%s\nwant it to say %q", reported[i], want)
				}
			}
		})
	}
}

func TestPassingUseReportsNothing(t *testing.T) {
	t.Parallel()
	rec := &recorder{TB: t}
	gh := githubtest.New(rec)
	gh.On("POST", "/repos/o/r/actions/runs/{run_id}/cancel", http.StatusAccepted, `{}`).Times(0)
	gh.On("GET", "/repos/o/r/commits/abc/check-runs", http.StatusTooManyRequests,
		`{"message":"API rate limit exceeded","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"}`).
		Header("Retry-After", "30")
	for range 3 {
		if _, err := gh.Client.Actions.CancelWorkflowRunByID(context.Background(), "o", "r", 5); accepted(err) != nil {
			t.Errorf("cancel: %v", err)
		}
	}
	if _, _, err := gh.Client.Checks.ListCheckRunsForRef(context.Background(), "o", "r", "abc", nil); err == nil {
		t.Error("ListCheckRunsForRef: no error, want the stubbed 429")
	}
	if reported := rec.finish(); len(reported) != 0 {
		t.Errorf("the fake reported failures for a correct use:\n%s", strings.Join(reported, "\n"))
	}
}

func TestDescriptionLoadsOnce(t *testing.T) {
	t.Parallel()
	a, err := githubtest.Description()
	if err != nil {
		t.Fatal(err)
	}
	b, err := githubtest.Description()
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Error("Description loaded the document twice")
	}
}

func send(gh *githubtest.Server, method, path, body string) error {
	req, err := http.NewRequest(method, gh.URL+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

func paths(reqs []githubtest.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Method+" "+r.Path)
	}
	return out
}

// accepted treats go-github's *AcceptedError (a 202 answer) as success.
func accepted(err error) error {
	var a *github.AcceptedError
	if errors.As(err, &a) {
		return nil
	}
	return err
}

// TestDocumentedExamplesPass checks every example the description gives for an answer against that
// answer's schema, as the fake checks stubs: the fake is as strict as GitHub's own documentation, and
// Example hands out bodies a stub can use.
func TestDocumentedExamplesPass(t *testing.T) {
	t.Parallel()
	doc, err := githubtest.Description()
	if err != nil {
		t.Fatal(err)
	}
	// Examples GitHub's description gets wrong; the test fails when one is fixed, so the list stays true.
	knownWrong := map[string]bool{
		// The example's user lacks role_name, which the collaborator schema requires.
		"GET /repos/{owner}/{repo}/collaborators/{username}/permission 200 response-if-user-has-admin-permissions": true,
		// The example is null; the schema is an object (GitHub answers {}).
		"POST /repos/{owner}/{repo}/actions/runs/{run_id}/cancel 202 default": true,
		// The examples lack user_view_type, the discriminator of the schema's oneOf (use User).
		"GET /user 200 response-with-public-and-private-profile-information": true,
		"GET /user 200 response-with-public-profile-information":             true,
		// The example's source and parent (the fork's origin) lack language (use Repository).
		"GET /repos/{owner}/{repo} 200 default-response": true,
	}
	checked := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, resp := range op.Responses.Map() {
				media := resp.Value.Content.Get("application/json")
				if media == nil || media.Schema == nil {
					continue
				}
				for name, ex := range media.Examples {
					raw, err := json.Marshal(ex.Value.Value)
					if err != nil {
						t.Fatalf("%s %s %s %s: %v", method, path, code, name, err)
					}
					var v any
					if err := json.Unmarshal(raw, &v); err != nil {
						t.Fatalf("%s %s %s %s: %v", method, path, code, name, err)
					}
					key := fmt.Sprintf("%s %s %s %s", method, path, code, name)
					err = media.Schema.Value.VisitJSON(v, openapi3.MultiErrors())
					switch {
					case err != nil && !knownWrong[key]:
						t.Errorf("%s: the example does not match its schema: %v", key, err)
					case err == nil && knownWrong[key]:
						t.Errorf("%s: the example now matches its schema: remove it from knownWrong", key)
					}
					checked++
				}
			}
		}
	}
	if checked < 15 {
		t.Errorf("checked %d examples, want the ~20 the description has", checked)
	}
}
