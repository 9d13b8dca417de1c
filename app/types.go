package app

import (
	"net/http"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/app/internal/comments"
	"github.com/latestwins/latestwins/app/internal/configsource"
	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/intake"
	"github.com/latestwins/latestwins/app/internal/surfaces"
	"github.com/latestwins/latestwins/app/internal/web"
)

// The App's own types, defined with the actions every door shares (internal/core), under the names
// the App's callers use.
type (
	// ConfigSource gives the configuration in force for a repository at a ref.
	ConfigSource = core.ConfigSource
	// Dispatcher starts workflows.
	Dispatcher = core.Dispatcher
	// Commits orders two commits of a repository when the push payloads cannot.
	Commits = core.Commits
	// InstallationFinder finds the App's installation on a repository.
	InstallationFinder = core.InstallationFinder
	// Conversation answers comment commands: react, reply, check write permission.
	Conversation = comments.Conversation
	// PromotionCompare is the comparer of promotion gates (authority.WithPromotionComparer).
	PromotionCompare = core.PromotionCompare

	// Delivery is one verified webhook delivery.
	Delivery = core.Delivery
	// MalformedError says what is wrong with a signed delivery.
	MalformedError = core.MalformedError
	// ProtectionRuleEvent is a deployment_protection_rule delivery.
	ProtectionRuleEvent = core.ProtectionRuleEvent
	// Result is what Handle did, for the response body and the logs.
	Result = core.Result
	// Outcome names what a delivery caused.
	Outcome = core.Outcome
	// Refusal is an environment's intent refused for a full queue.
	Refusal = core.Refusal
	// IntentInfo is one environment's share of a delivery.
	IntentInfo = core.IntentInfo

	// RepoRef names a repository.
	RepoRef = core.RepoRef
	// DispatchRequest asks for one workflow_dispatch.
	DispatchRequest = core.DispatchRequest
	// Comparison is what GitHub's compare API says about two commits.
	Comparison = core.Comparison
	// CommentRef names a comment on a pull request, and the installation to answer it as.
	CommentRef = core.CommentRef
	// ProtectionRun is the workflow run a deployment protection rule asks about.
	ProtectionRun = core.ProtectionRun
	// ProtectionAnswer approves or rejects a deployment protection rule.
	ProtectionAnswer = core.ProtectionAnswer
	// RefreshingError says that another process refreshes a configuration file.
	RefreshingError = core.RefreshingError
	// UnavailableConfigError says that GitHub did not give a configuration file (retryable: 503).
	UnavailableConfigError = core.UnavailableConfigError
	// MissingConfigError says that a repository has no configuration file.
	MissingConfigError = core.MissingConfigError
)

// Outcomes.
const (
	OutcomeAccepted   = core.OutcomeAccepted
	OutcomeDuplicate  = core.OutcomeDuplicate
	OutcomeNoScopes   = core.OutcomeNoScopes
	OutcomeReleased   = core.OutcomeReleased
	OutcomeRecorded   = core.OutcomeRecorded
	OutcomeUnapproved = core.OutcomeUnapproved
	OutcomeIgnored    = core.OutcomeIgnored
	OutcomeReplied    = core.OutcomeReplied
	OutcomeUnlocked   = core.OutcomeUnlocked
	OutcomeRefused    = core.OutcomeRefused
	OutcomeQueueFull  = core.OutcomeQueueFull
	OutcomeDecided    = core.OutcomeDecided
	OutcomeRolledBack = core.OutcomeRolledBack
	OutcomeUnfrozen   = core.OutcomeUnfrozen
	OutcomePromoted   = core.OutcomePromoted
)

// Categories of errors.
var (
	// ErrMalformed: a correctly signed delivery that cannot be read (400).
	ErrMalformed = core.ErrMalformed
	// ErrRefreshInProgress: another process refreshes a configuration file.
	ErrRefreshInProgress = core.ErrRefreshInProgress
	// ErrConfigUnavailable: GitHub did not give a configuration file.
	ErrConfigUnavailable = core.ErrConfigUnavailable
	// ErrNotInstalled is what an InstallationFinder answers for a repository without the App.
	ErrNotInstalled = core.ErrNotInstalled
)

// ReactionEyes is the reaction the App adds to a comment command it runs.
const ReactionEyes = core.ReactionEyes

// ParseRepo reads OWNER/NAME.
func ParseRepo(full string) (RepoRef, error) { return core.ParseRepo(full) }

// StatusFor maps a Handle error to an HTTP status (core.StatusFor).
func StatusFor(err error) int { return core.StatusFor(err) }

// The configuration sources (internal/configsource).
type (
	// TrustedConfig is the ConfigSource of a deployment of the App: one trusted file defines the
	// environments, and each repository's own file may narrow its scopes.
	TrustedConfig = configsource.Trusted
	// TrustedOptions configure a TrustedConfig.
	TrustedOptions = configsource.TrustedOptions
	// FileReader reads a file of a repository at a ref.
	FileReader = configsource.FileReader
	// FileConfig is a ConfigSource that reads one local file for every repository and ref.
	FileConfig = configsource.File
)

// DefaultTrustedRepo is the repository of the trusted file when none is named.
const DefaultTrustedRepo = configsource.DefaultTrustedRepo

// NewTrustedConfig checks the options (configsource.NewTrusted).
func NewTrustedConfig(o TrustedOptions) (*TrustedConfig, error) { return configsource.NewTrusted(o) }

// ProtectionReviewer answers deployment protection rules, as the installation the event came with.
type ProtectionReviewer = surfaces.ProtectionReviewer

// Outcomes of a deployment_protection_rule delivery.
const (
	OutcomeApproved = surfaces.OutcomeApproved
	OutcomeRejected = surfaces.OutcomeRejected
)

// The /v1 API's tokens (internal/api).
type (
	// TokenVerifier checks a workflow's OIDC token and says which workload it names.
	TokenVerifier = api.TokenVerifier
	// OIDCOptions configure an OIDCVerifier.
	OIDCOptions = api.OIDCOptions
	// OIDCVerifier verifies GitHub Actions OIDC tokens against the issuer's keys.
	OIDCVerifier = api.OIDCVerifier
	// Workload is what a verified token says about the workflow run.
	Workload = api.Workload
	// TokenError says why a token was refused.
	TokenError = api.TokenError
)

// Defaults of OIDCOptions.
const (
	DefaultOIDCIssuer = api.DefaultOIDCIssuer
	DefaultOIDCLeeway = api.DefaultOIDCLeeway
	DefaultKeysTTL    = api.DefaultKeysTTL
)

// ErrTokenRejected matches every refused token.
var ErrTokenRejected = api.ErrTokenRejected

// NewOIDCVerifier checks the options (api.NewOIDCVerifier).
func NewOIDCVerifier(o OIDCOptions) (*OIDCVerifier, error) { return api.NewOIDCVerifier(o) }

// The status page (internal/web).
type (
	// StatusPage says who may see the status page (GET /).
	StatusPage = web.StatusPage
	// SignInOptions configure StatusPageGitHub.
	SignInOptions = web.SignInOptions
	// GitHubSignIn is the App's user sign-in on GitHub; internal/githubapp.OAuth is one.
	GitHubSignIn = web.GitHubSignIn
)

// Status page modes, and the setting that picks one by the listening address.
const (
	StatusPageOff    = web.StatusPageOff
	StatusPageOpen   = web.StatusPageOpen
	StatusPageGitHub = web.StatusPageGitHub
	StatusPageAuto   = web.StatusPageAuto
)

// Defaults and bounds of SignInOptions.
const (
	DefaultSessionTTL  = web.DefaultSessionTTL
	DefaultAccessTTL   = web.DefaultAccessTTL
	MinSessionKeyBytes = web.MinSessionKeyBytes
)

// ErrBadSession: no valid session.
var ErrBadSession = web.ErrBadSession

// ResolveStatusPage reads the status page setting (web.ResolveStatusPage).
func ResolveStatusPage(setting string, loopback bool) (StatusPage, error) {
	return web.ResolveStatusPage(setting, loopback)
}

// LoopbackAddr reports whether a listening address or URL host is loopback only (web.LoopbackAddr).
func LoopbackAddr(hostport string) bool { return web.LoopbackAddr(hostport) }

// Bounds of the webhook intake (internal/intake).
const (
	// DefaultMaxBodyBytes caps a webhook body at GitHub's own cap on a payload, 25 MB.
	DefaultMaxBodyBytes = intake.DefaultMaxBodyBytes
	// MaxDeliveriesInFlight caps the webhook deliveries read, verified or handled at once.
	MaxDeliveriesInFlight = intake.MaxDeliveriesInFlight
	// BusyRetryAfter is the Retry-After of a delivery refused while the intake is full.
	BusyRetryAfter = intake.BusyRetryAfter
)

// InFlightBytes is the memory webhook bodies in flight may take, for a cap of maxBody on one body.
func InFlightBytes(maxBody int64) int64 { return intake.InFlightBytes(maxBody) }

// ParseDelivery verifies and parses one webhook delivery (intake.ParseDelivery).
func ParseDelivery(secret []byte, h http.Header, body []byte) (Delivery, error) {
	return intake.ParseDelivery(secret, h, body)
}

// Categories of refused deliveries.
var (
	// ErrUnauthorized: the signature is missing or wrong (401).
	ErrUnauthorized = intake.ErrUnauthorized
)

// SignatureError says why a delivery's signature was refused.
type SignatureError = intake.SignatureError
