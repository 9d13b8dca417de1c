package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/githubapp"
)

// Defaults of GitHubConfig.
const (
	// DefaultConfigTTL is how long a repository's configuration read from GitHub is used before it is
	// read again.
	DefaultConfigTTL = time.Minute
	// configRefreshLease bounds a refresh: a refresher that dies frees the repository after this.
	configRefreshLease = 30 * time.Second
)

// ErrRefreshInProgress is the category of *RefreshingError: retryable.
var ErrRefreshInProgress = errors.New("configuration refresh in progress")

// RefreshingError says that another refresh of the repository's configuration is under way, so this
// one did not call GitHub. GitHubConfig returns it alone when it has no copy yet, and beside the cached
// copy when it has one: the caller may go on with that copy.
type RefreshingError struct {
	Repo       RepoRef
	Holder     string
	RetryAfter time.Duration // whole seconds, at least one
}

func (e *RefreshingError) Error() string {
	return fmt.Sprintf("refresh in progress (by %s); retry after %s", e.Holder, e.RetryAfter)
}

// Is matches ErrRefreshInProgress.
func (e *RefreshingError) Is(target error) bool { return target == ErrRefreshInProgress }

// MissingConfigError says that a repository has no .github/latestwins.yml. It is bad configuration
// (errors.Is(err, authority.ErrInvalidInput)): nothing is accepted until the file is added.
type MissingConfigError struct {
	Repo RepoRef
	Ref  string
	Err  error
}

func (e *MissingConfigError) Error() string {
	return fmt.Sprintf("%s has no %s at %s: add one (see docs/config.md) naming the environments and scopes it deploys, "+
		"or uninstall the App from the repository", e.Repo, config.Path, orDefaultBranch(e.Ref))
}

// Is matches authority.ErrInvalidInput.
func (e *MissingConfigError) Is(target error) bool { return target == authority.ErrInvalidInput }

func (e *MissingConfigError) Unwrap() error { return e.Err }

func orDefaultBranch(ref string) string {
	if ref == "" {
		return "the default branch"
	}
	return ref
}

// GitHubConfig is a ConfigSource reading each repository's .github/latestwins.yml from GitHub, as
// the installation of the delivery. The result for a repository at a ref (a configuration, a missing
// file or an invalid one) is kept for TTL; expired results are dropped as new ones are stored, so the
// cache holds at most the refs read within one TTL. Refreshes are deduplicated across every process sharing the store
// (spec guarantee 10): a refresh takes the named lease config-refresh/OWNER/REPO, and a refresh that
// finds it held makes no GitHub call but returns the cached copy with a *RefreshingError.
type GitHubConfig struct {
	installations Installations
	auth          *authority.Authority
	ttl           time.Duration
	log           *slog.Logger
	id            string
	seq           atomic.Int64

	mu    sync.Mutex
	cache map[configKey]cachedConfig
}

// configKey names one cached read: the repository (lower case) and the ref it was read at.
type configKey struct{ repo, ref string }

type cachedConfig struct {
	cfg *config.Config
	err error // a terminal error (missing or invalid file), cached like a configuration
	at  time.Time
}

var _ ConfigSource = (*GitHubConfig)(nil)

// NewGitHubConfig reads configurations through installations, deduplicating refreshes with auth's
// named leases. ttl <= 0 means DefaultConfigTTL; a nil logger discards.
func NewGitHubConfig(installations Installations, auth *authority.Authority, ttl time.Duration, log *slog.Logger) (*GitHubConfig, error) {
	if installations == nil || auth == nil {
		return nil, errors.New("app: GitHubConfig needs installations and an Authority")
	}
	if ttl <= 0 {
		ttl = DefaultConfigTTL
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("app: holder id: %w", err)
	}
	return &GitHubConfig{installations: installations, auth: auth, ttl: ttl, log: log,
		id: "config-" + hex.EncodeToString(b[:]), cache: map[configKey]cachedConfig{}}, nil
}

// Config returns the repository's configuration at ref: the cached copy of that ref while it is
// fresh, else one read of the file at ref. Errors are left for the caller to prefix with the
// repository and ref. Refreshes of one repository, at any ref, share one lease (a lease per commit
// would leave a record in the store for every commit ever read): a refresh that finds it held has
// only this ref's cached copy to offer.
func (g *GitHubConfig) Config(ctx context.Context, installation int64, repo RepoRef, ref string) (*config.Config, error) {
	key := configKey{repo: strings.ToLower(repo.String()), ref: ref}
	cached, ok := g.cached(key)
	if ok && g.auth.Now().Sub(cached.at) < g.ttl {
		return cached.cfg, cached.err
	}
	holder := fmt.Sprintf("%s-%d", g.id, g.seq.Add(1))
	lease, err := g.auth.Acquire(ctx, "config-refresh/"+key.repo, holder, "config refresh", configRefreshLease)
	var held *authority.HeldError
	if errors.As(err, &held) {
		refreshing := &RefreshingError{Repo: repo, Holder: held.Holder, RetryAfter: held.RetryAfter}
		g.log.InfoContext(ctx, "configuration refresh in progress elsewhere", "repo", repo.String(), "holder", held.Holder, "cached", ok)
		if ok && cached.cfg != nil {
			return cached.cfg, refreshing
		}
		if ok {
			return nil, cached.err
		}
		return nil, refreshing
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := g.auth.ReleaseNamed(context.WithoutCancel(ctx), lease); err != nil {
			g.log.WarnContext(ctx, "release configuration refresh lease", "repo", repo.String(), "err", err)
		}
	}()
	cfg, err := g.read(ctx, installation, repo, ref)
	var terminal bool
	if err != nil {
		terminal = errors.Is(err, authority.ErrInvalidInput)
		if !terminal {
			return nil, err // transient (GitHub unreachable, rate limited): not cached
		}
	}
	g.store(key, cachedConfig{cfg: cfg, err: err, at: g.auth.Now()})
	return cfg, err
}

// Installation finds the App's installation on repo, for requests that name none (the API's OIDC
// tokens carry no installation id). A repository without the App is an error matching
// githubapp.ErrNotInstalled.
func (g *GitHubConfig) Installation(ctx context.Context, repo RepoRef) (int64, error) {
	f, ok := g.installations.(InstallationFinder)
	if !ok {
		return 0, fmt.Errorf("find the App's installation on %s: these installations cannot look one up", repo)
	}
	return f.ForRepo(ctx, repo.Owner, repo.Name)
}

func (g *GitHubConfig) cached(key configKey) (cachedConfig, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.cache[key]
	return c, ok
}

// store keeps c under key and drops the expired entries of other keys.
func (g *GitHubConfig) store(key configKey, c cachedConfig) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, old := range g.cache {
		if c.at.Sub(old.at) >= g.ttl {
			delete(g.cache, k)
		}
	}
	g.cache[key] = c
}

// cachedEntries is how many results the cache holds.
func (g *GitHubConfig) cachedEntries() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.cache)
}

func (g *GitHubConfig) read(ctx context.Context, installation int64, repo RepoRef, ref string) (*config.Config, error) {
	c, err := g.installations.Client(installation)
	if err != nil {
		return nil, err
	}
	b, err := c.FileContent(ctx, repo.Owner, repo.Name, config.Path, ref)
	if errors.Is(err, githubapp.ErrNotFound) {
		return nil, &MissingConfigError{Repo: repo, Ref: ref, Err: err}
	}
	if err != nil {
		return nil, err
	}
	return config.Parse(b)
}
