package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/alert"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/devissuer"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/heal"
	"github.com/latestwins/latestwins/internal/metrics"
	"github.com/latestwins/latestwins/internal/tracing"
)

// serveSettings are serve's own flags; each also reads its LATESTWINS_* variable.
type serveSettings struct {
	trustedSettings
	stopping      chan struct{} // closed when the server starts shutting down (app.Options.Stopping)
	addr          string
	webhookSecret string
	oidcIssuer    string
	oidcAudience  string
	devTokens     bool
	dev           *devissuer.Issuer
	maxBody       int64
	sweepEvery    time.Duration
	stall         time.Duration
	maxAttempts   int
	statusPage    string
	publicURL     string
	clientID      string
	clientSecret  string
	sessionKey    string
	githubURL     string
	redrive       func(context.Context, authority.StalledWork) error // nil: sweeps only log
	metricsAddr   string
	// healDeliveries replays, on start and before every sweep, the deliveries GitHub failed to
	// deliver; healer does it (nil without App credentials).
	healDeliveries bool
	healer         *heal.Healer
	alerts         *alert.Notifier // told after each sweep
}

// Timeouts of serve's HTTP server. GitHub gives a webhook delivery 10 seconds; a client that
// sends its headers or body slower is cut off, so that it cannot hold a connection, or the webhook
// intake's share of memory (app.InFlightBytes), for long.
const (
	serveReadHeaderTimeout = 10 * time.Second
	serveReadTimeout       = 30 * time.Second // headers and body
	serveWriteTimeout      = time.Minute      // from the end of the headers: the body, handling and the answer
	serveIdleTimeout       = 2 * time.Minute  // a kept-alive connection between requests
	// serveLongPoll is the longest a gate request of the API waits for a held lease here: one
	// process serves every request, so a release wakes the waiter (app.Options.LongPoll).
	serveLongPoll = apiclient.MaxLongPoll
)

// runServe runs the App as a plain HTTP server until ctx is done, then shuts down gracefully.
func runServe(ctx context.Context, c *cmdEnv, args []string) error {
	handler, ss, err := c.serveHandler(ctx, args)
	if err != nil {
		return err
	}
	defer c.done()
	if ss.dev != nil {
		defer ss.dev.Close()
	}
	ln, err := net.Listen("tcp", ss.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", ss.addr, err)
	}
	srv := &http.Server{Handler: handler,
		ReadHeaderTimeout: serveReadHeaderTimeout, ReadTimeout: serveReadTimeout,
		WriteTimeout: serveWriteTimeout, IdleTimeout: serveIdleTimeout,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	srv.RegisterOnShutdown(func() { close(ss.stopping) })
	c.progress("latestwins serve: listening on http://%s (webhooks: POST /webhook, status: GET /)", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	if ss.metricsAddr != metricsOff {
		stop, err := c.serveMetrics(ctx, ss.metricsAddr)
		switch {
		case err == nil:
			defer stop()
		case c.given("metrics-addr"):
			_ = srv.Close()
			return err
		default:
			// The default address is busy (another serve on this machine, say): run without metrics
			// rather than not at all, and say so.
			c.progress("latestwins serve: no metrics: %v", err)
		}
	}
	sweepCtx, stopSweeps := context.WithCancel(ctx)
	swept := make(chan struct{})
	go func() { defer close(swept); c.sweepEvery(sweepCtx, ss) }()
	defer func() { stopSweeps(); <-swept }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	c.progress("latestwins serve: stopped")
	return nil
}

// serveHandler parses serve's flags, checks its settings, opens the store and builds the App.
func (c *cmdEnv) serveHandler(ctx context.Context, args []string) (http.Handler, *serveSettings, error) {
	ss := &serveSettings{stopping: make(chan struct{})}
	c.newFlags("serve")
	c.str(&ss.addr, "addr", "127.0.0.1:8080", "address to listen on (host:port; :0 picks a free port)")
	c.trustedFlags(&ss.trustedSettings, "")
	c.secret(&ss.webhookSecret, "webhook-secret", "the App's webhook secret (prefer the variable: flags show in process lists)")
	c.str(&ss.oidcIssuer, "oidc-issuer", app.DefaultOIDCIssuer, "issuer of the workflow OIDC tokens the /v1 API accepts (GitHub Enterprise Server: https://HOST/_services/token)")
	c.str(&ss.oidcAudience, "oidc-audience", apiclient.Audience, "audience the /v1 API requires in those tokens (what the Action and --api ask for)")
	c.str(&ss.metricsAddr, "metrics-addr", defaultMetricsAddr, "address of the Prometheus metrics listener, GET /metrics (host:port; off: none). Its figures name environments and scopes: keep it off the public listener")
	c.boolean(&ss.devTokens, "dev-tokens", false, "try the /v1 API on this machine: run a development token issuer on loopback and accept only its tokens (refused unless --addr is loopback)")
	c.int64Var(&ss.maxBody, "max-body", app.DefaultMaxBodyBytes, 1, "largest webhook body accepted, in bytes")
	c.durVar(&ss.sweepEvery, "sweep-every", time.Minute, "how often to run the recovery sweep (0: never)")
	c.durVar(&ss.stall, "stall", 10*time.Minute, "how long pending work may sit idle with no live lease before the sweep re-drives it")
	c.intVar(&ss.maxAttempts, "max-attempts", 3, 1, "re-drives of one intent before it ends with a terminal error")
	c.boolean(&ss.healDeliveries, "heal-deliveries", true, "with App credentials, replay the webhook deliveries GitHub failed to deliver (read from the App's delivery log) on start and before every sweep")
	c.str(&ss.statusPage, "status-page", app.StatusPageAuto, "who sees the status page (/): auto (open when --addr is loopback, off otherwise), off, "+
		"open (anyone who can reach the address: actors, lease holders and failure messages included) or github (sign in with GitHub)")
	c.str(&ss.publicURL, "public-url", "", "the App's address as browsers reach it, for --status-page github (the callback URL to register on the App is this plus /signin/callback)")
	c.str(&ss.clientID, "app-client-id", "", "the GitHub App's client id, for --status-page github")
	c.secret(&ss.clientSecret, "app-client-secret", "the GitHub App's client secret, for --status-page github (prefer the variable)")
	c.secret(&ss.sessionKey, "session-key", "at least 32 random bytes sealing the status page's sign-in cookies, for --status-page github (prefer the variable)")
	c.str(&ss.githubURL, "github-url", githubapp.DefaultWebURL, "where users sign in to GitHub (GitHub Enterprise Server: https://HOST)")
	if err := c.parse(args); err != nil {
		return nil, nil, err
	}
	if err := c.noArguments(); err != nil {
		return nil, nil, err
	}
	if err := checkServeSettings(ss); err != nil {
		return nil, nil, err
	}
	inst, err := ss.check(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !ss.hasSource(inst) {
		return nil, nil, usageErrorf("no configuration: give --config PATH (or LATESTWINS_CONFIG), the trusted file in the .github/latestwins.yml schema (docs/config.md), " +
			"or the App's credentials (LATESTWINS_APP_ID, LATESTWINS_APP_PRIVATE_KEY) to read it from the App owner's .github repository (or --config-repo OWNER/REPO)")
	}
	log := slog.New(slog.NewJSONHandler(c.io.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c.log = log
	if ss.metricsAddr != metricsOff {
		c.metrics = metrics.New()
	}
	tc, err := tracing.ConfigFrom(c.io.Getenv)
	if err != nil {
		return nil, nil, usageErrorf("%v", err)
	}
	if c.tracing, err = tracing.Start(ctx, tc, "latestwins-serve", log); err != nil {
		return nil, nil, err
	}
	if tc.On() {
		c.progress("latestwins serve: sending traces of webhook deliveries, sweeps and store requests to %s (OTLP/HTTP)", tracing.Redact(tc.URL))
	}
	promote := &app.PromotionCompare{Log: log} // asks GitHub once the adapter exists, below
	c.promoter = promote
	if err := c.open(ctx); err != nil {
		c.done() // stops the tracing
		return nil, nil, err
	}
	if ss.devTokens {
		if err := devissuer.Loopback(ss.addr); err != nil {
			c.done()
			return nil, nil, usageErrorf("--dev-tokens with --addr %s: %v", ss.addr, err)
		}
		if ss.dev, err = devissuer.Start(ss.oidcAudience); err != nil {
			c.done()
			return nil, nil, err
		}
		ss.oidcIssuer = ss.dev.URL
		c.progress("latestwins serve: development tokens: curl -s '%s/token?repository=OWNER/NAME' (this machine only; GitHub's tokens are not accepted)", ss.dev.URL)
	}
	tokens, err := app.NewOIDCVerifier(app.OIDCOptions{Issuer: ss.oidcIssuer, Audience: ss.oidcAudience, Clock: c.auth})
	if err != nil {
		c.done()
		return nil, nil, usageErrorf("--oidc-issuer: %v", err)
	}
	o := app.Options{Secret: []byte(ss.webhookSecret), Authority: c.auth, MaxBodyBytes: ss.maxBody, Logger: log, Tokens: tokens,
		LongPoll: serveLongPoll, Stopping: ss.stopping}
	if o.StatusPage, o.SignIn, err = statusPageOptions(ss); err != nil {
		c.done()
		return nil, nil, err
	}
	src, gh, err := c.trustedSource(&ss.trustedSettings, inst, log)
	if err != nil {
		c.done()
		return nil, nil, err
	}
	if gh != nil {
		o.Dispatcher, o.Commits, o.Conversation, o.Reviewer = gh.Dispatcher, gh.Commits, gh.Conversation, gh.Reviewer
		promote.Commits = gh.Commits
		o.Installations = gh.Finder
	}
	if ss.alerts, err = c.notifier(&ss.trustedSettings, src, gh, "serve@"+hostname(), log); err != nil {
		c.done()
		return nil, nil, err
	}
	o.Config = src
	o.Environments = func(ctx context.Context) ([]string, error) { return configuredEnvironments(ctx, src) }
	if inst == nil {
		c.progress("latestwins serve: no App credentials (LATESTWINS_APP_ID, LATESTWINS_APP_PRIVATE_KEY): " +
			"webhooks are taken and state is kept, but nothing is published to GitHub; dispatches and replies are logged and skipped")
	} else {
		from := src.Where()
		if ss.config == "" && ss.configRepo == "" {
			from = "the App owner's .github repository (" + config.Path + ")"
		}
		c.progress("latestwins serve: acting as GitHub App %s on %s: dispatching workflows and answering comment commands; trusted configuration from %s",
			ss.appID, ss.apiURL, from)
	}
	a, err := app.New(o)
	if err != nil {
		c.done()
		return nil, nil, err
	}
	c.progress("latestwins serve: API /v1 takes OIDC tokens of %s with audience %s", ss.oidcIssuer, ss.oidcAudience)
	c.progress("latestwins serve: status page: %s", describeStatusPage(o.StatusPage))
	if o.Dispatcher != nil {
		ss.redrive = a.Redrive
	}
	if inst != nil && ss.healDeliveries {
		ho := heal.Options{Log: &ghadapter.DeliveryLog{App: inst}, App: a, Cursor: c.auth,
			Secret: []byte(ss.webhookSecret), Clock: c.auth, Logger: log}
		if c.metrics != nil {
			ho.Replayed = c.metrics.Replayed
		}
		ss.healer, err = heal.New(ho)
		if err != nil {
			c.done()
			return nil, nil, err
		}
		c.progress("latestwins serve: replaying the webhook deliveries GitHub failed to deliver, on start and before every sweep (--heal-deliveries=false to stop)")
	}
	h := c.tracing.Webhooks("/webhook", a)
	if c.metrics != nil {
		c.metrics.ReportScopes(metrics.Scopes{Authority: c.auth, Environments: o.Environments, Logger: log})
		h = c.metrics.Webhooks("/webhook", h)
	}
	return h, ss, nil
}

// sweepEvery replays the deliveries the App missed (with a healer), then runs the recovery sweep
// every ss.sweepEvery until ctx ends, each time after replaying them again and telling the
// convergence alarms. With App credentials it re-dispatches stalled work; without them it can
// start nothing, so it logs what it would re-drive and uses up no attempts.
func (c *cmdEnv) sweepEvery(ctx context.Context, ss *serveSettings) {
	c.heal(ctx, ss)
	if ss.sweepEvery <= 0 {
		return
	}
	t := time.NewTicker(ss.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, end := c.tracing.Work(ctx, "sweep")
		end(c.sweepOnce(sctx, ss))
	}
}

// sweepOnce is one pass of serve's sweep loop: replay the missed deliveries, tell the alarms, and
// re-drive stalled work (or, without App credentials, log it). Its error is the recovery sweep's.
func (c *cmdEnv) sweepOnce(ctx context.Context, ss *serveSettings) error {
	c.heal(ctx, ss)
	_, _ = ss.alerts.Tell(ctx) // logs what it could not tell
	if ss.redrive == nil {
		work, exhausted, err := c.auth.Stalled(ctx, ss.stall, ss.maxAttempts)
		if err != nil {
			c.log.WarnContext(ctx, "sweep", "err", err)
			return err
		}
		for _, w := range append(work, exhausted...) {
			c.log.InfoContext(ctx, "stalled work (no App credentials: not re-driven)", "environment", w.Environment,
				"generation", w.Generation, "scopes", w.Scopes, "attempt", w.Attempt)
		}
		return nil
	}
	rep, err := c.auth.Sweep(ctx, ss.stall, ss.maxAttempts, ss.redrive)
	if c.metrics != nil {
		c.metrics.Swept(err)
	}
	if err != nil {
		c.log.WarnContext(ctx, "sweep", "err", err)
		return err
	}
	for _, w := range rep.Redriven {
		c.log.InfoContext(ctx, "re-driven", "environment", w.Environment, "generation", w.Generation, "scopes", w.Scopes, "attempt", w.Attempt)
	}
	for _, w := range rep.Exhausted {
		c.log.WarnContext(ctx, "attempts exhausted: terminal error recorded", "environment", w.Environment, "scopes", w.Scopes)
	}
	for env, why := range rep.Failed {
		c.log.WarnContext(ctx, "re-drive failed; the next sweep retries", "environment", env, "err", why)
	}
	return nil
}

// heal replays the deliveries the App missed, when it has a healer; the healer logs each one, and
// what it could not handle is tried again next time.
func (c *cmdEnv) heal(ctx context.Context, ss *serveSettings) *heal.Report {
	if ss.healer == nil {
		return nil
	}
	rep, err := ss.healer.Run(ctx)
	switch {
	case err != nil:
		c.log.WarnContext(ctx, "missed deliveries not replayed; the next sweep tries again", "err", err)
	case len(rep.Replayed) > 0 || len(rep.NotReplayed) > 0 || rep.Stopped != nil || rep.Deferred > 0 || rep.Unchecked:
		c.log.InfoContext(ctx, "missed deliveries", "replayed", len(rep.Replayed), "not_replayed", len(rep.NotReplayed),
			"stopped", rep.Stopped != nil, "deferred", rep.Deferred, "unchecked", rep.Unchecked, "cursor", rep.To.String())
	}
	return rep
}

func checkServeSettings(ss *serveSettings) error {
	if ss.webhookSecret == "" {
		return usageErrorf("no webhook secret: set LATESTWINS_WEBHOOK_SECRET (or --webhook-secret) to the secret configured on the App's webhook; " +
			"serve refuses to start without one, since unsigned deliveries would be accepted")
	}
	if ss.maxBody <= 0 {
		return usageErrorf("--max-body %d: give a positive number of bytes", ss.maxBody)
	}
	api, err := githubAPIURL(ss.apiURL)
	if err != nil {
		return err
	}
	ss.apiURL = api
	if ss.oidcIssuer == "" {
		ss.oidcIssuer = app.DefaultOIDCIssuer
	}
	if ss.oidcAudience == "" {
		ss.oidcAudience = apiclient.Audience
	}
	return nil
}

// githubAPIURL checks --github-api-url and gives it the trailing slash go-github needs.
func githubAPIURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", usageErrorf("--github-api-url %q: give an http(s) URL such as https://api.github.com/", raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		raw += "/"
	}
	return raw, nil
}

// configuredEnvironments lists the trusted configuration's environments other than preview
// templates.
func configuredEnvironments(ctx context.Context, src *app.TrustedConfig) ([]string, error) {
	envs, err := src.Environments(ctx)
	if errors.Is(err, authority.ErrInvalidInput) {
		return nil, nil // a bad or missing trusted file is reported on each delivery; the page shows what the store holds
	}
	return envs, err
}

// statusPageOptions resolves --status-page (auto: open when --addr is loopback) and, for github,
// checks the sign-in settings.
func statusPageOptions(ss *serveSettings) (app.StatusPage, *app.SignInOptions, error) {
	mode, err := app.ResolveStatusPage(ss.statusPage, app.LoopbackAddr(ss.addr))
	if err != nil {
		return "", nil, usageErrorf("--status-page %q: %v", ss.statusPage, err)
	}
	if mode != app.StatusPageGitHub {
		return mode, nil, nil
	}
	var missing []string
	for _, m := range []struct{ v, name string }{{ss.publicURL, "LATESTWINS_PUBLIC_URL"}, {ss.clientID, "LATESTWINS_APP_CLIENT_ID"},
		{ss.clientSecret, "LATESTWINS_APP_CLIENT_SECRET"}, {ss.sessionKey, "LATESTWINS_SESSION_KEY"}} {
		if m.v == "" {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return "", nil, usageErrorf("--status-page github needs %s: the App's address as browsers reach it, its client id and secret "+
			"(the App's settings page), and a session key of at least %d random bytes (openssl rand -base64 48); see docs/deploy.md",
			strings.Join(missing, ", "), app.MinSessionKeyBytes)
	}
	if len(ss.sessionKey) < app.MinSessionKeyBytes {
		return "", nil, usageErrorf("LATESTWINS_SESSION_KEY has %d bytes: give at least %d random bytes (openssl rand -base64 48)", len(ss.sessionKey), app.MinSessionKeyBytes)
	}
	oauth := &githubapp.OAuth{ClientID: ss.clientID, ClientSecret: ss.clientSecret, WebURL: ss.githubURL, APIURL: ss.apiURL}
	return mode, &app.SignInOptions{GitHub: oauth, PublicURL: ss.publicURL, SessionKey: []byte(ss.sessionKey)}, nil
}

func describeStatusPage(mode app.StatusPage) string {
	switch mode {
	case app.StatusPageOpen:
		return "open to anyone who can reach this address (--status-page)"
	case app.StatusPageGitHub:
		return "sign in with GitHub; each user sees the environments of repositories they can read"
	}
	return "off (--status-page open or github to turn it on)"
}
