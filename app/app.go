// Package app is the GitHub App as an http.Handler: verified webhooks turned into intents and
// workflow dispatches, and a read-only status page. Parsing (ParseDelivery, ParseCommand) is pure,
// Handle returns a Result and never touches a ResponseWriter, and GitHub is reached only through
// the small ports below, which speak this package's types (ports.go). internal/ghadapter implements
// them with GitHub's REST API.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/app/internal/comments"
	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/surfaces"
	"github.com/latestwins/latestwins/app/internal/web"
	"github.com/latestwins/latestwins/internal/authority"
)

// DefaultMaxBodyBytes caps a webhook body at GitHub's own cap on a payload, 25 MB (GitHub does not
// deliver a larger one); see intake.go for what bodies in flight may take.
const DefaultMaxBodyBytes = 25 << 20

// Options configure the App.
type Options struct {
	// Secret is the webhook secret; required.
	Secret []byte
	// Authority runs the protocol over the store; required.
	Authority *authority.Authority
	// Config gives each repository's configuration; required.
	Config core.ConfigSource
	// Dispatcher starts workflows; nil logs and skips every dispatch (no App credentials).
	Dispatcher core.Dispatcher
	// Conversation reacts to and answers comment commands; nil logs the replies and refuses
	// mutating commands, whose permission cannot be checked (no App credentials).
	Conversation comments.Conversation
	// Reviewer answers deployment protection rules; nil logs the answers (no App credentials).
	Reviewer surfaces.ProtectionReviewer
	// Commits orders pushes whose payloads cannot tell which is newer; nil leaves them in arrival
	// order (no App credentials).
	Commits core.Commits
	// Environments lists environments the status page always shows (besides those with pending work).
	Environments func(ctx context.Context) ([]string, error)
	// StatusPage says who may see the status page; the zero value is StatusPageOff.
	StatusPage web.StatusPage
	// SignIn configures StatusPageGitHub; required with it.
	SignIn *web.SignInOptions
	// Installations finds the App's installation on a repository, for the status page's redeploys
	// when the configuration source cannot; nil: such redeploys dispatch as no installation.
	Installations core.InstallationFinder
	// Tokens verifies the OIDC tokens of the /v1 API; nil: GitHub Actions' issuer, audience latestwins.
	Tokens api.TokenVerifier
	// MaxBodyBytes caps a webhook body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	Logger       *slog.Logger
}

// App handles webhooks and serves the status page.
type App struct {
	*core.App
	secret   []byte
	comments *comments.Commands
	surfaces *surfaces.Handler
	maxBody  int64
	intake   *intake
	mux      *http.ServeMux
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
	a := &App{App: &core.App{Auth: o.Authority, Config: o.Config, Dispatch: o.Dispatcher, Commits: o.Commits, Envs: o.Environments, Log: o.Logger, Installations: o.Installations},
		secret: o.Secret, maxBody: o.MaxBodyBytes}
	a.comments = comments.New(a.App, o.Conversation)
	a.surfaces = surfaces.New(a.App, o.Reviewer)
	if a.maxBody == 0 {
		a.maxBody = DefaultMaxBodyBytes
	}
	a.intake = newIntake(a.maxBody, MaxDeliveriesInFlight, InFlightBytes(a.maxBody))
	if a.Log == nil {
		a.Log = slog.New(slog.DiscardHandler)
	}
	if a.Envs == nil {
		a.Envs = func(context.Context) ([]string, error) { return nil, nil }
	}
	a.mux = http.NewServeMux()
	a.mux.HandleFunc("POST /webhook", a.serveWebhook)
	a.mux.HandleFunc("GET /healthz", serveHealth)
	if err := web.Routes(a.mux, a.App, o.StatusPage, o.SignIn); err != nil {
		return nil, err
	}
	if o.Tokens == nil {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Clock: o.Authority})
		if err != nil {
			return nil, err
		}
		o.Tokens = v
	}
	api.Routes(a.mux, a.App, o.Tokens)
	return a, nil
}

// ServeHTTP routes a request.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Handle acts on a verified delivery. An error is a failure to act (the store, the config source,
// a dispatch); a delivery it does not act on is a Result with OutcomeIgnored.
func (a *App) Handle(ctx context.Context, d core.Delivery) (core.Result, error) {
	res := core.Result{Status: http.StatusOK, Delivery: d.ID, Event: d.Event}
	log := a.Log.With("delivery_id", d.ID, "event", d.Event)
	var err error
	switch d.Event {
	case "push":
		err = a.handlePush(ctx, log, d, &res)
	case "pull_request":
		err = a.handlePullRequest(ctx, log, d, &res)
	case "installation":
		a.handleInstallation(ctx, log, d, &res)
	case "issue_comment":
		err = a.comments.HandleIssueComment(ctx, log, d, &res)
	case "check_run":
		err = a.surfaces.HandleCheckRun(ctx, log, d, &res)
	case core.EventProtectionRule:
		err = a.surfaces.HandleProtectionRule(ctx, log, d, &res)
	case "deployment_status":
		err = a.surfaces.HandleDeploymentStatus(ctx, log, d, &res)
	default:
		res.Outcome, res.Status = core.OutcomeIgnored, http.StatusAccepted
		res.Message = fmt.Sprintf("event %q is not used by latestwins", d.Event)
	}
	if err != nil {
		return res, err
	}
	log.InfoContext(ctx, "webhook handled", "outcome", res.Outcome, "intents", len(res.Intents), "dispatched", len(res.Dispatched))
	return res, nil
}

func serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}
