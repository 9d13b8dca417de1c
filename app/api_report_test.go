package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

// GET /v1/environments/ENV/report answers the delivery figures of an environment the token's
// repository feeds, computed from its timeline as the command computes them, and nothing of one it
// does not feed; a bad since is bad input that says what to give.
func TestAPIReport(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	h := &apiHarness{iss: iss, harness: newHarness(t, visibilityConfig, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: iss.URL, Clock: o.Authority})
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = v
	})}
	ctx := t.Context()
	for _, c := range "ab" {
		if _, err := h.auth.Accept(ctx, authority.Intent{ID: "staging-" + string(c), Environment: "staging", Scopes: []string{"api"},
			Sha: strings.Repeat(string(c), 40), Ref: "refs/heads/master"}, true); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(5 * time.Minute)
		deployHeadOutcome(t, h.harness, "staging", "api", authority.OutcomeSuccess)
	}

	a := h.call(t, "GET", "/v1/environments/staging/report?since=7d", h.token(t, "acme/staging-tools"), nil)
	var d report.Delivery
	if err := json.Unmarshal(a.body, &d); a.status != http.StatusOK || err != nil {
		t.Fatalf("report: %d %s", a.status, a.body)
	}
	state, err := h.auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	want, err := report.ReadDelivery(ctx, h.auth, "staging", state, 7*24*time.Hour, h.auth.Now())
	if err != nil {
		t.Fatal(err)
	}
	if d.Days != 7 || d.Total.Deploys != 2 || d.Total.Commits != 2 || d.Total.LeadFromAccept.Count != 2 || d.Total.LeadFromAccept.P90Seconds != want.Total.LeadFromAccept.P90Seconds {
		t.Errorf("report: %+v; want 7 days, 2 deploys of 2 commits, as computed from the store: %+v", d.Total, want.Total)
	}

	hello := h.token(t, "Codertocat/Hello-World")
	if a := h.call(t, "GET", "/v1/environments/staging/report", hello, nil); a.status != http.StatusForbidden || strings.Contains(string(a.body), "deploys") {
		t.Errorf("a token of a repository that does not feed staging: %d %s; want 403 and no figures", a.status, a.body)
	}
	a = h.call(t, "GET", "/v1/environments/staging/report?since=forever", h.token(t, "acme/staging-tools"), nil)
	if body := a.errorBody(t); a.status != http.StatusBadRequest || !strings.Contains(body.Message, "in days (30d)") {
		t.Errorf("since=forever: %d %s; want 400 saying how to give since", a.status, a.body)
	}
	if a := h.call(t, "POST", "/v1/environments/staging/report", h.token(t, "acme/staging-tools"), nil); a.status != http.StatusMethodNotAllowed {
		t.Errorf("POST report: %d %s; want 405", a.status, a.body)
	}
}
