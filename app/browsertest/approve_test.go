//go:build unix

package browsertest

import (
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// The Approve button in Chromium: a commit of staging/api waits for one approval; mona, who may
// push to acme/api, sees the wait and the button next to it, clicks it, and the reloaded page says
// she approved it, with no button left; the approval is hers, through the page.
func TestApproveInChromium(t *testing.T) {
	bin := chromiumPath(t)
	w := newSigninWorld(t)
	ctx := t.Context()
	const waiting = "f00dfeed00000000000000000000000000000002"
	if _, err := w.auth.Accept(ctx, authority.Intent{ID: "run-waiting", Environment: "staging", Scopes: []string{"api"}, Sha: waiting, Ref: "refs/heads/main",
		Source: "push", Actor: "octocat", Gates: &authority.Gates{Approvals: &authority.ApprovalRule{Count: 1}}}, true); err != nil {
		t.Fatal(err)
	}
	push := map[string]bool{"admin": false, "push": true, "pull": true}
	read := map[string]bool{"admin": false, "push": false, "pull": true}
	w.user(t, "mona", map[string]map[string]bool{"acme/api": push, "acme/web": read, "acme/vault": nil})

	var signedIn, approved string
	drive(t, bin, func(b *browser) error {
		if err := b.open(w.appURL + "/"); err != nil {
			return err
		}
		if err := b.click("signin"); err != nil {
			return err
		}
		var err error
		if signedIn, err = b.dom(); err != nil {
			return err
		}
		if err := b.click("approve-staging/api"); err != nil {
			return err
		}
		approved, err = b.dom()
		return err
	})

	if !strings.Contains(signedIn, "waiting for approval: 0 of 1 (latestwins approve staging --sha f00dfee, or comment /latestwins approve staging f00dfee)") ||
		!strings.Contains(signedIn, "Approve f00dfee") || strings.Contains(signedIn, `id="approve-staging/web"`) {
		t.Errorf("mona's page: want the wait and an Approve button for api only:\n%s", signedIn)
	}
	if strings.Contains(approved, `id="approve-staging/api"`) || !strings.Contains(approved, "approved by mona") {
		t.Errorf("the page after the click: want who approved, and no button:\n%s", approved)
	}
	env, err := w.auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if a := env.Scopes["api"].Mailbox.Approvals; len(a) != 1 || a[0].Login != "mona" || a[0].Door != authority.ApprovalDoorPage {
		t.Errorf("approvals %+v; want mona's, through the page", a)
	}
}
