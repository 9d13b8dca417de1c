package githubtest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// oauthPrefix is where GitHub's web application flow lives: on the web host, not under the REST
// API, and not in the REST API's OpenAPI description. The fake serves both on one host.
const oauthPrefix = "/login/oauth/"

// codeTTL is how long an authorization code may be exchanged; GitHub documents ten minutes.
const codeTTL = 10 * time.Minute

// OAuthApp is a GitHub App's OAuth client on the fake: its client id, secret and callback URL, the
// user signed in on the fake's github.com, and the codes and tokens it issued.
//
// The fake checks what GitHub documents for the web application flow
// (docs.github.com, "Generating a user access token for a GitHub App"): GET /login/oauth/authorize
// needs the registered client_id and, when given, a redirect_uri equal to the registered callback
// URL; it redirects the browser to that URL with a code and the state it was given (the fake
// requires a state, which GitHub only recommends). POST /login/oauth/access_token needs the client
// id and secret, the code (single use, ten minutes) and, when given, the redirect_uri the code was
// issued for; its refusals are GitHub's (200 with error bad_verification_code,
// incorrect_client_credentials or redirect_uri_mismatch). It answers JSON when asked to with
// Accept: application/json, form-encoded otherwise, as GitHub does.
type OAuthApp struct {
	srv          *Server
	clientID     string
	clientSecret string
	callback     string
	now          func() time.Time

	signedIn string            // the login signed in on github.com; empty: nobody
	tokens   map[string]string // login -> the access token the exchange issues
	codes    map[string]*code
}

type code struct {
	login   string
	expires time.Time
	used    bool
}

// OAuthApp registers the App's OAuth client. callbackURL is the App's registered callback URL.
func (s *Server) OAuthApp(clientID, clientSecret, callbackURL string) *OAuthApp {
	s.t.Helper()
	if clientID == "" || clientSecret == "" || callbackURL == "" {
		s.t.Fatalf("githubtest: OAuthApp needs a client id, a client secret and a callback URL")
	}
	a := &OAuthApp{srv: s, clientID: clientID, clientSecret: clientSecret, callback: callbackURL, now: time.Now,
		tokens: map[string]string{}, codes: map[string]*code{}}
	s.mu.Lock()
	s.oauth = a
	s.mu.Unlock()
	return a
}

// SignIn makes login the user signed in on the fake's github.com, who has authorized the App: the
// next authorization redirects straight back with a code for them. It returns the access token the
// exchange of such a code issues (one per login), for stubs that answer that user (Stub.ForToken).
func (a *OAuthApp) SignIn(login string) string {
	a.srv.mu.Lock()
	defer a.srv.mu.Unlock()
	a.signedIn = login
	if tok, ok := a.tokens[login]; ok {
		return tok
	}
	tok := "ghu_" + random()
	a.tokens[login] = tok
	return tok
}

// Codes counts the codes issued and, of those, the ones exchanged.
func (a *OAuthApp) Codes() (issued, exchanged int) {
	a.srv.mu.Lock()
	defer a.srv.mu.Unlock()
	for _, c := range a.codes {
		if c.used {
			exchanged++
		}
	}
	return len(a.codes), exchanged
}

// ForToken makes the stub answer only requests made with token (Authorization: Bearer or token).
func (st *Stub) ForToken(token string) *Stub {
	st.token = token
	return st
}

func hasToken(h http.Header, token string) bool {
	auth := h.Get("Authorization")
	scheme, value, ok := strings.Cut(auth, " ")
	return ok && (strings.EqualFold(scheme, "bearer") || strings.EqualFold(scheme, "token")) && value == token
}

func random() string {
	b := make([]byte, 15)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) serveOAuth(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	a := s.oauth
	s.mu.Unlock()
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone()})
	s.mu.Unlock()
	if a == nil {
		s.fail(w, http.StatusNotFound, "githubtest: %s %s: no OAuth client is registered: call OAuthApp", r.Method, r.URL.Path)
		return
	}
	switch {
	case r.Method == http.MethodGet && r.URL.Path == oauthPrefix+"authorize":
		a.authorize(w, r)
	case r.Method == http.MethodPost && r.URL.Path == oauthPrefix+"access_token":
		a.accessToken(w, r)
	default:
		s.fail(w, http.StatusNotFound, "githubtest: %s %s is not an endpoint of GitHub's web application flow", r.Method, r.URL.Path)
	}
}

// page answers the browser with an HTML page, as github.com does when it cannot go on.
func page(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, "<!doctype html><title>GitHub</title><p id=\"error\">%s</p>", html.EscapeString(msg))
}

func (a *OAuthApp) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect := q.Get("redirect_uri")
	a.srv.mu.Lock()
	login := a.signedIn
	a.srv.mu.Unlock()
	switch {
	case q.Get("client_id") != a.clientID:
		page(w, http.StatusNotFound, "404: no application has this client_id")
		return
	case redirect != "" && redirect != a.callback:
		// GitHub sends the browser to the registered callback with the error.
		back, _ := url.Parse(a.callback)
		back.RawQuery = url.Values{"error": {"redirect_uri_mismatch"},
			"error_description": {"The redirect_uri MUST match the registered callback URL for this application."}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
		return
	case q.Get("state") == "":
		page(w, http.StatusBadRequest, "githubtest: authorize without a state: the App must send an unguessable state (GitHub strongly recommends it)")
		return
	case login == "":
		page(w, http.StatusUnauthorized, "nobody is signed in on the fake github.com: call SignIn")
		return
	}
	if redirect == "" {
		redirect = a.callback
	}
	c := random()
	a.srv.mu.Lock()
	a.codes[c] = &code{login: login, expires: a.now().Add(codeTTL)}
	a.srv.mu.Unlock()
	back, err := url.Parse(redirect)
	if err != nil {
		page(w, http.StatusBadRequest, "bad redirect_uri")
		return
	}
	bq := back.Query()
	bq.Set("code", c)
	bq.Set("state", q.Get("state"))
	back.RawQuery = bq.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (a *OAuthApp) accessToken(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		a.srv.fail(w, http.StatusBadRequest, "githubtest: access_token: %v", err)
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		a.srv.fail(w, http.StatusBadRequest, "githubtest: access_token: the body must be form-encoded, not %q", ct)
		return
	}
	f := r.PostForm
	answer := func(v map[string]string) {
		if accepts(r, "application/json") {
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			_ = json.NewEncoder(w).Encode(v)
			return
		}
		form := url.Values{}
		for k, x := range v {
			form.Set(k, x)
		}
		w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
		_, _ = w.Write([]byte(form.Encode()))
	}
	refuse := func(code, desc string) {
		answer(map[string]string{"error": code, "error_description": desc, "error_uri": "https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors"})
	}
	if f.Get("client_id") != a.clientID || f.Get("client_secret") != a.clientSecret {
		refuse("incorrect_client_credentials", "The client_id and/or client_secret passed are incorrect.")
		return
	}
	a.srv.mu.Lock()
	c := a.codes[f.Get("code")]
	ok := c != nil && !c.used && a.now().Before(c.expires)
	if ok && f.Get("redirect_uri") != "" && f.Get("redirect_uri") != a.callback {
		a.srv.mu.Unlock()
		refuse("redirect_uri_mismatch", "The redirect_uri MUST match the registered callback URL for this application.")
		return
	}
	var token string
	if ok {
		c.used = true
		token = a.tokens[c.login]
	}
	a.srv.mu.Unlock()
	if !ok {
		refuse("bad_verification_code", "The code passed is incorrect or expired.")
		return
	}
	answer(map[string]string{"access_token": token, "token_type": "bearer", "scope": ""})
}

func accepts(r *http.Request, media string) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == media {
			return true
		}
	}
	return false
}

// User is GitHub's answer to GET /user for login, as a public-user (GitHub's own examples of it
// lack the user_view_type its schema requires).
func User(login string) map[string]any {
	u := "https://api.github.com/users/" + login
	return map[string]any{
		"login": login, "id": 583231, "node_id": "MDQ6VXNlcjU4MzIzMQ==", "user_view_type": "public",
		"avatar_url": "https://avatars.githubusercontent.com/u/583231?v=4", "gravatar_id": "", "url": u,
		"html_url": "https://github.com/" + login, "followers_url": u + "/followers", "following_url": u + "/following{/other_user}",
		"gists_url": u + "/gists{/gist_id}", "starred_url": u + "/starred{/owner}{/repo}", "subscriptions_url": u + "/subscriptions",
		"organizations_url": u + "/orgs", "repos_url": u + "/repos", "events_url": u + "/events{/privacy}",
		"received_events_url": u + "/received_events", "type": "User", "site_admin": false, "name": nil, "company": nil,
		"blog": "", "location": nil, "email": nil, "hireable": nil, "bio": nil, "public_repos": 8, "public_gists": 8,
		"followers": 20, "following": 0, "created_at": "2011-01-25T18:44:36Z", "updated_at": "2026-01-22T12:53:39Z",
	}
}

// Repository is GitHub's answer to GET /repos/{owner}/{repo} for owner/name, with the permissions
// of the user asking (admin, maintain, push, triage, pull): GitHub's example, less the source and
// parent of a fork, and with the language the schema requires (the example lacks it in places).
func Repository(t testing.TB, owner, name string, permissions map[string]bool) map[string]any {
	t.Helper()
	doc, err := Description()
	if err != nil {
		t.Fatalf("githubtest: %v", err)
	}
	ex := doc.Paths.Value("/repos/{owner}/{repo}").Get.Responses.Status(200).Value.Content.Get("application/json").Examples["default-response"]
	raw, err := json.Marshal(ex.Value.Value)
	if err != nil {
		t.Fatalf("githubtest: Repository: %v", err)
	}
	var r map[string]any
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("githubtest: Repository: %v", err)
	}
	delete(r, "source")
	delete(r, "parent")
	r["fork"] = false
	if _, ok := r["language"]; !ok {
		r["language"] = nil
	}
	r["name"], r["full_name"] = name, owner+"/"+name
	if o, ok := r["owner"].(map[string]any); ok {
		o["login"] = owner
	}
	r["permissions"] = permissions
	return r
}
