package githubapp_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/githubapp"
)

func TestReviewProtectionRule(t *testing.T) {
	t.Parallel()
	const path = "/repos/o/r/actions/runs/77/deployment_protection_rule"
	gh, c := newClient(t)
	gh.On("POST", path, http.StatusNoContent, nil).Times(2)

	ctx := context.Background()
	if err := c.ReviewProtectionRule(ctx, "o", "r", 77, githubapp.ProtectionReview{Environment: "prod", State: githubapp.ProtectionApproved}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	long := strings.Repeat("é", 600) // 1200 bytes: cut at a character boundary
	if err := c.ReviewProtectionRule(ctx, "o", "r", 77, githubapp.ProtectionReview{Environment: "prod", State: githubapp.ProtectionRejected, Comment: long}); err != nil {
		t.Fatalf("reject: %v", err)
	}
	want := []call{
		{"POST", path, map[string]any{"environment_name": "prod", "state": "approved"}},
		{"POST", path, map[string]any{"environment_name": "prod", "state": "rejected", "comment": strings.Repeat("é", 510) + "…"}},
	}
	if diff := cmp.Diff(want, calls(gh.Requests())); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestReviewProtectionRuleRejectsBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		runID  int64
		review githubapp.ProtectionReview
		want   string
	}{
		{"unknown state", 77, githubapp.ProtectionReview{Environment: "prod", State: "approve"}, `state "approve" is not known; use approved or rejected`},
		{"no environment", 77, githubapp.ProtectionReview{State: "approved"}, "environment is empty"},
		{"no run", 0, githubapp.ProtectionReview{Environment: "prod", State: "approved"}, "the run id must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, c := newClient(t) // no stubs: nothing may be sent
			err := c.ReviewProtectionRule(context.Background(), "o", "r", tt.runID, tt.review)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want it to say %q", err, tt.want)
			}
			if n := len(gh.Requests()); n != 0 {
				t.Errorf("%d requests, want none", n)
			}
		})
	}
}

func TestParseProtectionCallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url     string
		want    githubapp.ProtectionCallback
		wantErr string
	}{
		{"https://api.github.com/repos/octo-org/api/actions/runs/1234/deployment_protection_rule",
			githubapp.ProtectionCallback{Owner: "octo-org", Repo: "api", RunID: 1234}, ""},
		{"https://ghe.example.com/api/v3/repos/acme/web/actions/runs/9/deployment_protection_rule",
			githubapp.ProtectionCallback{Owner: "acme", Repo: "web", RunID: 9}, ""},
		{"https://api.github.com/repos/o/r/actions/runs/0/deployment_protection_rule", githubapp.ProtectionCallback{}, "not a positive number"},
		{"https://api.github.com/repos/o/r/actions/runs/12/approve", githubapp.ProtectionCallback{}, "want .../repos/OWNER/REPO/actions/runs/RUN_ID/deployment_protection_rule"},
		{"", githubapp.ProtectionCallback{}, "want .../repos/OWNER/REPO"},
		{"http://[::1", githubapp.ProtectionCallback{}, "missing ']'"},
	}
	for _, tt := range tests {
		got, err := githubapp.ParseProtectionCallback(tt.url)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseProtectionCallback(%q) error = %v, want it to say %q", tt.url, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseProtectionCallback(%q): %v", tt.url, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseProtectionCallback(%q) (-want +got):\n%s", tt.url, diff)
		}
	}
}
