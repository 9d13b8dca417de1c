// Package action is the GitHub Action: it reads the step's inputs and the triggering event through
// go-githubactions, runs one latestwins verb (claim, gate, run, complete, status) against the
// store, and reports through outputs, the job summary and annotations. It returns typed errors that
// the command line turns into its documented exit codes.
package action

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sethvargo/go-githubactions"

	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/pass"
	"github.com/latestwins/latestwins/internal/report"
)

// Errors for outcomes that end the step with a non-zero exit code and are not errors of the program.
// Superseded (on-superseded: fail), locked and lease lost are the authority package's categories.
var (
	// ErrRetry: the command failed on a non-final attempt; nothing terminal was published.
	ErrRetry = errors.New("the command failed on a non-final attempt (retryable)")
	// ErrFailed: the command failed on the final attempt; one terminal error was published.
	ErrFailed = errors.New("the command failed on the final attempt")
	// ErrInterrupted: a signal stopped the step; the lease was released.
	ErrInterrupted = errors.New("interrupted")
)

// OpenStoreFunc opens the store a URL names, and returns a function that closes it.
type OpenStoreFunc func(ctx context.Context, url string) (authority.Store, func() error, error)

// Deps are what the Action needs from outside. OpenStore is required; the rest may be nil.
type Deps struct {
	OpenStore OpenStoreFunc
	// Canceler cancels this workflow run (on-superseded: cancel); nil: a GitHubCanceler built from
	// the github-token input and GITHUB_API_URL.
	Canceler RunCanceler
	// Comments and Checks publish the sticky PR comment and the check run (with the comment and
	// check-run inputs true); when both are nil, a githubapp client built from the github-token
	// input and GITHUB_API_URL publishes both. Set only one to publish only that one.
	Comments Commenter
	Checks   CheckRunner
	// Clock is the authority's clock (tests); nil: the system clock.
	Clock authority.Clock
	// Stdin, Stdout and Stderr are the run command's; nil: the process's.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is the run command's environment before the fencing variables (nil: the process's).
	Env []string
	// HTTPClient calls the App's API and the runner's OIDC token endpoint (api-url); nil: a client
	// with a 30 s timeout.
	HTTPClient *http.Client
	Log        *slog.Logger
}

// result is what a verb did, for the outputs, the summary and the annotations.
type result struct {
	generation   int64
	sha          string                   // the commit the pass deploys, when it claimed
	commits      []authority.ClaimedScope // per scope, when it claimed
	authorized   bool
	scopes       []string
	tokens       map[string]int64
	outcome      string
	headline     string
	superseded   *authority.SupersededError // set when the pass lost a scope
	supersededBy int64
	phase        string // the phase entered, when authorized
}

// Run runs the command the inputs name. Superseded is not an error with on-superseded skip or
// cancel: the step ends with authorized=false.
func Run(ctx context.Context, a *githubactions.Action, deps Deps) error {
	if deps.OpenStore == nil {
		return errors.New("action: Deps.OpenStore is required")
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	in, err := readInputs(a)
	if err != nil {
		a.Errorf("%v", err)
		writeOutputs(a, &result{outcome: "invalid"})
		return err
	}
	gh, err := a.Context()
	if err != nil {
		err = &authority.InputError{Field: "GITHUB_* variables", Value: err.Error(), Fix: "run the Action inside GitHub Actions, or set the variables it reads"}
		a.Errorf("%v", err)
		return err
	}
	s := &step{a: a, deps: deps, in: in, gh: gh, ev: eventOf(gh)}
	if in.apiURL != "" {
		c, err := newAPIClient(a, in.apiURL, deps.HTTPClient)
		if err != nil {
			a.Errorf("%v", err)
			writeOutputs(a, &result{outcome: "invalid"})
			return err
		}
		s.auth, s.view, s.claimer = c, c, c
		return s.do(ctx)
	}
	if in.defaultStore {
		a.Infof("%s", defaultStoreLine(in.store))
	}
	st, closeStore, err := deps.OpenStore(ctx, in.store)
	if err != nil {
		err = fmt.Errorf("store input: %w", err)
		if errors.Is(err, authority.ErrInvalidInput) {
			a.Errorf("%v", err)
			writeOutputs(a, &result{outcome: "invalid"})
			return err
		}
		a.Warningf("%v (retryable)", err)
		writeOutputs(a, &result{outcome: "error"})
		return err
	}
	defer func() {
		if err := closeStore(); err != nil {
			deps.Log.Warn("closing the store", "err", err)
		}
	}()
	opts := []authority.Option{authority.WithLogger(deps.Log)}
	if deps.Clock != nil {
		opts = append(opts, authority.WithClock(deps.Clock))
	}
	local := authority.New(st, opts...)
	s.auth, s.view, s.claimer = pass.Local(local), local, localClaimer{local}
	return s.do(ctx)
}

// stateReader reads an environment's authoritative state, and the clock to render it with.
type stateReader interface {
	Status(ctx context.Context, env string) (*authority.Env, error)
	Now() time.Time
}

var _ stateReader = (*authority.Authority)(nil)

// generationClaimer claims scopes for a generation accepted before: the store's authority, or the
// App's API.
type generationClaimer interface {
	ClaimGeneration(ctx context.Context, env string, gen int64, scopes []string) (*authority.ClaimResult, error)
}

var (
	_ generationClaimer = localClaimer{}
	_ generationClaimer = (*apiclient.Client)(nil)
)

// localClaimer is generationClaimer on the store.
type localClaimer struct{ a *authority.Authority }

func (l localClaimer) ClaimGeneration(ctx context.Context, env string, gen int64, scopes []string) (*authority.ClaimResult, error) {
	return l.a.Claim(ctx, env, gen, scopes)
}

// newAPIClient is the App's API client, authenticated with the workflow's OIDC token.
func newAPIClient(a *githubactions.Action, apiURL string, hc *http.Client) (*apiclient.Client, error) {
	tokens, err := apiclient.NewActionsToken(a.Getenv, apiclient.Audience, hc)
	if err != nil {
		return nil, err
	}
	return apiclient.New(apiURL, tokens, hc)
}

// step is one invocation of the Action.
type step struct {
	a    *githubactions.Action
	deps Deps
	in   *inputs
	gh   *githubactions.GitHubContext
	ev   event
	// auth runs the pass's steps, on the store or through the App's API; view reads the
	// environment's state for the summary and the publications.
	auth pass.Authority
	view stateReader
	// claimer claims the generation input's pass.
	claimer generationClaimer
	// gitHub publishes comments and check runs when Deps has none; built on first use.
	gitHub *githubapp.Client
}

func (s *step) do(ctx context.Context) error {
	s.a.Group(fmt.Sprintf("latestwins %s %s", s.in.command, s.in.environment))
	var res *result
	var err error
	switch s.in.command {
	case cmdClaim:
		res, err = s.claim(ctx)
	case cmdGate:
		res, err = s.gate(ctx)
	case cmdRun:
		res, err = s.runCommand(ctx)
	case cmdComplete:
		res, err = s.complete(ctx)
	case cmdStatus:
		res, err = &result{outcome: "status", authorized: false}, nil
	}
	s.a.EndGroup()
	if res == nil {
		res = &result{}
	}
	err = s.settle(ctx, res, err)
	writeOutputs(s.a, res)
	s.summarize(ctx, res)
	s.publish(ctx, res)
	return err
}

// untilSuffix is " (at TIME)" for a hold that ends by itself, "" for one that waits for someone.
func untilSuffix(held *authority.HeldError) string {
	if held.Until.IsZero() {
		return ""
	}
	return " (" + held.Until.UTC().Format("Mon 02 Jan 15:04 MST") + ")"
}

// settle classifies how the verb ended: it sets the outcome, writes the annotation and applies
// on-superseded. It returns the error the step ends with (nil: exit 0).
func (s *step) settle(ctx context.Context, res *result, err error) error {
	var sup *authority.SupersededError
	var held *authority.HeldError
	switch {
	case err == nil && res.superseded == nil:
		return nil
	case err == nil, errors.As(err, &sup):
		if sup == nil {
			sup = res.superseded
		}
		res.outcome, res.authorized, res.superseded, res.supersededBy = "superseded", false, sup, sup.By
		res.headline = fmt.Sprintf("Generation %d was superseded: %v. Nothing more to do; the newer run deploys.", sup.Generation, sup)
		if sup.By > 0 {
			s.a.Noticef("Superseded by generation %d%s: this run stops cleanly and the newer one deploys (%v)", sup.By, shaSuffix(sup.BySha), sup)
		} else {
			// Nothing newer: the pass's work here ended already, or it never owned the scope.
			s.a.Noticef("Stopped: %v; this run stops cleanly", sup)
		}
		return s.onSuperseded(ctx, sup)
	case errors.As(err, &held) && held.Why().Lasting():
		// Held for hours or days (a soak, approvals, a change window): the run ends without a
		// failure, and the commit stays pending; newer commits keep coalescing, and the recovery
		// sweep starts the work again once the gate lets it go.
		res.outcome = "held"
		res.headline = fmt.Sprintf("Held: %s. The commit stays pending; the recovery sweep starts its work again once it may go%s.", report.Waiting(held), untilSuffix(held))
		s.a.Noticef("held: %s: %s; the commit stays pending and the recovery sweep starts its work again once it may go%s", held.Resource, report.Waiting(held), untilSuffix(held))
		return nil
	case errors.As(err, &held):
		res.outcome = "locked"
		res.headline = fmt.Sprintf("Gave up waiting after %s (%s): %v.", s.in.wait, held.Why(), held)
		s.a.Warningf("gave up waiting after %s: %v; re-run later, or see who holds it in the summary", s.in.wait, held)
		return fmt.Errorf("gave up waiting: %w", err)
	case errors.Is(err, authority.ErrLeaseLost):
		res.outcome = "lost"
		res.headline = "The lease was lost while working: retryable infrastructure loss; nothing terminal was published."
		s.a.Warningf("lease lost (retryable, nothing terminal published): %v", err)
		return err
	case errors.Is(err, authority.ErrQueueFull):
		res.outcome = "queue-full"
		res.headline = err.Error()
		s.a.Errorf("%v; nothing was accepted for this run: re-run it once some of the pending commits have deployed", err)
		return err
	case errors.Is(err, ErrRetry):
		res.outcome = "retry"
		s.a.Warningf("%v; re-run the job (attempt %d of %d)", err, s.attempt(), s.in.maxAttempts)
		return err
	case errors.Is(err, ErrFailed):
		res.outcome = "failed"
		s.a.Errorf("%v: a terminal error is recorded for generation %d (attempt %d of %d)", err, res.generation, s.attempt(), s.in.maxAttempts)
		return err
	case errors.Is(err, ErrInterrupted):
		res.outcome = "interrupted"
		s.a.Warningf("interrupted; the lease was released and the job can be re-run")
		return err
	case errors.Is(err, authority.ErrInvalidInput):
		res.outcome = "invalid"
		res.headline = err.Error()
		s.a.Errorf("%v", err)
		return err
	case errors.Is(err, authority.ErrMoved):
		// The state went to another store: a re-run fails the same way until the store is pointed
		// there, which the error names.
		res.outcome = "invalid"
		res.headline = err.Error()
		s.a.Errorf("%v", err)
		return err
	case accessDenied(err):
		// The store's server refused the token or the repository: a re-run fails the same way
		// until the token or the job's permissions change, which the error names.
		res.outcome = "error"
		res.headline = err.Error()
		s.a.Errorf("%v", err)
		return err
	}
	res.outcome = "error"
	s.a.Warningf("%v (retryable)", err)
	return err
}

// accessDenied: err is a store's refusal of the credentials or the repository (a store on git refs
// marks it so: AccessDenied).
func accessDenied(err error) bool {
	var denied interface{ AccessDenied() bool }
	return errors.As(err, &denied) && denied.AccessDenied()
}

func (s *step) onSuperseded(ctx context.Context, sup *authority.SupersededError) error {
	switch s.in.onSuperseded {
	case onFail:
		return fmt.Errorf("on-superseded is fail: %w", sup)
	case onCancel:
		owner, repo := s.gh.Repo()
		if owner == "" || repo == "" || s.gh.RunID == 0 {
			return &authority.InputError{Field: "on-superseded", Value: onCancel, Fix: "cancel needs GITHUB_REPOSITORY and GITHUB_RUN_ID; use skip outside GitHub Actions"}
		}
		c := s.deps.Canceler
		if c == nil {
			gc, err := NewGitHubCanceler(s.in.token, s.gh.APIURL, nil)
			if err != nil {
				return &authority.InputError{Field: "github-token", Fix: err.Error()}
			}
			c = gc
		}
		if err := c.CancelRun(ctx, owner, repo, s.gh.RunID); err != nil {
			s.a.Errorf("could not cancel this run: %v; the job needs `permissions: actions: write`", err)
			return fmt.Errorf("on-superseded cancel (the job needs permissions: actions: write): %w", err)
		}
		s.a.Infof("cancellation of run %d requested", s.gh.RunID)
	}
	return nil
}

func shaSuffix(sha string) string {
	if sha == "" {
		return ""
	}
	if len(sha) > 7 {
		sha = sha[:7]
	}
	return " (" + sha + ")"
}

// attempt is GitHub's run attempt: a re-run of the job is the same intent, one attempt further.
func (s *step) attempt() int {
	if s.gh.RunAttempt > 0 {
		return int(s.gh.RunAttempt)
	}
	return 1
}

// intent is the pass's intent: the event's commit, the run as its id (a re-run is the same intent).
func (s *step) intent() authority.Intent {
	sha, ref := firstNonEmpty(s.in.sha, s.ev.sha), firstNonEmpty(s.in.ref, s.ev.ref)
	before, order := s.ev.before, s.ev.order
	if s.in.sha != "" && s.in.sha != s.ev.sha {
		before, order = "", authority.Order{} // the event's facts are not this commit's
	}
	source := "github-actions"
	if s.ev.name != "" {
		source += " " + s.ev.name
	}
	if s.ev.pr > 0 {
		source += fmt.Sprintf(" #%d", s.ev.pr)
	}
	id := fmt.Sprintf("gha:%s/%d", s.gh.Repository, s.gh.RunID)
	return authority.Intent{ID: id, Environment: s.in.environment, Scopes: s.in.scopes, Sha: sha, Ref: ref,
		Before: before, Order: order, Source: source, Actor: s.gh.Actor, Origin: s.origin()}
}

// OriginPrefix marks the intent origins the Action writes: gha:OWNER/REPO/PATH@REF, the workflow
// that made the intent (GITHUB_WORKFLOW_REF), so that a recovery sweep can dispatch it again as the
// same generation (latestwins sweep gives the command LATESTWINS_ORIGIN).
const OriginPrefix = "gha:"

// origin is the workflow that runs this step, as an intent's Origin; "" when the runner does not
// say, or when it is longer than an intent may carry (the intent is then accepted without one).
func (s *step) origin() string {
	wf := s.a.Getenv("GITHUB_WORKFLOW_REF")
	if wf == "" {
		return ""
	}
	o := OriginPrefix + wf
	if len(o) > authority.MaxFieldLen {
		s.a.Infof("the workflow's ref %q is too long to record as the intent's origin: a recovery sweep cannot dispatch it again", wf)
		return ""
	}
	return o
}

// holder names this job as a lease holder.
func (s *step) holder() string {
	return fmt.Sprintf("gha:%s/%d/%d/%s", s.gh.Repository, s.gh.RunID, s.attempt(), s.gh.Job)
}

func (s *step) runURL() string {
	if s.gh.RunID == 0 {
		return ""
	}
	return fmt.Sprintf("%s/%s/actions/runs/%d", strings.TrimSuffix(s.gh.ServerURL, "/"), s.gh.Repository, s.gh.RunID)
}

// claim accepts the run's intent and claims its scopes; with the generation input it claims that
// generation instead (accepted before: the App dispatched this workflow for it).
func (s *step) claim(ctx context.Context) (*result, error) {
	if s.in.generation > 0 {
		return s.claimGeneration(ctx)
	}
	in := s.intent()
	if len(in.Scopes) == 0 {
		return nil, &authority.InputError{Field: "scopes", Fix: "set the scopes input, e.g. scopes: api,web"}
	}
	res, err := s.auth.Claim(ctx, in)
	if err != nil {
		return nil, orderError(err)
	}
	claimed := []string{}
	if res.Claim != nil {
		claimed = res.Claim.Scopes()
	}
	if err := s.saveState(&state{Environment: in.Environment, Intent: in.ID, Generation: res.Generation, Sha: claimedSha(res.Claim), Scopes: claimed,
		Commits: claimedCommits(res.Claim), Holder: s.holder()}); err != nil {
		return nil, err
	}
	s.a.Infof("generation %d claimed %s", res.Generation, strings.Join(claimed, ","))
	r := &result{generation: res.Generation, authorized: len(claimed) > 0, scopes: claimed, outcome: "claimed", sha: claimedSha(res.Claim), commits: claimedCommits(res.Claim),
		headline: fmt.Sprintf("Generation %d claimed %s.", res.Generation, strings.Join(claimed, ", "))}
	if w := waitsOnClaim(res); w != "" {
		// Policy queue, or a barrier ahead: the pass may build now, and deploys in its turn.
		s.a.Infof("generation %d waits its turn to deploy: %s", res.Generation, w)
		r.headline = fmt.Sprintf("Generation %d claimed %s; it deploys in its turn (%s).", res.Generation, strings.Join(claimed, ", "), w)
	}
	if len(claimed) == 0 {
		if sup := supersededOnArrival(in, res); sup.By > 0 {
			r.superseded = sup
		} else {
			// Nothing pending: this intent's work is already done (a re-run after it deployed).
			r.outcome = "idle"
			r.headline = fmt.Sprintf("Nothing pending for %s: generation %d has nothing left to do.", strings.Join(in.Scopes, ", "), res.Generation)
			s.a.Noticef("nothing to do: %s has no pending work for generation %d", in.Environment, res.Generation)
		}
	}
	return r, nil
}

// claimGeneration claims the generation input's scopes. The commit that generation deploys is the
// sha output: a workflow_dispatch runs on a branch, whose head may be newer than the commit (a
// rollback's is older), so the workflow checks out this commit before it builds.
func (s *step) claimGeneration(ctx context.Context) (*result, error) {
	gen := s.in.generation
	cr, err := s.claimer.ClaimGeneration(ctx, s.in.environment, gen, s.in.scopes)
	if err != nil {
		return nil, err
	}
	claimed := cr.Scopes()
	if err := s.saveState(&state{Environment: s.in.environment, Intent: s.intent().ID, Generation: gen, Sha: claimedSha(cr), Scopes: claimed,
		Commits: claimedCommits(cr), Holder: s.holder()}); err != nil {
		return nil, err
	}
	r := &result{generation: gen, authorized: len(claimed) > 0, scopes: claimed, outcome: "claimed", sha: claimedSha(cr), commits: claimedCommits(cr)}
	if len(claimed) > 0 {
		s.a.Infof("generation %d claimed %s at %s", gen, strings.Join(claimed, ","), r.sha)
		r.headline = fmt.Sprintf("Generation %d claimed %s (commit %s).", gen, strings.Join(claimed, ", "), report.ShortSha(r.sha))
		if w := waitsOnClaim(&authority.AcceptResult{Claim: cr}); w != "" {
			r.headline = fmt.Sprintf("Generation %d claimed %s (commit %s); it deploys in its turn (%s).", gen, strings.Join(claimed, ", "), report.ShortSha(r.sha), w)
		}
		return r, nil
	}
	if len(cr.Superseded) > 0 && !cr.Superseded[0].Done {
		r.superseded = cr.Superseded[0]
		return r, nil
	}
	r.outcome = "idle"
	r.headline = fmt.Sprintf("Nothing pending for %s: generation %d has nothing left to do.", strings.Join(s.in.scopes, ", "), gen)
	s.a.Noticef("nothing to do: %s has no pending work for generation %d", s.in.environment, gen)
	return r, nil
}

// claimedSha is the commit a claim's scopes deploy ("" when it claimed none). The scopes of one
// generation share its commit.
func claimedSha(cr *authority.ClaimResult) string {
	if cr == nil || len(cr.Claimed) == 0 {
		return ""
	}
	return cr.Claimed[0].Sha
}

// claimedCommits are the commits a claim's scopes deploy (nil when it claimed none).
func claimedCommits(cr *authority.ClaimResult) []authority.ClaimedScope {
	if cr == nil {
		return nil
	}
	return cr.Claimed
}

// waitsOnClaim says, per claimed scope where older intents go first, how many are ahead:
// "api: queued: 2 ahead of this commit"; "" when none waits.
func waitsOnClaim(res *authority.AcceptResult) string {
	if res.Claim == nil {
		return ""
	}
	var parts []string
	for _, c := range res.Claim.Claimed {
		if c.Ahead > 0 {
			parts = append(parts, fmt.Sprintf("%s: queued: %d ahead of this commit", c.Scope, c.Ahead))
		}
	}
	return strings.Join(parts, "; ")
}

// supersededOnArrival names what superseded an intent that claimed nothing.
func supersededOnArrival(in authority.Intent, res *authority.AcceptResult) *authority.SupersededError {
	sup := &authority.SupersededError{Environment: in.Environment, Generation: res.Generation}
	if res.Claim != nil && len(res.Claim.Superseded) > 0 {
		return res.Claim.Superseded[0]
	}
	for _, scope := range in.Scopes {
		if by, ok := res.Stale[scope]; ok && by > sup.By {
			sup.Scope, sup.By = scope, by
		}
	}
	if sup.Scope == "" && len(in.Scopes) > 0 {
		sup.Scope = in.Scopes[0]
	}
	return sup
}

// pass loads this job's pass for the environment, claiming first when the job has none yet (the
// intent is the run, so a later job of the same run gets the same generation).
func (s *step) pass(ctx context.Context) (*state, *result, error) {
	st, err := s.loadState()
	if err != nil {
		return nil, nil, err
	}
	if st.Generation > 0 {
		if len(s.in.scopes) > 0 {
			st.Scopes = s.in.scopes
		}
		return st, nil, nil
	}
	r, err := s.claim(ctx)
	if err != nil || !r.authorized {
		return nil, r, err
	}
	st, err = s.loadState()
	if err != nil {
		return nil, nil, err
	}
	if st.Generation == 0 { // no RUNNER_TEMP: the state lives in memory only
		st = &state{Environment: s.in.environment, Intent: s.intent().ID, Generation: r.generation, Sha: r.sha, Scopes: r.scopes, Commits: r.commits, Holder: s.holder()}
	}
	return st, nil, nil
}

// enter gates the phase: for deploy with the scopes' leases, waiting on a held lease.
func (s *step) enter(ctx context.Context, st *state, phase string) (*authority.Grant, error) {
	ttl := time.Duration(0)
	if phase == "deploy" {
		ttl = s.in.leaseTTL
	}
	if st.Holder == "" {
		st.Holder = s.holder()
	}
	warned := false
	req := authority.GateRequest{Environment: st.Environment, Generation: st.Generation, Scopes: st.Scopes, Phase: phase, Holder: st.Holder, LeaseTTL: ttl}
	g, err := pass.Gate(ctx, s.auth, req, s.in.wait, func(held *authority.HeldError, pause, left time.Duration) {
		msg := fmt.Sprintf("waiting: %s is locked by %s (%s, generation %d); free within %s at the latest, asking again meanwhile (%s left to wait)",
			held.Resource, held.Holder, held.Purpose, held.Generation, pause.Round(time.Second), left.Round(time.Second))
		if w := report.Waiting(held); w != "" {
			msg = fmt.Sprintf("waiting: %s: %s; asking again within %s (%s left to wait)", held.Resource, w, pause.Round(time.Second), left.Round(time.Second))
		}
		if !warned {
			s.a.Warningf("%s", msg) // one annotation; the rest go to the log
			warned = true
			return
		}
		s.a.Infof("%s", msg)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("waiting for the lease: %w", ErrInterrupted)
		}
		return nil, err
	}
	for _, sc := range g.TookOver {
		s.a.Infof("%s/%s: recovered an interrupted operation (the previous holder's lease had expired)", g.Environment, sc)
	}
	if len(g.Tokens) > 0 {
		st.Tokens, st.ExpiresAt = g.Tokens, g.ExpiresAt
		st.Scopes = pass.TokenScopes(g.Tokens)
		if err := s.saveState(st); err != nil {
			return nil, err
		}
	}
	return g, nil
}

func (s *step) gate(ctx context.Context) (*result, error) {
	st, r, err := s.pass(ctx)
	if err != nil || r != nil {
		return r, err
	}
	g, err := s.enter(ctx, st, s.in.phase)
	if err != nil {
		return &result{generation: st.Generation, scopes: st.Scopes, sha: st.Sha}, err
	}
	s.a.Infof("authorized: generation %d may enter %s", g.Generation, g.Phase)
	return &result{generation: g.Generation, authorized: true, scopes: st.Scopes, sha: st.Sha, tokens: g.Tokens, outcome: "authorized", phase: g.Phase,
		headline: fmt.Sprintf("Generation %d may enter %s for %s.", g.Generation, g.Phase, strings.Join(st.Scopes, ", "))}, nil
}

func (s *step) runCommand(ctx context.Context) (*result, error) {
	st, r, err := s.pass(ctx)
	if err != nil || r != nil {
		return r, err
	}
	g, err := s.enter(ctx, st, "deploy")
	if err != nil {
		return &result{generation: st.Generation, scopes: st.Scopes, sha: st.Sha}, err
	}
	s.a.Infof("generation %d entered deploy; running the command under the lease", g.Generation)
	if s.in.checkRun {
		s.publishCheck(ctx, &result{generation: g.Generation, scopes: st.Scopes, sha: st.Sha, outcome: "authorized", phase: g.Phase})
	}
	sup := &pass.Supervisor{Auth: s.auth, Grant: g, TTL: s.in.leaseTTL, Grace: 10 * time.Second,
		Stdin: s.deps.Stdin, Stdout: orWriter(s.deps.Stdout, os.Stdout), Stderr: orWriter(s.deps.Stderr, os.Stderr), Env: s.deps.Env,
		Commits:  st.Commits,
		Progress: func(format string, args ...any) { s.a.Infof(format, args...) },
		Complete: func(ctx context.Context, o authority.Outcome, msg string) (*authority.CompleteResult, error) {
			return s.auth.Complete(ctx, s.completion(st, o, msg))
		}}
	if sup.Stdin == nil {
		sup.Stdin = os.Stdin
	}
	out := &result{generation: g.Generation, authorized: true, scopes: st.Scopes, sha: st.Sha, tokens: g.Tokens}
	res, err := sup.Run(ctx, []string{"bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", s.in.run})
	if err != nil {
		return out, err
	}
	switch res.Ending {
	case pass.LeaseLost:
		return out, fmt.Errorf("lease lost while the command ran: %w", res.Lost)
	case pass.Interrupted:
		return out, ErrInterrupted
	}
	return s.completed(out, res.Completion)
}

// completed turns a completion into the step's result.
func (s *step) completed(out *result, cr *authority.CompleteResult) (*result, error) {
	switch cr.Overall() {
	case authority.ResultDeployed:
		out.outcome = "deployed"
		out.headline = fmt.Sprintf("Generation %d deployed %s.", out.generation, strings.Join(out.scopes, ", "))
		return out, nil
	case authority.ResultSuperseded:
		for _, sc := range out.scopes {
			if sup := cr.Superseded[sc]; sup != nil {
				out.superseded = sup
				break
			}
		}
		if out.superseded == nil {
			out.superseded = &authority.SupersededError{Environment: s.in.environment, Generation: out.generation}
		}
		return out, nil
	case authority.ResultRetry:
		out.headline = fmt.Sprintf("Generation %d failed on attempt %d of %d; re-run the job to retry.", out.generation, s.attempt(), s.in.maxAttempts)
		return out, ErrRetry
	}
	out.headline = fmt.Sprintf("Generation %d failed on its final attempt (%d of %d); the error is recorded.", out.generation, s.attempt(), s.in.maxAttempts)
	return out, ErrFailed
}

func (s *step) completion(st *state, o authority.Outcome, msg string) authority.Completion {
	return authority.Completion{Environment: st.Environment, Generation: st.Generation, Scopes: st.Scopes, Holder: st.Holder,
		Tokens: st.Tokens, Outcome: o, Attempt: s.attempt(), MaxAttempts: s.in.maxAttempts, Message: msg, Run: s.runURL()}
}

// complete records how the pass ended. The outcome comes from LATESTWINS_OUTCOME (default success),
// e.g. env: LATESTWINS_OUTCOME: ${{ job.status }} mapped to success or failure.
func (s *step) complete(ctx context.Context) (*result, error) {
	st, err := s.loadState()
	if err != nil {
		return nil, err
	}
	if st.Generation == 0 {
		return nil, &authority.InputError{Field: "command", Value: cmdComplete,
			Fix: "this job has no pass for " + s.in.environment + ": run the Action with command: claim or gate earlier in the same job"}
	}
	if len(s.in.scopes) > 0 {
		st.Scopes = s.in.scopes
	}
	o, err := authority.ParseOutcome(firstNonEmpty(s.a.Getenv("LATESTWINS_OUTCOME"), string(authority.OutcomeSuccess)))
	if err != nil {
		return nil, fmt.Errorf("LATESTWINS_OUTCOME: %w", err)
	}
	out := &result{generation: st.Generation, authorized: true, scopes: st.Scopes, sha: st.Sha, tokens: st.Tokens}
	cr, err := s.auth.Complete(ctx, s.completion(st, o, s.a.Getenv("LATESTWINS_MESSAGE")))
	if err != nil {
		return out, err
	}
	if cr.Overall() == authority.ResultRetry {
		// A lost lease and an interruption are retryable without being a failed attempt.
		switch o {
		case authority.OutcomeLost:
			return out, fmt.Errorf("LATESTWINS_OUTCOME is %s: %w", o, authority.ErrLeaseLost)
		case authority.OutcomeInterrupted:
			return out, ErrInterrupted
		}
	}
	return s.completed(out, cr)
}

// summarize appends the environment's current state, read from the store, to the job summary, and
// the store the Action chose when it was given none.
func (s *step) summarize(ctx context.Context, res *result) {
	if s.a.Getenv("GITHUB_STEP_SUMMARY") == "" {
		return
	}
	var b bytes.Buffer
	e, err := s.view.Status(ctx, s.in.environment)
	if err == nil {
		err = report.JobSummary(&b, report.Summary{Env: e, Required: s.required(ctx, e), Now: s.view.Now(), Headline: res.headline})
	}
	if err != nil {
		s.a.Infof("no job summary: %v", err)
		b.Reset()
	}
	if s.in.defaultStore {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "State: `%s`, the refs under `refs/latestwins/` of this repository (no store or api-url given). The job needs `permissions: contents: write`.\n",
			strings.ReplaceAll(s.in.store, "`", ""))
	}
	if b.Len() > 0 {
		s.a.AddStepSummary(b.String())
	}
}

// defaultStoreLine says, in the log, which store the Action chose, given neither store nor api-url,
// and what the job needs for it.
func defaultStoreLine(store string) string {
	return fmt.Sprintf("State: %s, the refs under refs/latestwins/ of this repository (no store or api-url given). The job needs permissions: contents: write.", store)
}

// writeOutputs sets the step's outputs. Outside GitHub Actions (no GITHUB_OUTPUT) it prints them.
func writeOutputs(a *githubactions.Action, r *result) {
	scopes := r.scopes
	if scopes == nil {
		scopes = []string{}
	}
	scopesJSON, _ := json.Marshal(scopes)
	token := ""
	switch len(r.tokens) {
	case 0:
	case 1:
		for _, t := range r.tokens {
			token = strconv.FormatInt(t, 10)
		}
	default:
		b, _ := json.Marshal(r.tokens)
		token = string(b)
	}
	gen, by := "", ""
	if r.generation > 0 {
		gen = strconv.FormatInt(r.generation, 10)
	}
	if r.supersededBy > 0 {
		by = strconv.FormatInt(r.supersededBy, 10)
	}
	outputs := [][2]string{{"generation", gen}, {"authorized", strconv.FormatBool(r.authorized)}, {"superseded-by", by},
		{"token", token}, {"scopes", string(scopesJSON)}, {"outcome", r.outcome}, {"sha", r.sha}}
	for _, kv := range outputs {
		if a.Getenv("GITHUB_OUTPUT") == "" {
			a.Infof("output %s=%s", kv[0], kv[1])
			continue
		}
		a.SetOutput(kv[0], kv[1])
	}
}

func orWriter(w, def io.Writer) io.Writer {
	if w == nil {
		return def
	}
	return w
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
