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

// Defaults of GitHubFiles.
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
// one did not call GitHub. GitHubFiles returns it alone when it has no copy yet, and beside the cached
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

// ErrConfigUnavailable is the category of *UnavailableConfigError: retryable.
var ErrConfigUnavailable = errors.New("configuration unavailable from GitHub")

// UnavailableConfigError says that GitHub did not give the repository's configuration: it could not
// be reached, it failed, or it refused the read (a rate limit, say). Nothing was decided from it: the
// delivery can be retried once GitHub answers.
type UnavailableConfigError struct {
	Repo RepoRef
	Ref  string
	Err  error
}

func (e *UnavailableConfigError) Error() string {
	return fmt.Sprintf("GitHub did not give %s (retry once it answers): %v", config.Path, e.Err)
}

// Is matches ErrConfigUnavailable.
func (e *UnavailableConfigError) Is(target error) bool { return target == ErrConfigUnavailable }

func (e *UnavailableConfigError) Unwrap() error { return e.Err }

// MissingConfigError says that a repository has no .github/latestwins.yml. A repository's own file
// is optional; the trusted file is not: without it no environment is defined. It is bad
// configuration (errors.Is(err, authority.ErrInvalidInput)): nothing is accepted until the file is
// added.
type MissingConfigError struct {
	Repo RepoRef
	Ref  string
	Err  error
}

func (e *MissingConfigError) Error() string {
	return fmt.Sprintf("%s has no %s at %s: environments are defined there; add it (see docs/config.md), "+
		"or start latestwins with --config-repo OWNER/REPO or --config PATH naming where they are", e.Repo, config.Path, orDefaultBranch(e.Ref))
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

// GitHubFiles reads repositories' .github/latestwins.yml from GitHub, as an installation of the
// App: the trusted file in its repository, and each repository's own file, which may narrow its
// scopes (see TrustedConfig). The result for a repository at a ref (the file's bytes, or a missing
// file) is kept for TTL; expired results are dropped as new ones are stored, so the cache holds at
// most the refs read within one TTL.
//
// Reads are deduplicated (spec guarantee 10) without refusing anyone. Within a process, callers
// asking for the same installation, repository and ref while a read is in flight wait for that read
// and share its result. Across the processes sharing the store, a read takes the named lease
// config-refresh/OWNER/REPO; a process that finds it held uses its own cached copy of that ref, with
// a *RefreshingError, instead of calling GitHub. A process with no copy of that ref reads it itself:
// there is no cache shared between processes to wait for, and the delivery must not be turned away.
type GitHubFiles struct {
	installations Installations
	auth          *authority.Authority
	ttl           time.Duration
	log           *slog.Logger
	id            string
	seq           atomic.Int64

	mu      sync.Mutex
	cache   map[configKey]cachedConfig
	flights map[flightKey]*flight

	// joined, when set, is called by each caller that waits for a read already in flight.
	joined func()
}

// configKey names one cached read: the repository (lower case) and the ref it was read at.
type configKey struct{ repo, ref string }

type cachedConfig struct {
	body []byte
	err  error // a terminal error (a missing file), cached like a file
	at   time.Time
}

// flightKey names one read in flight: the cached read it makes, as an installation.
type flightKey struct {
	installation int64
	configKey
}

// flight is one read shared by the callers that asked for it while it ran. body and err are set
// before done is closed.
type flight struct {
	done chan struct{}
	body []byte
	err  error
}

// NewGitHubFiles reads files through installations, deduplicating refreshes with auth's named
// leases. ttl <= 0 means DefaultConfigTTL; a nil logger discards.
func NewGitHubFiles(installations Installations, auth *authority.Authority, ttl time.Duration, log *slog.Logger) (*GitHubFiles, error) {
	if installations == nil || auth == nil {
		return nil, errors.New("app: GitHubFiles needs installations and an Authority")
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
	return &GitHubFiles{installations: installations, auth: auth, ttl: ttl, log: log,
		id: "config-" + hex.EncodeToString(b[:]), cache: map[configKey]cachedConfig{}, flights: map[flightKey]*flight{}}, nil
}

// File returns the repository's .github/latestwins.yml at ref (the default branch when ref is
// empty): the cached copy of that ref while it is fresh, else the result of one read of the file at
// ref, shared with every caller asking for it meanwhile. The wait for it ends with ctx; the read
// itself goes on for the others, bounded by the refresh lease. A missing file is a
// *MissingConfigError; a read that GitHub did not answer is an *UnavailableConfigError; a
// *RefreshingError comes beside the cached copy, which the caller may use. Errors are left for the
// caller to prefix with the repository and ref.
func (g *GitHubFiles) File(ctx context.Context, installation int64, repo RepoRef, ref string) ([]byte, error) {
	key := flightKey{installation: installation, configKey: configKey{repo: strings.ToLower(repo.String()), ref: ref}}
	now := g.auth.Now()
	g.mu.Lock()
	if c, ok := g.cache[key.configKey]; ok && now.Sub(c.at) < g.ttl {
		g.mu.Unlock()
		return c.body, c.err
	}
	f, waiting := g.flights[key]
	if !waiting {
		f = &flight{done: make(chan struct{})}
		g.flights[key] = f
		// The read outlives a caller that stops waiting: the others still want its result.
		go g.fly(context.WithoutCancel(ctx), key, repo, f)
	}
	joined := g.joined
	g.mu.Unlock()
	if waiting && joined != nil {
		joined()
	}
	select {
	case <-f.done:
		return f.body, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the read of %s in flight: %w", config.Path, context.Cause(ctx))
	}
}

// fly makes the read of f and hands its result to the callers waiting for it. What it read is
// cached in the same critical section that ends the flight, so a later caller finds either the
// flight or the result, never neither.
func (g *GitHubFiles) fly(ctx context.Context, key flightKey, repo RepoRef, f *flight) {
	ctx, cancel := context.WithTimeout(ctx, configRefreshLease)
	defer cancel()
	body, keep, err := g.refresh(ctx, key, repo)
	g.mu.Lock()
	defer g.mu.Unlock()
	if keep {
		g.storeLocked(key.configKey, cachedConfig{body: body, err: err, at: g.auth.Now()})
	}
	delete(g.flights, key)
	f.body, f.err = body, err
	close(f.done)
}

// refresh reads the file under the repository's refresh lease. Refreshes of one
// repository, at any ref, share one lease (a lease per commit would leave a record in the store for
// every commit ever read). When another holder has it, this ref's cached configuration is the
// answer, with a *RefreshingError; without one, the file is read all the same. keep says whether
// the result is worth caching: a file or a terminal error read now.
func (g *GitHubFiles) refresh(ctx context.Context, key flightKey, repo RepoRef) (body []byte, keep bool, err error) {
	holder := fmt.Sprintf("%s-%d", g.id, g.seq.Add(1))
	lease, err := g.auth.Acquire(ctx, "config-refresh/"+key.repo, holder, "config refresh", configRefreshLease)
	var held *authority.HeldError
	switch {
	case errors.As(err, &held):
		if stale, ok := g.cached(key.configKey); ok && stale.err == nil {
			g.log.InfoContext(ctx, "configuration refresh in progress elsewhere: using the cached copy",
				"repo", repo.String(), "ref", key.ref, "holder", held.Holder)
			return stale.body, false, &RefreshingError{Repo: repo, Holder: held.Holder, RetryAfter: held.RetryAfter}
		}
		g.log.InfoContext(ctx, "configuration refresh in progress elsewhere, no copy of this ref here: reading it",
			"repo", repo.String(), "ref", key.ref, "holder", held.Holder)
	case err != nil:
		return nil, false, err
	default:
		defer func() {
			// Released even when the read ran out of time: the lease is not left to expire.
			if err := g.auth.ReleaseNamed(context.WithoutCancel(ctx), lease); err != nil {
				g.log.WarnContext(ctx, "release configuration refresh lease", "repo", repo.String(), "err", err)
			}
		}()
	}
	body, err = g.read(ctx, key.installation, repo, key.ref)
	if err != nil && !errors.Is(err, authority.ErrInvalidInput) {
		return nil, false, &UnavailableConfigError{Repo: repo, Ref: key.ref, Err: err}
	}
	return body, true, err
}

func (g *GitHubFiles) cached(key configKey) (cachedConfig, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.cache[key]
	return c, ok
}

// storeLocked keeps c under key and drops the expired entries of other keys. g.mu is held.
func (g *GitHubFiles) storeLocked(key configKey, c cachedConfig) {
	for k, old := range g.cache {
		if c.at.Sub(old.at) >= g.ttl {
			delete(g.cache, k)
		}
	}
	g.cache[key] = c
}

// cachedEntries is how many results the cache holds.
func (g *GitHubFiles) cachedEntries() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.cache)
}

// maxConfigFile bounds a configuration file read from GitHub: far above any real one (64 scopes per
// environment), far below what would strain the cache.
const maxConfigFile = 1 << 20

func (g *GitHubFiles) read(ctx context.Context, installation int64, repo RepoRef, ref string) ([]byte, error) {
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
	if len(b) > maxConfigFile {
		return nil, &authority.InputError{Field: config.Path, Value: fmt.Sprintf("%s at %s, %d bytes", repo, orDefaultBranch(ref), len(b)),
			Fix: fmt.Sprintf("keep the file under %d bytes", maxConfigFile)}
	}
	return b, nil
}
