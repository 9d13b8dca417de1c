package app

import (
	"net/http"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

// visibilityConfig: production (fed by Codertocat/Hello-World) requires staging, which only
// acme/staging-tools feeds.
const visibilityConfig = `environments:
  staging:
    scopes:
      api:
        repository: acme/staging-tools
        branch: master
  production:
    requires: [staging]
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
`

// Over the API a token learns what is live in an environment only if its repository feeds that
// environment: production's wait for staging tells Hello-World's token which of its commits waits,
// never staging's live commit, in the 409 body, its message, and the timeline of status and
// history. A token of a repository that feeds both reads it all.
func TestAPIHidesWhatIsLiveWhereTheTokenDoesNotFeed(t *testing.T) {
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
	live, waiting := strings.Repeat("a", 40), strings.Repeat("b", 40)
	if _, err := h.auth.Accept(ctx, authority.Intent{ID: "staging-1", Environment: "staging", Scopes: []string{"api"}, Sha: live, Ref: "refs/heads/master"}, true); err != nil {
		t.Fatal(err)
	}
	deployHeadOutcome(t, h.harness, "staging", "api", authority.OutcomeSuccess)

	tok := h.token(t, "Codertocat/Hello-World")
	if a := h.call(t, "POST", "/v1/environments/production/claim", tok, intent("run-1", 'b', "api")); a.status != http.StatusOK {
		t.Fatalf("claim: %d %s", a.status, a.body)
	}
	a := h.call(t, "POST", "/v1/environments/production/gate", tok,
		apiclient.GateRequest{Generation: 1, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1", LeaseTTLMillis: 60_000})
	body := a.errorBody(t)
	if a.status != http.StatusConflict || body.Wait != authority.ReasonPromotion || body.Promotion == nil || body.Promotion.Sha != waiting {
		t.Fatalf("gate: %d %s; want 409 waiting for staging", a.status, a.body)
	}
	if body.Promotion.Live != "" || strings.Contains(string(a.body), live[:7]) {
		t.Errorf("the 409 tells Hello-World's token what is live in staging, which it does not feed: %s", a.body)
	}
	if !strings.Contains(body.Message, "waiting for staging: bbbbbbb is not live there yet") {
		t.Errorf("the 409 message %q does not say what waits", body.Message)
	}
	for _, verb := range []string{"status", "history"} {
		a := h.call(t, "GET", "/v1/environments/production/"+verb, tok, nil)
		if a.status != http.StatusOK || !strings.Contains(string(a.body), "waiting for staging: bbbbbbb is not live there yet") {
			t.Fatalf("%s: %d %s; want the refusal in the timeline", verb, a.status, a.body)
		}
		if strings.Contains(string(a.body), live[:7]) {
			t.Errorf("%s tells Hello-World's token what is live in staging: %s", verb, a.body)
		}
	}
	// The stored event still says it all: a reader who may see staging reads it.
	e, err := h.auth.Status(ctx, "production")
	if err != nil {
		t.Fatal(err)
	}
	var stored string
	for _, ev := range e.Events {
		if ev.Kind == authority.EventLocked {
			stored = ev.Message
		}
	}
	if !strings.Contains(stored, "(aaaaaaa is)") {
		t.Errorf("stored refusal %q: want it whole, for readers who may see staging", stored)
	}
}
