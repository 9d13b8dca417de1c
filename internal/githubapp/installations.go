package githubapp

import (
	"crypto/rsa"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v60/github"
)

// Installations makes Clients that act as installations of a GitHub App. It keeps one token-refreshing
// transport per installation, so an installation token is fetched once and reused until it nears
// expiry.
type Installations struct {
	appID int64
	key   *rsa.PrivateKey
	api   *url.URL
	base  http.RoundTripper
	opts  []Option

	mu         sync.Mutex
	transports map[int64]*ghinstallation.Transport
}

// NewInstallations checks the App's credentials: appID and its private key (PEM, as GitHub issues
// it). apiURL is the REST API (empty means github.com).
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
	return &Installations{
		appID:      appID,
		key:        key,
		api:        api,
		base:       http.DefaultTransport,
		opts:       opts,
		transports: map[int64]*ghinstallation.Transport{},
	}, nil
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
