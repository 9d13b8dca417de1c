// Package web is the App's status page: what is live and pending where (status.go), who may see
// it (off, open, or signed in with GitHub: signin.go, with its sealed cookies in session.go), and
// the buttons of a signed-in user with write permission (redeploy, roll back, unfreeze, promote,
// approve).
package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/report"
)

// StatusPage says who may see the status page (GET /). The webhook, /healthz and /v1 are the same
// in every mode.
type StatusPage string

// Status page modes.
const (
	// StatusPageOff answers 404, with a body that says how to turn the page on. The zero value.
	StatusPageOff StatusPage = "off"
	// StatusPageOpen shows every environment, read-only, to anyone who can reach the App: actors,
	// lease holders and failure messages included.
	StatusPageOpen StatusPage = "open"
	// StatusPageGitHub signs users in with GitHub and shows each one the environments fed by a
	// repository they can read; users with write permission on a scope's repository can redeploy it,
	// roll it back, unfreeze it and promote it.
	StatusPageGitHub StatusPage = "github"
)

// StatusPageAuto is the setting that picks StatusPageOpen on a loopback address and StatusPageOff
// elsewhere (ResolveStatusPage).
const StatusPageAuto = "auto"

// ResolveStatusPage reads the status page setting: off, open, github, or auto (or empty): open when
// loopback is true (the App listens on a loopback address only), off otherwise.
func ResolveStatusPage(setting string, loopback bool) (StatusPage, error) {
	switch s := strings.ToLower(strings.TrimSpace(setting)); s {
	case "", StatusPageAuto:
		if loopback {
			return StatusPageOpen, nil
		}
		return StatusPageOff, nil
	case string(StatusPageOff), string(StatusPageOpen), string(StatusPageGitHub):
		return StatusPage(s), nil
	}
	return "", &authority.InputError{Field: "status page", Value: setting,
		Fix: "give auto (open on a loopback address, off elsewhere), off, open (anyone who can reach the App sees it) or github (sign in with GitHub)"}
}

// LoopbackAddr reports whether a listening address (host:port) or URL host is loopback only:
// 127.0.0.0/8, ::1 or localhost. An empty host (":8080", every interface) is not.
func LoopbackAddr(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// GitHubSignIn is the App's user sign-in on GitHub and the one question the page asks with a
// user's token; internal/githubapp.OAuth is one.
type GitHubSignIn interface {
	// AuthorizeURL is GitHub's page that asks the user to authorize the App, then redirects to
	// redirectURI with a code and state.
	AuthorizeURL(redirectURI, state string) string
	// Exchange trades the code for the user's access token.
	Exchange(ctx context.Context, code, redirectURI string) (string, error)
	// Login is the token's user.
	Login(ctx context.Context, token string) (string, error)
	// RepoAccess reports whether the token's user can read, and push to, owner/repo.
	RepoAccess(ctx context.Context, token, owner, repo string) (read, write bool, err error)
}

// Defaults of SignInOptions.
const (
	DefaultSessionTTL = 8 * time.Hour // a GitHub App's user tokens expire after 8 hours
	DefaultAccessTTL  = time.Minute
	signinTTL         = 10 * time.Minute // GitHub's codes live 10 minutes
	maxAccessEntries  = 10000
	callbackPath      = "/signin/callback"
)

// SignInOptions configure StatusPageGitHub.
type SignInOptions struct {
	// GitHub signs users in; required.
	GitHub GitHubSignIn
	// PublicURL is the App's address as browsers reach it (https://HOST, or http on loopback); the
	// callback URL to register on the App is PublicURL + "/signin/callback". Required.
	PublicURL string
	// SessionKey seals the cookies; at least MinSessionKeyBytes random bytes. Required.
	SessionKey []byte
	// SessionTTL is how long a sign-in lasts; 0 means DefaultSessionTTL.
	SessionTTL time.Duration
	// AccessTTL is how long a user's access to a repository is remembered in this process; 0 means
	// DefaultAccessTTL.
	AccessTTL time.Duration
}

// signIn is StatusPageGitHub's state.
type signIn struct {
	github   GitHubSignIn
	callback string
	secure   bool // cookies are Secure (https)
	seal     *sealer
	ttl      time.Duration
	access   *accessCache
}

func newSignIn(o *SignInOptions, now func() time.Time) (*signIn, error) {
	if o == nil || o.GitHub == nil {
		return nil, &authority.InputError{Field: "status page sign-in", Fix: "give the App's client id and client secret (LATESTWINS_APP_CLIENT_ID, LATESTWINS_APP_CLIENT_SECRET) for --status-page github"}
	}
	u, err := url.Parse(o.PublicURL)
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, &authority.InputError{Field: "public URL", Value: o.PublicURL,
			Fix: "give the App's address as browsers reach it, such as https://latestwins.example.com (LATESTWINS_PUBLIC_URL); the callback URL to register on the App is that plus " + callbackPath}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && LoopbackAddr(u.Host):
	default:
		return nil, &authority.InputError{Field: "public URL", Value: o.PublicURL,
			Fix: "the sign-in cookie carries a GitHub token: give an https:// address (http only on a loopback address)"}
	}
	seal, err := newSealer(o.SessionKey)
	if err != nil {
		return nil, &authority.InputError{Field: "session key", Fix: "set LATESTWINS_SESSION_KEY (--session-key) for --status-page github: " + err.Error()}
	}
	s := &signIn{github: o.GitHub, callback: strings.TrimSuffix(u.String(), "/") + callbackPath, secure: u.Scheme == "https",
		seal: seal, ttl: o.SessionTTL, access: &accessCache{ttl: o.AccessTTL, now: now, m: map[accessKey]accessEntry{}}}
	if s.ttl <= 0 {
		s.ttl = DefaultSessionTTL
	}
	if s.access.ttl <= 0 {
		s.access.ttl = DefaultAccessTTL
	}
	return s, nil
}

// Page is the status page: the view of the environments, the sign-in with GitHub and the buttons
// of StatusPageGitHub.
type Page struct {
	*core.App
	signIn *signIn // StatusPageGitHub only
}

// Routes registers the status page of app on mux as mode says and, for StatusPageGitHub (which o
// configures), its sign-in and buttons.
func Routes(mux *http.ServeMux, app *core.App, mode StatusPage, o *SignInOptions) error {
	a := &Page{App: app}
	switch mode {
	case "", StatusPageOff:
		mux.HandleFunc("GET /{$}", serveStatusOff)
		return nil
	case StatusPageOpen:
		mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { a.serveStatus(w, r, nil) })
		mux.HandleFunc("GET /report/{env...}", func(w http.ResponseWriter, r *http.Request) { a.serveReport(w, r, nil) })
		return nil
	case StatusPageGitHub:
	default:
		_, err := ResolveStatusPage(string(mode), false)
		return err
	}
	s, err := newSignIn(o, a.Now)
	if err != nil {
		return err
	}
	a.signIn = s
	mux.HandleFunc("GET /{$}", a.serveSignedIn)
	mux.HandleFunc("GET /report/{env...}", a.serveReportSignedIn)
	mux.HandleFunc("GET /signin", a.serveSignIn)
	mux.HandleFunc("GET "+callbackPath, a.serveCallback)
	mux.HandleFunc("POST /signout", a.serveSignOut)
	mux.HandleFunc("POST /redeploy", a.serveRedeploy)
	mux.HandleFunc("POST /rollback", a.serveRollback)
	mux.HandleFunc("POST /unfreeze", a.serveUnfreeze)
	mux.HandleFunc("POST /promote", a.servePromote)
	mux.HandleFunc("POST /approve", a.serveApprove)
	mux.HandleFunc("POST /break-glass", a.serveBreakGlass)
	return nil
}

// statusOffBody is the whole answer of a status page that is off.
const statusOffBody = "The status page is off on this address.\n\n" +
	"Turn it on with LATESTWINS_STATUS_PAGE (or --status-page):\n" +
	"  github  sign in with GitHub; each user sees the environments of repositories they can read\n" +
	"  open    anyone who can reach this address sees every environment, actors and failure messages included\n" +
	"See docs/deploy.md, \"The status page\".\n"

func serveStatusOff(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(statusOffBody))
}

// viewer is the signed-in user a page is rendered for, with their CSRF token.
type viewer struct {
	Login string
	CSRF  string
	sess  *session
}

// currentSession is the request's valid session, or nil.
func (a *Page) currentSession(r *http.Request) *session {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return nil
	}
	sess, err := a.signIn.seal.openSession(c.Value, a.Now())
	if err != nil {
		return nil
	}
	return sess
}

func (a *Page) serveSignedIn(w http.ResponseWriter, r *http.Request) {
	sess := a.currentSession(r)
	if sess == nil {
		if _, err := r.Cookie(SessionCookie); err == nil {
			a.clearCookie(w, SessionCookie, "/") // expired or not ours
		}
		writeHTML(w, http.StatusOK, signInPage)
		return
	}
	a.serveStatus(w, r, &viewer{Login: sess.Login, CSRF: a.signIn.seal.csrf(sess), sess: sess})
}

// serveReportSignedIn is the delivery report for the signed-in user; the sign-in page for anyone
// else.
func (a *Page) serveReportSignedIn(w http.ResponseWriter, r *http.Request) {
	sess := a.currentSession(r)
	if sess == nil {
		writeHTML(w, http.StatusOK, signInPage)
		return
	}
	a.serveReport(w, r, &viewer{Login: sess.Login, CSRF: a.signIn.seal.csrf(sess), sess: sess})
}

const signInPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>latestwins status</title>
<style>body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #1f2328; }</style></head>
<body><h1>latestwins</h1>
<p>Sign in to see the environments of the repositories you can read.</p>
<p><a id="signin" href="/signin">Sign in with GitHub</a></p>
</body></html>
`

func writeHTML(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func (a *Page) setCookie(w http.ResponseWriter, name, value, path string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: int(ttl.Seconds()),
		HttpOnly: true, Secure: a.signIn.secure, SameSite: http.SameSiteLaxMode})
}

func (a *Page) clearCookie(w http.ResponseWriter, name, path string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1,
		HttpOnly: true, Secure: a.signIn.secure, SameSite: http.SameSiteLaxMode})
}

// serveSignIn starts a sign-in: a random state, kept in a sealed cookie of this browser, and a
// redirect to GitHub.
func (a *Page) serveSignIn(w http.ResponseWriter, r *http.Request) {
	state, err := randomToken(32)
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, "sign-in failed to start", err)
		return
	}
	v, err := a.signIn.seal.seal(signinCookie, signinState{State: state, Expires: a.Now().Add(signinTTL)})
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, "sign-in failed to start", err)
		return
	}
	a.setCookie(w, signinCookie, v, "/signin", signinTTL)
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, a.signIn.github.AuthorizeURL(a.signIn.callback, state), http.StatusFound)
}

// serveCallback finishes a sign-in: the state GitHub sent back must be this browser's, then the code
// is exchanged for the user's token and a session cookie is set.
func (a *Page) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	c, err := r.Cookie(signinCookie)
	if err != nil {
		a.refuse(w, r, http.StatusBadRequest, "this sign-in was not started in this browser (or took over 10 minutes): sign in again", nil)
		return
	}
	a.clearCookie(w, signinCookie, "/signin")
	var st signinState
	if err := a.signIn.seal.open(signinCookie, c.Value, &st); err != nil || !a.Now().Before(st.Expires) {
		a.refuse(w, r, http.StatusBadRequest, "this sign-in expired or was not started here: sign in again", nil)
		return
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(st.State)) != 1 {
		a.refuse(w, r, http.StatusForbidden, "the sign-in's state does not match this browser's: sign in again", nil)
		return
	}
	if e := q.Get("error"); e != "" {
		a.refuse(w, r, http.StatusForbidden, "GitHub did not sign you in: "+e+" "+q.Get("error_description"), nil)
		return
	}
	token, err := a.signIn.github.Exchange(r.Context(), q.Get("code"), a.signIn.callback)
	if err != nil {
		a.refuse(w, r, http.StatusBadGateway, "GitHub did not complete the sign-in: sign in again", err)
		return
	}
	login, err := a.signIn.github.Login(r.Context(), token)
	if err != nil {
		a.refuse(w, r, http.StatusBadGateway, "GitHub did not say who signed in: sign in again", err)
		return
	}
	id, err := randomToken(24)
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, "sign-in failed", err)
		return
	}
	v, err := a.signIn.seal.seal(SessionCookie, session{Login: login, Token: token, ID: id, Expires: a.Now().Add(a.signIn.ttl)})
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, "sign-in failed", err)
		return
	}
	a.setCookie(w, SessionCookie, v, "/", a.signIn.ttl)
	a.Log.InfoContext(r.Context(), "status page: signed in", "login", login)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (a *Page) serveSignOut(w http.ResponseWriter, r *http.Request) {
	sess := a.currentSession(r)
	if sess == nil || !a.signIn.seal.checkCSRF(sess, formValue(r, "csrf")) {
		a.refuse(w, r, http.StatusForbidden, "sign-out refused: the form is not from this session's page", nil)
		return
	}
	a.clearCookie(w, SessionCookie, "/")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// maxFormBytes bounds a form POST of the page.
const maxFormBytes = 4 << 10

func formValue(r *http.Request, name string) string {
	if r.PostForm == nil {
		r.Body = http.MaxBytesReader(nil, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			return ""
		}
	}
	return r.PostForm.Get(name)
}

// refuse answers the browser with a short page; err (not shown) is logged.
func (a *Page) refuse(w http.ResponseWriter, r *http.Request, status int, msg string, err error) {
	if err != nil {
		a.Log.WarnContext(r.Context(), "status page", "status", status, "msg", msg, "err", err)
	} else {
		a.Log.InfoContext(r.Context(), "status page refused", "status", status, "msg", msg)
	}
	writeHTML(w, status, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>latestwins</title></head><body><p id="message">`+
		html.EscapeString(msg)+`</p><p><a href="/">Back to the status page</a></p></body></html>`)
}

// pageAction is a status page button's POST once checked: who, which scope, the form's one-time
// request id, and what feeds the scope (with the App's installation on its repository, and the
// scope as the repository's own file narrows it).
type pageAction struct {
	sess    *session
	env     string
	scope   string
	request string
	feed    scopeFeed
	log     *slog.Logger
	// breakGlass is the permission the environment's break-glass needs (admin by default).
	breakGlass string
}

// checkAction checks a button's POST: a signed-in user, a form of their own session's page (its
// CSRF token), a complete form, and write permission on the repository that feeds the scope. It
// answers a refusal itself (verb names the button in it) and then returns nil. Every button goes
// through it, so each has the same protection.
func (a *Page) checkAction(w http.ResponseWriter, r *http.Request, verb string) *pageAction {
	ctx := r.Context()
	sess := a.currentSession(r)
	if sess == nil {
		a.refuse(w, r, http.StatusForbidden, verb+" refused: sign in first", nil)
		return nil
	}
	if !a.signIn.seal.checkCSRF(sess, formValue(r, "csrf")) {
		a.refuse(w, r, http.StatusForbidden, verb+" refused: the form is not from this session's page (reload the page and try again)", nil)
		return nil
	}
	env, scope, request := formValue(r, "environment"), formValue(r, "scope"), formValue(r, "request")
	if authority.ValidateEnvironment(env) != nil || scope == "" || len(request) < 16 || len(request) > 64 {
		a.refuse(w, r, http.StatusBadRequest, verb+" refused: the form is incomplete", nil)
		return nil
	}
	log := a.Log.With("login", sess.Login, "environment", env, "scope", scope, "button", verb)
	doc, err := a.Auth.Status(ctx, env)
	if err != nil && !errors.Is(err, authority.ErrInvalidInput) {
		a.refuse(w, r, http.StatusInternalServerError, verb+" failed: the store did not answer", err)
		return nil
	}
	feeds, err := a.scopeFeeds(ctx, log, env, doc)
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, verb+" failed: the configuration could not be read", err)
		return nil
	}
	feed, ok := feeds[scope]
	if !ok {
		a.refuse(w, r, http.StatusForbidden, fmt.Sprintf("%s refused: no repository is known to feed %s/%s", verb, env, scope), nil)
		return nil
	}
	acc, err := a.repoAccess(ctx, sess, feed.repo)
	if err != nil {
		a.refuse(w, r, http.StatusBadGateway, verb+" failed: GitHub did not say what you may do on "+feed.repo.String(), err)
		return nil
	}
	if !acc.write {
		log.InfoContext(ctx, "status page: refused, no write permission", "repo", feed.repo.String())
		a.refuse(w, r, http.StatusForbidden, fmt.Sprintf("%s refused: %s needs write permission on %s", verb, sess.Login, feed.repo), nil)
		return nil
	}
	if feed.installation == 0 {
		if feed.installation, err = a.InstallationOf(ctx, feed.repo); err != nil {
			a.refuse(w, r, http.StatusBadGateway, verb+" failed: the App's installation on "+feed.repo.String()+" is not known", err)
			return nil
		}
	}
	// The repository's own file may have chosen the scope's workflow: the same narrowed
	// configuration as a comment command's.
	read := a.ConfigFor
	if verb == "rollback" || verb == "unfreeze" {
		read = func(ctx context.Context, log *slog.Logger, installation int64, repo core.RepoRef, _ string) (*config.Config, error) {
			return a.IncidentConfig(ctx, log, installation, repo)
		}
	}
	own, err := read(ctx, log, feed.installation, feed.repo, "")
	if err != nil {
		a.refuse(w, r, core.StatusFor(err), verb+" refused: "+err.Error(), err)
		return nil
	}
	if e, ok := own.Environment(env); ok {
		for _, s := range e.Scopes {
			if s.Name == feed.scope.Name {
				feed.scope = s
			}
		}
	}
	breakGlass := "admin"
	if e, ok := own.Environment(env); ok {
		breakGlass = e.BreakGlassPermission()
	}
	return &pageAction{sess: sess, env: env, scope: scope, request: request, feed: feed, log: log, breakGlass: breakGlass}
}

// serveRedeploy is the Redeploy button: the same row-level redeploy as `/latestwins redeploy SCOPE`,
// for a signed-in user with write permission on the scope's repository (checkAction).
func (a *Page) serveRedeploy(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pa := a.checkAction(w, r, "redeploy")
	if pa == nil {
		return
	}
	in, err := a.RedeployIntent(ctx, pa.env, pa.scope, authority.Intent{ID: "status-page:" + pa.request, Source: "status page redeploy", Actor: pa.sess.Login})
	if errors.Is(err, core.ErrNothingLive) {
		a.refuse(w, r, http.StatusConflict, fmt.Sprintf("%s/%s has nothing live to redeploy", pa.env, pa.scope), nil)
		return
	}
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, "redeploy failed: the store did not answer", err)
		return
	}
	sel := config.Selection{Environment: pa.env, Policy: pa.feed.policy, Scopes: []config.Scope{pa.feed.scope}}
	res, _, err := a.AcceptSelection(ctx, pa.log, sel, in, pa.feed.installation)
	if err != nil {
		a.refuse(w, r, core.StatusFor(err), "redeploy accepted but not started: "+err.Error(), err)
		return
	}
	if res.Outcome == core.OutcomeQueueFull {
		a.refuse(w, r, http.StatusTooManyRequests, "redeploy refused: "+res.Message, nil)
		return
	}
	pa.log.InfoContext(ctx, "status page: redeploy", "outcome", res.Outcome, "dispatched", len(res.Dispatched))
	http.Redirect(w, r, "/#env-"+url.PathEscape(pa.env), http.StatusSeeOther)
}

// serveRollback is the Rollback button: the same rollback as `/latestwins rollback ENV/SCOPE`, to
// the commit live before the current one (the form's to), with the reason the user typed, for a
// signed-in user with write permission on the scope's repository (checkAction). The workflow is
// dispatched at once for the rollback's generation.
func (a *Page) serveRollback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pa := a.checkAction(w, r, "rollback")
	if pa == nil {
		return
	}
	to, reason := strings.ToLower(formValue(r, "to")), strings.TrimSpace(formValue(r, "reason"))
	if to != "" && !core.IsCommitSha(to) {
		a.refuse(w, r, http.StatusBadRequest, "rollback refused: the form is incomplete", nil)
		return
	}
	if reason == "" {
		a.refuse(w, r, http.StatusBadRequest, "rollback refused: say why (the reason goes in the timeline)", nil)
		return
	}
	t := core.Target{Sel: config.Selection{Environment: pa.env, Policy: pa.feed.policy, Scopes: []config.Scope{pa.feed.scope}}, Installation: pa.feed.installation}
	if !pa.feed.preview {
		t.Branch = pa.feed.scope.Branch
	}
	done, err := a.Rollback(ctx, pa.log, t, to, pa.sess.Login, reason, "status-page:"+pa.request, "status page rollback")
	if done == nil {
		if errors.Is(err, authority.ErrInvalidInput) {
			a.refuse(w, r, http.StatusConflict, "rollback refused: "+err.Error(), nil)
			return
		}
		a.refuse(w, r, http.StatusInternalServerError, "rollback failed: the store did not answer", err)
		return
	}
	if err != nil {
		a.refuse(w, r, core.StatusFor(err), fmt.Sprintf("rolled back to %s at generation %d, but the workflow was not started (the recovery sweep starts it again): %v",
			done.Sha, done.Generation, err), err)
		return
	}
	http.Redirect(w, r, "/#env-"+url.PathEscape(pa.env), http.StatusSeeOther)
}

// serveUnfreeze is the Unfreeze button of a frozen scope: the newest commit held by the freeze goes
// next, as with `/latestwins unfreeze ENV/SCOPE FREEZE`. The form names the freeze the page showed
// (freeze, its rollback's generation); when another rollback froze the scope since, the form is
// refused with the current freeze named, and nothing is unfrozen.
func (a *Page) serveUnfreeze(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pa := a.checkAction(w, r, "unfreeze")
	if pa == nil {
		return
	}
	freeze, err := strconv.ParseInt(formValue(r, "freeze"), 10, 64)
	if err != nil || freeze < 1 {
		a.refuse(w, r, http.StatusBadRequest, "unfreeze refused: the form does not name the freeze it lifts (reload the page and try again)", nil)
		return
	}
	_, err = a.Auth.Unfreeze(ctx, authority.UnfreezeRequest{Environment: pa.env, Scope: pa.scope, Freeze: freeze, Actor: pa.sess.Login,
		Reason: "Unfreeze on the status page", Request: "status-page:" + pa.request})
	var mismatch *authority.FreezeMismatchError
	switch {
	case errors.As(err, &mismatch) && mismatch.Current != nil:
		pa.log.InfoContext(ctx, "status page: unfreeze refused, not the current freeze", "named", freeze, "current", mismatch.Current.Generation)
		a.refuse(w, r, http.StatusConflict, fmt.Sprintf("unfreeze refused: %s/%s is frozen by %s, not by freeze %d, which the page you used showed; nothing was unfrozen. "+
			"Reload the page to see freeze %d, and unfreeze it there if it may go.", pa.env, pa.scope, mismatch.Current.Describe(), freeze, mismatch.Current.Generation), nil)
		return
	case err == nil:
		a.StartHeld(ctx, a.Log, pa.env, pa.scope)
	case errors.Is(err, authority.ErrRepeated), errors.Is(err, authority.ErrNotFrozen):
		// Done before, or someone else was quicker: the page shows the scope as it is.
	case errors.Is(err, authority.ErrInvalidInput):
		a.refuse(w, r, http.StatusConflict, "unfreeze refused: "+err.Error(), nil)
		return
	default:
		a.refuse(w, r, http.StatusInternalServerError, "unfreeze failed: the store did not answer", err)
		return
	}
	http.Redirect(w, r, "/#env-"+url.PathEscape(pa.env), http.StatusSeeOther)
}

// servePromote is the Promote button of a scope of an environment that requires another: the same
// promotion as `/latestwins promote ENV/SCOPE`, of the commit live in the scope of the first
// environment it requires in the trusted configuration, for a signed-in user with write permission
// on the scope's repository (checkAction). The workflow is dispatched at once for the new
// generation; the form sent again promotes once.
func (a *Page) servePromote(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pa := a.checkAction(w, r, "promote")
	if pa == nil {
		return
	}
	trusted, err := a.ConfigFor(ctx, pa.log, 0, core.RepoRef{}, "")
	if err != nil {
		a.refuse(w, r, core.StatusFor(err), "promote refused: "+err.Error(), err)
		return
	}
	e, ok := trusted.Environment(pa.env)
	if !ok || e.Preview() {
		a.refuse(w, r, http.StatusConflict, fmt.Sprintf("promote refused: %s is no environment of %s that requires another", pa.env, config.Path), nil)
		return
	}
	from, problem := core.PromoteFrom(e, "")
	if problem != "" {
		a.refuse(w, r, http.StatusConflict, "promote refused: "+problem, nil)
		return
	}
	sel := config.Selection{Environment: pa.env, Policy: e.Policy, Requires: e.Requirements(), Scopes: []config.Scope{pa.feed.scope}}
	t := core.PromoteTarget(e, sel, pa.feed.installation)
	done, err := a.Promote(ctx, pa.log, t, from, pa.sess.Login, "status-page:"+pa.request, "status page promote")
	if done == nil {
		if errors.Is(err, authority.ErrInvalidInput) {
			a.refuse(w, r, http.StatusConflict, "promote refused: "+err.Error(), nil)
			return
		}
		a.refuse(w, r, http.StatusInternalServerError, "promote failed: the store did not answer", err)
		return
	}
	if err != nil {
		a.refuse(w, r, core.StatusFor(err), fmt.Sprintf("promoted %s from %s at generation %d, but the workflow was not started (the recovery sweep starts it again): %v",
			report.ShortSha(done.Sha), from, done.Generation, err), err)
		return
	}
	if done.NoBranch {
		a.refuse(w, r, http.StatusConflict, fmt.Sprintf("promoted %s from %s at generation %d, but %s has no branch in %s: nothing was dispatched; run its workflow with environment %s and generation %d",
			report.ShortSha(done.Sha), from, done.Generation, t.Resource(), config.Path, pa.env, done.Generation), nil)
		return
	}
	pa.log.InfoContext(ctx, "status page: promote", "from", from, "generation", done.Generation, "duplicate", done.Duplicate, "dispatched", len(done.Dispatched))
	http.Redirect(w, r, "/#env-"+url.PathEscape(pa.env), http.StatusSeeOther)
}

// scopeFeed is what feeds one scope of an environment: the repository, its configured scope
// (workflow), the environment's policy and, when known, the App's installation on the repository.
type scopeFeed struct {
	repo         core.RepoRef
	scope        config.Scope
	policy       config.Policy
	installation int64
	preview      bool // the environment is a pull request's preview
}

// scopeFeeds says which repository feeds each scope of the environment named env, from the
// trusted configuration, with the App's installation on it when the environment's pending work
// recorded one. This is the only place the page learns where scopes come from.
func (a *Page) scopeFeeds(ctx context.Context, log *slog.Logger, env string, doc *authority.Env) (map[string]scopeFeed, error) {
	out := map[string]scopeFeed{}
	cfg, err := a.ConfigFor(ctx, log, 0, core.RepoRef{}, "")
	if errors.Is(err, authority.ErrInvalidInput) {
		log.WarnContext(ctx, "status page: the trusted configuration is unreadable; its environments show to nobody signed in", "err", err)
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	installations := map[string]int64{} // by lower-case OWNER/NAME, from pending work's origins
	if doc != nil {
		for _, s := range doc.Scopes {
			if s.Mailbox == nil || s.Mailbox.Origin == "" {
				continue
			}
			if inst, repo, _, err := core.ParseOrigin(s.Mailbox.Origin); err == nil && inst != 0 {
				installations[strings.ToLower(repo.String())] = inst
			}
		}
	}
	for i := range cfg.Environments {
		e := &cfg.Environments[i]
		if !envMatches(e, env) {
			continue
		}
		for _, s := range e.Scopes {
			repo, err := core.ParseRepo(s.Repository)
			if err != nil {
				continue
			}
			if _, seen := out[s.Name]; !seen {
				out[s.Name] = scopeFeed{repo: repo, scope: s, policy: e.Policy, installation: installations[strings.ToLower(repo.String())], preview: e.Preview()}
			}
		}
	}
	return out, nil
}

// envMatches reports whether the configured environment e is name: equal, or a preview template
// ({number}) that name instantiates.
func envMatches(e *config.Environment, name string) bool {
	if !e.Preview() {
		return e.Name == name
	}
	prefix, suffix, _ := strings.Cut(e.Name, config.NumberPlaceholder)
	mid, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return false
	}
	if mid, ok = strings.CutSuffix(mid, suffix); !ok {
		return false
	}
	n, err := strconv.Atoi(mid)
	return err == nil && n > 0 && strconv.Itoa(n) == mid
}

// access is what a signed-in user may do on a repository.
type access struct{ read, write bool }

type accessKey struct{ token, repo string }

type accessEntry struct {
	access
	expires time.Time
}

// accessCache remembers users' access to repositories for a short while, so that a page view asks
// GitHub once per repository, not once per row.
type accessCache struct {
	mu  sync.Mutex
	ttl time.Duration
	now func() time.Time
	m   map[accessKey]accessEntry
}

func (c *accessCache) get(k accessKey) (access, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || !c.now().Before(e.expires) {
		return access{}, false
	}
	return e.access, true
}

func (c *accessCache) put(k accessKey, a access) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if len(c.m) >= maxAccessEntries {
		for k, e := range c.m {
			if !now.Before(e.expires) {
				delete(c.m, k)
			}
		}
		if len(c.m) >= maxAccessEntries {
			clear(c.m)
		}
	}
	c.m[k] = accessEntry{access: a, expires: now.Add(c.ttl)}
}

// repoAccess asks GitHub, with the user's token, what the user may do on repo (remembered briefly).
func (a *Page) repoAccess(ctx context.Context, sess *session, repo core.RepoRef) (access, error) {
	k := accessKey{token: sess.Token, repo: strings.ToLower(repo.String())}
	if acc, ok := a.signIn.access.get(k); ok {
		return acc, nil
	}
	read, write, err := a.signIn.github.RepoAccess(ctx, sess.Token, repo.Owner, repo.Name)
	if err != nil {
		return access{}, err
	}
	acc := access{read: read || write, write: write}
	a.signIn.access.put(k, acc)
	return acc, nil
}
