package action

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGitHubCancelerCancelsTheRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		wantErr string
	}{
		{"accepted", http.StatusAccepted, ""},
		{"forbidden", http.StatusForbidden, "cancel workflow run 42 of acme/shop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(`{}`))
			}))
			defer srv.Close()
			c, err := NewGitHubCanceler("ghs_test", srv.URL+"/api/v3", srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			err = c.CancelRun(context.Background(), "acme", "shop", 42)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff([]string{"POST /api/v3/repos/acme/shop/actions/runs/42/cancel Bearer ghs_test"}, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGitHubCancelerNeedsATokenAndAURL(t *testing.T) {
	t.Parallel()
	if _, err := NewGitHubCanceler("", "", nil); err == nil || !strings.Contains(err.Error(), "github-token") {
		t.Errorf("no token: err = %v", err)
	}
	if _, err := NewGitHubCanceler("t", "::not a url", nil); err == nil {
		t.Error("a malformed GITHUB_API_URL was accepted")
	}
}
