//go:build unix

package browsertest

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/authority"
)

// overviewConfig adds production to signinConfig: it requires staging, and its api is built from
// acme/api.
const overviewConfig = signinConfig + `  production:
    requires: [staging]
    scopes:
      api:
        repository: acme/api
        branch: main
        workflow: deploy.yml
`

const (
	prodLiveSha = "0ddba11000000000000000000000000000000001" // live in production/api
	prodNextSha = "beefcafe00000000000000000000000000000002" // accepted for production/api, not live in staging
)

// The front page in Chromium says what is live where: per scope, the commit live in each
// environment, how far it is behind and what it waits for. Signed in, mona sees only the
// environments fed by repositories she can read (not vault); the open page shows them all.
func TestFrontPageOverviewInChromium(t *testing.T) {
	bin := chromiumPath(t)
	w := newSigninWorldOf(t, overviewConfig, "production", "staging", "vault")
	ctx := t.Context()
	acc, err := w.auth.Accept(ctx, authority.Intent{ID: "p-1", Environment: "production", Scopes: []string{"api"}, Sha: prodLiveSha, Ref: "refs/heads/main", Source: "push"}, true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := w.auth.Gate(ctx, authority.GateRequest{Environment: "production", Generation: acc.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "p-1", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.auth.Complete(ctx, authority.Completion{Environment: "production", Generation: acc.Generation, Scopes: []string{"api"}, Holder: "p-1",
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.auth.Accept(ctx, authority.Intent{ID: "p-2", Environment: "production", Scopes: []string{"api"}, Sha: prodNextSha, Ref: "refs/heads/main",
		Source: "push", Requires: &authority.Requirements{Environments: []string{"staging"}}}, false); err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{"admin": false, "push": false, "pull": true}
	w.user(t, "mona", map[string]map[string]bool{"acme/api": read, "acme/web": read, "acme/vault": nil})

	var signedIn string
	drive(t, bin, func(b *browser) error {
		if err := b.open(w.appURL + "/"); err != nil {
			return err
		}
		if err := b.click("signin"); err != nil {
			return err
		}
		var err error
		signedIn, err = b.dom()
		return err
	})
	wait := "waiting for staging: " + prodNextSha[:7] + " is not live there yet (" + apiSha[:7] + " is)"

	t.Run("signed in", func(t *testing.T) {
		overview := between(t, signedIn, `<section id="overview">`, "</section>")
		if head := between(t, overview, "<thead>", "</thead>"); text(head) != "scope production staging" {
			t.Errorf("the overview's columns are %q; want scope, production, staging (vault is not mona's to see)", text(head))
		}
		api := between(t, overview, `<tr id="overview-api">`, "</tr>")
		for _, want := range []string{prodLiveSha[:7], "1 behind: newest " + prodNextSha[:7], wait, apiSha[:7], "up to date"} {
			if !strings.Contains(text(api), want) {
				t.Errorf("the overview's api row lacks %q: %s", want, text(api))
			}
		}
		if strings.Contains(overview, "overview-keys") || strings.Contains(signedIn, vaultSha[:7]) {
			t.Errorf("mona cannot read acme/vault and sees its scope in the overview:\n%s", overview)
		}
		if prod := section(t, signedIn, "production"); !strings.Contains(text(prod), wait) {
			t.Errorf("production's api row does not say what its head waits for (%q):\n%s", wait, prod)
		}
	})

	t.Run("open", func(t *testing.T) {
		a, err := app.New(app.Options{Secret: []byte("status page test"), Authority: w.auth, Config: noConfig{}, StatusPage: app.StatusPageOpen,
			Environments: func(context.Context) ([]string, error) { return []string{"production", "staging", "vault"}, nil }})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(a) // on 127.0.0.1
		t.Cleanup(srv.Close)
		dom, _ := dumpDOM(t, bin, srv.URL+"/")
		overview := between(t, dom, `<section id="overview">`, "</section>")
		if head := between(t, overview, "<thead>", "</thead>"); text(head) != "scope production staging vault" {
			t.Errorf("the open overview's columns are %q; want every environment", text(head))
		}
		if keys := between(t, overview, `<tr id="overview-keys">`, "</tr>"); !strings.Contains(keys, vaultSha[:7]) {
			t.Errorf("the open overview's keys row lacks vault's commit: %s", text(keys))
		}
	})
}
