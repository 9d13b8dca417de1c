package githubapp

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v60/github"
)

// Lifetimes of ForRepo's answers.
const (
	// InstallationTTL is how long ForRepo keeps a repository's installation id before asking again.
	InstallationTTL = 5 * time.Minute
	// NotInstalledTTL is how long ForRepo remembers that the App is not installed on a repository:
	// shorter, so that installing the App takes effect within a minute.
	NotInstalledTTL = time.Minute
)

// ErrNotInstalled is the category of *NotInstalledError.
var ErrNotInstalled = errors.New("GitHub App not installed")

// NotInstalledError says that the App has no installation on a repository (or the repository does
// not exist: GitHub answers 404 to both). It matches ErrNotInstalled and ErrNotFound.
type NotInstalledError struct {
	Owner, Repo string
	Err         error
}

func (e *NotInstalledError) Error() string {
	return fmt.Sprintf("the GitHub App is not installed on %s/%s (or the repository does not exist): install the App on the repository", e.Owner, e.Repo)
}

// Is matches ErrNotInstalled and ErrNotFound.
func (e *NotInstalledError) Is(target error) bool {
	return target == ErrNotInstalled || target == ErrNotFound
}

func (e *NotInstalledError) Unwrap() error { return e.Err }

// Installations makes Clients that act as installations of a GitHub App. It keeps one token-refreshing
// transport per installation, so an installation token is fetched once and reused until it nears
// expiry, and it finds a repository's installation (ForRepo), cached for InstallationTTL.
type Installations struct {
	appID int64
	key   *rsa.PrivateKey
	api   *url.URL
	base  http.RoundTripper
	opts  []Option
	// app calls the API as the App itself, authenticated with its JWT.
	app *Client

	mu         sync.Mutex
	transports map[int64]*ghinstallation.Transport
	repos      map[string]cachedInstallation // by lower-case OWNER/REPO
	owner      string                        // the App's owner, once GitHub has said
}

// cachedInstallation is ForRepo's answer for a repository: an id, or 0 for not installed.
type cachedInstallation struct {
	id    int64
	until time.Time
}

// NewInstallations checks the App's credentials: appID and its private key (PEM, as GitHub issues
// it). apiURL is the REST API (empty means github.com). WithClock also sets the clock of ForRepo's
// cache.
func NewInstallations(appID int64, privateKeyPEM []byte, apiURL string, opts ...Option) (*Installations, error) {
	if appID <= 0 {
		return nil, fmt.Errorf("GitHub App id %d: set the App's numeric id (LATESTWINS_APP_ID)", appID)
	}
	if len(privateKeyPEM) == 0 {
		return nil, fmt.Errorf("GitHub App private key is empty: set LATESTWINS_APP_PRIVATE_KEY to the App's PEM key")
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM(privateKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("GitHub App private key: want the RSA PEM key GitHub generated for the App: %w", err)
	}
	api, err := baseURL(apiURL)
	if err != nil {
		return nil, err
	}
	i := &Installations{
		appID:      appID,
		key:        key,
		api:        api,
		base:       http.DefaultTransport,
		opts:       opts,
		transports: map[int64]*ghinstallation.Transport{},
		repos:      map[string]cachedInstallation{},
	}
	gh := github.NewClient(&http.Client{Transport: ghinstallation.NewAppsTransportFromPrivateKey(i.base, appID, key)})
	gh.BaseURL = api
	gh.UploadURL = api
	i.app = New(gh, opts...)
	return i, nil
}

// Client returns a Client acting as installation installationID. No request is made until the
// Client is used; the first request fetches an installation token.
func (i *Installations) Client(installationID int64) (*Client, error) {
	if installationID <= 0 {
		return nil, fmt.Errorf("installation id %d: want the id from the webhook's installation object", installationID)
	}
	gh := github.NewClient(&http.Client{Transport: i.transport(installationID)})
	gh.BaseURL = i.api
	gh.UploadURL = i.api
	return New(gh, i.opts...), nil
}

func (i *Installations) transport(installationID int64) *ghinstallation.Transport {
	i.mu.Lock()
	defer i.mu.Unlock()
	if tr, ok := i.transports[installationID]; ok {
		return tr
	}
	// One apps transport per installation: ghinstallation writes to it when refreshing a token.
	apps := ghinstallation.NewAppsTransportFromPrivateKey(i.base, i.appID, i.key)
	apps.BaseURL = strings.TrimSuffix(i.api.String(), "/")
	tr := ghinstallation.NewFromAppsTransport(apps, installationID)
	// Without options ghinstallation sends the body "null", which GitHub's description does not allow;
	// empty options send {} (a token for everything the installation may access).
	tr.InstallationTokenOptions = &github.InstallationTokenOptions{}
	i.transports[installationID] = tr
	return tr
}

// ForRepo returns the id of the App's installation on owner/repo, for requests that name none (an
// OIDC token of the API carries no installation id). It asks GitHub as the App (GET
// /repos/{owner}/{repo}/installation, with the App's JWT) and keeps the answer for InstallationTTL,
// or NotInstalledTTL for a repository without the App, which is a *NotInstalledError
// (errors.Is(err, ErrNotInstalled)). Other failures are not kept.
func (i *Installations) ForRepo(ctx context.Context, owner, repo string) (int64, error) {
	op := fmt.Sprintf("find the App's installation on %s/%s", owner, repo)
	if err := requireNames(op, "owner", owner, "repo", repo); err != nil {
		return 0, err
	}
	key := strings.ToLower(owner + "/" + repo)
	i.mu.Lock()
	c, ok := i.repos[key]
	i.mu.Unlock()
	if ok && i.app.now().Before(c.until) {
		if c.id == 0 {
			return 0, &NotInstalledError{Owner: owner, Repo: repo}
		}
		return c.id, nil
	}
	inst, _, err := i.app.gh.Apps.FindRepositoryInstallation(ctx, owner, repo)
	switch {
	case err != nil && notFound(err):
		i.remember(key, 0, NotInstalledTTL)
		return 0, &NotInstalledError{Owner: owner, Repo: repo, Err: err}
	case err != nil:
		return 0, i.app.wrap(op, err)
	case inst.GetID() <= 0:
		return 0, fmt.Errorf("%s: GitHub answered no installation id", op)
	}
	i.remember(key, inst.GetID(), InstallationTTL)
	return inst.GetID(), nil
}

// AppOwner returns the login of the account that owns the App (GET /app, with the App's JWT). The
// answer is kept: an App does not change owners while it runs.
func (i *Installations) AppOwner(ctx context.Context) (string, error) {
	i.mu.Lock()
	owner := i.owner
	i.mu.Unlock()
	if owner != "" {
		return owner, nil
	}
	a, _, err := i.app.gh.Apps.Get(ctx, "")
	if err != nil {
		return "", i.app.wrap("read the App (GET /app)", err)
	}
	if owner = a.GetOwner().GetLogin(); owner == "" {
		return "", errors.New("read the App (GET /app): GitHub answered no owner")
	}
	i.mu.Lock()
	i.owner = owner
	i.mu.Unlock()
	return owner, nil
}

func (i *Installations) remember(key string, id int64, ttl time.Duration) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.repos[key] = cachedInstallation{id: id, until: i.app.now().Add(ttl)}
}
