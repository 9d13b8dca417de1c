package githubapp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// A team member is an active membership, as GitHub's team membership API answers it: a pending
// invitation or a user outside the team (404) is not one.
func TestTeamMember(t *testing.T) {
	t.Parallel()
	membership := func(state string) string {
		m := githubtest.Example(t, "GET", "/orgs/{org}/teams/{team_slug}/memberships/{username}", http.StatusOK, "")
		m["state"] = state
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tests := []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"active", http.StatusOK, membership("active"), true},
		{"pending invitation", http.StatusOK, membership("pending"), false},
		{"not in the team", http.StatusNotFound, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, c := newClient(t)
			gh.On("GET", "/orgs/acme/teams/sre/memberships/octocat", tt.status, tt.body)
			got, err := c.TeamMember(context.Background(), "acme", "sre", "octocat")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("TeamMember = %v, want %v", got, tt.want)
			}
		})
	}
}
