package ghadapter

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

	"github.com/latestwins/latestwins/internal/appport"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp"
)

// Defaults of Files.
const (
	// DefaultConfigTTL is how long a configuration file read from GitHub is used before it is read
	// again.
	DefaultConfigTTL = time.Minute
	// configRefreshLease bounds a refresh: a refresher that dies frees the repository after this.
	configRefreshLease = 30 * time.Second
)

// Files reads repositories' .github/latestwins.yml from GitHub, as an installation of the
// App: the trusted file in its repository, and each repository's own file, which may narrow its
// scopes (see app.TrustedConfig). The result for a repository at a ref (the file's bytes, or a missing
// file) is kept for TTL; expired results are dropped as new ones are stored, so the cache holds at
// most the refs read within one TTL.
//
// Reads are deduplicated (spec guarantee 10) without refusing anyone. Within a process, callers
// asking for the same installation, repository and ref while a read is in flight wait for that read
// and share its result. Across the processes sharing the store, a read takes the named lease
// config-refresh/OWNER/REPO; a process that finds it held uses its own cached copy of that ref, with
// a *RefreshingError, instead of calling GitHub. A process with no copy of that ref reads it itself:
// there is no cache shared between processes to wait for, and the delivery must not be turned away.
type Files struct {
	installations Installations
	auth          *authority.Authority
	ttl           time.Duration
	log           *slog.Logger
	id            string
	seq           atomic.Int64

	mu      sync.Mutex
	cache   map[configKey]cachedConfig
	flights map[flightKey]*flight

	// Joined, when set before the first read, is called by each caller that waits for a read already
	// in flight (tests use it to know that a caller waits).
	Joined func()
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

// NewFiles reads files through installations, deduplicating refreshes with auth's named
// leases. ttl <= 0 means DefaultConfigTTL; a nil logger discards.
func NewFiles(installations Installations, auth *authority.Authority, ttl time.Duration, log *slog.Logger) (*Files, error) {
	if installations == nil || auth == nil {
		return nil, errors.New("ghadapter: Files needs installations and an Authority")
	}
	if ttl <= 0 {
		ttl = DefaultConfigTTL
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("ghadapter: holder id: %w", err)
	}
	return &Files{installations: installations, auth: auth, ttl: ttl, log: log,
		id: "config-" + hex.EncodeToString(b[:]), cache: map[configKey]cachedConfig{}, flights: map[flightKey]*flight{}}, nil
}

// File returns the repository's .github/latestwins.yml at ref (the default branch when ref is
// empty): the cached copy of that ref while it is fresh, else the result of one read of the file at
// ref, shared with every caller asking for it meanwhile. The wait for it ends with ctx; the read
// itself goes on for the others, bounded by the refresh lease. A missing file is a
// *MissingConfigError; a read that GitHub did not answer is an *UnavailableConfigError; a
// *RefreshingError comes beside the cached copy, which the caller may use. Errors are left for the
// caller to prefix with the repository and ref.
func (g *Files) File(ctx context.Context, installation int64, repo appport.RepoRef, ref string) ([]byte, error) {
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
	joined := g.Joined
	g.mu.Unlock()
	if waiting && joined != nil {
		joined()
	}
	select {
	case <-f.done:
		return f.body, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the read of %s in flight: %w", appport.ConfigPath, context.Cause(ctx))
	}
}

// fly makes the read of f and hands its result to the callers waiting for it. What it read is
// cached in the same critical section that ends the flight, so a later caller finds either the
// flight or the result, never neither.
func (g *Files) fly(ctx context.Context, key flightKey, repo appport.RepoRef, f *flight) {
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
func (g *Files) refresh(ctx context.Context, key flightKey, repo appport.RepoRef) (body []byte, keep bool, err error) {
	holder := fmt.Sprintf("%s-%d", g.id, g.seq.Add(1))
	lease, err := g.auth.Acquire(ctx, "config-refresh/"+key.repo, holder, "config refresh", configRefreshLease)
	var held *authority.HeldError
	switch {
	case errors.As(err, &held):
		if stale, ok := g.cached(key.configKey); ok && stale.err == nil {
			g.log.InfoContext(ctx, "configuration refresh in progress elsewhere: using the cached copy",
				"repo", repo.String(), "ref", key.ref, "holder", held.Holder)
			return stale.body, false, &appport.RefreshingError{Repo: repo, Holder: held.Holder, RetryAfter: held.RetryAfter}
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
		return nil, false, &appport.UnavailableConfigError{Repo: repo, Ref: key.ref, Err: err}
	}
	return body, true, err
}

func (g *Files) cached(key configKey) (cachedConfig, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.cache[key]
	return c, ok
}

// storeLocked keeps c under key and drops the expired entries of other keys. g.mu is held.
func (g *Files) storeLocked(key configKey, c cachedConfig) {
	for k, old := range g.cache {
		if c.at.Sub(old.at) >= g.ttl {
			delete(g.cache, k)
		}
	}
	g.cache[key] = c
}

// cachedEntries is how many results the cache holds.
func (g *Files) cachedEntries() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.cache)
}

// maxConfigFile bounds a configuration file read from GitHub: far above any real one (64 scopes per
// environment), far below what would strain the cache.
const maxConfigFile = 1 << 20

func (g *Files) read(ctx context.Context, installation int64, repo appport.RepoRef, ref string) ([]byte, error) {
	c, err := g.installations.Client(installation)
	if err != nil {
		return nil, err
	}
	b, err := c.FileContent(ctx, repo.Owner, repo.Name, appport.ConfigPath, ref)
	if errors.Is(err, githubapp.ErrNotFound) {
		return nil, &appport.MissingConfigError{Repo: repo, Ref: ref, Err: err}
	}
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigFile {
		return nil, &authority.InputError{Field: appport.ConfigPath, Value: fmt.Sprintf("%s at %s, %d bytes", repo, appport.OrDefaultBranch(ref), len(b)),
			Fix: fmt.Sprintf("keep the file under %d bytes", maxConfigFile)}
	}
	return b, nil
}
