package lambda

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/memory"
)

// Build makes the function's Handler from its settings, once per cold start: the store, the
// Authority, the App and the sweep. With the App's credentials, the App dispatches workflows and
// answers commands as each delivery's installation, and reads each repository's
// .github/latestwins.yml unless Settings.Config names one file for every repository. redrive is
// the sweep's re-drive; nil means the App's own (dispatching the work's workflows again) when it has
// credentials, and dry runs without them.
func Build(ctx context.Context, s *Settings, redrive func(context.Context, authority.StalledWork) error, log *slog.Logger) (*Handler, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	st, err := openStore(ctx, s.Store, log)
	if err != nil {
		return nil, err
	}
	auth := authority.New(st, authority.WithLogger(log))
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
		o.Dispatcher = &app.GitHubDispatcher{Installations: inst}
		o.Commits = &app.GitHubCommits{Installations: inst}
		o.Conversation = &app.GitHubConversation{Installations: inst}
		o.Reviewer = &app.GitHubReviewer{Installations: inst}
	} else {
		log.WarnContext(ctx, "no App credentials ("+EnvAppID+", "+EnvAppPrivateKeySSM+"): webhooks are taken and state is kept, "+
			"but nothing is published to GitHub; dispatches are logged and skipped")
	}
	switch {
	case s.Config != "":
		src := &app.FileConfig{Path: s.Config}
		cfg, err := src.Config(ctx, 0, app.RepoRef{}, "")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", EnvConfig, err)
		}
		o.Config = src
		o.Environments = func(context.Context) ([]string, error) { return environments(cfg), nil }
	case inst != nil:
		if o.Config, err = app.NewGitHubConfig(inst, auth, 0, log); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("no configuration source: set %s and %s so that each repository's .github/latestwins.yml is read, or %s to %s",
			EnvAppID, EnvAppPrivateKeySSM, EnvConfig, configFileConvention)
	}
	o.StatusPage = s.StatusPage
	if s.StatusPage == app.StatusPageGitHub {
		o.SignIn = &app.SignInOptions{PublicURL: s.PublicURL, SessionKey: s.SessionKey,
			GitHub: &githubapp.OAuth{ClientID: s.ClientID, ClientSecret: s.ClientSecret, WebURL: s.GitHubURL, APIURL: s.GitHubAPIURL}}
	}
	if inst != nil {
		o.Installations = inst
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
	return New(Options{HTTP: a, Authority: auth, Redrive: redrive, Stall: s.Stall, MaxAttempts: s.MaxAttempts, Logger: log})
}

// openStore opens the stores a function can use: DynamoDB, or memory (for tests; state lives only
// as long as the instance).
func openStore(ctx context.Context, raw string, log *slog.Logger) (authority.Store, error) {
	switch {
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
	return nil, fmt.Errorf("%s=%q: use %s (or memory:// for tests)", EnvStore, raw, storeExample)
}

// environments lists the configuration's environments other than preview templates, for the
// status page.
func environments(cfg *config.Config) []string {
	var out []string
	for _, e := range cfg.Environments {
		if !e.Preview() {
			out = append(out, e.Name)
		}
	}
	return out
}
