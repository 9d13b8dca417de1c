package app

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// The Promote button: only on a scope of an environment that requires another, only for users who
// can push to the scope's repository, only from a form of their own session's page, and then the
// same promotion as `/latestwins promote ENV/SCOPE`: the commit live in staging becomes production's
// new generation and the scope's workflow is dispatched for it, once however often the form is
// sent.
func TestPromoteButton(t *testing.T) {
	t.Parallel()
	w := newSignInWorldOf(t, promoteConfig, "production", "staging")
	ctx := context.Background()
	// production/api and production/web have liveAPI and liveWeb live under the requirement; then
	// shaB goes live in staging/api.
	for i, d := range []struct{ scope, sha string }{{"api", liveAPI}, {"web", liveWeb}} {
		run := fmt.Sprintf("prod-%d", i)
		acc, err := w.h.auth.Accept(ctx, authority.Intent{ID: run, Environment: "production", Scopes: []string{d.scope}, Sha: d.sha, Ref: "refs/heads/master",
			Source: "push", Requires: &authority.Requirements{Environments: []string{"staging"}}}, true)
		if err != nil {
			t.Fatal(err)
		}
		g, err := w.h.auth.Gate(ctx, authority.GateRequest{Environment: "production", Generation: acc.Generation, Scopes: []string{d.scope}, Phase: "deploy", Holder: run, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.h.auth.Complete(ctx, authority.Completion{Environment: "production", Generation: acc.Generation, Scopes: []string{d.scope}, Holder: run,
			Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	deployLive(t, w.h.auth, "staging", "api", shaB, "run-3")

	mona := w.signIn(t, "mona", map[string]map[string]bool{"Codertocat/Hello-World": pushPerm, "acme/web": readPerm})
	pg := getPage(t, mona, w.url+"/")
	for _, id := range []string{"promote-production/web", "promote-staging/api"} {
		if strings.Contains(pg, `id="`+id+`"`) {
			t.Fatalf("mona has a button #%s (she cannot push to acme/web; staging requires nothing):\n%s", id, pg)
		}
	}
	if !strings.Contains(pg, "Promote from staging") {
		t.Fatalf("the Promote button does not name the environment it promotes from:\n%s", pg)
	}
	form := buttonForm(t, pg, "promote-production/api")
	before, err := w.h.auth.Status(ctx, "production")
	if err != nil {
		t.Fatal(err)
	}

	refused := map[string]url.Values{
		"no CSRF token":                       {"environment": {"production"}, "scope": {"api"}, "request": {form.Get("request")}},
		"a wrong CSRF token":                  {"csrf": {strings.Repeat("A", 43)}, "environment": {"production"}, "scope": {"api"}, "request": {form.Get("request")}},
		"no write permission":                 {"csrf": {form.Get("csrf")}, "environment": {"production"}, "scope": {"web"}, "request": {form.Get("request")}},
		"another session's form (no session)": form,
	}
	for name, f := range refused {
		c := mona
		if name == "another session's form (no session)" {
			c = http.DefaultClient
		}
		if code := post(t, c, w.url+"/promote", f); code != http.StatusForbidden {
			t.Errorf("%s: POST /promote answered %d, want 403", name, code)
		}
	}
	after, _ := w.h.auth.Status(ctx, "production")
	if after.Desired != before.Desired || after.Scopes["api"].Mailbox != nil || after.Scopes["web"].Mailbox != nil || len(w.h.disp.requests()) != 0 {
		t.Fatalf("a refused POST changed something: desired %d -> %d, pending api %+v web %+v, dispatches %v",
			before.Desired, after.Desired, after.Scopes["api"].Mailbox, after.Scopes["web"].Mailbox, w.h.disp.requests())
	}

	for range 2 {
		if code := post(t, mona, w.url+"/promote", form); code != http.StatusSeeOther {
			t.Fatalf("the Promote form: %d, want 303", code)
		}
	}
	after, _ = w.h.auth.Status(ctx, "production")
	gen := before.Desired + 1
	if m := after.Scopes["api"].Mailbox; m == nil || m.Sha != shaB || m.Actor != "mona" || m.Generation != gen || after.Desired != gen || len(after.Scopes["api"].Queue) != 0 {
		t.Errorf("production/api after Promote (twice): pending %+v, desired %d; want %s by mona at generation %d, once", m, after.Desired, shaB[:7], gen)
	}
	if live := after.Scopes["api"].Live; live == nil || live.Sha != liveAPI {
		t.Errorf("Promote changed what is live in production/api: %+v", live)
	}
	reqs := w.h.disp.requests()
	if len(reqs) != 1 || reqs[0].Workflow != "deploy.yml" || reqs[0].Ref != "master" || reqs[0].Inputs["generation"] != fmt.Sprint(gen) || reqs[0].Inputs["scopes"] != "api" {
		t.Errorf("dispatches: %+v; want deploy.yml on master for api at generation %d, once", reqs, gen)
	}
}
