package core

import "github.com/latestwins/latestwins/internal/appport"

// The types the App's ports speak. They are defined in internal/appport so that the adapters that
// reach GitHub (internal/ghadapter) implement the ports without depending on this package.
type (
	// RepoRef names a repository.
	RepoRef = appport.RepoRef
	// DispatchRequest asks for one workflow_dispatch.
	DispatchRequest = appport.DispatchRequest
	// Comparison is what GitHub's compare API says about two commits: their order, the files changed.
	Comparison = appport.Comparison
	// CommentRef names a comment on a pull request, and the installation to answer it as.
	CommentRef = appport.CommentRef
	// ProtectionRun is the workflow run a deployment protection rule asks about.
	ProtectionRun = appport.ProtectionRun
	// ProtectionAnswer approves or rejects a deployment protection rule.
	ProtectionAnswer = appport.ProtectionAnswer
	// RefreshingError says that another process refreshes a configuration file; it comes beside
	// the cached copy, which the App then uses.
	RefreshingError = appport.RefreshingError
	// UnavailableConfigError says that GitHub did not give a configuration file (retryable: 503).
	UnavailableConfigError = appport.UnavailableConfigError
	// MissingConfigError says that a repository has no configuration file.
	MissingConfigError = appport.MissingConfigError
)

// Categories of the configuration source's errors.
var (
	ErrRefreshInProgress = appport.ErrRefreshInProgress
	ErrConfigUnavailable = appport.ErrConfigUnavailable
	// ErrNotInstalled is what an InstallationFinder answers for a repository without the App.
	ErrNotInstalled = appport.ErrNotInstalled
)

// ReactionEyes is the reaction the App adds to a comment command it runs.
const ReactionEyes = "eyes"

func OrDefaultBranch(ref string) string { return appport.OrDefaultBranch(ref) }
