// Package app is the GitHub App as an http.Handler: verified webhooks turned into intents and
// workflow dispatches, and a read-only status page. Parsing (ParseDelivery, ParseCommand) is pure,
// Handle returns a Result and never touches a ResponseWriter, and GitHub is reached only through
// the small ports below, which speak this package's types (ports.go). internal/ghadapter implements
// them with GitHub's REST API.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
)

// ParseRepo reads OWNER/NAME.
func ParseRepo(full string) (RepoRef, error) {
	owner, name, ok := strings.Cut(full, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return RepoRef{}, &MalformedError{Reason: fmt.Sprintf("repository %q is not OWNER/NAME", full)}
	}
	return RepoRef{Owner: owner, Name: name}, nil
}

// ConfigSource gives the configuration in force for a repository at a ref (.github/latestwins.yml),
// read as the App's installation (0 when the delivery names none). An error matching
// authority.ErrInvalidInput is bad configuration (terminal); one matching ErrRefreshInProgress may
// come with the cached configuration, which the App then uses.
type ConfigSource interface {
	Config(ctx context.Context, installation int64, repo RepoRef, ref string) (*config.Config, error)
}

// Dispatcher starts workflows.
type Dispatcher interface {
	Dispatch(ctx context.Context, r DispatchRequest) error
}

// Commits orders two commits of a repository when the push payloads cannot: GitHub's compare API
// (head "ahead" of base is newer, "behind" older). Changes also says which files changed between
// them (the API's claims decide their barriers from it).
type Commits interface {
	Compare(ctx context.Context, installation int64, repo RepoRef, base, head string) (authority.CommitOrder, error)
	Changes(ctx context.Context, installation int64, repo RepoRef, base, head string) (Comparison, error)
}

// Conversation answers comment commands.
type Conversation interface {
	// React adds a reaction (eyes, +1, confused, ...) to the comment.
	React(ctx context.Context, at CommentRef, content string) error
	// Reply comments on the pull request.
	Reply(ctx context.Context, at CommentRef, body string) error
	// CanWrite reports whether user has at least write permission on the repository.
	CanWrite(ctx context.Context, at CommentRef, user string) (bool, error)
}

// DefaultMaxBodyBytes caps a webhook body at GitHub's own cap on a payload, 25 MB (GitHub does not
// deliver a larger one); see intake.go for what bodies in flight may take.
const DefaultMaxBodyBytes = 25 << 20

// Options configure the App.
type Options struct {
	// Secret is the webhook secret; required.
	Secret []byte
	// Authority runs the protocol over the store; required.
	Authority *authority.Authority
	// Config gives each repository's configuration; required.
	Config ConfigSource
	// Dispatcher starts workflows; nil logs and skips every dispatch (no App credentials).
	Dispatcher Dispatcher
	// Conversation reacts to and answers comment commands; nil logs the replies and refuses
	// mutating commands, whose permission cannot be checked (no App credentials).
	Conversation Conversation
	// Reviewer answers deployment protection rules; nil logs the answers (no App credentials).
	Reviewer ProtectionReviewer
	// Commits orders pushes whose payloads cannot tell which is newer; nil leaves them in arrival
	// order (no App credentials).
	Commits Commits
	// Environments lists environments the status page always shows (besides those with pending work).
	Environments func(ctx context.Context) ([]string, error)
	// StatusPage says who may see the status page; the zero value is StatusPageOff.
	StatusPage StatusPage
	// SignIn configures StatusPageGitHub; required with it.
	SignIn *SignInOptions
	// Installations finds the App's installation on a repository, for the status page's redeploys
	// when the configuration source cannot; nil: such redeploys dispatch as no installation.
	Installations InstallationFinder
	// Tokens verifies the OIDC tokens of the /v1 API; nil: GitHub Actions' issuer, audience latestwins.
	Tokens TokenVerifier
	// MaxBodyBytes caps a webhook body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	Logger       *slog.Logger
}

// App handles webhooks and serves the status page.
type App struct {
	secret   []byte
	auth     *authority.Authority
	config   ConfigSource
	dispatch Dispatcher
	convo    Conversation
	review   ProtectionReviewer
	commits  Commits
	envs     func(ctx context.Context) ([]string, error)
	signIn   *signIn // StatusPageGitHub only
	maxBody  int64
	intake   *intake
	log      *slog.Logger
	mux      *http.ServeMux

	installations InstallationFinder
}

var _ http.Handler = (*App)(nil)

// New checks the options and wires the routes.
func New(o Options) (*App, error) {
	switch {
	case len(o.Secret) == 0:
		return nil, &authority.InputError{Field: "webhook secret", Fix: "set LATESTWINS_WEBHOOK_SECRET (or --webhook-secret) to the App's webhook secret; without one anybody could post events"}
	case o.Authority == nil:
		return nil, errors.New("app: no Authority")
	case o.Config == nil:
		return nil, errors.New("app: no ConfigSource")
	case o.MaxBodyBytes < 0:
		return nil, &authority.InputError{Field: "max body bytes", Value: fmt.Sprint(o.MaxBodyBytes), Fix: "give a positive size, or 0 for the default"}
	}
	a := &App{secret: o.Secret, auth: o.Authority, config: o.Config, dispatch: o.Dispatcher, convo: o.Conversation, review: o.Reviewer, commits: o.Commits, envs: o.Environments,
		maxBody: o.MaxBodyBytes, log: o.Logger, installations: o.Installations}
	if a.maxBody == 0 {
		a.maxBody = DefaultMaxBodyBytes
	}
	a.intake = newIntake(a.maxBody, MaxDeliveriesInFlight, InFlightBytes(a.maxBody))
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.envs == nil {
		a.envs = func(context.Context) ([]string, error) { return nil, nil }
	}
	a.mux = http.NewServeMux()
	a.mux.HandleFunc("POST /webhook", a.serveWebhook)
	a.mux.HandleFunc("GET /healthz", serveHealth)
	if err := a.routeStatus(o.StatusPage, o.SignIn); err != nil {
		return nil, err
	}
	if o.Tokens == nil {
		v, err := NewOIDCVerifier(OIDCOptions{Clock: o.Authority})
		if err != nil {
			return nil, err
		}
		o.Tokens = v
	}
	a.routeAPI(o.Tokens)
	a.routeMeta(o.Tokens)
	return a, nil
}

// ServeHTTP routes a request.
func (a *App) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Outcome names what a delivery caused.
type Outcome string

// Outcomes.
const (
	OutcomeAccepted  Outcome = "accepted"  // intents were accepted (some may be duplicates or stale)
	OutcomeDuplicate Outcome = "duplicate" // a re-delivery: every intent was accepted before; nothing changed
	OutcomeNoScopes  Outcome = "no-scopes" // no configured scope is built from the repository and branch
	OutcomeReleased  Outcome = "released"  // a closed pull request's preview work was withdrawn and its leases released
	OutcomeRecorded  Outcome = "recorded"  // bookkeeping only (installation)
	// OutcomeUnapproved: a deployment status of a deployment latestwins never approved: a warning, not live.
	OutcomeUnapproved Outcome = "unapproved"
	OutcomeIgnored    Outcome = "ignored"     // an event or action this App does not act on
	OutcomeReplied    Outcome = "replied"     // a comment command that only answers (status, help, a mistake)
	OutcomeUnlocked   Outcome = "unlocked"    // /latestwins unlock ran (the reply says what it freed)
	OutcomeRefused    Outcome = "refused"     // the commenter may not run the command
	OutcomeQueueFull  Outcome = "queue-full"  // a scope's queue is full: its intent was refused, nothing written for it (429)
	OutcomeDecided    Outcome = "decided"     // /latestwins skip or retry ran (the reply says what it decided)
	OutcomeRolledBack Outcome = "rolled-back" // /latestwins rollback ran (the reply says what it did)
	OutcomeUnfrozen   Outcome = "unfrozen"    // /latestwins unfreeze ran (the reply says what it did)
	OutcomePromoted   Outcome = "promoted"    // /latestwins promote ran (the reply says what it did)
)

// Result is what Handle did, for the response body and the logs.
type Result struct {
	Status   int          `json:"-"`
	Delivery string       `json:"delivery"`
	Event    string       `json:"event"`
	Outcome  Outcome      `json:"outcome"`
	Message  string       `json:"message,omitempty"`
	Intents  []IntentInfo `json:"intents,omitempty"`
	// Dispatched lists the workflows started (or, without a Dispatcher, that would have been).
	Dispatched []DispatchRequest `json:"dispatched,omitempty"`
	Released   []string          `json:"released,omitempty"`  // ENV/SCOPE leases freed
	Withdrawn  []string          `json:"withdrawn,omitempty"` // ENV/SCOPE pending work ended (a closed pull request)
	// Command is the comment command run, and Reply the answer posted (or, without a
	// Conversation, logged).
	Command string `json:"command,omitempty"`
	Reply   string `json:"reply,omitempty"`
	// Refused lists the environments whose intent was refused because a scope's queue is full:
	// nothing was written for them, and the delivery is answered 429 so that it shows as failed and
	// can be re-delivered once some of the pending commits have deployed.
	Refused []Refusal `json:"refused,omitempty"`
}

// Refusal is an environment's intent refused for a full queue.
type Refusal struct {
	Environment string `json:"environment"`
	Scope       string `json:"scope,omitempty"`
	Message     string `json:"message"`
}

// IntentInfo is one environment's share of a delivery.
type IntentInfo struct {
	Environment string           `json:"environment"`
	Generation  int64            `json:"generation"`
	Duplicate   bool             `json:"duplicate,omitempty"`
	Accepted    []string         `json:"accepted,omitempty"`
	Stale       map[string]int64 `json:"stale,omitempty"`
	// Ahead says, per scope where the intent waits behind others (policy queue, or a barrier), how
	// many pending intents are ahead of it.
	Ahead map[string]int `json:"ahead,omitempty"`
	// Barrier lists the scopes in which the intent is a barrier: nothing newer supersedes it there.
	Barrier []string `json:"barrier,omitempty"`
}

// Handle acts on a verified delivery. An error is a failure to act (the store, the config source,
// a dispatch); a delivery it does not act on is a Result with OutcomeIgnored.
func (a *App) Handle(ctx context.Context, d Delivery) (Result, error) {
	res := Result{Status: http.StatusOK, Delivery: d.ID, Event: d.Event}
	log := a.log.With("delivery_id", d.ID, "event", d.Event)
	var err error
	switch d.Event {
	case "push":
		err = a.handlePush(ctx, log, d, &res)
	case "pull_request":
		err = a.handlePullRequest(ctx, log, d, &res)
	case "installation":
		a.handleInstallation(ctx, log, d, &res)
	case "issue_comment":
		err = a.handleIssueComment(ctx, log, d, &res)
	case "check_run":
		err = a.handleCheckRun(ctx, log, d, &res)
	case protectionRuleEvent:
		err = a.handleProtectionRule(ctx, log, d, &res)
	case "deployment_status":
		err = a.handleDeploymentStatus(ctx, log, d, &res)
	default:
		res.Outcome, res.Status = OutcomeIgnored, http.StatusAccepted
		res.Message = fmt.Sprintf("event %q is not used by latestwins", d.Event)
	}
	if err != nil {
		return res, err
	}
	log.InfoContext(ctx, "webhook handled", "outcome", res.Outcome, "intents", len(res.Intents), "dispatched", len(res.Dispatched))
	return res, nil
}

// accept records one intent per selected environment and dispatches the workflows of the scopes
// it accepted. Each intent carries the environment's policy and promotion requirement, and is a barrier in the scopes whose
// barrier-paths the changed files touch (changed nil: not known, so a barrier wherever a scope has
// barrier-paths). A re-delivery (every intent a duplicate) dispatches nothing: the first delivery
// did, and work it failed to start stays in the mailbox for the recovery sweep. An environment
// whose scope's queue is full refuses its intent (nothing written there): the others go on, and the
// refusal is the delivery's answer (429, see Refused).
func (a *App) accept(ctx context.Context, log *slog.Logger, sels []config.Selection, in authority.Intent, changed []string, dispatchRef string, installation int64, res *Result, opts ...authority.AcceptOption) error {
	if len(sels) == 0 {
		res.Outcome = OutcomeNoScopes
		return nil
	}
	allDup := true
	var dispatches []DispatchRequest
	for _, sel := range sels {
		in := in
		in.Environment, in.Scopes = sel.Environment, sel.ScopeNames()
		in.Policy, in.Barrier, in.Requires = authority.Policy(sel.Policy), sel.Barriers(changed), sel.Requires
		if dispatchRef != "" && len(sel.Scopes) > 0 {
			// How the recovery sweep starts this work again if its run dies: see Redrive.
			in.Origin = originFor(installation, sel.Scopes[0].Repository, dispatchRef)
		}
		ar, err := a.auth.Accept(ctx, in, false, opts...)
		var full *authority.QueueFullError
		if errors.As(err, &full) {
			res.Refused = append(res.Refused, Refusal{Environment: sel.Environment, Scope: full.Scope, Message: full.Error()})
			log.WarnContext(ctx, "intent refused: queue full", "environment", sel.Environment, "scope", full.Scope,
				"pending", full.Pending, "limit", full.Limit, "err", err)
			continue
		}
		if err != nil {
			return fmt.Errorf("accept %s for %s: %w", in.Sha, sel.Environment, err)
		}
		if ar.Joined {
			// The commit is already pending in every scope: nothing new to accept or dispatch; the
			// run started for it claims it.
			stale := map[string]int64{}
			for _, s := range ar.Accepted {
				stale[s] = ar.Generation
			}
			ar = &authority.AcceptResult{Generation: ar.Generation, Accepted: []string{}, Stale: stale}
		}
		res.Intents = append(res.Intents, IntentInfo{Environment: sel.Environment, Generation: ar.Generation,
			Duplicate: ar.Duplicate, Accepted: ar.Accepted, Stale: ar.Stale, Ahead: ar.Ahead, Barrier: in.Barrier})
		log.InfoContext(ctx, "intent accepted", "environment", sel.Environment, "generation", ar.Generation,
			"duplicate", ar.Duplicate, "accepted", ar.Accepted, "stale", ar.Stale, "ahead", ar.Ahead, "barrier", in.Barrier)
		if ar.Duplicate {
			continue
		}
		allDup = false
		if dispatchRef != "" {
			dispatches = append(dispatches, dispatchesFor(sel, ar, dispatchRef, installation)...)
		}
	}
	res.Outcome = OutcomeAccepted
	switch {
	case len(res.Refused) > 0:
		res.Outcome, res.Status = OutcomeQueueFull, http.StatusTooManyRequests
		msgs := make([]string, len(res.Refused))
		for i, r := range res.Refused {
			msgs[i] = r.Message
		}
		res.Message = "refused, nothing written for it: " + strings.Join(msgs, "; ")
	case allDup:
		res.Outcome, res.Message = OutcomeDuplicate, "already processed: this delivery's intents were accepted before"
		return nil
	}
	var errs []error
	for _, dr := range dispatches {
		res.Dispatched = append(res.Dispatched, dr)
		if a.dispatch == nil {
			log.InfoContext(ctx, "dispatch skipped: no App credentials, not publishing to GitHub", "repo", dr.Repo.String(),
				"workflow", dr.Workflow, "ref", dr.Ref, "inputs", dr.Inputs)
			continue
		}
		if err := a.dispatch.Dispatch(ctx, dr); err != nil {
			errs = append(errs, &dispatchError{fmt.Errorf("dispatch %s in %s for %s: %w", dr.Workflow, dr.Repo, dr.Inputs["environment"], err)})
		}
	}
	if len(errs) > 0 && len(res.Refused) > 0 {
		// The error is the delivery's answer: it keeps saying what was refused.
		errs = append(errs, fmt.Errorf("%s: %w", res.Message, authority.ErrQueueFull))
	}
	return errors.Join(errs...)
}

// dispatchesFor groups the accepted scopes of a selection by repository and workflow: one dispatch each.
func dispatchesFor(sel config.Selection, ar *authority.AcceptResult, ref string, installation int64) []DispatchRequest {
	accepted := map[string]bool{}
	for _, s := range ar.Accepted {
		accepted[s] = true
	}
	var out []DispatchRequest
	index := map[string]int{}
	for _, s := range sel.Scopes {
		if !accepted[s.Name] || s.Workflow == "" {
			continue
		}
		repo, err := ParseRepo(s.Repository)
		if err != nil {
			continue // the config validated OWNER/NAME
		}
		key := strings.ToLower(s.Repository) + "\x00" + s.Workflow
		i, ok := index[key]
		if !ok {
			i = len(out)
			index[key] = i
			out = append(out, DispatchRequest{Installation: installation, Repo: repo, Workflow: s.Workflow, Ref: ref,
				Inputs: map[string]string{"environment": sel.Environment, "generation": fmt.Sprint(ar.Generation)}})
		}
		if prev := out[i].Inputs["scopes"]; prev != "" {
			out[i].Inputs["scopes"] = prev + "," + s.Name
		} else {
			out[i].Inputs["scopes"] = s.Name
		}
	}
	return out
}

// StatusFor maps a Handle error to an HTTP status: bad configuration is terminal (422), a full
// queue is a refusal worth a re-delivery once some commits deployed (429), the rest is worth a
// re-delivery (500, 502 for a failed dispatch, 503 when GitHub did not give the configuration or
// another process refreshes it).
func StatusFor(err error) int {
	var de *dispatchError
	switch {
	case errors.Is(err, authority.ErrQueueFull):
		return http.StatusTooManyRequests
	case errors.Is(err, authority.ErrInvalidInput):
		return http.StatusUnprocessableEntity
	case errors.Is(err, ErrRefreshInProgress), errors.Is(err, ErrConfigUnavailable):
		return http.StatusServiceUnavailable
	case errors.As(err, &de):
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

type dispatchError struct{ err error }

func (e *dispatchError) Error() string { return e.err.Error() }
func (e *dispatchError) Unwrap() error { return e.err }

func serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// configFor returns the repository's configuration. A refresh in progress elsewhere with a cached
// copy is not an error: the copy is used.
func (a *App) configFor(ctx context.Context, log *slog.Logger, installation int64, repo RepoRef, ref string) (*config.Config, error) {
	cfg, err := a.config.Config(ctx, installation, repo, ref)
	if errors.Is(err, ErrRefreshInProgress) && cfg != nil {
		log.InfoContext(ctx, "configuration refresh in progress elsewhere: using the cached copy", "repo", repo.String())
		return cfg, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configuration of %s at %s: %w", repo, orDefaultBranch(ref), err)
	}
	return cfg, nil
}

// incidentConfig is configFor for the tools of an incident (rollback, unfreeze): when the
// repository's own file is refused (the bad commit being rolled back may have broken it), the
// trusted configuration answers alone, so that the way back never depends on that file.
func (a *App) incidentConfig(ctx context.Context, log *slog.Logger, installation int64, repo RepoRef) (*config.Config, error) {
	cfg, err := a.configFor(ctx, log, installation, repo, "")
	var refused *config.NarrowError
	if errors.As(err, &refused) {
		log.WarnContext(ctx, "the repository's own configuration file is refused; the trusted configuration answers alone", "repo", repo.String(), "err", err)
		return a.configFor(ctx, log, 0, repo, "")
	}
	return cfg, err
}

// configWhere names where the environments are defined, for messages.
func (a *App) configWhere() string {
	if w, ok := a.config.(interface{ Where() string }); ok {
		return w.Where()
	}
	return "the configuration"
}

// now is the Authority's clock, so that the page agrees with lease expiry.
func (a *App) now() time.Time { return a.auth.Now() }

// compareTimeout bounds one call of GitHub's compare API.
const compareTimeout = 5 * time.Second

// comparer asks GitHub to order the commits of repo that the push payloads cannot. An answer it
// cannot get leaves them in arrival order, with a warning: a delivery is never refused for it.
type comparer struct {
	commits      Commits
	installation int64
	repo         RepoRef
	log          *slog.Logger
}

func (c comparer) Compare(ctx context.Context, in authority.Intent, base, head string) (authority.CommitOrder, error) {
	// Asked while the environment's updates in this process wait (see Authority.Accept): bounded,
	// so that a slow GitHub cannot hold up the renewals of running passes.
	ctx, cancel := context.WithTimeout(ctx, compareTimeout)
	defer cancel()
	o, err := c.commits.Compare(ctx, c.installation, c.repo, base, head)
	if err != nil {
		c.log.WarnContext(ctx, "GitHub could not order two pushes; taking them in arrival order", "base", base, "head", head, "err", err)
		return authority.Diverged, nil
	}
	return o, nil
}
