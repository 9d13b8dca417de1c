// Package app is the GitHub App as an http.Handler, composed of its doors, which share one core
// (internal/core: the dependencies and the actions several doors take):
//
//   - internal/intake: the webhook (bounded, signature-checked intake; ParseDelivery is pure),
//     Handle's table of handlers by event, and push, pull_request and installation;
//   - internal/comments: the /latestwins comment commands (ParseCommand is pure);
//   - internal/api: the /v1 API of the Action, with its OIDC tokens;
//   - internal/web: the status page, its sign-in with GitHub and its buttons;
//   - internal/surfaces: deployment protection rules, check runs and deployment statuses.
//
// Handle returns a Result and never touches a ResponseWriter, and GitHub is reached only through
// small ports that speak the App's types (internal/appport); internal/ghadapter implements them
// with GitHub's REST API. The configuration sources are in internal/configsource.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/app/internal/comments"
	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/intake"
	"github.com/latestwins/latestwins/app/internal/surfaces"
	"github.com/latestwins/latestwins/app/internal/web"
	"github.com/latestwins/latestwins/internal/authority"
)

// Options configure the App.
type Options struct {
	// Secret is the webhook secret; required.
	Secret []byte
	// Authority runs the protocol over the store; required.
	Authority *authority.Authority
	// Config gives each repository's configuration; required.
	Config ConfigSource
	// Dispatcher starts workflows; nil logs and skips every dispatch (no App credentials).
	Dispatcher Dispatcher
	// Conversation reacts to and answers comment commands; nil logs the replies and refuses
	// mutating commands, whose permission cannot be checked (no App credentials).
	Conversation Conversation
	// Reviewer answers deployment protection rules; nil logs the answers (no App credentials).
	Reviewer ProtectionReviewer
	// Commits orders pushes whose payloads cannot tell which is newer; nil leaves them in arrival
	// order (no App credentials).
	Commits Commits
	// Environments lists environments the status page always shows (besides those with pending work).
	Environments func(ctx context.Context) ([]string, error)
	// StatusPage says who may see the status page; the zero value is StatusPageOff.
	StatusPage StatusPage
	// SignIn configures StatusPageGitHub; required with it.
	SignIn *SignInOptions
	// Installations finds the App's installation on a repository, for the status page's redeploys
	// when the configuration source cannot; nil: such redeploys dispatch as no installation.
	Installations InstallationFinder
	// Tokens verifies the OIDC tokens of the /v1 API; nil: GitHub Actions' issuer, audience latestwins.
	Tokens TokenVerifier
	// LongPoll is the longest a gate request of the /v1 API may wait for a held lease to be
	// released (its wait_ms), so that the next pass gets it as it is released; 0 answers at once.
	// Set it where one process serves every request (serve); separate Lambda instances cannot
	// wake each other, and a waiting request would only bill the wait.
	LongPoll time.Duration
	// Stopping, when it closes, answers every long-polling gate request at once with its last
	// refusal, so that a server shutting down is not held by them (serve closes it at shutdown).
	Stopping <-chan struct{}
	// MaxBodyBytes caps a webhook body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	Logger       *slog.Logger
}

// App handles webhooks and serves the status page and the /v1 API: the composition of its doors,
// which share one core.
type App struct {
	core    *core.App
	hook    intake.Options // the webhook door's, with the handlers of every event
	webhook *intake.Webhook
	mux     *http.ServeMux
}

var _ http.Handler = (*App)(nil)

// New checks the options and wires the routes.
func New(o Options) (*App, error) {
	switch {
	case len(o.Secret) == 0:
		return nil, &authority.InputError{Field: "webhook secret", Fix: "set LATESTWINS_WEBHOOK_SECRET (or --webhook-secret) to the App's webhook secret; without one anybody could post events"}
	case o.Authority == nil:
		return nil, errors.New("app: no Authority")
	case o.Config == nil:
		return nil, errors.New("app: no ConfigSource")
	case o.MaxBodyBytes < 0:
		return nil, &authority.InputError{Field: "max body bytes", Value: fmt.Sprint(o.MaxBodyBytes), Fix: "give a positive size, or 0 for the default"}
	}
	c := &core.App{Auth: o.Authority, Config: o.Config, Dispatch: o.Dispatcher, Commits: o.Commits, Envs: o.Environments,
		Log: o.Logger, Installations: o.Installations}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Envs == nil {
		c.Envs = func(context.Context) ([]string, error) { return nil, nil }
	}
	events, commands, surface := &intake.Events{App: c}, comments.New(c, o.Conversation), surfaces.New(c, o.Reviewer)
	a := &App{core: c, hook: intake.Options{Secret: o.Secret, MaxBodyBytes: o.MaxBodyBytes, Handlers: map[string]intake.Handler{
		"push":                   events.HandlePush,
		"pull_request":           events.HandlePullRequest,
		"installation":           events.HandleInstallation,
		"issue_comment":          commands.HandleIssueComment,
		"check_run":              surface.HandleCheckRun,
		core.EventProtectionRule: surface.HandleProtectionRule,
		"deployment_status":      surface.HandleDeploymentStatus,
	}}}
	a.webhook = intake.New(c, a.hook)
	a.mux = http.NewServeMux()
	// Through a.webhook at each request: a test may give the door other bounds.
	a.mux.HandleFunc("POST /webhook", func(w http.ResponseWriter, r *http.Request) { a.webhook.ServeWebhook(w, r) })
	a.mux.HandleFunc("GET /healthz", serveHealth)
	if err := web.Routes(a.mux, c, o.StatusPage, o.SignIn); err != nil {
		return nil, err
	}
	if o.Tokens == nil {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Clock: o.Authority})
		if err != nil {
			return nil, err
		}
		o.Tokens = v
	}
	api.Routes(a.mux, c, o.Tokens, o.LongPoll, o.Stopping)
	routeMeta(a.mux, o.Tokens)
	return a, nil
}

// Handle acts on a verified delivery (intake.Webhook.Handle). An error is a failure to act (the
// store, the config source, a dispatch); a delivery it does not act on is a Result with
// OutcomeIgnored.
func (a *App) Handle(ctx context.Context, d Delivery) (Result, error) {
	return a.webhook.Handle(ctx, d)
}

// Redrive starts stalled work again, for the recovery sweep (core.App.Redrive).
func (a *App) Redrive(ctx context.Context, w authority.StalledWork) error {
	return a.core.Redrive(ctx, w)
}

// ServeHTTP routes a request.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

func serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}
