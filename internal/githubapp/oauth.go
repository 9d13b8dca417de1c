package githubapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// DefaultWebURL is github.com, where users sign in (GitHub Enterprise Server: https://HOST).
const DefaultWebURL = "https://github.com"

// oauthTimeout bounds each sign-in request to GitHub.
const oauthTimeout = 10 * time.Second

// OAuth signs users in with a GitHub App's user authorization (GitHub's web application flow:
// /login/oauth/authorize, then /login/oauth/access_token) and makes the REST calls the App needs
// with the user's token. A GitHub App asks for no scopes: what a user's token may read is what both
// the user and the App's installation may read.
type OAuth struct {
	ClientID     string
	ClientSecret string
	// WebURL is where users sign in; empty means DefaultWebURL.
	WebURL string
	// APIURL is the REST API; empty means DefaultAPIURL.
	APIURL string
	// HTTP makes the requests; nil uses a client with a 10 s timeout.
	HTTP *http.Client
}

// OAuthError is GitHub's refusal of a code exchange (bad_verification_code, incorrect_client_credentials,
// redirect_uri_mismatch, ...).
type OAuthError struct {
	Code        string
	Description string
}

func (e *OAuthError) Error() string {
	return fmt.Sprintf("GitHub refused the sign-in: %s (%s)", e.Code, e.Description)
}

func (o *OAuth) web() string {
	if o.WebURL == "" {
		return DefaultWebURL
	}
	return strings.TrimSuffix(o.WebURL, "/")
}

func (o *OAuth) http() *http.Client {
	if o.HTTP == nil {
		return &http.Client{Timeout: oauthTimeout}
	}
	return o.HTTP
}

// AuthorizeURL is where to send the browser to sign in: GitHub asks the user to authorize the App
// (once), then redirects to redirectURI with a code and the state given here.
func (o *OAuth) AuthorizeURL(redirectURI, state string) string {
	q := url.Values{"client_id": {o.ClientID}, "redirect_uri": {redirectURI}, "state": {state}}
	return o.web() + "/login/oauth/authorize?" + q.Encode()
}

// Exchange trades the code GitHub gave the browser for the user's access token. redirectURI must be
// the one the sign-in started with.
func (o *OAuth) Exchange(ctx context.Context, code, redirectURI string) (string, error) {
	form := url.Values{"client_id": {o.ClientID}, "client_secret": {o.ClientSecret}, "code": {code}, "redirect_uri": {redirectURI}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.web()+"/login/oauth/access_token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("exchange the sign-in code: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := o.http().Do(req)
	if err != nil {
		return "", fmt.Errorf("exchange the sign-in code: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("exchange the sign-in code: read the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("exchange the sign-in code: GitHub answered %s", resp.Status)
	}
	var out struct {
		AccessToken      string `json:"access_token"`
		TokenType        string `json:"token_type"`
		Error            string `json:"error"`
		ErrorDescription string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return "", fmt.Errorf("exchange the sign-in code: decode the answer: %w", err)
	}
	if out.Error != "" {
		return "", &OAuthError{Code: out.Error, Description: out.ErrorDescription}
	}
	if out.AccessToken == "" || !strings.EqualFold(out.TokenType, "bearer") {
		return "", errors.New("exchange the sign-in code: GitHub's answer has no bearer access token")
	}
	return out.AccessToken, nil
}

// userClient is a Client acting as the user whose token it holds.
func (o *OAuth) userClient(token string) (*github.Client, error) {
	if strings.TrimSpace(token) == "" {
		return nil, errors.New("no user token")
	}
	base, err := baseURL(o.APIURL)
	if err != nil {
		return nil, err
	}
	gh := github.NewClient(o.http()).WithAuthToken(token)
	gh.BaseURL, gh.UploadURL = base, base
	return gh, nil
}

// Login returns the login of the token's user (GET /user).
func (o *OAuth) Login(ctx context.Context, token string) (string, error) {
	gh, err := o.userClient(token)
	if err != nil {
		return "", fmt.Errorf("who signed in: %w", err)
	}
	u, _, err := gh.Users.Get(ctx, "")
	if err != nil {
		return "", fmt.Errorf("who signed in: %w", err)
	}
	if u.GetLogin() == "" {
		return "", errors.New("who signed in: GitHub's answer has no login")
	}
	return u.GetLogin(), nil
}

// repoPermissions is the token's user's permissions on owner/repo as GitHub tells the user (GET
// /repos/{owner}/{repo}, its permissions: admin, maintain, push, triage, pull); nil for a
// repository the user cannot see (404, or 403 when the App is not installed on it).
func (o *OAuth) repoPermissions(ctx context.Context, op, token, owner, repo string) (map[string]bool, error) {
	if err := requireNames(op, "owner", owner, "repo", repo); err != nil {
		return nil, err
	}
	gh, err := o.userClient(token)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	r, _, err := gh.Repositories.Get(ctx, owner, repo)
	if err != nil {
		var e *github.ErrorResponse
		if errors.As(err, &e) && e.Response != nil && (e.Response.StatusCode == http.StatusNotFound || e.Response.StatusCode == http.StatusForbidden) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return r.GetPermissions(), nil
}

// HasPermission reports whether the token's user has at least level (write, maintain, admin) on
// owner/repo, as GitHub tells the user. A repository the user cannot see grants nothing.
func (o *OAuth) HasPermission(ctx context.Context, token, owner, repo, level string) (bool, error) {
	p, err := o.repoPermissions(ctx, fmt.Sprintf("permission of the signed-in user on %s/%s", owner, repo), token, owner, repo)
	if err != nil {
		return false, err
	}
	has := PermissionNone
	for _, l := range []struct {
		key  string
		role Permission
	}{{"admin", PermissionAdmin}, {"maintain", PermissionMaintain}, {"push", PermissionWrite}, {"triage", PermissionTriage}, {"pull", PermissionRead}} {
		if p[l.key] {
			has = l.role
			break
		}
	}
	return has.AtLeast(Permission(level)), nil
}

// RepoAccess reports whether the token's user can read owner/repo and push to it, as GitHub tells
// the user. A repository the user cannot see is neither.
func (o *OAuth) RepoAccess(ctx context.Context, token, owner, repo string) (read, write bool, err error) {
	p, err := o.repoPermissions(ctx, fmt.Sprintf("access of the signed-in user to %s/%s", owner, repo), token, owner, repo)
	if err != nil {
		return false, false, err
	}
	write = p["push"] || p["maintain"] || p["admin"]
	return write || p["pull"] || p["triage"], write, nil
}
