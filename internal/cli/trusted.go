package cli

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/bradleyfalzon/ghinstallation/v2"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/alert"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
)

// trustedSettings name the trusted configuration, the App's credentials and the alarms' secret:
// what serve and sweep both read the convergence alarms from, and tell them with.
type trustedSettings struct {
	config      string
	configRepo  string
	appID       string
	appKey      string
	apiURL      string
	alertSecret string
}

// trustedFlags defines the flags of ts; what adds to --config's help what the command does with it.
func (c *cmdEnv) trustedFlags(ts *trustedSettings, what string) {
	c.str(&ts.config, "config", "", "the trusted configuration file: environments, scopes and the repositories that feed them (see docs/config.md)"+what)
	c.str(&ts.configRepo, "config-repo", "", "OWNER/REPO whose .github/latestwins.yml is the trusted configuration (default, with App credentials and no --config: the App owner's .github repository)")
	c.str(&ts.appID, "app-id", "", "the GitHub App's id")
	c.secret(&ts.appKey, "app-private-key", "the GitHub App's private key: PEM, or a path to a PEM file")
	c.str(&ts.apiURL, "github-api-url", "https://api.github.com/", "GitHub's REST API (GitHub Enterprise: https://HOST/api/v3/)")
	c.secret(&ts.alertSecret, "alert-secret", "the secret the convergence alarms' webhook posts are signed with (X-Latestwins-Signature-256), for alert-webhook in the trusted file")
}

// check checks ts before anything is opened: the API's address, the credentials (both or
// neither), and the trusted file or repository when one is named. It returns the App's
// installations, nil without credentials.
func (ts *trustedSettings) check(ctx context.Context) (*githubapp.Installations, error) {
	api, err := githubAPIURL(ts.apiURL)
	if err != nil {
		return nil, err
	}
	ts.apiURL = api
	inst, err := checkCredentials(ts)
	if err != nil {
		return nil, err
	}
	switch {
	case ts.config != "" && ts.configRepo != "":
		return nil, usageErrorf("--config and --config-repo both name the trusted configuration: give one")
	case ts.configRepo != "":
		if _, err := app.ParseRepo(ts.configRepo); err != nil {
			return nil, usageErrorf("--config-repo: %v", err)
		}
	}
	if ts.config != "" {
		if _, err := (&app.FileConfig{Path: ts.config}).Config(ctx, 0, app.RepoRef{}, ""); err != nil {
			return nil, usageErrorf("%v", err)
		}
	}
	return inst, nil
}

// hasSource reports whether ts names a trusted configuration: a file, or the App's credentials to
// read it from GitHub with.
func (ts *trustedSettings) hasSource(inst *githubapp.Installations) bool {
	return ts.config != "" || inst != nil
}

// trustedSource is the trusted configuration ts names, and the App's ports through GitHub when it
// has credentials (nil without). The store must be open.
func (c *cmdEnv) trustedSource(ts *trustedSettings, inst *githubapp.Installations, log *slog.Logger) (*app.TrustedConfig, *ghadapter.Ports, error) {
	trusted := app.TrustedOptions{Path: ts.config, Repo: ts.configRepo}
	var gh *ghadapter.Ports
	if inst != nil {
		var err error
		if gh, err = ghadapter.New(inst, c.auth, log); err != nil {
			return nil, nil, err
		}
		trusted.Files, trusted.Installations, trusted.AppOwner = gh.Files, gh.Finder, gh.AppOwner
	}
	src, err := app.NewTrustedConfig(trusted)
	if err != nil {
		return nil, nil, usageErrorf("%v", err)
	}
	return src, gh, nil
}

// notifier is the convergence alarms' notifier of src's environments, signing with ts's secret and
// keeping issues as the App when gh is given.
func (c *cmdEnv) notifier(ts *trustedSettings, src *app.TrustedConfig, gh *ghadapter.Ports, holder string, log *slog.Logger) (*alert.Notifier, error) {
	return alert.New(alert.Options{Authority: c.auth, Trusted: src.Trusted, Secret: []byte(ts.alertSecret), Issues: gh.AlertIssues(), Holder: holder, Log: log})
}

// checkCredentials returns the App's installations when its id and key are both given and usable,
// nil when neither is; one without the other is bad configuration.
func checkCredentials(ss *trustedSettings) (*githubapp.Installations, error) {
	switch {
	case ss.appID == "" && ss.appKey == "":
		return nil, nil
	case ss.appID == "":
		return nil, usageErrorf("LATESTWINS_APP_PRIVATE_KEY is set but LATESTWINS_APP_ID is not: give both, or neither to run without publishing")
	case ss.appKey == "":
		return nil, usageErrorf("LATESTWINS_APP_ID is set but LATESTWINS_APP_PRIVATE_KEY is not: give both, or neither to run without publishing")
	}
	id, err := strconv.ParseInt(ss.appID, 10, 64)
	if err != nil || id <= 0 {
		return nil, usageErrorf("LATESTWINS_APP_ID %q: give the App's numeric id (the App's settings page shows it)", ss.appID)
	}
	key := []byte(ss.appKey)
	if !strings.Contains(ss.appKey, "-----BEGIN") {
		if key, err = os.ReadFile(ss.appKey); err != nil {
			return nil, usageErrorf("LATESTWINS_APP_PRIVATE_KEY is neither a PEM key nor a readable file: %v", err)
		}
	}
	if _, err := ghinstallation.NewAppsTransport(http.DefaultTransport, id, key); err != nil {
		return nil, usageErrorf("LATESTWINS_APP_PRIVATE_KEY: %v; give the App's private key in PEM (-----BEGIN RSA PRIVATE KEY-----)", err)
	}
	inst, err := githubapp.NewInstallations(id, key, ss.apiURL)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return inst, nil
}
