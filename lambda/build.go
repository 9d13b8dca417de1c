package lambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/alert"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/heal"
	"github.com/latestwins/latestwins/internal/metrics"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/gitref"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/tracing"
)

// Build makes the function's Handler from its settings, once per cold start: the store, the
// Authority, the App and the sweep. With the App's credentials, the App dispatches workflows and
// answers commands as each delivery's installation, and each scheduled sweep first replays the
// deliveries GitHub failed to deliver (unless Settings.HealDeliveries is off). The trusted configuration is Settings.Config,
// or the .github/latestwins.yml of Settings.ConfigRepo or of the App owner's .github repository;
// each repository's own file may narrow its scopes (app.TrustedConfig). redrive is
// the sweep's re-drive; nil means the App's own (dispatching the work's workflows again) when it has
// credentials, and dry runs without them.
func Build(ctx context.Context, s *Settings, redrive func(context.Context, authority.StalledWork) error, log *slog.Logger) (*Handler, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := openStore(ctx, s, log)
	if err != nil {
		return nil, err
	}
	promote := &app.PromotionCompare{Log: log} // asks GitHub once the adapter exists, below
	opts := []authority.Option{authority.WithLogger(log), authority.WithPromotionComparer(promote)}
	if s.Retention > 0 {
		opts = append(opts, authority.WithRetention(s.Retention))
	}
	m := metrics.New()
	opts = append(opts, authority.WithObserver(m))
	tr, err := tracing.Start(ctx, s.Tracing, "latestwins-lambda", log)
	if err != nil {
		return nil, err
	}
	auth := authority.New(tr.Store(m.Store(st)), opts...)
	tokens, err := app.NewOIDCVerifier(app.OIDCOptions{Issuer: s.OIDCIssuer, Audience: s.OIDCAudience})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvOIDCIssuer, err)
	}
	o := app.Options{Secret: s.WebhookSecret, Authority: auth, MaxBodyBytes: s.MaxBodyBytes, Logger: log, Tokens: tokens}
	var inst *githubapp.Installations
	if s.AppID != 0 {
		if inst, err = githubapp.NewInstallations(s.AppID, s.AppPrivateKey, s.GitHubAPIURL); err != nil {
			return nil, err
		}
	} else {
		log.WarnContext(ctx, "no App credentials ("+EnvAppID+", "+EnvAppPrivateKeySSM+"): webhooks are taken and state is kept, "+
			"but nothing is published to GitHub; dispatches are logged and skipped")
	}
	if inst == nil && s.Config == "" {
		return nil, fmt.Errorf("no configuration source: set %s and %s so that the trusted file is read from the App owner's .github repository (or %s), or %s to %s",
			EnvAppID, EnvAppPrivateKeySSM, EnvConfigRepo, EnvConfig, configFileConvention)
	}
	if s.Config != "" {
		if _, err := (&app.FileConfig{Path: s.Config}).Config(ctx, 0, app.RepoRef{}, ""); err != nil {
			return nil, fmt.Errorf("%s: %w", EnvConfig, err)
		}
	}
	trusted := app.TrustedOptions{Path: s.Config, Repo: s.ConfigRepo}
	var gh *ghadapter.Ports // nil without App credentials
	if inst != nil {
		if gh, err = ghadapter.New(inst, auth, log); err != nil {
			return nil, err
		}
		o.Dispatcher, o.Commits, o.Conversation, o.Reviewer = gh.Dispatcher, gh.Commits, gh.Conversation, gh.Reviewer
		promote.Commits = gh.Commits
		trusted.Files, trusted.Installations, trusted.AppOwner = gh.Files, gh.Finder, gh.AppOwner
		o.Installations = gh.Finder
	}
	src, err := app.NewTrustedConfig(trusted)
	if err != nil {
		return nil, err
	}
	alerts, err := alert.New(alert.Options{Authority: auth, Trusted: src.Trusted, Secret: s.AlertSecret, Issues: gh.AlertIssues(), Holder: "lambda", Log: log})
	if err != nil {
		return nil, err
	}
	o.Config = src
	o.Environments = func(ctx context.Context) ([]string, error) {
		envs, err := src.Environments(ctx)
		if errors.Is(err, authority.ErrInvalidInput) {
			return nil, nil // a bad or missing trusted file is reported on each delivery
		}
		return envs, err
	}
	o.StatusPage = s.StatusPage
	if s.StatusPage == app.StatusPageGitHub {
		o.SignIn = &app.SignInOptions{PublicURL: s.PublicURL, SessionKey: s.SessionKey,
			GitHub: &githubapp.OAuth{ClientID: s.ClientID, ClientSecret: s.ClientSecret, WebURL: s.GitHubURL, APIURL: s.GitHubAPIURL}}
	}
	a, err := app.New(o)
	if err != nil {
		return nil, err
	}
	if redrive == nil && o.Dispatcher != nil {
		redrive = a.Redrive // dispatch the stalled work's workflows again
	}
	if redrive == nil {
		log.InfoContext(ctx, "no re-drive is configured (no App credentials): scheduled sweeps are dry runs that log stalled work")
	}
	var healer *heal.Healer
	if inst != nil && s.HealDeliveries {
		if healer, err = heal.New(heal.Options{Log: &ghadapter.DeliveryLog{App: inst}, App: a, Cursor: auth, Secret: s.WebhookSecret, Clock: auth,
			Replayed: m.Replayed, Logger: log}); err != nil {
			return nil, err
		}
	}
	return New(Options{HTTP: m.Webhooks("/webhook", tr.Webhooks("/webhook", a)), Tracing: tr, Authority: auth, Redrive: redrive, Stall: s.Stall, MaxAttempts: s.MaxAttempts,
		Metrics: m, Environments: o.Environments, Healer: healer, Alerts: alerts, Logger: log})
}

// openStore opens the stores a function can use: DynamoDB, refs of a git repository over HTTP
// (github://OWNER/REPO, git+https://), or memory (for tests; state lives only as long as the
// instance).
func openStore(ctx context.Context, s *Settings, log *slog.Logger) (authority.Store, error) {
	raw := s.Store
	switch {
	case isGitStore(raw) && !strings.HasPrefix(raw, "git+file:"):
		st, err := gitref.Open(raw, s.gitEnv, gitref.WithLogger(log))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvStore, err)
		}
		return st, nil
	case strings.HasPrefix(raw, dynamo.Scheme+"://"):
		st, err := dynamo.Open(ctx, raw, dynamo.WithLogger(log))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvStore, err)
		}
		return st, nil
	case raw == "memory://":
		log.WarnContext(ctx, EnvStore+"=memory://: state lives only as long as this instance; use "+storeExample+" in production")
		return memory.New(), nil
	}
	return nil, fmt.Errorf("%s=%q: use %s, github://OWNER/REPO (or memory:// for tests)", EnvStore, raw, storeExample)
}
