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
