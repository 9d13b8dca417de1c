package app

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app/internal/web"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

var testSessionKey = []byte("0123456789abcdef0123456789abcdef-test")

// The GitHub client of the sign-in implements the port.
var _ web.GitHubSignIn = (*githubapp.OAuth)(nil)

func TestResolveStatusPage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		setting  string
		loopback bool
		want     web.StatusPage
	}{
		{"", true, web.StatusPageOpen}, {"auto", true, web.StatusPageOpen}, {"", false, web.StatusPageOff}, {"auto", false, web.StatusPageOff},
		{"open", false, web.StatusPageOpen}, {"GitHub", true, web.StatusPageGitHub}, {"off", true, web.StatusPageOff},
	} {
		if got, err := web.ResolveStatusPage(tt.setting, tt.loopback); err != nil || got != tt.want {
			t.Errorf("ResolveStatusPage(%q, %v) = %q, %v; want %q", tt.setting, tt.loopback, got, err, tt.want)
		}
	}
	if _, err := web.ResolveStatusPage("public", true); !errors.Is(err, authority.ErrInvalidInput) {
		t.Errorf("an unknown mode: %v", err)
	}
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true, ":8080": false,
		"0.0.0.0:8080": false, "10.0.0.1:80": false, "latestwins.example.com": false, "127.0.0.1": true} {
		if web.LoopbackAddr(addr) != want {
			t.Errorf("LoopbackAddr(%q) = %v", addr, !want)
		}
	}
}

func TestStatusPageOff(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, func(o *Options) { o.StatusPage = "" })
	rec := h.do(httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "LATESTWINS_STATUS_PAGE") {
		t.Errorf("GET / with the page off: %d %q; want 404 saying how to turn it on", rec.Code, rec.Body)
	}
	if rec := h.do(httptest.NewRequest("GET", "/healthz", nil)); rec.Code != http.StatusOK {
		t.Errorf("GET /healthz with the page off: %d", rec.Code)
	}
	for _, path := range []string{"/signin", "/signin/callback"} {
		if rec := h.do(httptest.NewRequest("GET", path, nil)); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s with the page off: %d, want 404", path, rec.Code)
		}
	}
}

func TestSignInSettingsRefused(t *testing.T) {
	t.Parallel()
	gh := &githubapp.OAuth{ClientID: "c", ClientSecret: "s"}
	for name, o := range map[string]*web.SignInOptions{
		"no sign-in":         nil,
		"short key":          {GitHub: gh, PublicURL: "https://x.example", SessionKey: []byte("short")},
		"no key":             {GitHub: gh, PublicURL: "https://x.example"},
		"http on the public": {GitHub: gh, PublicURL: "http://x.example", SessionKey: testSessionKey},
		"a path":             {GitHub: gh, PublicURL: "https://x.example/status", SessionKey: testSessionKey},
		"no public URL":      {GitHub: gh, SessionKey: testSessionKey},
	} {
		_, err := New(Options{Secret: testSecret, Authority: authority.New(nil), Config: staticConfig{}, StatusPage: web.StatusPageGitHub, SignIn: o})
		if !errors.Is(err, authority.ErrInvalidInput) {
			t.Errorf("%s: %v, want a settings error", name, err)
		}
	}
}

// signInWorld is the App with GitHub sign-in against the strict fake, on loopback: staging has api
// (Codertocat/Hello-World) and web (acme/web) live; mona can push to Hello-World and cannot see
// acme/web; hubot can read acme/web only.
type signInWorld struct {
	h     *harness
	url   string
	gh    *githubtest.Server
	oauth *githubtest.OAuthApp
}

const (
	liveAPI = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
	liveWeb = "a10867b14bb761a232cd80139fbd4c0d33264240"
)

func newSignInWorld(t *testing.T) *signInWorld {
	t.Helper()
	return newSignInWorldOf(t, testConfig, "staging")
}

// newSignInWorldOf is newSignInWorld with the configuration cfgYAML, whose environments are envs.
func newSignInWorldOf(t *testing.T, cfgYAML string, envs ...string) *signInWorld {
	t.Helper()
	w := &signInWorld{gh: githubtest.New(t)}
	srv := httptest.NewUnstartedServer(nil)
	w.h = newHarness(t, cfgYAML, func(o *Options) {
		o.Environments = func(context.Context) ([]string, error) { return envs, nil }
		o.StatusPage = web.StatusPageGitHub
		o.SignIn = &web.SignInOptions{PublicURL: "http://" + srv.Listener.Addr().String(), SessionKey: testSessionKey,
			GitHub: &githubapp.OAuth{ClientID: "Iv1.test", ClientSecret: "client-secret", WebURL: w.gh.URL, APIURL: w.gh.URL}}
	})
	srv.Config.Handler = w.h.app
	srv.Start()
	t.Cleanup(srv.Close)
	w.url = srv.URL
	w.oauth = w.gh.OAuthApp("Iv1.test", "client-secret", srv.URL+"/signin/callback")
	deployLive(t, w.h.auth, "staging", "api", liveAPI, "run-1")
	deployLive(t, w.h.auth, "staging", "web", liveWeb, "run-2")
	return w
}

// deployLive accepts sha for env/scope and completes its deploy.
func deployLive(t *testing.T, auth *authority.Authority, env, scope, sha, run string) {
	t.Helper()
	ctx := context.Background()
	acc, err := auth.Accept(ctx, authority.Intent{ID: run, Environment: env, Scopes: []string{scope}, Sha: sha, Ref: "refs/heads/master", Source: "push", Actor: "octocat"}, true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := auth.Gate(ctx, authority.GateRequest{Environment: env, Generation: acc.Generation, Scopes: []string{scope}, Phase: "deploy", Holder: run, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Complete(ctx, authority.Completion{Environment: env, Generation: acc.Generation, Scopes: []string{scope}, Holder: run,
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Run: run}); err != nil {
		t.Fatal(err)
	}
}

// signIn goes through the sign-in as login, whose access is given per repository; it returns a
// client carrying the session cookie.
func (w *signInWorld) signIn(t *testing.T, login string, perms map[string]map[string]bool) *http.Client {
	t.Helper()
	token := w.oauth.SignIn(login)
	w.gh.On("GET", "/user", 200, githubtest.User(login)).ForToken(token)
	for full, p := range perms {
		owner, name, _ := strings.Cut(full, "/")
		if p == nil {
			w.gh.On("GET", "/repos/"+full, 404, map[string]any{"message": "Not Found"}).ForToken(token)
			continue
		}
		w.gh.On("GET", "/repos/"+full, 200, githubtest.Repository(t, owner, name, p)).ForToken(token)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(w.url + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `<strong id="login">`+login+`</strong>`) {
		t.Fatalf("after sign-in: %d\n%s", resp.StatusCode, body)
	}
	return c
}

var (
	pushPerm = map[string]bool{"admin": false, "push": true, "pull": true}
	readPerm = map[string]bool{"admin": false, "push": false, "pull": true}
)

func getPage(t *testing.T, c *http.Client, url string) string {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", url, resp.StatusCode, b)
	}
	return string(b)
}

var hiddenInput = regexp.MustCompile(`name="(csrf|environment|scope|request)" value="([^"]*)"`)

// redeployForm reads the Redeploy form of env/scope from the page.
func redeployForm(t *testing.T, pg, env, scope string) url.Values {
	t.Helper()
	i := strings.Index(pg, `id="redeploy-`+env+`/`+scope+`"`)
	if i < 0 {
		t.Fatalf("no Redeploy button for %s/%s:\n%s", env, scope, pg)
	}
	start := strings.LastIndex(pg[:i], "<form")
	v := url.Values{}
	for _, m := range hiddenInput.FindAllStringSubmatch(pg[start:i], -1) {
		v.Set(m[1], m[2])
	}
	return v
}

func post(t *testing.T, c *http.Client, url string, form url.Values) int {
	t.Helper()
	noFollow := *c
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.PostForm(url, form)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

func TestSignedInPageVisibility(t *testing.T) {
	t.Parallel()
	w := newSignInWorld(t)
	mona := w.signIn(t, "mona", map[string]map[string]bool{"Codertocat/Hello-World": pushPerm, "acme/web": nil})
	pg := getPage(t, mona, w.url+"/")
	if !strings.Contains(pg, `<h2>staging</h2>`) {
		t.Fatalf("mona can read Hello-World, which feeds staging, and does not see it:\n%s", pg)
	}
	redeployForm(t, pg, "staging", "api")
	if strings.Contains(pg, `id="redeploy-staging/web"`) {
		t.Error("mona has a Redeploy button for web, whose repository she cannot see")
	}

	// hubot reads acme/web only: staging shows (web feeds it), without any button.
	hubot := w.signIn(t, "hubot", map[string]map[string]bool{"Codertocat/Hello-World": nil, "acme/web": readPerm})
	pg = getPage(t, hubot, w.url+"/")
	if !strings.Contains(pg, `<h2>staging</h2>`) || strings.Contains(pg, "Redeploy</button>") {
		t.Errorf("hubot reads acme/web: want staging, read-only:\n%s", pg)
	}

	// A user who can read no repository of staging does not see it.
	stranger := w.signIn(t, "stranger", map[string]map[string]bool{"Codertocat/Hello-World": nil, "acme/web": nil})
	pg = getPage(t, stranger, w.url+"/")
	if strings.Contains(pg, "staging") || strings.Contains(pg, liveAPI[:7]) {
		t.Errorf("a user who can read none of staging's repositories sees it:\n%s", pg)
	}

	// Without a session: the sign-in link, no state.
	pg = getPage(t, http.DefaultClient, w.url+"/")
	if !strings.Contains(pg, `href="/signin"`) || strings.Contains(pg, "staging") {
		t.Errorf("signed out: want only the sign-in link:\n%s", pg)
	}
}

func TestRedeployButton(t *testing.T) {
	t.Parallel()
	w := newSignInWorld(t)
	ctx := context.Background()
	mona := w.signIn(t, "mona", map[string]map[string]bool{"Codertocat/Hello-World": pushPerm, "acme/web": readPerm})
	pg := getPage(t, mona, w.url+"/")
	form := redeployForm(t, pg, "staging", "api")
	before, err := w.h.auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}

	refused := map[string]url.Values{
		"no CSRF token": {"environment": {"staging"}, "scope": {"api"}, "request": {form.Get("request")}},
		"a wrong CSRF token": {"csrf": {strings.Repeat("A", 43)}, "environment": {"staging"}, "scope": {"api"},
			"request": {form.Get("request")}},
		// mona reads acme/web but cannot push: the form is well made, the permission is missing.
		"no write permission": {"csrf": {form.Get("csrf")}, "environment": {"staging"}, "scope": {"web"}, "request": {form.Get("request")}},
	}
	for name, f := range refused {
		if code := post(t, mona, w.url+"/redeploy", f); code != http.StatusForbidden {
			t.Errorf("%s: POST /redeploy answered %d, want 403", name, code)
		}
	}
	if code := post(t, http.DefaultClient, w.url+"/redeploy", form); code != http.StatusForbidden {
		t.Errorf("without a session: POST /redeploy answered %d, want 403", code)
	}
	after, _ := w.h.auth.Status(ctx, "staging")
	if after.Desired != before.Desired || after.Scopes["api"].Mailbox != nil || len(w.h.disp.requests()) != 0 {
		t.Fatalf("a refused POST changed something: desired %d -> %d, api mailbox %+v, dispatches %v",
			before.Desired, after.Desired, after.Scopes["api"].Mailbox, w.h.disp.requests())
	}

	if code := post(t, mona, w.url+"/redeploy", form); code != http.StatusSeeOther {
		t.Fatalf("the Redeploy form: %d, want 303", code)
	}
	after, _ = w.h.auth.Status(ctx, "staging")
	m := after.Scopes["api"].Mailbox
	if m == nil || m.Sha != liveAPI || m.Actor != "mona" || m.Generation != before.Desired+1 {
		t.Errorf("api's mailbox after Redeploy: %+v; want %s at generation %d by mona", m, liveAPI[:7], before.Desired+1)
	}
	if web := after.Scopes["web"]; web.Mailbox != nil || *web.Live != *before.Scopes["web"].Live {
		t.Errorf("web changed: live %+v -> %+v, mailbox %+v", before.Scopes["web"].Live, web.Live, web.Mailbox)
	}
	if *after.Scopes["api"].Live != *before.Scopes["api"].Live {
		t.Errorf("api's live state changed before any deploy: %+v -> %+v", before.Scopes["api"].Live, after.Scopes["api"].Live)
	}
	reqs := w.h.disp.requests()
	if len(reqs) != 1 || reqs[0].Workflow != "deploy.yml" || reqs[0].Inputs["scopes"] != "api" || reqs[0].Ref != "master" {
		t.Errorf("dispatches: %+v; want deploy.yml on master for api", reqs)
	}
	// The same form again is the same request: nothing new.
	if code := post(t, mona, w.url+"/redeploy", form); code != http.StatusSeeOther {
		t.Errorf("the form sent twice: %d", code)
	}
	if again, _ := w.h.auth.Status(ctx, "staging"); again.Desired != after.Desired || len(w.h.disp.requests()) != 1 {
		t.Errorf("the form sent twice redeployed twice: desired %d -> %d", after.Desired, again.Desired)
	}
}

func TestSignInState(t *testing.T) {
	t.Parallel()
	w := newSignInWorld(t)
	w.oauth.SignIn("mona")
	jar, _ := cookiejar.New(nil)
	noFollow := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	callback := func(c *http.Client, query string) *http.Response {
		t.Helper()
		resp, err := c.Get(w.url + "/signin/callback?" + query)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	// A callback this browser did not start (a link from elsewhere) is refused.
	if resp := callback(noFollow, "code=abc&state=xyz"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a callback without a sign-in started here: %d, want 400", resp.StatusCode)
	}
	resp, err := noFollow.Get(w.url + "/signin")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	authz, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || authz.Query().Get("state") == "" || authz.Query().Get("redirect_uri") != w.url+"/signin/callback" {
		t.Fatalf("GET /signin redirected to %q, want GitHub's authorize with a state and the exact callback", resp.Header.Get("Location"))
	}
	// GitHub's answer with another state (an attacker's code pushed into this browser) is refused.
	resp, err = noFollow.Get(authz.String())
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	back, _ := url.Parse(resp.Header.Get("Location"))
	q := back.Query()
	q.Set("state", "forged-"+q.Get("state"))
	if resp := callback(noFollow, q.Encode()); resp.StatusCode != http.StatusForbidden || slicesContainSession(resp.Cookies()) {
		t.Errorf("a callback with another state: %d, cookies %v; want 403 and no session", resp.StatusCode, resp.Cookies())
	}
	if _, exchanged := w.oauth.Codes(); exchanged != 0 {
		t.Errorf("the code of a refused callback was exchanged")
	}
}

func slicesContainSession(cs []*http.Cookie) bool {
	for _, c := range cs {
		if c.Name == web.SessionCookie && c.MaxAge >= 0 && c.Value != "" {
			return true
		}
	}
	return false
}
