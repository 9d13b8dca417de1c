package gitref

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
)

// The github:// store reaches a repository on GitHub (or GitHub Enterprise Server) through git's
// smart HTTP protocol, with the variables a workflow job has.
const (
	// GitHubTokenVar is the token sent when TokenVar is unset: a workflow's GITHUB_TOKEN (which
	// the job's env must pass: GITHUB_TOKEN: ${{ github.token }}).
	GitHubTokenVar = "GITHUB_TOKEN"
	// ServerURLVar names the GitHub server whose git host holds the repository.
	ServerURLVar = "GITHUB_SERVER_URL"
	// DefaultServerURL is the server when ServerURLVar is unset.
	DefaultServerURL = "https://github.com"
	// GitHubScheme is the URL scheme: github://OWNER/REPO.
	GitHubScheme = "github"
)

// ErrNoToken: a github:// store was named without a token to send. GitHub takes no anonymous
// pushes, and the store pushes on its first write.
var ErrNoToken = errors.New("no token for GitHub")

var (
	// ownerName is a GitHub account or organisation: letters, digits and single hyphens inside
	// (underscores too, which GitHub Enterprise Server gives accounts made by single sign-on).
	ownerName = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9_]|-[A-Za-z0-9_])*$`)
	// repoName is a GitHub repository's name.
	repoName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
)

// GitHubRepo is the OWNER/REPO a github:// URL names, validated as GitHub spells them.
func GitHubRepo(raw string) (owner, repo string, err error) {
	rest, ok := strings.CutPrefix(raw, GitHubScheme+"://")
	if !ok {
		return "", "", fmt.Errorf("store %q: %w: a GitHub repository is github://OWNER/REPO", shown(raw), ErrBadURL)
	}
	owner, repo, ok = strings.Cut(strings.TrimSuffix(rest, "/"), "/")
	bad := func(why string) error {
		return fmt.Errorf("store %q: %w: %s; give github://OWNER/REPO, e.g. github://octo-org/deploy-state", shown(raw), ErrBadURL, why)
	}
	switch {
	case strings.ContainsAny(rest, "?#@:"):
		return "", "", bad("no query, credentials or port: the token comes from " + TokenVar + " or " + GitHubTokenVar + " and the host from " + ServerURLVar)
	case !ok || owner == "" || repo == "":
		return "", "", bad("it names no repository")
	case strings.Contains(repo, "/"):
		return "", "", bad("a repository is two names, OWNER/REPO, not a path")
	case len(owner) > 39 || !ownerName.MatchString(owner):
		return "", "", bad(fmt.Sprintf("owner %q is not a GitHub account name (letters, digits and single hyphens inside, at most 39)", owner))
	}
	repo = strings.TrimSuffix(repo, ".git")
	if len(repo) > 100 || !repoName.MatchString(repo) || repo == "." || repo == ".." {
		return "", "", bad(fmt.Sprintf("repository %q is not a GitHub repository name (letters, digits, '.', '-' and '_', at most 100)", repo))
	}
	return owner, repo, nil
}

// NewGitHubTransport reaches github://OWNER/REPO (raw) on the git host of getenv(ServerURLVar)
// (DefaultServerURL when unset), sending getenv(TokenVar), or else getenv(GitHubTokenVar), as
// GitHub takes a token over git: basic auth with the user x-access-token. client nil is
// http.DefaultClient. The token appears in no error.
func NewGitHubTransport(raw string, getenv func(string) string, client *http.Client) (Transport, error) {
	owner, repo, err := GitHubRepo(raw)
	if err != nil {
		return nil, err
	}
	server := strings.TrimSuffix(getenv(ServerURLVar), "/")
	if server == "" {
		server = DefaultServerURL
	}
	su, err := url.Parse(server)
	if err != nil || su.Scheme != "https" && su.Scheme != "http" || su.Host == "" || su.User != nil || su.RawQuery != "" || su.Fragment != "" {
		return nil, fmt.Errorf("store %q: %w: %s=%q is not a server address: give one such as %s (a GitHub Enterprise Server's https://HOST), or unset it",
			shown(raw), ErrBadURL, ServerURLVar, server, DefaultServerURL)
	}
	token, from := getenv(TokenVar), TokenVar
	if token == "" {
		token, from = getenv(GitHubTokenVar), GitHubTokenVar
	}
	if token == "" {
		return nil, fmt.Errorf("store %q: %w: set %s (or %s) to a token that may push to %s/%s; in a workflow, give the job permissions: contents: write and "+
			"env: GITHUB_TOKEN: ${{ github.token }} (the Action passes its github-token input), or for another repository than the workflow's a token "+
			"with contents: write on it in %s", raw, ErrNoToken, TokenVar, GitHubTokenVar, owner, repo, TokenVar)
	}
	tr, err := NewHTTPTransport(server+"/"+owner+"/"+repo+".git", token, client)
	if err != nil {
		return nil, fmt.Errorf("store %q: %w", raw, err)
	}
	pt := tr.(*packTransport)
	pt.explain = gitHubErrors(owner+"/"+repo, su.Host, from)
	return pt, nil
}

// AccessError is GitHub's refusal of the token or the repository: retrying cannot cure it, a change
// of the token or the job's permissions does. Its text says which.
type AccessError struct{ Err error }

func (e *AccessError) Error() string { return e.Err.Error() }
func (e *AccessError) Unwrap() error { return e.Err }

// AccessDenied marks the error for callers that cannot import this package (the Action's step
// reports it as an error to fix, not a retryable one).
func (e *AccessError) AccessDenied() bool { return true }

// gitHubErrors says what to fix when GitHub refuses the token or the repository.
func gitHubErrors(repo, host, from string) func(error) error {
	explain := gitHubWords(repo, host, from)
	return func(err error) error {
		if e := explain(err); e != err {
			return &AccessError{Err: e}
		}
		return err
	}
}

func gitHubWords(repo, host, from string) func(error) error {
	return func(err error) error {
		switch {
		case errors.Is(err, transport.ErrAuthenticationRequired):
			return fmt.Errorf("%s refused the token in %s (expired, revoked or not a token): set %s or %s to a valid one: %w",
				host, from, TokenVar, GitHubTokenVar, err)
		case errors.Is(err, transport.ErrAuthorizationFailed):
			return fmt.Errorf("the token in %s may not write to %s: give the job permissions: contents: write, or for another repository "+
				"than the workflow's set %s to a token with contents: write on %s: %w", from, repo, TokenVar, repo, err)
		case errors.Is(err, transport.ErrRepositoryNotFound):
			return fmt.Errorf("%s has no repository %s that the token in %s may read (a workflow's own token reaches only its repository: "+
				"for another one set %s to a token with contents: write on it): %w", host, repo, from, TokenVar, err)
		}
		return err
	}
}
