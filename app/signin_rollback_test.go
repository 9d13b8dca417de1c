package app

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

var formInput = regexp.MustCompile(`name="(csrf|environment|scope|request|to|freeze|sha)" value="([^"]*)"`)

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

// The Unfreeze form names the freeze its page showed. Rollback 1 froze staging/api and mona's page
// shows its Unfreeze button; then rollback 2 froze the scope again. The form of the page shown
// before rollback 2 is refused 409 with rollback 2's freeze named, and lifts nothing; a form
// without the freeze is incomplete; the reloaded page's form, which names freeze 2, lifts it.
func TestUnfreezeButtonNamesTheFreeze(t *testing.T) {
	t.Parallel()
	w := newSignInWorld(t)
	ctx := context.Background()
	deployLive(t, w.h.auth, "staging", "api", shaB, "run-3")
	first, err := w.h.auth.Rollback(ctx, authority.RollbackRequest{Environment: "staging", Scope: "api", Actor: "oncall", Reason: "incident 1"})
	if err != nil {
		t.Fatal(err)
	}
	mona := w.signIn(t, "mona", map[string]map[string]bool{"Codertocat/Hello-World": pushPerm, "acme/web": readPerm})
	pg := getPage(t, mona, w.url+"/")
	stale := buttonForm(t, pg, "unfreeze-staging/api")
	if stale.Get("freeze") != fmt.Sprint(first.Generation) || !strings.Contains(pg, fmt.Sprintf("until unfreeze (freeze %d)", first.Generation)) {
		t.Fatalf("the page names freeze %q, want %d:\n%s", stale.Get("freeze"), first.Generation, pg)
	}
	second, err := w.h.auth.Rollback(ctx, authority.RollbackRequest{Environment: "staging", Scope: "api", To: shaB, Actor: "night-shift", Reason: "incident 2"})
	if err != nil {
		t.Fatal(err)
	}

	code, body := postPage(t, mona, w.url+"/unfreeze", stale)
	if code != http.StatusConflict || !strings.Contains(body, fmt.Sprintf("frozen by freeze %d (the rollback to %s by night-shift: incident 2), not by freeze %d", second.Generation, shaB[:7], first.Generation)) ||
		!strings.Contains(body, "nothing was unfrozen") {
		t.Errorf("the form of the page shown before rollback 2: %d, want 409 naming freeze %d:\n%s", code, second.Generation, body)
	}
	incomplete := url.Values{}
	for k, v := range stale {
		incomplete[k] = v
	}
	incomplete.Del("freeze")
	if code, body := postPage(t, mona, w.url+"/unfreeze", incomplete); code != http.StatusBadRequest {
		t.Errorf("a form without the freeze: %d, want 400:\n%s", code, body)
	}
	if sc := scopeState(t, w.h, "staging", "api"); sc.Freeze == nil || sc.Freeze.Generation != second.Generation {
		t.Fatalf("after the refused forms: freeze %+v; want rollback 2's", sc.Freeze)
	}

	fresh := buttonForm(t, getPage(t, mona, w.url+"/"), "unfreeze-staging/api")
	if fresh.Get("freeze") != fmt.Sprint(second.Generation) {
		t.Fatalf("the reloaded page's form names freeze %q, want %d", fresh.Get("freeze"), second.Generation)
	}
	if code, body := postPage(t, mona, w.url+"/unfreeze", fresh); code != http.StatusSeeOther {
		t.Fatalf("the reloaded page's Unfreeze form: %d, want 303:\n%s", code, body)
	}
	if sc := scopeState(t, w.h, "staging", "api"); sc.Freeze != nil {
		t.Errorf("after the Unfreeze: freeze %+v; want none", sc.Freeze)
	}
}

// postPage posts form to url, not following a redirect, and returns the status and the body.
func postPage(t *testing.T, c *http.Client, url string, form url.Values) (int, string) {
	t.Helper()
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.PostForm(url, form)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, html.UnescapeString(string(b))
}
