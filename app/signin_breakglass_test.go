package app

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// glassForm reads the Break glass form of production/api from the page.
func glassForm(t *testing.T, pg string) url.Values {
	t.Helper()
	return buttonForm(t, pg, "break-glass-production/api")
}

var adminPerm = map[string]bool{"admin": true, "push": true, "pull": true}

// permissionAsked answers the break-glass handler's question about login's permission on the
// fixtures' repository, with the user's own token, as GitHub would.
func (w *signInWorld) permissionAsked(t *testing.T, login string, perm map[string]bool) *githubtest.Stub {
	t.Helper()
	return w.gh.On("GET", "/repos/Codertocat/Hello-World", 200, githubtest.Repository(t, "Codertocat", "Hello-World", perm)).ForToken(w.oauth.SignIn(login))
}

// The Break glass button: next to a commit a gate holds (here, for approvals), for users who can
// push to the scope's repository; only one with the environment's break-glass permission (admin
// by default) may use it, with a reason; it waives the commit's gates, audited, through the page.
func TestBreakGlassButton(t *testing.T) {
	t.Parallel()
	w := newSignInWorldOf(t, approvalConfig, "production")
	waitingForApproval(t, w.h, "octocat", &authority.ApprovalRule{Count: 1})

	reader := w.signIn(t, "rita", map[string]map[string]bool{"Codertocat/Hello-World": readPerm})
	if pg := getPage(t, reader, w.url+"/"); strings.Contains(pg, `id="break-glass-production/api"`) {
		t.Fatalf("a reader's page has a Break glass button:\n%s", pg)
	}
	mona := w.signIn(t, "mona", map[string]map[string]bool{"Codertocat/Hello-World": pushPerm})
	w.permissionAsked(t, "mona", pushPerm)
	form := glassForm(t, getPage(t, mona, w.url+"/"))
	if form.Get("sha") != headSha {
		t.Fatalf("the Break glass form names %q, want the waiting commit %s", form.Get("sha"), headSha)
	}
	form.Set("reason", "incident 4711")
	if code, body := postPage(t, mona, w.url+"/break-glass", form); code != http.StatusForbidden || !strings.Contains(body, "mona needs admin permission on Codertocat/Hello-World") {
		t.Errorf("a writer where admin is needed: %d %s; want 403 saying what it needs", code, body)
	}
	ada := w.signIn(t, "ada", map[string]map[string]bool{"Codertocat/Hello-World": adminPerm})
	w.permissionAsked(t, "ada", adminPerm) // asked once the form has a reason
	adaForm := glassForm(t, getPage(t, ada, w.url+"/"))
	if code, body := postPage(t, ada, w.url+"/break-glass", adaForm); code != http.StatusBadRequest || !strings.Contains(body, "no reason") {
		t.Errorf("no reason: %d %s; want 400", code, body)
	}
	adaForm.Set("reason", "incident 4711")
	if code := post(t, ada, w.url+"/break-glass", adaForm); code != http.StatusSeeOther {
		t.Fatalf("ada's Break glass form: %d, want 303", code)
	}
	env, err := w.h.auth.Status(context.Background(), "production")
	if err != nil {
		t.Fatal(err)
	}
	if bg := env.Scopes["api"].Mailbox.BreakGlass; bg == nil || bg.Actor != "ada" || bg.Via != "page" || bg.Reason != "incident 4711" {
		t.Fatalf("break-glass recorded as %+v; want ada's, through the page, with her reason", bg)
	}
	if pg := getPage(t, ada, w.url+"/"); strings.Contains(pg, `id="break-glass-production/api"`) {
		t.Errorf("the page once the glass is broken still offers it:\n%s", pg)
	}
}
