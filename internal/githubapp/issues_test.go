package githubapp_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

func TestCreateAndCloseIssue(t *testing.T) {
	t.Parallel()
	gh, c := newClient(t)
	created := githubtest.Example(t, "POST", "/repos/{owner}/{repo}/issues", http.StatusCreated, "")
	created["number"] = 12
	gh.On("POST", "/repos/o/r/issues", http.StatusCreated, created)
	gh.On("PATCH", "/repos/o/r/issues/12", http.StatusOK, githubtest.Example(t, "PATCH", "/repos/{owner}/{repo}/issues/{issue_number}", http.StatusOK, ""))
	ctx := context.Background()
	n, err := c.CreateIssue(ctx, "o", "r", "latestwins: prod is stuck (api)", "body")
	if err != nil {
		t.Fatal(err)
	}
	if n != 12 {
		t.Fatalf("number %d; want 12", n)
	}
	if err := c.CloseIssue(ctx, "o", "r", n); err != nil {
		t.Fatal(err)
	}
	want := []call{
		{"POST", "/repos/o/r/issues", map[string]any{"title": "latestwins: prod is stuck (api)", "body": "body"}},
		{"PATCH", "/repos/o/r/issues/12", map[string]any{"state": "closed", "state_reason": "completed"}},
	}
	if diff := cmp.Diff(want, calls(gh.Requests())); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if _, err := c.CreateIssue(ctx, "o", "r", "", "body"); err == nil {
		t.Error("an issue without a title was sent")
	}
	if err := c.CloseIssue(ctx, "o", "r", 0); err == nil {
		t.Error("issue 0 was closed")
	}
}
