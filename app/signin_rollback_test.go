package app

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

var formInput = regexp.MustCompile(`name="(csrf|environment|scope|request|to)" value="([^"]*)"`)

// buttonForm reads the form of the button with the id from the page.
func buttonForm(t *testing.T, pg, id string) url.Values {
	t.Helper()
	i := strings.Index(pg, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no button #%s:\n%s", id, pg)
	}
	start := strings.LastIndex(pg[:i], "<form")
	v := url.Values{}
	for _, m := range formInput.FindAllStringSubmatch(pg[start:i], -1) {
		v.Set(m[1], m[2])
	}
	return v
}

// The Rollback and Unfreeze buttons: only for users who can push to the scope's repository, only
// from a form of their own session's page, and then the same rollback as the comment command: the
// commit live before goes ahead of what is pending, the scope freezes, its workflow is dispatched;
// Unfreeze shows on the frozen row and lifts the freeze.
func TestRollbackAndUnfreezeButtons(t *testing.T) {
	t.Parallel()
	w := newSignInWorld(t)
	ctx := context.Background()
	const older = liveAPI
	deployLive(t, w.h.auth, "staging", "api", shaB, "run-3") // now B is live, the fixture's commit before it
	pending(t, w.h, "staging", "c", shaC, "api")

	mona := w.signIn(t, "mona", map[string]map[string]bool{"Codertocat/Hello-World": pushPerm, "acme/web": readPerm})
	pg := getPage(t, mona, w.url+"/")
	if strings.Contains(pg, `id="rollback-staging/web"`) || strings.Contains(pg, `id="unfreeze-staging/api"`) {
		t.Fatalf("mona has a Rollback button for web (she cannot push to acme/web), or Unfreeze on a scope not frozen:\n%s", pg)
	}
	form := buttonForm(t, pg, "rollback-staging/api")
	if form.Get("to") != older {
		t.Fatalf("the Rollback form goes to %q, want the commit live before, %s", form.Get("to"), older)
	}
	form.Set("reason", "B breaks checkout")
	before, _ := w.h.auth.Status(ctx, "staging")

	refused := map[string]url.Values{
		"no CSRF token":                       {"environment": {"staging"}, "scope": {"api"}, "request": {form.Get("request")}, "to": {older}, "reason": {"x"}},
		"a wrong CSRF token":                  {"csrf": {strings.Repeat("A", 43)}, "environment": {"staging"}, "scope": {"api"}, "request": {form.Get("request")}, "to": {older}, "reason": {"x"}},
		"no write permission":                 {"csrf": {form.Get("csrf")}, "environment": {"staging"}, "scope": {"web"}, "request": {form.Get("request")}, "reason": {"x"}},
		"another session's form (no session)": form,
	}
	for name, f := range refused {
		c := mona
		if name == "another session's form (no session)" {
			c = http.DefaultClient
		}
		if code := post(t, c, w.url+"/rollback", f); code != http.StatusForbidden {
			t.Errorf("%s: POST /rollback answered %d, want 403", name, code)
		}
		if code := post(t, c, w.url+"/unfreeze", f); code != http.StatusForbidden {
			t.Errorf("%s: POST /unfreeze answered %d, want 403", name, code)
		}
	}
	noReason := url.Values{}
	for k, v := range form {
		noReason[k] = v
	}
	noReason.Set("reason", " ")
	if code := post(t, mona, w.url+"/rollback", noReason); code != http.StatusBadRequest {
		t.Errorf("a rollback without a reason: %d, want 400", code)
	}
	after, _ := w.h.auth.Status(ctx, "staging")
	if after.Desired != before.Desired || after.Scopes["api"].Freeze != nil || len(w.h.disp.requests()) != 0 {
		t.Fatalf("a refused POST changed something: desired %d -> %d, freeze %+v, dispatches %v",
			before.Desired, after.Desired, after.Scopes["api"].Freeze, w.h.disp.requests())
	}

	if code := post(t, mona, w.url+"/rollback", form); code != http.StatusSeeOther {
		t.Fatalf("the Rollback form: %d, want 303", code)
	}
	if code := post(t, mona, w.url+"/rollback", form); code != http.StatusSeeOther {
		t.Fatalf("the Rollback form again: %d, want 303", code)
	}
	after, _ = w.h.auth.Status(ctx, "staging")
	api := after.Scopes["api"]
	if f := api.Freeze; f == nil || f.Sha != older || f.Actor != "mona" || f.Reason != "B breaks checkout" || f.Generation != before.Desired+1 {
		t.Errorf("freeze after Rollback: %+v; want %s by mona, with her reason, at generation %d", f, older[:7], before.Desired+1)
	}
	if m := api.Mailbox; m == nil || m.Sha != older || !m.Rollback || len(api.Queue) != 0 || after.Desired != before.Desired+1 {
		t.Errorf("pending after Rollback (twice): %+v, queue %d, desired %d; want the one rollback alone", m, len(api.Queue), after.Desired)
	}
	reqs := w.h.disp.requests()
	if len(reqs) != 1 || reqs[0].Workflow != "deploy.yml" || reqs[0].Ref != "master" || reqs[0].Inputs["generation"] != fmt.Sprint(before.Desired+1) || reqs[0].Inputs["scopes"] != "api" {
		t.Errorf("dispatches: %+v; want deploy.yml on master for api at generation %d, once", reqs, before.Desired+1)
	}

	pg = getPage(t, mona, w.url+"/")
	if !strings.Contains(pg, "frozen by the rollback to "+older[:7]+" (mona: B breaks checkout)") {
		t.Errorf("the page does not show the freeze:\n%s", pg)
	}
	unfreeze := buttonForm(t, pg, "unfreeze-staging/api")
	if code := post(t, mona, w.url+"/unfreeze", unfreeze); code != http.StatusSeeOther {
		t.Fatalf("the Unfreeze form: %d, want 303", code)
	}
	if sc, _ := w.h.auth.Status(ctx, "staging"); sc.Scopes["api"].Freeze != nil {
		t.Errorf("still frozen after Unfreeze: %+v", sc.Scopes["api"].Freeze)
	}
	if pg = getPage(t, mona, w.url+"/"); strings.Contains(pg, `id="unfreeze-staging/api"`) {
		t.Errorf("an Unfreeze button on a scope no longer frozen")
	}
}
