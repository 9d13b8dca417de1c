// Package appport holds the types the GitHub App's ports speak: the requests the App makes of
// GitHub and the errors its configuration source answers with. Package app names them as its own
// (type aliases), and the adapters that reach GitHub (internal/ghadapter) implement the ports
// without depending on the App, so that either can be tested with the other.
package appport

import (
	"errors"
	"fmt"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// ConfigPath is where a repository keeps its .github/latestwins.yml.
const ConfigPath = ".github/latestwins.yml"

// RepoRef names a repository.
type RepoRef struct {
	Owner string `json:"owner"`
	Name  string `json:"name"`
}

// String is OWNER/NAME.
func (r RepoRef) String() string { return r.Owner + "/" + r.Name }

// DispatchRequest asks for one workflow_dispatch.
type DispatchRequest struct {
	Installation int64             `json:"installation,omitempty"`
	Repo         RepoRef           `json:"repo"`
	Workflow     string            `json:"workflow"`
	Ref          string            `json:"ref"`    // the branch to run on
	Inputs       map[string]string `json:"inputs"` // environment, generation, scopes
}

// Comparison is what GitHub's compare API says about two commits of a repository.
type Comparison struct {
	// Order is how head relates to base: ahead (newer), behind (older), identical or diverged.
	Order authority.CommitOrder
	// Files are the paths changed from base to head (a renamed file under both names); nil when
	// they are not all known (GitHub lists at most 300).
	Files []string
}

// CommentRef names a comment on a pull request, and the installation to answer it as.
type CommentRef struct {
	Installation int64
	Repo         RepoRef
	Number       int   // the pull request
	CommentID    int64 // the comment
}

// ProtectionRun is the workflow run a deployment protection rule asks about.
type ProtectionRun struct {
	Repo  RepoRef
	RunID int64
}

// ProtectionAnswer approves or rejects a deployment protection rule for one GitHub environment.
type ProtectionAnswer struct {
	Environment string // the GitHub environment, as the event names it
	Approved    bool
	Comment     string // why; GitHub shows it with the job
}

// ErrNotInstalled says that the App has no installation on a repository.
var ErrNotInstalled = errors.New("GitHub App not installed")

// ErrRefreshInProgress is the category of *RefreshingError: retryable.
var ErrRefreshInProgress = errors.New("configuration refresh in progress")

// RefreshingError says that another process refreshes the repository's configuration file, so this
// one did not call GitHub. It comes beside the cached copy: the caller may go on with that copy.
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

// UnavailableConfigError says that GitHub did not give a configuration file: it could not be
// reached, it failed, or it refused the read (a rate limit, say). Nothing was decided from it: the
// delivery can be retried once GitHub answers.
type UnavailableConfigError struct {
	Repo RepoRef
	Ref  string
	Err  error
}

func (e *UnavailableConfigError) Error() string {
	return fmt.Sprintf("GitHub did not give %s (retry once it answers): %v", ConfigPath, e.Err)
}

// Is matches ErrConfigUnavailable.
func (e *UnavailableConfigError) Is(target error) bool { return target == ErrConfigUnavailable }

func (e *UnavailableConfigError) Unwrap() error { return e.Err }

// ErrMissingConfig is the category of *MissingConfigError.
var ErrMissingConfig = errors.New("configuration file missing")

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
		"or start latestwins with --config-repo OWNER/REPO or --config PATH naming where they are", e.Repo, ConfigPath, OrDefaultBranch(e.Ref))
}

// Is matches ErrMissingConfig and authority.ErrInvalidInput.
func (e *MissingConfigError) Is(target error) bool {
	return target == ErrMissingConfig || target == authority.ErrInvalidInput
}

func (e *MissingConfigError) Unwrap() error { return e.Err }

// OrDefaultBranch is ref, or "the default branch" when it is empty.
func OrDefaultBranch(ref string) string {
	if ref == "" {
		return "the default branch"
	}
	return ref
}
