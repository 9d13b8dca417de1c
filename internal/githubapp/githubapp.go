// Package githubapp is latestwins' thin layer over GitHub's REST API (go-github v60): sticky comments
// and reactions, check runs, workflow runs and dispatches, permissions, file contents and deployments.
// Its consumers (the Action and the App) declare the small interfaces they need; this package exports
// the concrete Client and the ways to build one: NewTokenClient for a workflow's token and
// Installations for a GitHub App's installations.
//
// Methods make exactly the requests they document and never retry: a rate limit is returned as a
// *RateLimitedError that says how long to wait, and the caller decides.
package githubapp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// DefaultAPIURL is github.com's REST API.
const DefaultAPIURL = "https://api.github.com"

// Client calls GitHub's REST API through a go-github client.
type Client struct {
	gh  *github.Client
	now func() time.Time
}

// Option configures a Client.
type Option func(*Client)

// WithClock sets the clock used to turn a rate limit's reset time into a wait (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(c *Client) { c.now = now }
}

// New wraps a go-github client, which carries the API URL and the credentials.
func New(gh *github.Client, opts ...Option) *Client {
	c := &Client{gh: gh, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c
}

// NewTokenClient returns a Client that authenticates with token, as the Action does with its
// github-token input. apiURL is GITHUB_API_URL (https://api.github.com, or https://HOST/api/v3 on GitHub
// Enterprise Server); empty means github.com.
func NewTokenClient(ctx context.Context, apiURL, token string, opts ...Option) (*Client, error) {
	if strings.TrimSpace(token) == "" {
		return nil, errors.New("github token is empty: pass the workflow's token (the github-token input defaults to github.token)")
	}
	base, err := baseURL(apiURL)
	if err != nil {
		return nil, err
	}
	gh := github.NewClient(&http.Client{}).WithAuthToken(token)
	gh.BaseURL = base
	gh.UploadURL = base
	return New(gh, opts...), nil
}

// baseURL parses a REST API URL into go-github's BaseURL form (with a trailing slash).
func baseURL(apiURL string) (*url.URL, error) {
	if apiURL == "" {
		apiURL = DefaultAPIURL
	}
	u, err := url.Parse(apiURL)
	if err != nil {
		return nil, fmt.Errorf("GitHub API URL %q: %w", apiURL, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("GitHub API URL %q: want an http(s) URL such as %s or https://HOST/api/v3", apiURL, DefaultAPIURL)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// notFound reports whether err is GitHub's 404 answer.
func notFound(err error) bool {
	var e *github.ErrorResponse
	return errors.As(err, &e) && e.Response != nil && e.Response.StatusCode == http.StatusNotFound
}

// wrap adds op to err, turning rate limits into *RateLimitedError.
func (c *Client) wrap(op string, err error) error {
	if rl := c.rateLimited(op, err); rl != nil {
		return rl
	}
	return fmt.Errorf("%s: %w", op, err)
}

func requireNames(op string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if strings.TrimSpace(pairs[i+1]) == "" {
			return fmt.Errorf("%s: %s is empty", op, pairs[i])
		}
	}
	return nil
}
