package action

import (
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v4"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

// apiConfig lets the workflow's repository deploy api to staging.
const apiConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
      web:
        repository: acme/web
        branch: master
`

// newAPIWorld is a world whose steps go through the App's API (api-url) on 127.0.0.1, with a
// memory store behind it, a fake OIDC issuer, and a fake of the runner's token endpoint handing
// out tokens of Codertocat/Hello-World.
func newAPIWorld(t *testing.T) *world {
	t.Helper()
	return newAPIWorldOf(t, apiConfig)
}

// newAPIWorldOf is newAPIWorld with the configuration yml.
func newAPIWorldOf(t *testing.T, yml string) *world {
	t.Helper()
	w := newWorld(t)
	cfg := filepath.Join(w.dir, "latestwins.yml")
	if err := os.WriteFile(cfg, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	iss := oidctest.NewIssuer(t)
	verifier, err := app.NewOIDCVerifier(app.OIDCOptions{Issuer: iss.URL})
	if err != nil {
		t.Fatal(err)
	}
	w.auth = authority.New(memory.New())
	a, err := app.New(app.Options{Secret: []byte("webhook secret"), Authority: w.auth, Config: &app.FileConfig{Path: cfg}, Tokens: verifier})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	tokenURL, bearer, _ := iss.TokenEndpoint(t, func(aud string) jwt.MapClaims {
		return iss.Claims("Codertocat/Hello-World", aud, w.auth.Now())
	})
	w.api = map[string]string{"INPUT_API-URL": srv.URL, "ACTIONS_ID_TOKEN_REQUEST_URL": tokenURL, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": bearer}
	return w
}

// TestAPIRefusalsKeepTheirMeaning: through api-url, a scope of another repository is refused as
// bad configuration with a message naming the repository, and plain http to a remote host is
// refused before any token is sent.
func TestAPIRefusalsKeepTheirMeaning(t *testing.T) {
	t.Parallel()
	w := newAPIWorld(t)
	j := w.job("j", "1", "push", pushEvent, nil)
	r := j.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "web"})
	var apiErr *apiclient.Error
	if !errors.As(r.err, &apiErr) || apiErr.Code != apiclient.CodeForbidden || !errors.Is(r.err, authority.ErrInvalidInput) {
		t.Fatalf("err = %v, want a forbidden refusal that is bad configuration", r.err)
	}
	if !strings.Contains(r.err.Error(), "Codertocat/Hello-World may not act on web of staging") || r.outputs["outcome"] != "invalid" {
		t.Errorf("err %q outcome %q", r.err, r.outputs["outcome"])
	}

	j = w.job("k", "2", "push", pushEvent, nil)
	j.vars["INPUT_API-URL"] = "http://latestwins.example"
	r = j.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "api"})
	if !errors.Is(r.err, authority.ErrInvalidInput) || !strings.Contains(r.err.Error(), "use https") {
		t.Errorf("err = %v, want: use https", r.err)
	}
	if e, err := w.auth.Status(context.Background(), "staging"); err == nil {
		t.Errorf("nothing should have been accepted, got desired %d", e.Desired)
	}
}

// TestAPIQueuedPassSaysWhereItStands: through api-url, in an environment the configuration queues,
// a later run's claim says how many are ahead of it, and its wait for the deploy gate says so too,
// in the annotation and the job summary's headline, rather than naming a lock holder.
func TestAPIQueuedPassSaysWhereItStands(t *testing.T) {
	t.Parallel()
	w := newAPIWorldOf(t, strings.Replace(apiConfig, "  staging:\n", "  staging:\n    policy: queue\n", 1))
	first := w.job("a", "1", "push", pushEvent, pushOf(sha('0'), sha('a')))
	if r := first.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "api"}); r.err != nil {
		t.Fatal(r.err, r.log)
	}
	second := w.job("b", "2", "push", pushEvent, pushOf(sha('a'), sha('b')))
	r := second.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "api"})
	if r.err != nil || r.outputs["outcome"] != "claimed" || !strings.Contains(r.log, "generation 2 waits its turn to deploy: api: queued: 1 ahead of this commit") {
		t.Fatalf("second claim: %v %v\n%s", r.err, r.outputs, r.log)
	}
	r = second.step(map[string]string{"command": "gate", "environment": "staging", "wait": "0s"})
	if !errors.Is(r.err, authority.ErrLeaseHeld) || r.outputs["outcome"] != "locked" {
		t.Fatalf("gate: %v %v\n%s", r.err, r.outputs, r.log)
	}
	if !strings.Contains(r.log, "staging/api: queued: 1 ahead of this commit (generation 1, aaaaaaa, goes first)") {
		t.Errorf("the wait does not say where the pass stands:\n%s", r.log)
	}
	if !strings.Contains(r.summary, "queued: 1 ahead of this commit") {
		t.Errorf("the job summary does not say where the pass stands:\n%s", r.summary)
	}
	if e := w.status("staging"); e.PolicyOrDefault() != authority.PolicyQueue {
		t.Errorf("staging's policy %s, want queue (the configuration's)", e.PolicyOrDefault())
	}
}

// promotionAPIConfig: production takes a commit of api only once it is live in staging.
const promotionAPIConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
  production:
    requires: [staging]
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
`

// TestAPIPromotionWaitSaysWhatItWaitsFor: through api-url, a production pass whose commit is not
// live in staging yet is told so at its deploy gate, in the progress line, the annotation and the
// job summary, rather than being told of a lock nobody holds; once staging has the commit live,
// it deploys.
func TestAPIPromotionWaitSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	w := newAPIWorldOf(t, promotionAPIConfig)
	if _, err := w.auth.SetRequires(context.Background(), "production", authority.Requirements{Environments: []string{"staging"}}, "admin"); err != nil {
		t.Fatal(err)
	}
	prod := w.job("p", "1", "push", pushEvent, pushOf(sha('0'), sha('a')))
	if r := prod.step(map[string]string{"command": "claim", "environment": "production", "scopes": "api"}); r.err != nil {
		t.Fatal(r.err, r.log)
	}
	r := prod.step(map[string]string{"command": "gate", "environment": "production", "wait": "300ms"})
	if !errors.Is(r.err, authority.ErrLeaseHeld) || r.outputs["outcome"] != "locked" {
		t.Fatalf("gate: %v %v\n%s", r.err, r.outputs, r.log)
	}
	const want = "production/api: waiting for staging: aaaaaaa is not live there yet"
	if !strings.Contains(r.log, "::warning::waiting: "+want) || strings.Contains(r.log, "is locked by") {
		t.Errorf("the progress line does not say what the pass waits for (want %q):\n%s", want, r.log)
	}
	if !strings.Contains(r.summary, "waiting for staging: aaaaaaa is not live there yet") {
		t.Errorf("the job summary does not say what the pass waits for:\n%s", r.summary)
	}

	staging := w.job("s", "2", "push", pushEvent, pushOf(sha('0'), sha('a')))
	if r := staging.step(map[string]string{"command": "run", "environment": "staging", "scopes": "api", "run": "true"}); r.err != nil || r.outputs["outcome"] != "deployed" {
		t.Fatalf("staging: %v %v\n%s", r.err, r.outputs, r.log)
	}
	if r := prod.step(map[string]string{"command": "gate", "environment": "production", "wait": "300ms"}); r.err != nil {
		t.Fatalf("production's gate once staging has the commit: %v\n%s", r.err, r.log)
	}
}
