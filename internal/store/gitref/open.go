package gitref

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// TokenVar is the environment variable whose value, when set, is sent as the password of basic
// auth to a git server over HTTP.
const TokenVar = "LATESTWINS_GIT_TOKEN"

// ErrBadURL: the store URL is not one this package opens.
var ErrBadURL = errors.New("not a git store URL")

// Open returns a Store on the repository raw names: git+file:///ABS/PATH.git (a local bare
// repository, through git's programs on the PATH), git+https://HOST/PATH.git and
// git+http://HOST/PATH.git (smart HTTP; getenv(TokenVar) is the token, if any), or
// github://OWNER/REPO (smart HTTP to GitHub's git host, see NewGitHubTransport). The repository
// must exist; the Store writes only under Namespace.
func Open(raw string, getenv func(string) string, opts ...Option) (*Store, error) {
	tr, err := ParseURL(raw, getenv)
	if err != nil {
		return nil, err
	}
	return New(tr, opts...), nil
}

// ParseURL returns the transport raw names (see Open).
func ParseURL(raw string, getenv func(string) string) (Transport, error) {
	if strings.HasPrefix(raw, GitHubScheme+"://") {
		return NewGitHubTransport(raw, getenv, nil)
	}
	rest, ok := strings.CutPrefix(raw, "git+")
	if !ok {
		return nil, fmt.Errorf("store %q: %w: use github://OWNER/REPO, git+file:///ABS/PATH.git or git+https://HOST/OWNER/REPO.git", shown(raw), ErrBadURL)
	}
	u, err := url.Parse(rest)
	if err != nil {
		return nil, fmt.Errorf("store %q: %w: %w", shown(raw), ErrBadURL, err)
	}
	switch u.Scheme {
	case "file":
		if u.Host != "" || !path.IsAbs(u.Path) || u.RawQuery != "" {
			return nil, fmt.Errorf("store %q: %w: a local repository is git+file:///ABS/PATH.git (an absolute path, no host)", shown(raw), ErrBadURL)
		}
		return NewFileTransport(u.Path)
	case "http", "https":
		if u.Host == "" || u.User != nil || u.RawQuery != "" {
			return nil, fmt.Errorf("store %q: %w: give git+https://HOST/OWNER/REPO.git, without credentials in the URL (set %s)", shown(raw), ErrBadURL, TokenVar)
		}
		return NewHTTPTransport(rest, getenv(TokenVar), nil)
	}
	return nil, fmt.Errorf("store %q: %w: unknown transport %q; use git+file, git+https or github://OWNER/REPO", shown(raw), ErrBadURL, u.Scheme)
}

// shown is a store URL as an error may show it: without the credentials (what comes before an '@'
// in its host part) or the query a user may have put in it.
func shown(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	host, path := rest, ""
	if i := strings.Index(rest, "/"); i >= 0 {
		host, path = rest[:i], rest[i:]
	}
	if j := strings.LastIndex(host, "@"); j >= 0 {
		host = "REDACTED@" + host[j+1:]
	}
	if k := strings.IndexAny(path, "?#"); k >= 0 {
		path = path[:k] + "?REDACTED"
	} else if k := strings.IndexAny(host, "?#"); k >= 0 {
		host = host[:k] + "?REDACTED"
	}
	return scheme + "://" + host + path
}
