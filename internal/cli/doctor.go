package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/gitref"
	"github.com/latestwins/latestwins/internal/store/memory"
)

// checkStatus is how one of doctor's checks ended.
type checkStatus string

const (
	checkOK      checkStatus = "ok"
	checkFailed  checkStatus = "fail"
	checkSkipped checkStatus = "skipped"
)

// finding is one check's result: what was found (ok), what is wrong and how to fix it (fail), or
// why the check did not run (skipped).
type finding struct {
	Check  string      `json:"check"`
	Status checkStatus `json:"status"`
	Detail string      `json:"detail"`
	Fix    string      `json:"fix,omitempty"`
}

// doctorSettings are doctor's flags: the App's address, and what serve is given (its webhook
// secret, credentials, trusted configuration and store) to compare with what the App does.
type doctorSettings struct {
	url          *url.URL
	secret       string
	appID        string
	appKey       string
	apiURL       string
	configRepo   string
	configFile   string
	audience     string
	oidcAudience string
	timeout      time.Duration
}

// The checks, in the order doctor runs them.
const (
	checkApp          = "app"
	checkSecret       = "webhook-secret"
	checkSignature    = "webhook-signature"
	checkInstallation = "installation"
	checkTrusted      = "trusted-config"
	checkStore        = "store"
	checkAudience     = "audience"
)

// pingBody is the ping doctor sends: an event the App acknowledges without acting on it.
const pingBody = `{"zen":"latestwins doctor","hook_id":0}`

// runDoctor is `latestwins doctor`: it asks a deployed App, and what the App is configured with,
// whether they fit, and says for each check what to fix.
func runDoctor(ctx context.Context, c *cmdEnv, args []string) error {
	ds, err := c.doctorFlags(args)
	if err != nil {
		return err
	}
	var inst *githubapp.Installations
	if ds.appID != "" || ds.appKey != "" {
		if inst, err = checkCredentials(&trustedSettings{appID: ds.appID, appKey: ds.appKey, apiURL: ds.apiURL}); err != nil {
			return err
		}
	}
	d := &doctor{c: c, ds: ds, inst: inst}
	var found []finding
	add := func(check string, run func(ctx context.Context) finding) {
		cctx, cancel := context.WithTimeout(ctx, ds.timeout)
		defer cancel()
		f := run(cctx)
		f.Check = check
		found = append(found, f)
		if !c.s.jsonOut {
			c.printFinding(f)
		}
	}
	add(checkApp, d.answers)
	add(checkSecret, d.secretAccepted)
	add(checkSignature, d.forgeryRefused)
	add(checkInstallation, d.installed)
	add(checkTrusted, d.trustedConfig)
	add(checkStore, d.store)
	add(checkAudience, d.audience)
	var failed []string
	for _, f := range found {
		if f.Status == checkFailed {
			failed = append(failed, f.Check)
		}
	}
	if c.s.jsonOut {
		if err := c.printJSON(map[string]any{"ok": len(failed) == 0, "checks": found}); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return &exitError{code: ExitError, msg: fmt.Sprintf("%d of %d checks failed: %s", len(failed), len(found), strings.Join(failed, ", "))}
	}
	return nil
}

func (c *cmdEnv) doctorFlags(args []string) (*doctorSettings, error) {
	ds := &doctorSettings{}
	var target string
	c.newFlags("doctor")
	c.str(&target, "url", "", "the App's address: its Function URL, or where serve listens, e.g. http://127.0.0.1:8080 (required)")
	c.secret(&ds.secret, "webhook-secret", "the App's webhook secret, to check that the App takes deliveries signed with it (prefer the variable: flags show in process lists)")
	c.str(&ds.appID, "app-id", "", "the GitHub App's id, as serve takes it: checks the installation on the trusted configuration's repository and reads its file")
	c.secret(&ds.appKey, "app-private-key", "the GitHub App's private key: PEM, or a path to a PEM file")
	c.str(&ds.apiURL, "github-api-url", "https://api.github.com/", "GitHub's REST API (GitHub Enterprise: https://HOST/api/v3/)")
	c.str(&ds.configRepo, "config-repo", "", "OWNER/REPO whose .github/latestwins.yml is the trusted configuration, as serve takes it (default: the App owner's .github repository)")
	c.str(&ds.configFile, "config", "", "the trusted configuration file, when serve is given one (--config) instead of a repository")
	c.str(&ds.audience, "audience", apiclient.Audience, "the OIDC audience the workflows ask for (the Action asks for "+apiclient.Audience+"; the CLI's --api for its --api-audience)")
	c.str(&ds.oidcAudience, "oidc-audience", apiclient.Audience, "the audience the App requires, as serve takes it: compared only when the App does not say it (GET "+app.MetaPath+")")
	c.durVar(&ds.timeout, "timeout", 20*time.Second, "how long each check may take")
	c.fs.Lookup("store").Usage = "the App's store, to check that it is reachable and migrated: bolt://PATH, dynamodb://TABLE?region=R&endpoint=URL (default: not checked) ($LATESTWINS_STORE)"
	if err := c.parse(args); err != nil {
		return nil, err
	}
	if err := c.noArguments(); err != nil {
		return nil, err
	}
	u, err := url.Parse(strings.TrimSuffix(target, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, c.badSetting("url", target, "give the App's address as http:// or https://, e.g. http://127.0.0.1:8080 (without /webhook)")
	}
	ds.url = u
	if ds.apiURL, err = githubAPIURL(ds.apiURL); err != nil {
		return nil, err
	}
	if ds.configRepo != "" && ds.configFile != "" {
		return nil, usageErrorf("--config and --config-repo both name the trusted configuration: give the one serve is given")
	}
	if ds.configRepo != "" {
		if _, err := app.ParseRepo(ds.configRepo); err != nil {
			return nil, usageErrorf("--config-repo: %v", err)
		}
	}
	if ds.timeout <= 0 {
		return nil, c.badSetting("timeout", ds.timeout.String(), "give how long each check may take, such as 20s")
	}
	if c.given("store") {
		if err := checkStoreURL(c.s.store); err != nil {
			return nil, err
		}
	}
	return ds, nil
}

// checkStoreURL refuses a store URL no store could be opened with, before any check runs.
func checkStoreURL(raw string) error {
	scheme, _, _ := strings.Cut(raw, "://")
	switch scheme {
	case "bolt", "memory":
		return nil
	case "dynamodb":
		if _, err := dynamo.ParseURL(raw); err != nil {
			return usageErrorf("%v", err)
		}
		return nil
	case gitref.GitHubScheme: // its token is the store check's to find
		if _, _, err := gitref.GitHubRepo(raw); err != nil {
			return usageErrorf("%v", err)
		}
		return nil
	case "git+file", "git+https", "git+http":
		if _, err := gitref.ParseURL(raw, func(string) string { return "" }); err != nil {
			return usageErrorf("%v", err)
		}
		return nil
	}
	return usageErrorf("store %q: use bolt://PATH, dynamodb://TABLE?region=R, github://OWNER/REPO or git+https://HOST/OWNER/REPO.git (memory:// lives in the App's process)", raw)
}

func (c *cmdEnv) printFinding(f finding) {
	switch f.Status {
	case checkOK:
		c.printf("ok       %-17s %s\n", f.Check, f.Detail)
	case checkFailed:
		c.printf("FAIL     %-17s %s; fix: %s\n", f.Check, f.Detail, f.Fix)
	default:
		c.printf("skipped  %-17s (%s)\n", f.Check, f.Detail)
	}
}

// doctor runs the checks; later ones read what earlier ones found.
type doctor struct {
	c    *cmdEnv
	ds   *doctorSettings
	inst *githubapp.Installations

	down     string      // why the App does not answer, once checkApp has failed
	repo     app.RepoRef // the trusted configuration's repository, once found
	homeless bool        // the installation check failed, so the file cannot be read
}

func ok(format string, args ...any) finding {
	return finding{Status: checkOK, Detail: fmt.Sprintf(format, args...)}
}

func skipped(format string, args ...any) finding {
	return finding{Status: checkSkipped, Detail: fmt.Sprintf(format, args...)}
}

func failed(detail, fix string) finding {
	return finding{Status: checkFailed, Detail: detail, Fix: fix}
}

func (d *doctor) at(path string) *url.URL { return d.ds.url.JoinPath(path) }

// answers checks that the App answers GET /healthz.
func (d *doctor) answers(ctx context.Context) finding {
	u := d.at("/healthz")
	status, body, err := get(ctx, u)
	switch {
	case err != nil:
		d.down = "the App does not answer"
		return failed(err.Error(), "check --url: the App's Function URL, or the address serve listens on (--addr), and that the App runs")
	case status != http.StatusOK:
		d.down = fmt.Sprintf("GET /healthz answered %d", status)
		return failed(fmt.Sprintf("GET %s answered %d %s", u.Redacted(), status, excerpt(body)),
			"--url must be the App's own address (not a page in front of it), with no path")
	}
	return ok("GET %s answered 200 %s", u.Redacted(), excerpt(body))
}

// secretAccepted sends a ping signed with the webhook secret, which the App must take.
func (d *doctor) secretAccepted(ctx context.Context) finding {
	switch {
	case d.down != "":
		return skipped("%s", d.down)
	case d.ds.secret == "":
		return skipped("no webhook secret: set LATESTWINS_WEBHOOK_SECRET to the App's to check it")
	}
	u := d.at("/webhook")
	resp, answer, err := sendSigned(ctx, u, "ping", newDeliveryID(), d.ds.secret, []byte(pingBody))
	switch {
	case err != nil:
		return failed(err.Error(), "check that the App takes POST /webhook at --url")
	case resp.StatusCode == http.StatusUnauthorized:
		return failed(fmt.Sprintf("the App refused a ping signed with this webhook secret: %s %s", resp.Status, excerpt(answer)),
			"the App has another secret: give the App (serve's LATESTWINS_WEBHOOK_SECRET, or the deployment's webhook secret parameter) "+
				"and the App's webhook on GitHub (its settings page, Webhook secret) the same secret, and doctor that one")
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return failed(fmt.Sprintf("POST %s answered %s %s to a signed ping", u.Redacted(), resp.Status, excerpt(answer)),
			"--url must be the App's address, where POST /webhook takes GitHub's deliveries")
	}
	return ok("a ping signed with the webhook secret was taken: %s", resp.Status)
}

// forgeryRefused sends the ping signed with another secret, which the App must refuse with 401.
func (d *doctor) forgeryRefused(ctx context.Context) finding {
	if d.down != "" {
		return skipped("%s", d.down)
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	wrong := "not-" + d.ds.secret + "-" + hex.EncodeToString(b[:])
	u := d.at("/webhook")
	resp, answer, err := sendSigned(ctx, u, "ping", newDeliveryID(), wrong, []byte(pingBody))
	switch {
	case err != nil:
		return failed(err.Error(), "check that the App takes POST /webhook at --url")
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		return failed(fmt.Sprintf("a ping with a wrong signature was taken: %s", resp.Status),
			"whatever answers at --url checks no webhook signatures, so anyone could post it events: point --url at latestwins itself, "+
				"which refuses unsigned and wrongly signed deliveries")
	case resp.StatusCode != http.StatusUnauthorized:
		return failed(fmt.Sprintf("a ping with a wrong signature was answered %s %s, not 401", resp.Status, excerpt(answer)),
			"--url must be the App's address, where POST /webhook checks each delivery's signature")
	}
	return ok("a ping with a wrong signature was refused: %s", resp.Status)
}

// installed finds the App's installation on the trusted configuration's repository, as the App
// (GET /repos/{owner}/{repo}/installation with its JWT).
func (d *doctor) installed(ctx context.Context) finding {
	switch {
	case d.ds.configFile != "":
		return skipped("the trusted configuration is a file (--config), not a repository's")
	case d.inst == nil:
		return skipped("no App credentials: give LATESTWINS_APP_ID and LATESTWINS_APP_PRIVATE_KEY as serve takes them to check the installation")
	}
	if d.ds.configRepo != "" {
		d.repo, _ = app.ParseRepo(d.ds.configRepo) // checked with the flags
	} else {
		owner, err := d.inst.AppOwner(ctx)
		if err != nil {
			d.homeless = true
			return failed(err.Error(), credentialsFix(err))
		}
		d.repo = app.RepoRef{Owner: owner, Name: app.DefaultTrustedRepo}
	}
	id, err := d.inst.ForRepo(ctx, d.repo.Owner, d.repo.Name)
	switch {
	case errors.Is(err, githubapp.ErrNotInstalled):
		d.homeless = true
		return failed(fmt.Sprintf("the App is not installed on %s (or there is no such repository), where the trusted configuration is read", d.repo),
			fmt.Sprintf("install the App on %s (the App's page on GitHub, Install App or Configure), or give --config-repo the repository serve is given", d.repo))
	case err != nil:
		d.homeless = true
		return failed(err.Error(), credentialsFix(err))
	}
	return ok("the App is installed on %s (installation %d)", d.repo, id)
}

// credentialsFix says what to check when GitHub does not answer the App as it should.
func credentialsFix(err error) string {
	if rl, isRL := errors.AsType[*githubapp.RateLimitedError](err); isRL {
		return fmt.Sprintf("GitHub limits the App's requests: try again after %s", rl.RetryAfter)
	}
	return "check that --app-id and the private key are the App's (a key GitHub revoked is refused), that the machine's clock is right (the App's token is signed with it), and --github-api-url"
}

// trustedConfig reads the trusted file as serve does and parses it.
func (d *doctor) trustedConfig(ctx context.Context) finding {
	if d.ds.configFile != "" {
		cfg, err := (&app.FileConfig{Path: d.ds.configFile}).Config(ctx, 0, app.RepoRef{}, "")
		if err != nil {
			return failed(err.Error(), "correct the file as the message says (docs/config.md)")
		}
		return ok("%s parses: %s", d.ds.configFile, environmentList(cfg))
	}
	switch {
	case d.inst == nil:
		return skipped("no App credentials to read the trusted file with, and no --config")
	case d.homeless:
		return skipped("the App's installation on the trusted configuration's repository was not found")
	}
	// The ports serve builds, with their deduplicating leases on a store of this process alone.
	gh, err := ghadapter.New(d.inst, authority.New(memory.New()), d.c.log)
	if err != nil {
		return failed(err.Error(), "report this: the GitHub ports could not be built")
	}
	src, err := app.NewTrustedConfig(app.TrustedOptions{Repo: d.repo.String(), Files: gh.Files, Installations: gh.Finder, AppOwner: gh.AppOwner})
	if err != nil {
		return failed(err.Error(), "give --config-repo OWNER/REPO")
	}
	cfg, err := src.Trusted(ctx)
	var missing *app.MissingConfigError
	switch {
	case errors.As(err, &missing):
		return failed(err.Error(), fmt.Sprintf("add %s to the default branch of %s (docs/config.md)", config.Path, d.repo))
	case errors.Is(err, authority.ErrInvalidInput):
		return failed(err.Error(), fmt.Sprintf("correct %s as the message says (docs/config.md)", src.Where()))
	case err != nil:
		return failed(err.Error(), credentialsFix(err))
	}
	return ok("%s parses: %s", src.Where(), environmentList(cfg))
}

func environmentList(cfg *config.Config) string {
	if len(cfg.Environments) == 0 {
		return "no environments"
	}
	names := make([]string, len(cfg.Environments))
	for i, e := range cfg.Environments {
		names[i] = e.Name
		if e.Preview() {
			names[i] += " (preview template)"
		}
	}
	return "environments " + strings.Join(names, ", ")
}

// store opens the store as the other commands do, read-only, and checks its layout as migrate
// would find it.
func (d *doctor) store(ctx context.Context) finding {
	raw := d.c.s.store
	if !d.c.given("store") {
		return skipped("no --store: give the App's store URL (LATESTWINS_STORE) to check it")
	}
	if strings.HasPrefix(raw, "memory://") {
		return skipped("memory:// lives in the App's process: nothing to check from here")
	}
	st, closeFn, err := openStore(ctx, raw, storeReadOnly, d.c.io.Getenv)
	if err != nil {
		return failed(err.Error(), storeFix(raw, err))
	}
	defer closeFn()
	switch s := st.(type) {
	case *dynamo.Store:
		rep, err := s.Check(ctx)
		if err != nil {
			return failed(err.Error(), storeFix(raw, err))
		}
		return ok("table %s is migrated: schema version %d, index %s, time to live %s", rep.Table, rep.SchemaVersion, dynamo.PendingIndex, rep.TTL)
	case *bolt.Store:
		v, err := s.Check(ctx)
		if err != nil {
			return failed(err.Error(), storeFix(raw, err))
		}
		return ok("%s is migrated: schema version %d", s.Path(), v)
	case *gitref.Store:
		envs, err := s.Environments(ctx)
		if err != nil {
			return failed(err.Error(), storeFix(raw, err))
		}
		return ok("%s answers: %d environments under %s (doctor only reads: pushing needs contents: write)", raw, len(envs), gitref.Namespace)
	}
	return skipped("%s: no layout to check", raw)
}

// storeFix says what to do about a store that failed its check.
func storeFix(raw string, err error) string {
	switch {
	case errors.Is(err, dynamo.ErrNotMigrated), errors.Is(err, bolt.ErrNoStore):
		return fmt.Sprintf("run latestwins migrate --store '%s' (as someone who may create and change the table)", raw)
	case errors.Is(err, bolt.ErrNewerSchema):
		return "upgrade this latestwins: a newer one migrated the store"
	case strings.HasPrefix(raw, "dynamodb://"):
		return "check the endpoint and region in the store URL, and this machine's AWS credentials: " +
			"doctor needs dynamodb:DescribeTable, dynamodb:DescribeTimeToLive and dynamodb:GetItem on the table"
	case strings.HasPrefix(raw, gitref.GitHubScheme+"://"), strings.HasPrefix(raw, "git+"):
		return "check the repository in the store URL, and the token: " + gitref.TokenVar + " (for github://, or else " + gitref.GitHubTokenVar +
			") must reach the repository, and the App's pushes need contents: write on it"
	}
	if strings.Contains(err.Error(), "run latestwins migrate") {
		return fmt.Sprintf("run latestwins migrate --store '%s'", raw)
	}
	return "give --store the file serve uses, on the machine it runs on"
}

// audience compares the audience the App requires of OIDC tokens with the one the workflows ask
// for. The App says it at GET /meta; an App that does not (an older latestwins) is taken to require
// what serve's settings here say.
func (d *doctor) audience(ctx context.Context) finding {
	want, from := d.ds.oidcAudience, "as --oidc-audience / LATESTWINS_OIDC_AUDIENCE here say, the App not saying it"
	if d.down == "" {
		var m app.Meta
		status, body, err := get(ctx, d.at(app.MetaPath))
		switch {
		case err != nil:
			return failed(err.Error(), "check that the App answers GET "+app.MetaPath+" at --url")
		case status == http.StatusNotFound:
			from = "as --oidc-audience / LATESTWINS_OIDC_AUDIENCE here say: the App does not say it (GET " + app.MetaPath + " is a later latestwins')"
		case status != http.StatusOK || json.Unmarshal(body, &m) != nil:
			return failed(fmt.Sprintf("GET %s answered %d %s", d.at(app.MetaPath).Redacted(), status, excerpt(body)),
				"--url must be the App's own address")
		case m.OIDC != nil:
			want, from = m.OIDC.Audience, fmt.Sprintf("the App says so at GET %s, for tokens of %s", app.MetaPath, m.OIDC.Issuer)
		}
	}
	if want != d.ds.audience {
		set := fmt.Sprintf("set the App's LATESTWINS_OIDC_AUDIENCE (serve --oidc-audience) to %q", d.ds.audience)
		if d.ds.audience == apiclient.Audience {
			set += ", or unset it"
		}
		return failed(fmt.Sprintf("the App requires OIDC audience %q (%s), the workflows ask for %q", want, from, d.ds.audience),
			fmt.Sprintf("%s: the Action always asks for %q, and --api calls ask for their --api-audience", set, apiclient.Audience))
	}
	return ok("the App requires OIDC audience %q (%s), the one the workflows ask for", want, from)
}

// get reads up to maxWebhookAnswer of the answer to GET u.
func get(ctx context.Context, u *url.URL) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	req.Header.Set("User-Agent", "latestwins-doctor")
	resp, err := noRedirects.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxWebhookAnswer))
	if err != nil {
		return 0, nil, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	return resp.StatusCode, body, nil
}

// excerpt is the start of an answer's body, on one line, for a message.
func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
