package lambda

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/gitref"
	"github.com/latestwins/latestwins/internal/tracing"
)

// The variables the function reads at cold start.
const (
	EnvStore             = "LATESTWINS_STORE"
	EnvConfig            = "LATESTWINS_CONFIG"
	EnvConfigRepo        = "LATESTWINS_CONFIG_REPO"
	EnvWebhookSecret     = "LATESTWINS_WEBHOOK_SECRET"
	EnvWebhookSecretSSM  = "LATESTWINS_WEBHOOK_SECRET_SSM_PARAMETER"
	EnvAppID             = "LATESTWINS_APP_ID"
	EnvAppPrivateKey     = "LATESTWINS_APP_PRIVATE_KEY"
	EnvAppPrivateKeySSM  = "LATESTWINS_APP_PRIVATE_KEY_SSM_PARAMETER"
	EnvGitHubAPIURL      = "LATESTWINS_GITHUB_API_URL"
	EnvMaxBody           = "LATESTWINS_MAX_BODY"
	EnvSweepStall        = "LATESTWINS_SWEEP_STALL"
	EnvMaxAttempts       = "LATESTWINS_MAX_ATTEMPTS"
	EnvOIDCIssuer        = "LATESTWINS_OIDC_ISSUER"
	EnvRetention         = "LATESTWINS_RETENTION"
	EnvOIDCAudience      = "LATESTWINS_OIDC_AUDIENCE"
	EnvStatusPage        = "LATESTWINS_STATUS_PAGE"
	EnvPublicURL         = "LATESTWINS_PUBLIC_URL"
	EnvGitHubURL         = "LATESTWINS_GITHUB_URL"
	EnvClientID          = "LATESTWINS_APP_CLIENT_ID"
	EnvClientSecret      = "LATESTWINS_APP_CLIENT_SECRET"
	EnvClientSecretSSM   = "LATESTWINS_APP_CLIENT_SECRET_SSM_PARAMETER"
	EnvSessionKey        = "LATESTWINS_SESSION_KEY"
	EnvSessionKeySSM     = "LATESTWINS_SESSION_KEY_SSM_PARAMETER"
	EnvAlertSecret       = "LATESTWINS_ALERT_SECRET"
	EnvAlertSecretSSM    = "LATESTWINS_ALERT_SECRET_SSM_PARAMETER"
	defaultGitHubAPIURL  = "https://api.github.com/"
	storeExample         = "dynamodb://TABLE?region=REGION"
	configFileConvention = "a file in the .github/latestwins.yml schema shipped with the function, e.g. /var/task/latestwins.yml"
)

// EnvGitToken (or the SecureString parameter EnvGitTokenSSM names) is the token a store on git refs
// (github://OWNER/REPO, git+https://) pushes with; EnvGitHubURL is a github:// store's host
// (default https://github.com).
const (
	EnvGitToken    = "LATESTWINS_GIT_TOKEN"
	EnvGitTokenSSM = "LATESTWINS_GIT_TOKEN_SSM_PARAMETER"
)

// EnvHealDeliveries=false turns off the replay of missed webhook deliveries on each scheduled sweep.
const EnvHealDeliveries = "LATESTWINS_HEAL_DELIVERIES"

// ParameterReader reads one SSM parameter. *ssm.Client satisfies it.
type ParameterReader interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

var _ ParameterReader = (*ssm.Client)(nil)

// Settings are the function's configuration, read once at cold start.
type Settings struct {
	Store         string
	Config        string // the trusted file shipped with the function
	ConfigRepo    string // OWNER/REPO holding the trusted file ("": the App owner's .github)
	WebhookSecret []byte
	AppID         int64  // 0: no App credentials, nothing is published to GitHub
	AppPrivateKey []byte // PEM
	GitHubAPIURL  string
	MaxBodyBytes  int64
	Stall         time.Duration
	MaxAttempts   int
	Retention     time.Duration // how long events and intent ids are kept (0: authority.DefaultRetention)
	OIDCIssuer    string        // issuer of the tokens the /v1 API accepts ("": GitHub's)
	OIDCAudience  string        // audience they must carry ("": latestwins)
	// StatusPage is who sees the status page: off unless LATESTWINS_STATUS_PAGE says open or github
	// (auto is off: a Function URL is public).
	StatusPage app.StatusPage
	// SignIn configures StatusPage github: PublicURL, ClientID, ClientSecret, SessionKey, GitHubURL.
	PublicURL    string
	GitHubURL    string
	ClientID     string
	ClientSecret string
	SessionKey   []byte
	// HealDeliveries replays, on each scheduled sweep, the webhook deliveries GitHub failed to
	// deliver (with App credentials; on unless LATESTWINS_HEAL_DELIVERIES=false).
	HealDeliveries bool
	// AlertSecret signs the convergence alarms' webhook posts; empty: none is posted.
	AlertSecret []byte
	// GitToken is a store on git refs' token; GitServerURL a github:// store's host ("":
	// github.com). Neither is read for another store.
	GitToken     string
	GitServerURL string
	// Tracing is where traces go (OTEL_EXPORTER_OTLP_ENDPOINT); off unless set.
	Tracing tracing.Config
}

// gitEnv is what a store on git refs reads: the token and the host, from the settings only.
func (s *Settings) gitEnv(k string) string {
	switch k {
	case gitref.TokenVar:
		return s.GitToken
	case gitref.ServerURLVar:
		return s.GitServerURL
	}
	return ""
}

// isGitStore: the store URL names a store on git refs.
func isGitStore(raw string) bool {
	return strings.HasPrefix(raw, "git+") || strings.HasPrefix(raw, gitref.GitHubScheme+"://")
}

// loadGitStore checks a store on git refs the function can open: over HTTP (the function has no
// git programs), with its token.
func (s *Settings) loadGitStore(ctx context.Context, getenv func(string) string, params ParameterReader) error {
	if strings.HasPrefix(s.Store, "git+file:") {
		return fmt.Errorf("%s=%s: the function has no git programs to reach a local repository; use github://OWNER/REPO or git+https://HOST/OWNER/REPO.git", EnvStore, s.Store)
	}
	token, err := secretSetting(ctx, getenv, params, EnvGitToken, EnvGitTokenSSM)
	if err != nil {
		return err
	}
	s.GitToken, s.GitServerURL = token, getenv(EnvGitHubURL)
	if strings.HasPrefix(s.Store, gitref.GitHubScheme+"://") && token == "" {
		return fmt.Errorf("%s=%s: no token to push with: set %s to the name of a SecureString parameter holding a token with contents: write on the repository (or %s)",
			EnvStore, s.Store, EnvGitTokenSSM, EnvGitToken)
	}
	if _, err := gitref.ParseURL(s.Store, s.gitEnv); err != nil {
		return fmt.Errorf("%s: %w", EnvStore, err)
	}
	return nil
}

// UsesSSM reports whether any secret is to be read from SSM Parameter Store.
func UsesSSM(getenv func(string) string) bool {
	return getenv(EnvWebhookSecretSSM) != "" || getenv(EnvAppPrivateKeySSM) != "" ||
		getenv(EnvClientSecretSSM) != "" || getenv(EnvSessionKeySSM) != "" || getenv(EnvAlertSecretSSM) != "" || getenv(EnvGitTokenSSM) != ""
}

// LoadSettings reads the settings through getenv. A secret named by a *_SSM_PARAMETER variable is
// read from SSM Parameter Store with decryption (params must then be given); otherwise it comes from
// its own variable. An empty webhook secret refuses to start: unsigned deliveries would be accepted.
func LoadSettings(ctx context.Context, getenv func(string) string, params ParameterReader) (*Settings, error) {
	s := &Settings{Store: getenv(EnvStore), Config: getenv(EnvConfig), ConfigRepo: getenv(EnvConfigRepo), GitHubAPIURL: getenv(EnvGitHubAPIURL),
		MaxBodyBytes: app.DefaultMaxBodyBytes, Stall: DefaultStall, MaxAttempts: DefaultMaxAttempts,
		OIDCIssuer: getenv(EnvOIDCIssuer), OIDCAudience: getenv(EnvOIDCAudience), HealDeliveries: true}
	var errs []error
	if s.Store == "" {
		errs = append(errs, fmt.Errorf("%s is not set: give the store URL, %s", EnvStore, storeExample))
	} else if strings.HasPrefix(s.Store, "bolt://") {
		errs = append(errs, fmt.Errorf("%s=%s: a bolt file does not survive a Lambda instance; use %s", EnvStore, s.Store, storeExample))
	} else if strings.HasPrefix(s.Store, "memory://") {
		errs = append(errs, fmt.Errorf("%s=%s: every Lambda instance would keep its own state, and latest-wins would silently stop working; use %s",
			EnvStore, s.Store, storeExample))
	} else if isGitStore(s.Store) {
		if err := s.loadGitStore(ctx, getenv, params); err != nil {
			errs = append(errs, err)
		}
	}
	secret, err := secretSetting(ctx, getenv, params, EnvWebhookSecret, EnvWebhookSecretSSM)
	switch {
	case err != nil:
		errs = append(errs, err)
	case secret == "":
		errs = append(errs, fmt.Errorf("no webhook secret: set %s to the name of a SecureString parameter holding the App's webhook secret (or %s); "+
			"the function refuses to start without one, since unsigned deliveries would be accepted", EnvWebhookSecretSSM, EnvWebhookSecret))
	}
	s.WebhookSecret = []byte(secret)
	if alertSecret, err := secretSetting(ctx, getenv, params, EnvAlertSecret, EnvAlertSecretSSM); err != nil {
		errs = append(errs, err)
	} else if alertSecret != "" {
		s.AlertSecret = []byte(alertSecret)
	}
	if err := s.loadCredentials(ctx, getenv, params); err != nil {
		errs = append(errs, err)
	}
	if s.Config != "" && s.ConfigRepo != "" {
		errs = append(errs, fmt.Errorf("%s and %s both name the trusted configuration: set one", EnvConfig, EnvConfigRepo))
	} else if s.ConfigRepo != "" {
		if _, err := app.ParseRepo(s.ConfigRepo); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", EnvConfigRepo, err))
		}
	}
	if s.GitHubAPIURL == "" {
		s.GitHubAPIURL = defaultGitHubAPIURL
	}
	if u, err := url.Parse(s.GitHubAPIURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%s=%q: give an http(s) URL such as %s", EnvGitHubAPIURL, s.GitHubAPIURL, defaultGitHubAPIURL))
	} else if !strings.HasSuffix(u.Path, "/") {
		s.GitHubAPIURL += "/"
	}
	if v := getenv(EnvMaxBody); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: give a positive number of bytes", EnvMaxBody, v))
		} else {
			s.MaxBodyBytes = n
		}
	}
	if v := getenv(EnvSweepStall); v != "" {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: give a positive duration such as 10m", EnvSweepStall, v))
		} else {
			s.Stall = d
		}
	}
	if v := getenv(EnvRetention); v != "" {
		if d, err := authority.ParseRetention(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: give how long events and intent ids are kept, in days such as 90d, at least 1d", EnvRetention, v))
		} else {
			s.Retention = d
		}
	}
	if v := getenv(EnvMaxAttempts); v != "" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			errs = append(errs, fmt.Errorf("%s=%q: give a whole number of at least 1", EnvMaxAttempts, v))
		} else {
			s.MaxAttempts = n
		}
	}
	if v := getenv(EnvHealDeliveries); v != "" {
		if b, err := strconv.ParseBool(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: give true or false", EnvHealDeliveries, v))
		} else {
			s.HealDeliveries = b
		}
	}
	if err := s.loadStatusPage(ctx, getenv, params); err != nil {
		errs = append(errs, err)
	}
	if tc, err := tracing.ConfigFrom(getenv); err != nil {
		errs = append(errs, err)
	} else {
		s.Tracing = tc
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("settings: %w", errors.Join(errs...))
	}
	return s, nil
}

// loadStatusPage reads the status page's settings. On Lambda the page is off unless set: the
// Function URL must be public for webhooks, and auto never opens a public address.
func (s *Settings) loadStatusPage(ctx context.Context, getenv func(string) string, params ParameterReader) error {
	mode, err := app.ResolveStatusPage(getenv(EnvStatusPage), false)
	if err != nil {
		return fmt.Errorf("%s: %w", EnvStatusPage, err)
	}
	s.StatusPage = mode
	if mode != app.StatusPageGitHub {
		return nil
	}
	s.PublicURL, s.GitHubURL, s.ClientID = getenv(EnvPublicURL), getenv(EnvGitHubURL), getenv(EnvClientID)
	secret, err := secretSetting(ctx, getenv, params, EnvClientSecret, EnvClientSecretSSM)
	if err != nil {
		return err
	}
	key, err := secretSetting(ctx, getenv, params, EnvSessionKey, EnvSessionKeySSM)
	if err != nil {
		return err
	}
	s.ClientSecret, s.SessionKey = secret, []byte(key)
	var missing []string
	for _, m := range []struct{ v, name string }{{s.PublicURL, EnvPublicURL + " (the Function URL)"}, {s.ClientID, EnvClientID},
		{s.ClientSecret, EnvClientSecretSSM + " or " + EnvClientSecret}, {key, EnvSessionKeySSM + " or " + EnvSessionKey}} {
		if m.v == "" {
			missing = append(missing, m.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s=github needs %s; see docs/deploy.md", EnvStatusPage, strings.Join(missing, ", "))
	}
	if len(key) < app.MinSessionKeyBytes {
		return fmt.Errorf("the session key has %d bytes: give at least %d random bytes (openssl rand -base64 48)", len(key), app.MinSessionKeyBytes)
	}
	return nil
}

// loadCredentials reads the App's id and private key: both, or neither (then nothing is published).
func (s *Settings) loadCredentials(ctx context.Context, getenv func(string) string, params ParameterReader) error {
	key, err := secretSetting(ctx, getenv, params, EnvAppPrivateKey, EnvAppPrivateKeySSM)
	if err != nil {
		return err
	}
	id := getenv(EnvAppID)
	switch {
	case id == "" && key == "":
		return nil
	case id == "":
		return fmt.Errorf("the App's private key is set but %s is not: give both, or neither to run without publishing", EnvAppID)
	case key == "":
		return fmt.Errorf("%s is set but the App's private key is not: set %s (or %s), or unset %s", EnvAppID, EnvAppPrivateKeySSM, EnvAppPrivateKey, EnvAppID)
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s=%q: give the App's numeric id (the App's settings page shows it)", EnvAppID, id)
	}
	s.AppID = n
	if strings.Contains(key, "-----BEGIN") || getenv(EnvAppPrivateKeySSM) != "" {
		s.AppPrivateKey = []byte(key)
		return nil
	}
	b, err := os.ReadFile(key)
	if err != nil {
		return fmt.Errorf("%s is neither a PEM key nor a readable file: %w", EnvAppPrivateKey, err)
	}
	s.AppPrivateKey = b
	return nil
}

// secretSetting reads a secret from the SSM parameter ssmVar names, or from plainVar.
func secretSetting(ctx context.Context, getenv func(string) string, params ParameterReader, plainVar, ssmVar string) (string, error) {
	name, plain := getenv(ssmVar), getenv(plainVar)
	switch {
	case name == "":
		return plain, nil
	case plain != "":
		return "", fmt.Errorf("both %s and %s are set: keep one (the parameter, so that the secret stays out of the function's configuration)", ssmVar, plainVar)
	case params == nil:
		return "", fmt.Errorf("%s=%s: no SSM client to read it with", ssmVar, name)
	}
	out, err := params.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
	if err != nil {
		return "", fmt.Errorf("%s: read SSM parameter %s (the function's role needs ssm:GetParameter on it, and kms:Decrypt on its key): %w", ssmVar, name, err)
	}
	if out.Parameter == nil || aws.ToString(out.Parameter.Value) == "" {
		return "", fmt.Errorf("%s: SSM parameter %s is empty: put the secret in it (aws ssm put-parameter --type SecureString --overwrite)", ssmVar, name)
	}
	return aws.ToString(out.Parameter.Value), nil
}
