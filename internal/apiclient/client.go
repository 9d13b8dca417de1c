package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// TokenSource gives the bearer token sent with each request (the workflow's OIDC token).
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// Error is a refusal of the API that has no authority counterpart: unauthorized and forbidden
// (bad configuration: they match authority.ErrInvalidInput), unavailable and anything unexpected
// (retryable).
type Error struct {
	Status  int
	Code    string
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("latestwins API answered %d %s: %s", e.Status, e.Code, e.Message)
}

// Is matches authority.ErrInvalidInput for unauthorized and forbidden: re-running cannot help until
// the workflow's permissions or the environment's configuration change.
func (e *Error) Is(target error) bool {
	return target == authority.ErrInvalidInput && (e.Code == CodeUnauthorized || e.Code == CodeForbidden)
}

// Client calls the App's /v1 API. It is safe for concurrent use.
type Client struct {
	base   *url.URL
	tokens TokenSource
	hc     *http.Client
	// longPoll is the longest gate wait the App announced in its last gate answer, in
	// milliseconds (LongPollHeader); 0: none.
	longPoll atomic.Int64
}

// MaxLongPoll bounds the wait of one gate request (GateWait), well inside the client's timeout.
const MaxLongPoll = 20 * time.Second

// New returns a client of the API at baseURL (the App's URL, e.g. https://latestwins.example.com/).
// The URL must be https, or http on a loopback address. hc nil: a client with a 30 s timeout.
func New(baseURL string, tokens TokenSource, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.RawQuery != "" || u.Fragment != "" {
		return nil, &authority.InputError{Field: "api-url", Value: baseURL, Fix: "give the App's base URL, such as https://latestwins.example.com/"}
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return nil, &authority.InputError{Field: "api-url", Value: baseURL,
			Fix: "use https: the workflow's OIDC token must not cross the network in clear text (http is allowed only on loopback)"}
	}
	if tokens == nil {
		return nil, errors.New("apiclient: no TokenSource")
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: u, tokens: tokens, hc: hc}, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Claim accepts the intent and claims its scopes in one write (pass.Claim on the App's side).
func (c *Client) Claim(ctx context.Context, in authority.Intent) (*authority.AcceptResult, error) {
	var res authority.AcceptResult
	if err := c.do(ctx, http.MethodPost, in.Environment, "claim", nil, ClaimRequest{Intent: in}, &res); err != nil {
		return nil, fmt.Errorf("claim %q in %s: %w", in.ID, in.Environment, err)
	}
	return &res, nil
}

// ClaimAndEnter claims the intent and, when the gate lets the pass go at once, enters its deploy
// phase in the same write, with the leases of holder for ttl (pass.Enterer). res.Entered is nil
// when it did not: the pass then asks the gate. An App of an earlier release refuses the request's
// enter field as unknown, before it writes anything; the claim is then made without it.
func (c *Client) ClaimAndEnter(ctx context.Context, in authority.Intent, holder string, ttl time.Duration) (*authority.AcceptResult, error) {
	var res authority.AcceptResult
	sent := time.Now()
	req := ClaimRequest{Intent: in, Enter: &EnterRequest{Holder: holder, LeaseTTLMillis: ttl.Milliseconds()}}
	if err := c.do(ctx, http.MethodPost, in.Environment, "claim", nil, req, &res); err != nil {
		var bad *authority.InputError
		if errors.As(err, &bad) && bad.Field == "body" && strings.Contains(bad.Fix, `unknown field "enter"`) {
			return c.Claim(ctx, in)
		}
		return nil, fmt.Errorf("claim %q in %s: %w", in.ID, in.Environment, err)
	}
	if res.Entered != nil {
		res.Entered.RequestedAt = sent
	}
	return &res, nil
}

// ClaimGeneration claims scopes for a generation accepted before (authority.Authority.Claim on the
// App's side); the claimed scopes carry the commit that generation deploys.
func (c *Client) ClaimGeneration(ctx context.Context, env string, gen int64, scopes []string) (*authority.ClaimResult, error) {
	var res authority.AcceptResult
	if err := c.do(ctx, http.MethodPost, env, "claim", nil, ClaimRequest{Generation: gen, Scopes: scopes}, &res); err != nil {
		return nil, fmt.Errorf("claim generation %d in %s: %w", gen, env, err)
	}
	if res.Claim == nil {
		return nil, fmt.Errorf("claim generation %d in %s: the API answered no claim", gen, env)
	}
	return res.Claim, nil
}

// Gate enters a phase; a refusal is a *authority.SupersededError or a *authority.HeldError.
func (c *Client) Gate(ctx context.Context, r authority.GateRequest) (*authority.Grant, error) {
	return c.GateWait(ctx, r, 0)
}

// GateWait is Gate that, while another holder has the lease, lets the App answer only once the
// lease is released or wait has passed (a long poll), up to the longest the App honours
// (LongPoll) and MaxLongPoll. An App that honours none answers at once, as Gate.
func (c *Client) GateWait(ctx context.Context, r authority.GateRequest, wait time.Duration) (*authority.Grant, error) {
	var g authority.Grant
	wait = min(wait, c.LongPoll(), MaxLongPoll)
	req := GateRequest{Generation: r.Generation, Scopes: r.Scopes, Phase: r.Phase, Holder: r.Holder, LeaseTTLMillis: r.LeaseTTL.Milliseconds(),
		WaitMillis: max(wait.Milliseconds(), 0)}
	if err := c.do(ctx, http.MethodPost, r.Environment, "gate", nil, req, &g); err != nil {
		return nil, fmt.Errorf("gate %s in %s at generation %d: %w", r.Phase, r.Environment, r.Generation, err)
	}
	return &g, nil
}

// LongPoll is the longest gate wait the App announced in its last gate answer; 0 before the first
// answer and for an App that answers at once (the Lambda).
func (c *Client) LongPoll() time.Duration { return time.Duration(c.longPoll.Load()) * time.Millisecond }

// Renew extends a grant's leases by ttl; a *authority.LostError when any is no longer the caller's.
func (c *Client) Renew(ctx context.Context, g *authority.Grant, ttl time.Duration) error {
	if err := c.do(ctx, http.MethodPost, g.Environment, "renew", nil, RenewRequest{Grant: *g, LeaseTTLMillis: ttl.Milliseconds()}, &OK{}); err != nil {
		return fmt.Errorf("renew lease in %s: %w", g.Environment, err)
	}
	return nil
}

// Release gives up a grant's leases.
func (c *Client) Release(ctx context.Context, g *authority.Grant) error {
	if err := c.do(ctx, http.MethodPost, g.Environment, "release", nil, ReleaseRequest{Grant: *g}, &OK{}); err != nil {
		return fmt.Errorf("release lease in %s: %w", g.Environment, err)
	}
	return nil
}

// Complete records how the pass ended and releases its leases.
func (c *Client) Complete(ctx context.Context, comp authority.Completion) (*authority.CompleteResult, error) {
	var res authority.CompleteResult
	if err := c.do(ctx, http.MethodPost, comp.Environment, "complete", nil, CompleteRequest{Completion: comp}, &res); err != nil {
		return nil, fmt.Errorf("complete generation %d in %s: %w", comp.Generation, comp.Environment, err)
	}
	return &res, nil
}

// Status reads the environment's current state.
func (c *Client) Status(ctx context.Context, env string) (*authority.Env, error) {
	var res StatusResponse
	if err := c.do(ctx, http.MethodGet, env, "status", nil, nil, &res); err != nil {
		return nil, fmt.Errorf("status of %s: %w", env, err)
	}
	if res.Env == nil {
		return nil, fmt.Errorf("status of %s: the API answered no environment", env)
	}
	return res.Env, nil
}

// History reads a page of the environment's timeline (see authority.Authority.History).
func (c *Client) History(ctx context.Context, env string, before int64, limit int) (*authority.HistoryPage, error) {
	var res authority.HistoryPage
	q := url.Values{"before": {strconv.FormatInt(before, 10)}, "limit": {strconv.Itoa(limit)}}
	if err := c.do(ctx, http.MethodGet, env, "history", q, nil, &res); err != nil {
		return nil, fmt.Errorf("history of %s: %w", env, err)
	}
	return &res, nil
}

// Report reads the environment's delivery report over the last since, as the App computes it
// (GET .../report?since=720h).
func (c *Client) Report(ctx context.Context, env string, since time.Duration) (*report.Delivery, error) {
	var res report.Delivery
	q := url.Values{"since": {since.String()}}
	if err := c.do(ctx, http.MethodGet, env, "report", q, nil, &res); err != nil {
		return nil, fmt.Errorf("delivery report of %s: %w", env, err)
	}
	return &res, nil
}

// Rollback accepts an older commit of one scope ahead of everything pending and freezes the scope
// (authority.Authority.Rollback on the App's side, which then dispatches the scope's workflow).
// The actor is the token's.
func (c *Client) Rollback(ctx context.Context, r authority.RollbackRequest) (*RollbackResponse, error) {
	var res RollbackResponse
	req := RollbackRequest{Scope: r.Scope, To: r.To, Reason: r.Reason, Request: r.Request}
	if err := c.do(ctx, http.MethodPost, r.Environment, "rollback", nil, req, &res); err != nil {
		return nil, fmt.Errorf("roll back %s/%s: %w", r.Environment, r.Scope, err)
	}
	return &res, nil
}

// Promote asks for the commit live in r.From's scope (empty: the first environment r.Environment
// requires) in r.Environment's (authority.Authority.Promote on the App's side, which then
// dispatches the scope's workflow). The actor is the token's.
func (c *Client) Promote(ctx context.Context, r authority.PromoteRequest) (*PromoteResponse, error) {
	var res PromoteResponse
	req := PromoteRequest{Scope: r.Scope, From: r.From, Request: r.Request}
	if err := c.do(ctx, http.MethodPost, r.Environment, "promote", nil, req, &res); err != nil {
		return nil, fmt.Errorf("promote %s/%s: %w", r.Environment, r.Scope, err)
	}
	return &res, nil
}

// Unfreeze lifts the rollback's freeze r names; errors match authority.ErrNotFrozen,
// ErrRepeated and ErrFreezeMismatch (a *authority.FreezeMismatchError) as the authority's do.
func (c *Client) Unfreeze(ctx context.Context, r authority.UnfreezeRequest) (*authority.Freeze, error) {
	var res UnfreezeResponse
	req := UnfreezeRequest{Scope: r.Scope, Freeze: r.Freeze, Reason: r.Reason, Request: r.Request}
	if err := c.do(ctx, http.MethodPost, r.Environment, "unfreeze", nil, req, &res); err != nil {
		return nil, fmt.Errorf("unfreeze %s/%s: %w", r.Environment, r.Scope, err)
	}
	if res.Freeze == nil {
		return nil, fmt.Errorf("unfreeze %s/%s: the API answered no freeze", r.Environment, r.Scope)
	}
	return res.Freeze, nil
}

// Overview reads what is live where across the environments the token's repository feeds.
func (c *Client) Overview(ctx context.Context) (*report.Overview, error) {
	var res OverviewResponse
	if err := c.call(ctx, http.MethodGet, c.overviewEndpoint(), "", nil, &res); err != nil {
		return nil, fmt.Errorf("environments: %w", err)
	}
	if res.Overview == nil {
		return nil, errors.New("environments: the API answered no overview")
	}
	return res.Overview, nil
}

func (c *Client) overviewEndpoint() *url.URL {
	u := *c.base
	u.Path = strings.TrimSuffix(c.base.Path, "/") + "/v1/environments"
	u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + "/v1/environments"
	return &u
}

// Now is this machine's clock: rendering only, never a lease decision.
func (c *Client) Now() time.Time { return time.Now() }

// endpoint is BASE/v1/environments/ENV/VERB, the environment escaped as one path segment.
func (c *Client) endpoint(env, verb string) *url.URL {
	u := *c.base
	u.Path = strings.TrimSuffix(c.base.Path, "/") + "/v1/environments/" + env + "/" + verb
	u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + "/v1/environments/" + url.PathEscape(env) + "/" + verb
	return &u
}

func (c *Client) do(ctx context.Context, method, env, verb string, query url.Values, in, out any) error {
	if err := authority.ValidateEnvironment(env); err != nil {
		return err
	}
	u := c.endpoint(env, verb)
	u.RawQuery = query.Encode()
	return c.call(ctx, method, u, env, in, out)
}

// call sends one request to u and decodes the answer into out, or a refusal into the authority's
// typed error (env: the environment the refusal concerns).
func (c *Client) call(ctx context.Context, method string, u *url.URL, env string, in, out any) error {
	tok, err := c.tokens.Token(ctx)
	if err != nil {
		return err
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("call %s %s: %w", method, u.Redacted(), err)
	}
	defer resp.Body.Close()
	if strings.HasSuffix(u.Path, "/gate") {
		ms, err := strconv.ParseInt(resp.Header.Get(LongPollHeader), 10, 64)
		if err != nil || ms < 0 {
			ms = 0
		}
		c.longPoll.Store(ms)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("read the answer of %s %s: %w", method, u.Redacted(), err)
	}
	if len(b) > MaxBodyBytes {
		return fmt.Errorf("the answer of %s %s is over %d bytes", method, u.Redacted(), MaxBodyBytes)
	}
	if resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode the answer of %s %s: %w", method, u.Redacted(), err)
		}
		return nil
	}
	return refusal(env, resp, b)
}

// refusal turns an error answer into the authority's typed error of the same meaning.
func refusal(env string, resp *http.Response, b []byte) error {
	var e ErrorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error == "" {
		return &Error{Status: resp.StatusCode, Code: http.StatusText(resp.StatusCode), Message: strings.TrimSpace(string(b))}
	}
	switch e.Error {
	case CodeLocked:
		retry := e.RetryAfter
		if h, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); retry < 1 && err == nil {
			retry = h
		}
		return &authority.HeldError{Reason: e.Wait, Resource: e.Resource, Holder: e.Holder, Purpose: e.Purpose, Generation: e.Generation,
			ExpiresAt: e.ExpiresAt, RetryAfter: time.Duration(max(retry, 1)) * time.Second,
			Ahead: e.Ahead, HeadSha: e.HeadSha, Barrier: e.Barrier, Blocked: e.Blocked, Frozen: e.Frozen, Promotion: e.Promotion,
			Soak: e.Soak, Approval: e.Approval, Window: e.Window, Until: e.Until}
	case CodeNotFrozen:
		return fmt.Errorf("%s: %w", e.Message, authority.ErrNotFrozen)
	case CodeRepeated:
		return fmt.Errorf("%s: %w", e.Message, authority.ErrRepeated)
	case CodeMoved:
		return fmt.Errorf("%s: %w", e.Message, authority.ErrMoved)
	case CodeFreezeMismatch:
		if e.Frozen == nil {
			break
		}
		return &authority.FreezeMismatchError{Environment: env, Scope: e.Scope, Named: e.Generation, Current: e.Frozen}
	case CodeQueueFull:
		return &authority.QueueFullError{Environment: env, Scope: e.Scope, Pending: e.Pending, Limit: e.Limit, Bytes: e.Bytes}
	case CodeSuperseded:
		return &authority.SupersededError{Environment: env, Scope: e.Scope, Generation: e.Generation, By: e.By, BySha: e.BySha}
	case CodeLeaseLost:
		return &authority.LostError{Resource: e.Resource, Token: e.Token, Holder: e.Holder, Current: e.Current, Reason: e.Reason}
	case CodeInvalid:
		if e.Field == "" {
			return &authority.InputError{Field: "request", Fix: e.Message}
		}
		return &authority.InputError{Field: e.Field, Value: e.Value, Fix: e.Fix}
	}
	return &Error{Status: resp.StatusCode, Code: e.Error, Message: e.Message}
}
