// Package api is the App's HTTP API for the Action (/v1), authenticated by the workflow's GitHub
// Actions OIDC token (oidc.go): a token may act only on the scopes the trusted configuration builds
// from its repository, and its claims are ordered and given barriers by GitHub (apiclaim.go).
package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/pass"
	"github.com/latestwins/latestwins/internal/report"
)

// server serves /v1, the HTTP API the Action uses instead of store credentials. Each request carries
// the workflow's GitHub Actions OIDC token; the token's repository must build a scope of the
// environment (its configuration says so), and a request may touch only such scopes.
type server struct {
	app      *core.App
	tokens   TokenVerifier
	longPoll time.Duration
	stopping <-chan struct{}
}

// Routes registers the /v1 endpoints of a on mux, for the workloads whose tokens verifies. The
// environment may hold slashes (preview/pr-7), escaped or not: the verb is the path's last segment.
// longPoll is the longest a gate request may wait for a held lease (its wait_ms; 0: none); a
// waiting request is answered at once when stopping closes (the server shuts down).
func Routes(mux *http.ServeMux, a *core.App, tokens TokenVerifier, longPoll time.Duration, stopping <-chan struct{}) {
	p := &server{app: a, tokens: tokens, longPoll: max(longPoll, 0), stopping: stopping}
	mux.HandleFunc("POST /v1/environments/{path...}", p.serve)
	mux.HandleFunc("GET /v1/environments/{path...}", p.serve)
	mux.HandleFunc("GET /v1/environments", p.serveOverview)
}

// serveOverview answers GET /v1/environments: what is live where across the environments with a
// scope built from the token's repository in the trusted configuration (a preview template's
// environments among them while they have work pending: listing every stored one is a scan).
func (p *server) serveOverview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	log := p.app.Log.With("api", "environments")
	wl, err := p.authenticate(ctx, r)
	if err != nil {
		log.WarnContext(ctx, "API request refused", "err", err)
		p.fail(w, err)
		return
	}
	o, err := p.overview(ctx, log.With("repo", wl.Repository, "actor", wl.Actor), wl)
	if err != nil {
		log.InfoContext(ctx, "API request refused", "err", err)
		p.fail(w, err)
		return
	}
	writeAPI(w, http.StatusOK, apiclient.OverviewResponse{Overview: o, Now: p.app.Auth.Now()})
}

func (p *server) overview(ctx context.Context, log *slog.Logger, wl *Workload) (*report.Overview, error) {
	repo, err := core.ParseRepo(wl.Repository)
	if err != nil {
		return nil, &TokenError{Reason: err.Error()}
	}
	cfg, err := p.app.ConfigFor(ctx, log, 0, repo, "")
	if err != nil {
		return nil, err
	}
	var configured []string
	for _, e := range cfg.Environments {
		if !e.Preview() {
			configured = append(configured, e.Name)
		}
	}
	names, read, err := p.app.ReadThese(ctx, configured)
	if err != nil {
		return nil, err
	}
	feeds := map[string]bool{}
	for _, name := range names {
		e, ok := cfg.Environment(name)
		if !ok {
			continue
		}
		if e.FedBy(wl.Repository) {
			feeds[name] = true
		}
	}
	if len(feeds) == 0 {
		return nil, &forbiddenError{fmt.Sprintf("%s feeds no environment: no scope in %s is built from it (an administrator adds repository: %s to a scope there)",
			wl.Repository, p.app.ConfigWhere(), wl.Repository)}
	}
	return core.OverviewOf(read, feeds, p.app.Auth.Now()), nil
}

// recheck is how often a long-polling gate asks again although nothing in this process wrote the
// environment: a lease released by another process (an operator's unlock through the store)
// is then taken within it, as a polling client would take it.
const recheck = 800 * time.Millisecond

// gateWait asks the gate, and while another holder has the lease asks again each time this
// process writes what the gate reads (a release, a completion; for a gate of one scope in the
// per-scope layout, that scope's document or the head, not the other scopes'), at the lease's
// expiry and every recheck, until wait has passed: then it answers the last refusal. The
// hand-over of a lease released through this process costs no polling.
func (p *server) gateWait(ctx context.Context, req authority.GateRequest, wait time.Duration) (*authority.Grant, error) {
	auth := p.app.Auth
	deadline := time.Now().Add(wait)
	for {
		// Taken before asking, so that a write between the refusal and the wait is not missed.
		changed := auth.Changed(req.Environment)
		if len(req.Scopes) == 1 {
			changed = auth.ChangedScope(req.Environment, req.Scopes[0]) // not woken by the other scopes' writes
		}
		g, err := auth.Gate(ctx, req)
		var held *authority.HeldError
		left := time.Until(deadline)
		if !errors.As(err, &held) || left <= 0 {
			return g, err
		}
		t := time.NewTimer(min(left, max(held.RetryAfter, time.Millisecond), recheck))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-p.stopping: // the server shuts down: the client asks again, elsewhere or later
			t.Stop()
			return nil, err
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// verbMethod is each endpoint's method.
func verbMethod(verb string) (string, bool) {
	switch verb {
	case "claim", "gate", "renew", "complete", "release", "rollback", "unfreeze", "promote":
		return http.MethodPost, true
	case "status", "history", "report":
		return http.MethodGet, true
	}
	return "", false
}

func (p *server) serve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rest := r.PathValue("path")
	i := strings.LastIndex(rest, "/")
	env, verb := "", rest
	if i >= 0 {
		env, verb = rest[:i], rest[i+1:]
	}
	method, ok := verbMethod(verb)
	if !ok || env == "" {
		writeAPI(w, http.StatusNotFound, apiclient.ErrorBody{Error: apiclient.CodeNotFound,
			Message: "no such endpoint: use /v1/environments/ENV/{claim,gate,renew,complete,release,rollback,unfreeze,promote} (POST) or /v1/environments/ENV/{status,history,report} (GET)"})
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeAPI(w, http.StatusMethodNotAllowed, apiclient.ErrorBody{Error: apiclient.CodeInvalid, Message: fmt.Sprintf("%s takes %s", verb, method)})
		return
	}
	log := p.app.Log.With("api", verb, "environment", env)
	wl, err := p.authenticate(ctx, r)
	if err != nil {
		log.WarnContext(ctx, "API request refused", "err", err)
		p.fail(w, err)
		return
	}
	log = log.With("repo", wl.Repository, "actor", wl.Actor, "run_id", wl.RunID)
	if err := authority.ValidateEnvironment(env); err != nil {
		p.fail(w, err)
		return
	}
	allowed, trusted, err := p.allowed(ctx, log, wl, env)
	if err != nil {
		log.WarnContext(ctx, "API request refused", "err", err)
		p.fail(w, err)
		return
	}
	res, err := p.do(ctx, w, r, wl, env, verb, allowed, trusted)
	if err != nil {
		log.InfoContext(ctx, "API request refused", "err", err)
		p.fail(w, p.redactError(ctx, log, wl, err))
		return
	}
	writeAPI(w, http.StatusOK, res)
}

// viewer is what the token's repository may see: the environments with a scope built from it in
// the trusted configuration. What one environment says of another's commits is shown only to a
// repository that feeds that other one too.
func (p *server) viewer(ctx context.Context, log *slog.Logger, wl *Workload) (report.Viewer, error) {
	repo, err := core.ParseRepo(wl.Repository)
	if err != nil {
		return nil, &TokenError{Reason: err.Error()}
	}
	cfg, err := p.app.ConfigFor(ctx, log, 0, repo, "")
	if err != nil {
		return nil, err
	}
	return func(env string) bool {
		e, ok := cfg.Environment(env)
		return ok && e.FedBy(wl.Repository)
	}, nil
}

// redactError is err as the token's repository may read it: a wait for a commit in an environment
// it does not feed says nothing of what is live there.
func (p *server) redactError(ctx context.Context, log *slog.Logger, wl *Workload, err error) error {
	var held *authority.HeldError
	if !errors.As(err, &held) || held.Promotion == nil || held.Promotion.Live == "" {
		return err
	}
	v, verr := p.viewer(ctx, log, wl)
	if verr != nil {
		v = func(string) bool { return false } // not known: shown to nobody
	}
	hidden := v.Wait(held.Promotion)
	if hidden == held.Promotion {
		return err
	}
	c := *held
	c.Promotion = hidden
	full, short := authority.WaitText(&authority.HeldError{Promotion: held.Promotion}), authority.WaitText(&authority.HeldError{Promotion: hidden})
	return &viewedError{msg: strings.Replace(err.Error(), full, short, 1), err: &c}
}

// viewedError is an error worded for a reader, wrapping the refusal as the reader may read it.
type viewedError struct {
	msg string
	err error
}

func (e *viewedError) Error() string { return e.msg }
func (e *viewedError) Unwrap() error { return e.err }

// do runs one verb for an authenticated workload; allowed are the scopes it may touch, trusted the
// environment as the trusted configuration defines it.
func (p *server) do(ctx context.Context, w http.ResponseWriter, r *http.Request, wl *Workload, env, verb string, allowed []string, trusted *config.Environment) (any, error) {
	auth := p.app.Auth
	switch verb {
	case "status":
		e, err := auth.Status(ctx, env)
		if err != nil {
			return nil, err
		}
		v, err := p.viewer(ctx, p.app.Log, wl)
		if err != nil {
			return nil, err
		}
		return apiclient.StatusResponse{Env: v.Env(e), Now: auth.Now()}, nil
	case "history":
		before, limit, err := historyQuery(r)
		if err != nil {
			return nil, err
		}
		page, err := auth.History(ctx, env, before, limit)
		if err != nil {
			return nil, err
		}
		v, err := p.viewer(ctx, p.app.Log, wl)
		if err != nil {
			return nil, err
		}
		page.Events = v.Events(page.Events)
		return page, nil
	case "report":
		// The figures name no commit: what the token's repository may see of the environment
		// (allowed) is all of them.
		since, err := report.ParseSince(r.URL.Query().Get("since"))
		if err != nil {
			return nil, err
		}
		state, err := auth.Status(ctx, env)
		if err != nil {
			return nil, err
		}
		return report.ReadDelivery(ctx, auth, env, state, since, auth.Now())
	case "claim":
		var req apiclient.ClaimRequest
		if err := p.decode(w, r, &req); err != nil {
			return nil, err
		}
		if req.Generation != 0 || len(req.Scopes) > 0 {
			if req.Enter != nil {
				return nil, &authority.InputError{Field: "enter", Fix: "enter the deploy phase with a claim of an intent; a claim of a generation accepted before asks the gate"}
			}
			return p.claimGeneration(ctx, wl, env, req, allowed)
		}
		in := req.Intent
		if err := sameEnv(in.Environment, env); err != nil {
			return nil, err
		}
		in.Environment = env
		if len(in.Scopes) == 0 {
			return nil, &authority.InputError{Field: "scopes", Fix: "name the scopes to claim, e.g. [\"api\"]"}
		}
		if err := p.permit(wl, env, in.Scopes, allowed); err != nil {
			return nil, err
		}
		// The verified actor, not the one the request names: the audit trail records who ran it.
		in.Actor = wl.Actor
		// An origin names the installation and repository the App acts as when it starts the work
		// again or asks GitHub about its commits: the App's to record, never a workload's to choose.
		in.Origin = ""
		// The environment's policy and promotion requirement are the trusted configuration's: a
		// workload feeds some scopes of an environment and may not switch how all of them are
		// ordered, nor let its commits skip the environments they must be live in first.
		in.Policy = authority.Policy(trusted.Policy)
		in.Requires = trusted.Requirements()
		in.AlertAfter = trusted.AlertThreshold()
		// The gates too: a workload may not let its commit skip soak time, approvals or windows.
		in.Gates = trusted.GatesOf()
		// Ordering facts are GitHub's, not a workload's: a push time in 2100 or a parent it names
		// would make every later commit older (never deployed), a redeploy would skip the guard.
		// The App asks GitHub instead (claimIntent), or takes the claim as it arrives.
		in.Order, in.Before, in.Redeploy = authority.Order{}, "", false
		// Barriers are the trusted configuration's barrier-paths, matched by GitHub's list of the
		// changed files (claimIntent), never a workload's word: a barrier that fails blocks the scope.
		in.Barrier = nil
		in.Sha, in.Ref = cmp.Or(in.Sha, wl.Sha), cmp.Or(in.Ref, wl.Ref)
		var opts []authority.AcceptOption
		if e := req.Enter; e != nil {
			if e.LeaseTTLMillis <= 0 {
				return nil, &authority.InputError{Field: "enter.lease_ttl_ms", Value: fmt.Sprint(e.LeaseTTLMillis), Fix: "give the deploy leases' length in milliseconds"}
			}
			opts = append(opts, authority.EnterDeploy(wl.Holder(e.Holder), time.Duration(e.LeaseTTLMillis)*time.Millisecond))
		}
		return p.claimIntent(ctx, wl, in, trusted, opts...)
	case "gate":
		var req apiclient.GateRequest
		if err := p.decode(w, r, &req); err != nil {
			return nil, err
		}
		if err := p.permit(wl, env, req.Scopes, allowed); err != nil {
			return nil, err
		}
		if req.LeaseTTLMillis < 0 {
			return nil, &authority.InputError{Field: "lease_ttl_ms", Value: fmt.Sprint(req.LeaseTTLMillis), Fix: "give a lease length in milliseconds, or 0 for none"}
		}
		if req.WaitMillis < 0 {
			return nil, &authority.InputError{Field: "wait_ms", Value: fmt.Sprint(req.WaitMillis), Fix: "give how long to wait for a held lease in milliseconds, or 0 for an answer at once"}
		}
		if p.longPoll > 0 {
			w.Header().Set(apiclient.LongPollHeader, strconv.FormatInt(p.longPoll.Milliseconds(), 10))
		}
		wait := min(time.Duration(req.WaitMillis)*time.Millisecond, p.longPoll)
		return p.gateWait(ctx, authority.GateRequest{Environment: env, Generation: req.Generation, Scopes: req.Scopes,
			Phase: req.Phase, Holder: wl.Holder(req.Holder), LeaseTTL: time.Duration(req.LeaseTTLMillis) * time.Millisecond}, wait)
	case "renew":
		var req apiclient.RenewRequest
		if err := p.decode(w, r, &req); err != nil {
			return nil, err
		}
		g, err := p.grant(wl, env, &req.Grant, allowed)
		if err != nil {
			return nil, err
		}
		if req.LeaseTTLMillis <= 0 {
			return nil, &authority.InputError{Field: "lease_ttl_ms", Value: fmt.Sprint(req.LeaseTTLMillis), Fix: "give the lease length in milliseconds"}
		}
		return apiclient.OK{OK: true}, auth.Renew(ctx, g, time.Duration(req.LeaseTTLMillis)*time.Millisecond)
	case "release":
		var req apiclient.ReleaseRequest
		if err := p.decode(w, r, &req); err != nil {
			return nil, err
		}
		g, err := p.grant(wl, env, &req.Grant, allowed)
		if err != nil {
			return nil, err
		}
		return apiclient.OK{OK: true}, auth.Release(ctx, g)
	case "rollback":
		var req apiclient.RollbackRequest
		if err := p.decode(w, r, &req); err != nil {
			return nil, err
		}
		if err := p.permit(wl, env, []string{req.Scope}, allowed); err != nil {
			return nil, err
		}
		return p.rollback(ctx, wl, env, req)
	case "promote":
		var req apiclient.PromoteRequest
		if err := p.decode(w, r, &req); err != nil {
			return nil, err
		}
		if err := p.permit(wl, env, []string{req.Scope}, allowed); err != nil {
			return nil, err
		}
		return p.promote(ctx, wl, env, req, trusted)
	case "unfreeze":
		var req apiclient.UnfreezeRequest
		if err := p.decode(w, r, &req); err != nil {
			return nil, err
		}
		if err := p.permit(wl, env, []string{req.Scope}, allowed); err != nil {
			return nil, err
		}
		f, err := auth.Unfreeze(ctx, authority.UnfreezeRequest{Environment: env, Scope: req.Scope, Freeze: req.Freeze, Actor: wl.Actor,
			Reason: req.Reason, Request: apiRequest(wl, req.Request)})
		if err != nil {
			return nil, err
		}
		p.app.StartHeld(ctx, p.app.Log, env, req.Scope)
		return apiclient.UnfreezeResponse{Freeze: f}, nil
	default: // complete
		var req apiclient.CompleteRequest
		if err := p.decode(w, r, &req); err != nil {
			return nil, err
		}
		c := req.Completion
		if err := sameEnv(c.Environment, env); err != nil {
			return nil, err
		}
		c.Environment = env
		if err := p.permit(wl, env, c.Scopes, allowed); err != nil {
			return nil, err
		}
		c.Holder = wl.Holder(c.Holder)
		return auth.Complete(ctx, c)
	}
}

// claimGeneration claims scopes for a generation accepted before: a workflow the App dispatched
// (for a push, a redeploy or a rollback) claims the generation it was given, and learns the commit
// that generation deploys, which may not be its branch's head.
func (p *server) claimGeneration(ctx context.Context, wl *Workload, env string, req apiclient.ClaimRequest, allowed []string) (any, error) {
	if req.Intent.ID != "" || req.Intent.Sha != "" {
		return nil, &authority.InputError{Field: "generation", Value: fmt.Sprint(req.Generation), Fix: "send either an intent to accept or a generation to claim, not both"}
	}
	if req.Generation < 1 {
		return nil, &authority.InputError{Field: "generation", Value: fmt.Sprint(req.Generation), Fix: "give the generation the workflow was dispatched for"}
	}
	if len(req.Scopes) == 0 {
		return nil, &authority.InputError{Field: "scopes", Fix: "name the scopes to claim for the generation, e.g. [\"api\"]"}
	}
	if err := p.permit(wl, env, req.Scopes, allowed); err != nil {
		return nil, err
	}
	cr, err := p.app.Auth.Claim(ctx, env, req.Generation, req.Scopes)
	if err != nil {
		return nil, err
	}
	return &authority.AcceptResult{Generation: req.Generation, Duplicate: true, Accepted: cr.Scopes(), Claim: cr}, nil
}

// rollback rolls a scope built from the workload's repository back, and dispatches its workflow
// as the App's installation on that repository (as the comment command and the status page do).
func (p *server) rollback(ctx context.Context, wl *Workload, env string, req apiclient.RollbackRequest) (any, error) {
	a := p.app
	log := a.Log.With("api", "rollback", "environment", env, "repo", wl.Repository, "actor", wl.Actor)
	repo, err := core.ParseRepo(wl.Repository)
	if err != nil {
		return nil, &TokenError{Reason: err.Error()}
	}
	to := strings.ToLower(strings.TrimSpace(req.To))
	if to != "" && !core.IsCommitSha(to) {
		return nil, &authority.InputError{Field: "to", Value: req.To, Fix: "give 7 to 40 hexadecimal digits of the commit's sha, or leave it out for the commit live before the current one"}
	}
	installation, err := a.InstallationOf(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("the App's installation on %s: %w", repo, err)
	}
	// The repository's own file may have chosen the scope's workflow: the narrowed configuration,
	// as a comment command's (the trusted one alone if that file is refused). The scope itself was
	// checked against the trusted file (allowed).
	cfg, err := a.IncidentConfig(ctx, log, installation, repo)
	if err != nil {
		return nil, err
	}
	sels, problem := core.NamedScope(cfg, repo, env, req.Scope)
	if problem != "" {
		return nil, &forbiddenError{problem}
	}
	t := core.Target{Sel: sels[0], Installation: installation}
	if e, ok := cfg.Environment(env); ok && !e.Preview() {
		t.Branch = t.Scope().Branch
	}
	done, err := a.Rollback(ctx, log, t, to, wl.Actor, req.Reason, apiRequest(wl, req.Request), "api rollback by "+wl.Repository)
	if done == nil {
		return nil, err
	}
	res := apiclient.RollbackResponse{Generation: done.Generation, Sha: done.Sha, Duplicate: done.Duplicate, Dispatched: dispatches(a, done.Dispatched)}
	if err != nil {
		// The rollback stands; a repeat of the request would not dispatch again, so the answer says
		// so, and the recovery sweep re-drives the rollback through its origin.
		log.WarnContext(ctx, "rollback recorded, dispatch failed", "err", err)
		res.DispatchFailed = err.Error() + "; the rollback is recorded, and the recovery sweep starts its workflow again"
	}
	return res, nil
}

// promote promotes a scope built from the workload's repository into env from an environment env
// requires in the trusted configuration, and dispatches its workflow as the App's installation on
// that repository (as the comment command does).
func (p *server) promote(ctx context.Context, wl *Workload, env string, req apiclient.PromoteRequest, trusted *config.Environment) (any, error) {
	a := p.app
	log := a.Log.With("api", "promote", "environment", env, "repo", wl.Repository, "actor", wl.Actor)
	from, problem := core.PromoteFrom(trusted, strings.TrimSpace(req.From))
	if problem != "" {
		return nil, &authority.InputError{Field: "from", Value: req.From, Fix: problem}
	}
	repo, err := core.ParseRepo(wl.Repository)
	if err != nil {
		return nil, &TokenError{Reason: err.Error()}
	}
	installation, err := a.InstallationOf(ctx, repo)
	if err != nil {
		return nil, fmt.Errorf("the App's installation on %s: %w", repo, err)
	}
	cfg, err := a.ConfigFor(ctx, log, installation, repo, "")
	if err != nil {
		return nil, err
	}
	sels, problem := core.NamedScope(cfg, repo, env, req.Scope)
	if problem != "" {
		return nil, &forbiddenError{problem}
	}
	t := core.PromoteTarget(trusted, sels[0], installation)
	done, err := a.Promote(ctx, log, t, from, wl.Actor, apiRequest(wl, req.Request), "api promote by "+wl.Repository)
	if done == nil {
		return nil, err
	}
	res := apiclient.PromoteResponse{From: from, Generation: done.Generation, Sha: done.Sha, Duplicate: done.Duplicate, Dispatched: dispatches(a, done.Dispatched)}
	if err != nil {
		log.WarnContext(ctx, "promotion recorded, dispatch failed", "err", err)
		res.DispatchFailed = err.Error() + "; the promotion is recorded, and the recovery sweep starts its workflow again"
	}
	return res, nil
}

// dispatches is what an answer says of the workflows started: none without App credentials (the
// requests were logged, not sent).
func dispatches(a *core.App, drs []core.DispatchRequest) []apiclient.Dispatch {
	if a.Dispatch == nil {
		return nil
	}
	var out []apiclient.Dispatch
	for _, dr := range drs {
		out = append(out, apiclient.Dispatch{Repository: dr.Repo.String(), Workflow: dr.Workflow, Ref: dr.Ref})
	}
	return out
}

// apiRequest scopes a caller's request id to its repository, so that two repositories' ids never
// meet; empty stays empty (a new request).
func apiRequest(wl *Workload, id string) string {
	if id == "" {
		return ""
	}
	return "api:" + strings.ToLower(wl.Repository) + ":" + id
}

// authenticate verifies the bearer token.
func (p *server) authenticate(ctx context.Context, r *http.Request) (*Workload, error) {
	scheme, raw, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || raw == "" {
		audience := apiclient.Audience
		if v, ok := p.tokens.(interface{ Audience() string }); ok {
			audience = v.Audience()
		}
		return nil, &TokenError{Reason: "no bearer token: send the workflow's OIDC token (audience " + audience + ") as Authorization: Bearer TOKEN"}
	}
	return p.tokens.Verify(ctx, strings.TrimSpace(raw))
}

// allowed lists the scopes of env built from the workload's repository, and returns env as the
// trusted configuration defines it (a repository's own file cannot add scopes, so it is not read);
// no scope is a *forbiddenError.
func (p *server) allowed(ctx context.Context, log *slog.Logger, wl *Workload, env string) ([]string, *config.Environment, error) {
	repo, err := core.ParseRepo(wl.Repository)
	if err != nil {
		return nil, nil, &TokenError{Reason: err.Error()}
	}
	cfg, err := p.app.ConfigFor(ctx, log, 0, repo, "")
	if err != nil {
		return nil, nil, err
	}
	where := p.app.ConfigWhere()
	e, ok := cfg.Environment(env)
	if !ok {
		return nil, nil, &forbiddenError{fmt.Sprintf("%s may not act on %s: %s defines no such environment", wl.Repository, env, where)}
	}
	scopes := e.ScopesFedBy(wl.Repository)
	if len(scopes) == 0 {
		return nil, nil, &forbiddenError{fmt.Sprintf("%s may not act on %s: none of its scopes is built from that repository in %s (an administrator adds repository: %s to a scope there)",
			wl.Repository, env, where, wl.Repository)}
	}
	return scopes, e, nil
}

// permit refuses scopes that are not built from the workload's repository.
func (p *server) permit(wl *Workload, env string, scopes, allowed []string) error {
	var bad []string
	for _, s := range scopes {
		if !slices.Contains(allowed, s) {
			bad = append(bad, s)
		}
	}
	if len(bad) > 0 {
		return &forbiddenError{fmt.Sprintf("%s may not act on %s of %s: they are not built from it (its scopes there: %s)",
			wl.Repository, strings.Join(bad, ", "), env, strings.Join(allowed, ", "))}
	}
	return nil
}

// grant checks a grant sent back for renew or release.
func (p *server) grant(wl *Workload, env string, g *authority.Grant, allowed []string) (*authority.Grant, error) {
	if err := sameEnv(g.Environment, env); err != nil {
		return nil, err
	}
	g.Environment = env
	if len(g.Tokens) == 0 {
		return nil, &authority.InputError{Field: "grant", Fix: "send the grant the gate returned, with its tokens"}
	}
	g.Holder = wl.Holder(g.Holder)
	return g, p.permit(wl, env, pass.TokenScopes(g.Tokens), allowed)
}

// maxHistoryPage bounds the events of one history page.
const maxHistoryPage = 1000

// historyQuery reads ?before=SEQ&limit=N (defaults: the newest, 50).
func historyQuery(r *http.Request) (int64, int, error) {
	q := r.URL.Query()
	before, limit := int64(0), 50
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, 0, &authority.InputError{Field: "before", Value: v, Fix: "give an event number from an earlier page, or 0 for the newest"}
		}
		before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxHistoryPage {
			return 0, 0, &authority.InputError{Field: "limit", Value: v, Fix: fmt.Sprintf("ask for 1 to %d events", maxHistoryPage)}
		}
		limit = n
	}
	return before, limit, nil
}

func sameEnv(body, path string) error {
	if body != "" && body != path {
		return &authority.InputError{Field: "environment", Value: body, Fix: fmt.Sprintf("the body names another environment than the path (%s); send one", path)}
	}
	return nil
}

// decode reads a capped JSON body with no unknown fields.
func (p *server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, apiclient.MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &authority.InputError{Field: "body", Fix: fmt.Sprintf("send at most %d bytes", apiclient.MaxBodyBytes)}
		}
		return &authority.InputError{Field: "body", Fix: fmt.Sprintf("send a JSON object of the endpoint's shape (docs/api.md): %v", err)}
	}
	if dec.More() {
		return &authority.InputError{Field: "body", Fix: "send one JSON object"}
	}
	return nil
}

// forbiddenError: the token is valid but its repository may not act on the environment or scope (403).
type forbiddenError struct{ msg string }

func (e *forbiddenError) Error() string { return e.msg }

// fail writes err as the API's error body.
func (p *server) fail(w http.ResponseWriter, err error) {
	status, body := apiError(err)
	if body.Error == apiclient.CodeUnavailable {
		p.app.Log.Error("API request failed", "err", err)
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	}
	if body.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.FormatInt(body.RetryAfter, 10))
	}
	writeAPI(w, status, body)
}

// rateLimited is GitHub's refusal for a while (a rate limit), saying how long.
type rateLimited interface {
	error
	RetryDelay() time.Duration
}

// apiError maps an error to its status and body: the authority's refusals keep their data.
func apiError(err error) (int, apiclient.ErrorBody) {
	var (
		held       *authority.HeldError
		mismatch   *authority.FreezeMismatchError
		full       *authority.QueueFullError
		sup        *authority.SupersededError
		lost       *authority.LostError
		input      *authority.InputError
		forbidden  *forbiddenError
		refreshing *core.RefreshingError
		limited    rateLimited
	)
	msg := err.Error()
	switch {
	case errors.As(err, &held):
		return http.StatusConflict, apiclient.ErrorBody{Error: apiclient.CodeLocked, Message: msg, Wait: held.Why(),
			RetryAfter: max(int64(held.RetryAfter/time.Second), 1), Resource: held.Resource, Holder: held.Holder,
			Purpose: held.Purpose, Generation: held.Generation, ExpiresAt: held.ExpiresAt,
			Ahead: held.Ahead, HeadSha: held.HeadSha, Barrier: held.Barrier, Blocked: held.Blocked, Frozen: held.Frozen,
			Promotion: held.Promotion, Soak: held.Soak, Approval: held.Approval, Window: held.Window, Until: held.Until}
	case errors.Is(err, authority.ErrNotFrozen):
		return http.StatusConflict, apiclient.ErrorBody{Error: apiclient.CodeNotFrozen, Message: msg}
	case errors.Is(err, authority.ErrRepeated):
		return http.StatusConflict, apiclient.ErrorBody{Error: apiclient.CodeRepeated, Message: msg}
	case errors.Is(err, authority.ErrMoved):
		return http.StatusConflict, apiclient.ErrorBody{Error: apiclient.CodeMoved, Message: msg}
	case errors.As(err, &mismatch):
		return http.StatusConflict, apiclient.ErrorBody{Error: apiclient.CodeFreezeMismatch, Message: msg,
			Scope: mismatch.Scope, Generation: mismatch.Named, Frozen: mismatch.Current}
	case errors.As(err, &full):
		return http.StatusTooManyRequests, apiclient.ErrorBody{Error: apiclient.CodeQueueFull, Message: msg,
			Scope: full.Scope, Pending: full.Pending, Limit: full.Limit, Bytes: full.Bytes}
	case errors.As(err, &sup):
		return http.StatusConflict, apiclient.ErrorBody{Error: apiclient.CodeSuperseded, Message: msg,
			Scope: sup.Scope, Generation: sup.Generation, By: sup.By, BySha: sup.BySha}
	case errors.As(err, &lost):
		return http.StatusConflict, apiclient.ErrorBody{Error: apiclient.CodeLeaseLost, Message: msg,
			Resource: lost.Resource, Token: lost.Token, Holder: lost.Holder, Current: lost.Current, Reason: lost.Reason}
	case errors.Is(err, ErrTokenRejected):
		return http.StatusUnauthorized, apiclient.ErrorBody{Error: apiclient.CodeUnauthorized, Message: msg}
	case errors.As(err, &forbidden):
		return http.StatusForbidden, apiclient.ErrorBody{Error: apiclient.CodeForbidden, Message: msg}
	case errors.As(err, &input):
		return http.StatusBadRequest, apiclient.ErrorBody{Error: apiclient.CodeInvalid, Message: msg, Field: input.Field, Value: input.Value, Fix: input.Fix}
	case errors.Is(err, authority.ErrInvalidInput):
		return http.StatusBadRequest, apiclient.ErrorBody{Error: apiclient.CodeInvalid, Message: msg}
	case errors.As(err, &refreshing):
		return http.StatusServiceUnavailable, apiclient.ErrorBody{Error: apiclient.CodeUnavailable, Message: msg,
			RetryAfter: max(int64(refreshing.RetryAfter/time.Second), 1)}
	case errors.As(err, &limited):
		return http.StatusServiceUnavailable, apiclient.ErrorBody{Error: apiclient.CodeUnavailable,
			Message: "the App is rate limited by GitHub; retry after the time given", RetryAfter: max(int64(limited.RetryDelay()/time.Second), 1)}
	case errors.Is(err, core.ErrConfigUnavailable):
		return http.StatusServiceUnavailable, apiclient.ErrorBody{Error: apiclient.CodeUnavailable, Message: msg, RetryAfter: 30}
	}
	return http.StatusServiceUnavailable, apiclient.ErrorBody{Error: apiclient.CodeUnavailable,
		Message: "the App could not complete the request (its store or the token issuer is unreachable); retry"}
}

func writeAPI(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
