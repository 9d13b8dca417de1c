// Package configsource holds the App's configuration sources: the trusted file of a deployment,
// narrowed by each repository's own file (Trusted), and one local file for everything (File).
package configsource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
)

// DefaultTrustedRepo is the repository, of the account that owns the App, whose
// .github/latestwins.yml defines the environments when no other trusted place is set.
const DefaultTrustedRepo = ".github"

// Trusted is the ConfigSource of a deployment of the App: one trusted file defines the
// environments, their scopes and the repository and branch that feed each scope, and a repository's
// own .github/latestwins.yml may only narrow its own scopes, as far as the trusted file's
// allowed-overrides lets it (config.Config.Narrow). The trusted file is a file on disk
// (TrustedOptions.Path), or the .github/latestwins.yml on the default branch of one repository
// (TrustedOptions.Repo; by default the .github repository of the account that owns the App), read
// as the App's installation there. So an installation on any repository can feed only the scopes the
// trusted file gives that repository: installing the App is not enough to deploy to production.
type Trusted struct {
	path     string
	repo     core.RepoRef // set, or found from owner on first use
	files    FileReader
	finder   core.InstallationFinder
	appOwner func(ctx context.Context) (string, error)

	mu    sync.Mutex
	found core.RepoRef // the default trusted repository, once the App's owner is known
}

// TrustedOptions configure a Trusted. Path or Files is required.
type TrustedOptions struct {
	// Path is the trusted file on disk (serve --config). When set, Repo and AppOwner are unused.
	Path string
	// Repo is the repository, OWNER/NAME, whose .github/latestwins.yml is the trusted file (serve
	// --config-repo). Empty with no Path: AppOwner's .github.
	Repo string
	// Files reads repository files through GitHub: the trusted file when it comes from a repository,
	// and each repository's own file. Nil: repositories' own files are not read (no App
	// credentials), and Path is required.
	Files FileReader
	// Installations finds the App's installation on the trusted repository; required with Files
	// unless Path is set.
	Installations core.InstallationFinder
	// AppOwner gives the login of the account that owns the App (GitHub's GET /app), for the default
	// Repo; required when neither Path nor Repo is set.
	AppOwner func(ctx context.Context) (string, error)
}

var _ core.ConfigSource = (*Trusted)(nil)

// FileReader reads a repository's .github/latestwins.yml at a ref (the default branch when ref is
// empty), as an installation of the App. A missing file is an error matching
// errors.As(err, new(*MissingConfigError)); a *RefreshingError may come beside a cached copy, which
// is then used; a file GitHub does not give is an *UnavailableConfigError.
type FileReader interface {
	File(ctx context.Context, installation int64, repo core.RepoRef, ref string) ([]byte, error)
}

// NewTrusted checks the options.
func NewTrusted(o TrustedOptions) (*Trusted, error) {
	t := &Trusted{path: o.Path, files: o.Files, finder: o.Installations, appOwner: o.AppOwner}
	switch {
	case o.Path != "" && o.Repo != "":
		return nil, errors.New("the trusted configuration is either a file (--config) or a repository's file (--config-repo), not both")
	case o.Path != "":
		return t, nil
	case o.Files == nil || o.Installations == nil:
		return nil, errors.New("no trusted configuration: give a file (--config PATH), or the App's credentials so that a repository's file can be read")
	case o.Repo != "":
		r, err := core.ParseRepo(o.Repo)
		if err != nil {
			return nil, fmt.Errorf("trusted configuration repository: %w", err)
		}
		t.repo = r
	case o.AppOwner == nil:
		return nil, errors.New("no trusted configuration repository: give --config-repo OWNER/REPO")
	}
	return t, nil
}

// Where names the trusted file for messages: its path, or OWNER/REPO:.github/latestwins.yml (with
// OWNER/.github when the App's owner is not known yet).
func (t *Trusted) Where() string {
	if t.path != "" {
		return t.path
	}
	r := t.repo
	if r == (core.RepoRef{}) {
		t.mu.Lock()
		r = t.found
		t.mu.Unlock()
	}
	if r == (core.RepoRef{}) {
		r = core.RepoRef{Owner: "OWNER", Name: DefaultTrustedRepo}
	}
	return r.String() + ":" + config.Path
}

// Trusted returns the trusted configuration, as no repository's own file narrows it. A refresh in
// progress elsewhere is not an error: the cached copy is used.
func (t *Trusted) Trusted(ctx context.Context) (*config.Config, error) {
	if t.path != "" {
		return (&File{Path: t.path}).Config(ctx, 0, core.RepoRef{}, "")
	}
	repo, err := t.trustedRepo(ctx)
	if err != nil {
		return nil, err
	}
	inst, err := t.finder.ForRepo(ctx, repo.Owner, repo.Name)
	if errors.Is(err, core.ErrNotInstalled) {
		return nil, &authority.InputError{Field: "trusted configuration", Value: repo.String(),
			Fix: fmt.Sprintf("environments are defined in %s:%s, but the App is not installed on %s: install it there (the App's page on GitHub, Configure), "+
				"or start latestwins with --config-repo OWNER/REPO or --config PATH", repo, config.Path, repo)}
	}
	if err != nil {
		return nil, &core.UnavailableConfigError{Repo: repo, Err: fmt.Errorf("find the App's installation on %s: %w", repo, err)}
	}
	b, err := t.files.File(ctx, inst, repo, "")
	if err != nil && (b == nil || !errors.Is(err, core.ErrRefreshInProgress)) {
		return nil, err
	}
	cfg, err := config.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("the trusted file %s: %w", t.Where(), err)
	}
	return cfg, nil
}

// Config returns the configuration in force for repo at ref: the trusted one, narrowed by repo's own
// file at ref when the delivery names an installation to read it as and the trusted file's
// allowed-overrides lets the repository set something. A repository's file that sets
// what the trusted file does not let it is a *config.NarrowError naming both files.
func (t *Trusted) Config(ctx context.Context, installation int64, repo core.RepoRef, ref string) (*config.Config, error) {
	cfg, err := t.Trusted(ctx)
	if err != nil || t.files == nil || installation == 0 || !cfg.Overridable(repo.String()) {
		// Where the trusted file lets the repository set nothing, its own file is not read at all:
		// a file left from the per-repository form is ignored, not an error.
		return cfg, err
	}
	if t.path == "" {
		if trusted, err := t.trustedRepo(ctx); err == nil && strings.EqualFold(trusted.String(), repo.String()) {
			return cfg, nil // the trusted repository's file is the trusted file
		}
	}
	b, err := t.files.File(ctx, installation, repo, ref)
	switch {
	case errors.Is(err, core.ErrRefreshInProgress) && b != nil:
	case errors.As(err, new(*core.MissingConfigError)):
		return cfg, nil // nothing to narrow
	case err != nil:
		return nil, err
	}
	return cfg.Narrow(repo.String(), b, t.Where())
}

// Environments lists the trusted file's environments other than preview templates, for the status
// page.
func (t *Trusted) Environments(ctx context.Context) ([]string, error) {
	cfg, err := t.Trusted(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range cfg.Environments {
		if !e.Preview() {
			out = append(out, e.Name)
		}
	}
	return out, nil
}

// trustedRepo is the repository of the trusted file: the one set, or the App owner's .github.
func (t *Trusted) trustedRepo(ctx context.Context) (core.RepoRef, error) {
	if t.repo != (core.RepoRef{}) {
		return t.repo, nil
	}
	t.mu.Lock()
	found := t.found
	t.mu.Unlock()
	if found != (core.RepoRef{}) {
		return found, nil
	}
	owner, err := t.appOwner(ctx)
	if err != nil {
		return core.RepoRef{}, &core.UnavailableConfigError{Repo: core.RepoRef{Owner: "OWNER", Name: DefaultTrustedRepo},
			Err: fmt.Errorf("find the account that owns the App, whose %s repository defines the environments (or set --config-repo): %w", DefaultTrustedRepo, err)}
	}
	found = core.RepoRef{Owner: owner, Name: DefaultTrustedRepo}
	t.mu.Lock()
	t.found = found
	t.mu.Unlock()
	return found, nil
}
