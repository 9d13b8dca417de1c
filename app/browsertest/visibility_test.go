//go:build unix

package browsertest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// visibilityConfig: production's keys wait for vault's; vault is fed by acme/vault and production
// by acme/web, and mona reads only acme/web: she sees production, never vault.
const visibilityConfig = `environments:
  staging:
    scopes:
      api:
        repository: acme/api
        branch: main
        workflow: deploy.yml
      web:
        repository: acme/web
        branch: main
        workflow: web.yml
  vault:
    scopes:
      keys:
        repository: acme/vault
        branch: main
        workflow: keys.yml
  production:
    requires: [vault]
    scopes:
      keys:
        repository: acme/web
        branch: main
        workflow: keys.yml
`

// A signed-in user who may not read the environment another one requires never reads its commits
// on the page: not in the waiting row, not in the timeline, whose refusal names what is live there.
func TestNoTextCrossesVisibilityInChromium(t *testing.T) {
	bin := chromiumPath(t)
	w := newSigninWorldOf(t, visibilityConfig, "staging", "vault", "production")
	ctx := t.Context()
	waiting := strings.Repeat("c", 40)
	acc, err := w.auth.Accept(ctx, authority.Intent{ID: "prod-1", Environment: "production", Scopes: []string{"keys"}, Sha: waiting, Ref: "refs/heads/main",
		Source: "push", Actor: "octocat", Requires: &authority.Requirements{Environments: []string{"vault"}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.auth.Gate(ctx, authority.GateRequest{Environment: "production", Generation: acc.Generation, Scopes: []string{"keys"}, Phase: "deploy", Holder: "prod-1", LeaseTTL: time.Minute})
	if held := (*authority.HeldError)(nil); !errors.As(err, &held) || held.Promotion == nil || held.Promotion.Live != vaultSha {
		t.Fatalf("production's gate: %v; want it waiting for vault, where %s is live", err, vaultSha[:7])
	}
	read := map[string]bool{"admin": false, "push": false, "pull": true}
	w.user(t, "mona", map[string]map[string]bool{"acme/web": read, "acme/api": nil, "acme/vault": nil})

	var page string
	drive(t, bin, func(b *browser) error {
		if err := b.open(w.appURL + "/"); err != nil {
			return err
		}
		if err := b.click("signin"); err != nil {
			return err
		}
		var err error
		page, err = b.dom()
		return err
	})
	if !strings.Contains(page, "<h2>production</h2>") || !strings.Contains(page, "waiting for vault: ccccccc is not live there yet") {
		t.Fatalf("mona reads acme/web: she sees production and what its keys wait for:\n%s", page)
	}
	if strings.Contains(page, vaultSha[:7]) {
		t.Errorf("mona cannot read acme/vault, and the page names vault's live commit %s:\n%s", vaultSha[:7], page)
	}
}

// The delivery report of an environment is shown to a signed-in user who sees it on the status
// page, and to nobody else: mona reads acme/web, which feeds production, not acme/vault.
func TestReportPageFollowsVisibilityInChromium(t *testing.T) {
	bin := chromiumPath(t)
	w := newSigninWorldOf(t, visibilityConfig, "staging", "vault", "production")
	if _, err := w.auth.Accept(t.Context(), authority.Intent{ID: "prod-1", Environment: "production", Scopes: []string{"keys"}, Sha: strings.Repeat("c", 40),
		Ref: "refs/heads/main", Source: "push", Actor: "octocat"}, true); err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{"admin": false, "push": false, "pull": true}
	w.user(t, "mona", map[string]map[string]bool{"acme/web": read, "acme/api": nil, "acme/vault": nil})

	var signedOut, prod, vault string
	drive(t, bin, func(b *browser) error {
		var err error
		if err = b.open(w.appURL + "/report/production"); err != nil {
			return err
		}
		if signedOut, err = b.dom(); err != nil {
			return err
		}
		if err = b.click("signin"); err != nil {
			return err
		}
		if err = b.open(w.appURL + "/report/production"); err != nil {
			return err
		}
		if prod, err = b.dom(); err != nil {
			return err
		}
		if err = b.open(w.appURL + "/report/vault"); err != nil {
			return err
		}
		vault, err = b.dom()
		return err
	})
	if !strings.Contains(signedOut, "Sign in with GitHub") || strings.Contains(signedOut, "delivery over") {
		t.Errorf("signed out, the report page shows more than the sign-in:\n%s", signedOut)
	}
	if !strings.Contains(prod, "production: delivery over 30 day(s)") || !strings.Contains(prod, `id="chart-scope-keys-deploys"`) {
		t.Errorf("mona reads acme/web and does not see production's report:\n%s", prod)
	}
	if !strings.Contains(vault, `no environment "vault" to report on here`) || strings.Contains(vault, "delivery over") {
		t.Errorf("mona cannot read acme/vault and sees its report:\n%s", vault)
	}
}
