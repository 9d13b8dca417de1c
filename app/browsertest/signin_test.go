//go:build unix

package browsertest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// signinConfig: staging is fed by acme/api and acme/web, vault by acme/vault alone.
const signinConfig = `environments:
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
`

const vaultSha = "de9f2c7fd25e1b3afad3e85a0bd17d9b100db4b3"

// dispatches records the App's workflow dispatches.
type dispatches struct {
	mu   sync.Mutex
	reqs []app.DispatchRequest
}

func (d *dispatches) Dispatch(_ context.Context, r app.DispatchRequest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reqs = append(d.reqs, r)
	return nil
}

func (d *dispatches) all() []app.DispatchRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]app.DispatchRequest(nil), d.reqs...)
}

// signinWorld is the App with GitHub sign-in, on loopback, against the strict fake's OAuth
// endpoints, with staging/api, staging/web and vault/keys live; and a page on another loopback
// server that posts a forged Redeploy form to the App.
type signinWorld struct {
	appURL, evilURL string
	auth            *authority.Authority
	disp            *dispatches
	gh              *githubtest.Server
	oauth           *githubtest.OAuthApp
}

func newSigninWorld(t *testing.T) *signinWorld {
	t.Helper()
	return newSigninWorldOf(t, signinConfig, "staging", "vault")
}

// newSigninWorldOf is newSigninWorld with the configuration yml, whose environments are envs.
func newSigninWorldOf(t *testing.T, yml string, envs ...string) *signinWorld {
	t.Helper()
	ctx := t.Context()
	store, err := bolt.Open(filepath.Join(t.TempDir(), "latestwins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	w := &signinWorld{auth: authority.New(store, authority.WithClock(storetest.NewClock(start))), disp: &dispatches{}, gh: githubtest.New(t)}
	for i, d := range []struct{ env, scope, sha string }{{"staging", "api", apiSha}, {"staging", "web", webSha}, {"vault", "keys", vaultSha}} {
		run := fmt.Sprintf("run-%d", i+1)
		acc, err := w.auth.Accept(ctx, authority.Intent{ID: run, Environment: d.env, Scopes: []string{d.scope}, Sha: d.sha, Ref: "refs/heads/main", Source: "push", Actor: "octocat"}, true)
		if err != nil {
			t.Fatal(err)
		}
		g, err := w.auth.Gate(ctx, authority.GateRequest{Environment: d.env, Generation: acc.Generation, Scopes: []string{d.scope}, Phase: "deploy", Holder: run, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.auth.Complete(ctx, authority.Completion{Environment: d.env, Generation: acc.Generation, Scopes: []string{d.scope}, Holder: run,
			Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Run: run}); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(t.TempDir(), "latestwins.yml")
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil) // on 127.0.0.1
	publicURL := "http://" + srv.Listener.Addr().String()
	a, err := app.New(app.Options{Secret: []byte("status page test"), Authority: w.auth, Config: &app.FileConfig{Path: cfg}, Dispatcher: w.disp,
		Environments: func(context.Context) ([]string, error) { return envs, nil },
		StatusPage:   app.StatusPageGitHub,
		SignIn: &app.SignInOptions{PublicURL: publicURL, SessionKey: []byte("a session key of at least 32 bytes, for tests"),
			GitHub: &githubapp.OAuth{ClientID: "Iv1.browser", ClientSecret: "browser-client-secret", WebURL: w.gh.URL, APIURL: w.gh.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = a
	srv.Start()
	t.Cleanup(srv.Close)
	w.appURL = srv.URL
	w.oauth = w.gh.OAuthApp("Iv1.browser", "browser-client-secret", srv.URL+"/signin/callback")

	// Another site's page with a Redeploy form, as a forger would make it: everything but the CSRF
	// token, which it cannot read from the App's page; the signed-in user is lured into a click.
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(rw, `<!doctype html><html><body><form id="f" method="post" action="`+w.appURL+`/redeploy">`+
			`<input type="hidden" name="environment" value="staging"><input type="hidden" name="scope" value="api">`+
			`<input type="hidden" name="request" value="forged-request-0123456789">`+
			`<button id="win" type="submit">Claim your prize</button></form>`+
			`<form method="post" action="`+w.appURL+`/rollback">`+
			`<input type="hidden" name="environment" value="staging"><input type="hidden" name="scope" value="api">`+
			`<input type="hidden" name="request" value="forged-request-9876543210"><input type="hidden" name="reason" value="prize">`+
			`<button id="win-rollback" type="submit">Claim another prize</button></form></body></html>`)
	}))
	t.Cleanup(evil.Close)
	w.evilURL = evil.URL
	return w
}

// user signs login in on the fake github.com, with their access to each repository (nil: they
// cannot see it).
func (w *signinWorld) user(t *testing.T, login string, perms map[string]map[string]bool) {
	t.Helper()
	token := w.oauth.SignIn(login)
	w.gh.On("GET", "/user", 200, githubtest.User(login)).ForToken(token)
	for full, p := range perms {
		owner, name, _ := strings.Cut(full, "/")
		if p == nil {
			w.gh.On("GET", "/repos/"+full, 404, map[string]any{"message": "Not Found"}).ForToken(token).Times(0)
			continue
		}
		w.gh.On("GET", "/repos/"+full, 200, githubtest.Repository(t, owner, name, p)).ForToken(token).Times(0)
	}
}

// browser is a headless Chromium with scripts on, driven over the DevTools pipe: one tab.
type browser struct {
	t       *testing.T
	c       *cdp
	session string
}

// drive launches Chromium and runs steps in one tab.
func drive(t *testing.T, bin string, steps func(b *browser) error) {
	t.Helper()
	l := newLaunch(t, bin)
	toR, toW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromR, fromW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range []*os.File{toR, toW, fromR, fromW} {
			_ = f.Close()
		}
	}()
	talk := func(ctx context.Context) error {
		_ = toR.Close()
		_ = fromW.Close()
		stop := context.AfterFunc(ctx, func() { _ = fromR.Close() })
		defer stop()
		c := &cdp{w: toW, r: bufio.NewReader(fromR)}
		var target struct {
			TargetID string `json:"targetId"`
		}
		if err := c.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
			return err
		}
		var attached struct {
			SessionID string `json:"sessionId"`
		}
		if err := c.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
			return err
		}
		b := &browser{t: t, c: c, session: attached.SessionID}
		if err := c.call(b.session, "Page.enable", nil, nil); err != nil {
			return err
		}
		if err := steps(b); err != nil {
			return err
		}
		return c.send("", "Browser.close", nil)
	}
	if _, err := l.run(t.Context(), []string{"--remote-debugging-pipe", "about:blank"}, []*os.File{toR, fromW}, talk); err != nil {
		l.fail("drive the browser", err)
	}
}

// open navigates to url and waits for the page (after any redirects) to load.
func (b *browser) open(url string) error {
	b.t.Logf("open %s", url)
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := b.c.call(b.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("navigate to %s: %s", url, nav.ErrorText)
	}
	return b.c.waitEvent(b.session, "Page.loadEventFired")
}

// eval runs a script in the page and returns its string result.
func (b *browser) eval(expr string) (string, error) {
	var out struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails json.RawMessage `json:"exceptionDetails"`
	}
	if err := b.c.call(b.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &out); err != nil {
		return "", err
	}
	if len(out.ExceptionDetails) > 0 {
		return "", fmt.Errorf("%s: %s", expr, out.ExceptionDetails)
	}
	s, _ := out.Result.Value.(string)
	return s, nil
}

// click clicks the element with the id, as a user does, and waits for the page it leads to.
func (b *browser) click(id string) error {
	b.t.Logf("click #%s", id)
	ok, err := b.eval(fmt.Sprintf(`(() => { const e = document.getElementById(%q); if (!e) return "missing"; e.click(); return "ok"; })()`, id))
	if err != nil {
		return err
	}
	if ok != "ok" {
		dom, _ := b.dom()
		return fmt.Errorf("no element #%s on %s", id, dom)
	}
	return b.c.waitEvent(b.session, "Page.loadEventFired")
}

func (b *browser) dom() (string, error) {
	return b.eval(`location.href + "\n" + document.documentElement.outerHTML`)
}

func TestSignInAndRedeployInChromium(t *testing.T) {
	bin := chromiumPath(t)
	w := newSigninWorld(t)
	ctx := t.Context()
	push := map[string]bool{"admin": false, "push": true, "pull": true}
	read := map[string]bool{"admin": false, "push": false, "pull": true}
	w.user(t, "mona", map[string]map[string]bool{"acme/api": push, "acme/web": read, "acme/vault": nil})
	before, err := w.auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}

	var signedIn, afterRedeploy, forged string
	start := time.Now()
	drive(t, bin, func(b *browser) error {
		if err := b.open(w.appURL + "/"); err != nil {
			return err
		}
		if err := b.click("signin"); err != nil { // to the fake github.com and back
			return err
		}
		var err error
		if signedIn, err = b.dom(); err != nil {
			return err
		}
		if err := b.click("redeploy-staging/api"); err != nil {
			return err
		}
		if afterRedeploy, err = b.dom(); err != nil {
			return err
		}
		if err := b.open(w.evilURL + "/"); err != nil {
			return err
		}
		if err := b.click("win"); err != nil {
			return err
		}
		forged, err = b.dom()
		return err
	})
	t.Logf("chromium: sign-in, Redeploy and a forged POST in %s", time.Since(start).Round(time.Millisecond))

	t.Run("sign-in", func(t *testing.T) {
		if !strings.HasPrefix(signedIn, w.appURL+"/\n") || !strings.Contains(signedIn, `<strong id="login">mona</strong>`) {
			t.Fatalf("after the sign-in the browser is not on the status page as mona:\n%s", signedIn)
		}
		if issued, exchanged := w.oauth.Codes(); issued != 1 || exchanged != 1 {
			t.Errorf("codes issued/exchanged: %d/%d, want 1/1", issued, exchanged)
		}
	})
	t.Run("visibility", func(t *testing.T) {
		if !strings.Contains(signedIn, `<h2>staging</h2>`) {
			t.Errorf("mona reads acme/api and acme/web and does not see staging:\n%s", signedIn)
		}
		if strings.Contains(signedIn, "vault") || strings.Contains(signedIn, vaultSha[:7]) {
			t.Errorf("mona cannot read acme/vault and sees its environment:\n%s", signedIn)
		}
		if strings.Contains(signedIn, `id="redeploy-staging/web"`) {
			t.Errorf("mona cannot push to acme/web and has its Redeploy button")
		}
	})
	t.Run("redeploy", func(t *testing.T) {
		after, err := w.auth.Status(ctx, "staging")
		if err != nil {
			t.Fatal(err)
		}
		m := after.Scopes["api"].Mailbox
		if m == nil || m.Sha != apiSha || m.Actor != "mona" || m.Generation != before.Desired+1 {
			t.Fatalf("api after the click: mailbox %+v; want %s at generation %d by mona", m, apiSha[:7], before.Desired+1)
		}
		for _, s := range []string{"api", "web"} {
			if *after.Scopes[s].Live != *before.Scopes[s].Live {
				t.Errorf("%s's live state changed: %+v -> %+v", s, before.Scopes[s].Live, after.Scopes[s].Live)
			}
		}
		if after.Scopes["web"].Mailbox != nil {
			t.Errorf("web got pending work: %+v", after.Scopes["web"].Mailbox)
		}
		if d := w.disp.all(); len(d) != 1 || d[0].Workflow != "deploy.yml" || d[0].Inputs["scopes"] != "api" || d[0].Ref != "main" {
			t.Errorf("dispatches: %+v; want deploy.yml on main for api", d)
		}
		if !strings.Contains(afterRedeploy, apiSha[:7]+" (generation "+fmt.Sprint(before.Desired+1)+")") {
			t.Errorf("the page after the click does not show api pending:\n%s", afterRedeploy)
		}
	})
	t.Run("forged POST", func(t *testing.T) {
		// Refused for its missing token: the browser did send mona's session cookie along (the
		// other port is the same site), so the token is all that stops it.
		if !strings.Contains(forged, "redeploy refused: the form is not from this session") {
			t.Errorf("the forged form was not refused for its CSRF token:\n%s", forged)
		}
		after, err := w.auth.Status(ctx, "staging")
		if err != nil {
			t.Fatal(err)
		}
		if after.Desired != before.Desired+1 || len(w.disp.all()) != 1 {
			t.Errorf("the forged POST changed state: desired %d (want %d), %d dispatches (want 1)", after.Desired, before.Desired+1, len(w.disp.all()))
		}
	})
}

// The Rollback button in Chromium: mona types why and clicks it; staging/api goes back to the
// commit live before, frozen, its workflow dispatched; the Unfreeze button then shows on the row.
// Before she clicks it, a second rollback freezes the scope again: her page's Unfreeze, which
// names the first freeze, is refused with the second one named; the reloaded page's lifts it.
// Another site's Rollback form, sent with mona's cookie, is refused for its missing CSRF token.
func TestRollbackAndUnfreezeInChromium(t *testing.T) {
	bin := chromiumPath(t)
	w := newSigninWorld(t)
	ctx := t.Context()
	const newer = "f00dfeed00000000000000000000000000000001"
	acc, err := w.auth.Accept(ctx, authority.Intent{ID: "run-newer", Environment: "staging", Scopes: []string{"api"}, Sha: newer, Ref: "refs/heads/main", Source: "push"}, true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := w.auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: acc.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-newer", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: acc.Generation, Scopes: []string{"api"}, Holder: "run-newer",
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
	push := map[string]bool{"admin": false, "push": true, "pull": true}
	read := map[string]bool{"admin": false, "push": false, "pull": true}
	w.user(t, "mona", map[string]map[string]bool{"acme/api": push, "acme/web": read, "acme/vault": nil})
	before, err := w.auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}

	var signedIn, frozen, stale, unfrozen, forged string
	var second *authority.AcceptResult
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
		if _, err := b.eval(`document.getElementById("reason-staging/api").value = "newer breaks checkout"`); err != nil {
			return err
		}
		if err := b.click("rollback-staging/api"); err != nil {
			return err
		}
		if frozen, err = b.dom(); err != nil {
			return err
		}
		if second, err = w.auth.Rollback(ctx, authority.RollbackRequest{Environment: "staging", Scope: "api", To: apiSha, Actor: "night-shift", Reason: "incident 2"}); err != nil {
			return err
		}
		if err := b.click("unfreeze-staging/api"); err != nil {
			return err
		}
		if stale, err = b.dom(); err != nil {
			return err
		}
		if err := b.open(w.appURL + "/"); err != nil {
			return err
		}
		if err := b.click("unfreeze-staging/api"); err != nil {
			return err
		}
		if unfrozen, err = b.dom(); err != nil {
			return err
		}
		if err := b.open(w.evilURL + "/"); err != nil {
			return err
		}
		if err := b.click("win-rollback"); err != nil {
			return err
		}
		forged, err = b.dom()
		return err
	})

	if strings.Contains(signedIn, `id="rollback-staging/web"`) || !strings.Contains(signedIn, "Roll back to "+apiSha[:7]) {
		t.Errorf("mona's page: want a Rollback button to %s for api only:\n%s", apiSha[:7], signedIn)
	}
	if !strings.Contains(frozen, "frozen by the rollback to "+apiSha[:7]+" (mona: newer breaks checkout)") || !strings.Contains(frozen, `id="unfreeze-staging/api"`) {
		t.Errorf("the page after the click does not show the freeze and its Unfreeze button:\n%s", frozen)
	}
	if d := w.disp.all(); len(d) != 1 || d[0].Workflow != "deploy.yml" || d[0].Ref != "main" || d[0].Inputs["generation"] != fmt.Sprint(before.Desired+1) {
		t.Errorf("dispatches: %+v; want deploy.yml on main for generation %d", d, before.Desired+1)
	}
	if first := before.Desired + 1; !strings.Contains(frozen, fmt.Sprintf("until unfreeze (freeze %d)", first)) || !strings.Contains(frozen, fmt.Sprintf("Unfreeze (freeze %d)", first)) {
		t.Errorf("the page after the click does not name freeze %d:\n%s", first, frozen)
	}
	if second == nil || !strings.Contains(stale, "unfreeze refused: staging/api is frozen by freeze "+fmt.Sprint(second.Generation)) ||
		!strings.Contains(stale, fmt.Sprintf("not by freeze %d", before.Desired+1)) {
		t.Errorf("the Unfreeze of the page shown before the second rollback was not refused with the second freeze named:\n%s", stale)
	}
	if strings.Contains(unfrozen, `id="unfreeze-staging/api"`) || strings.Contains(unfrozen, "frozen by the rollback") {
		t.Errorf("the page after Unfreeze still shows the freeze:\n%s", unfrozen)
	}
	t.Run("forged POST", func(t *testing.T) {
		if !strings.Contains(forged, "rollback refused: the form is not from this session") {
			t.Errorf("the forged Rollback form was not refused for its CSRF token:\n%s", forged)
		}
		after, err := w.auth.Status(ctx, "staging")
		if err != nil {
			t.Fatal(err)
		}
		if after.Desired != before.Desired+2 || after.Scopes["api"].Freeze != nil || len(w.disp.all()) != 1 {
			t.Errorf("the forged POST changed state: desired %d (want %d: the two rollbacks), freeze %+v, %d dispatches (want 1)",
				after.Desired, before.Desired+2, after.Scopes["api"].Freeze, len(w.disp.all()))
		}
	})
}

// A Promote click in Chromium: production requires staging, and its api waits for a commit not
// live there; mona, who can push to acme/api, promotes staging's api commit, which becomes
// production's new generation, and its workflow is dispatched once.
func TestPromoteInChromium(t *testing.T) {
	bin := chromiumPath(t)
	w := newSigninWorldOf(t, overviewConfig, "production", "staging", "vault")
	ctx := t.Context()
	if _, err := w.auth.Accept(ctx, authority.Intent{ID: "p-1", Environment: "production", Scopes: []string{"api"}, Sha: prodNextSha, Ref: "refs/heads/main",
		Source: "push", Requires: &authority.Requirements{Environments: []string{"staging"}}}, false); err != nil {
		t.Fatal(err)
	}
	push := map[string]bool{"admin": false, "push": true, "pull": true}
	read := map[string]bool{"admin": false, "push": false, "pull": true}
	w.user(t, "mona", map[string]map[string]bool{"acme/api": push, "acme/web": read, "acme/vault": nil})
	before, err := w.auth.Status(ctx, "production")
	if err != nil {
		t.Fatal(err)
	}

	var signedIn, promoted string
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
		if err := b.click("promote-production/api"); err != nil {
			return err
		}
		promoted, err = b.dom()
		return err
	})

	if !strings.Contains(signedIn, "Promote from staging") || strings.Contains(signedIn, `id="promote-staging/api"`) {
		t.Errorf("mona's page: want a Promote button from staging on production/api only:\n%s", signedIn)
	}
	after, err := w.auth.Status(ctx, "production")
	if err != nil {
		t.Fatal(err)
	}
	gen := before.Desired + 1
	if m := after.Scopes["api"].Mailbox; m == nil || m.Sha != apiSha || m.Actor != "mona" || m.Generation != gen {
		t.Errorf("production/api after the click: pending %+v; want %s by mona at generation %d", m, apiSha[:7], gen)
	}
	if d := w.disp.all(); len(d) != 1 || d[0].Workflow != "deploy.yml" || d[0].Ref != "main" || d[0].Inputs["generation"] != fmt.Sprint(gen) {
		t.Errorf("dispatches: %+v; want deploy.yml on main for generation %d, once", d, gen)
	}
	if prod := section(t, promoted, "production"); !strings.Contains(prod, apiSha[:7]+" (generation "+fmt.Sprint(gen)+")") {
		t.Errorf("the page after the click does not show the promoted commit pending in production:\n%s", prod)
	}
}
