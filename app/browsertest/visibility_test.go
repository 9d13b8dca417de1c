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
