// Package apiclient is the client of the App's HTTP API for the Action (/v1): the verbs of a pass
// (claim, gate, renew, complete, release, status) sent as JSON, authenticated with the workflow's
// GitHub Actions OIDC token. Refusals come back as the authority package's typed errors, so a pass
// behaves the same over the API as over a store. The wire types below are shared with the App.
package apiclient

import (
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// Audience is the audience the App expects in OIDC tokens, and the one the client asks for.
const Audience = "latestwins"

// MaxBodyBytes caps a request body of the API (and a response body read by the client).
const MaxBodyBytes = 1 << 20

// Error codes: the stable "error" field of every refusal.
const (
	CodeLocked       = "locked"       // 409: another holder has the lease, older intents go first (ahead, head_sha, barrier, blocked), a freeze holds it (frozen) or its commit waits for a required environment (promotion); Retry-After and retry_after say when to ask again
	CodeQueueFull    = "queue_full"   // 429: a scope already holds as many pending intents as it may; nothing was written; retry once some have deployed
	CodeSuperseded   = "superseded"   // 409: a newer generation owns or waits for the scope (by, by_sha)
	CodeLeaseLost    = "lease_lost"   // 409: the caller's lease expired, was taken over or was unlocked
	CodeInvalid      = "invalid"      // 400: a malformed request; the message says what to fix
	CodeUnauthorized = "unauthorized" // 401: no valid OIDC token
	CodeForbidden    = "forbidden"    // 403: the token's repository may not act on the environment or scope
	CodeNotFound     = "not_found"    // 404: no such endpoint
	CodeUnavailable  = "unavailable"  // 503: the store or a key fetch failed; retryable
	CodeNotFrozen    = "not_frozen"   // 409: unfreeze of a scope that no rollback froze; nothing changed
	CodeRepeated     = "repeated"     // 409: the request id was carried out before; nothing was done again
	CodeMoved        = "moved"        // 409: the environment's state was moved to another store; the message says where
	// CodeFreezeMismatch, 409: an unfreeze that did not name the scope's current freeze (it named
	// an older one, or none); nothing changed. frozen is the current freeze (its generation is the
	// name to give), generation the one named, scope the scope.
	CodeFreezeMismatch = "freeze_mismatch"
)

// ClaimRequest accepts the pass's intent and claims its scopes (POST .../claim). The environment
// is the path's. With Generation instead of an intent, it claims Scopes for a generation accepted
// before (the one a dispatched workflow is given): the answer's claim names the commit it deploys.
type ClaimRequest struct {
	Intent     authority.Intent `json:"intent"`
	Generation int64            `json:"generation,omitempty"`
	Scopes     []string         `json:"scopes,omitempty"`
	// Enter asks the claim of an intent to enter the deploy phase in its own write when the gate
	// lets the pass go at once (authority.EnterDeploy): the answer's entered is the grant then.
	// An App of an earlier release refuses the field as unknown before it writes anything, and
	// ClaimAndEnter then claims without it. Only a claim of an intent takes it.
	Enter *EnterRequest `json:"enter,omitempty"`
}

// EnterRequest is the deploy phase a claim asks to enter: the leases' holder (the token's job
// when empty, as for a gate) and their TTL.
type EnterRequest struct {
	Holder         string `json:"holder,omitempty"`
	LeaseTTLMillis int64  `json:"lease_ttl_ms"`
}

// GateRequest asks to enter a phase (POST .../gate). LeaseTTLMillis > 0 also leases the scopes.
type GateRequest struct {
	Generation     int64    `json:"generation"`
	Scopes         []string `json:"scopes"`
	Phase          string   `json:"phase"`
	Holder         string   `json:"holder,omitempty"`
	LeaseTTLMillis int64    `json:"lease_ttl_ms,omitempty"`
	// WaitMillis > 0 asks the App to answer a refusal for a held lease only once the lease is
	// released or this long has passed, whichever is first (a long poll), up to the longest the
	// App announces in LongPollHeader; an App that announces none answers at once.
	WaitMillis int64 `json:"wait_ms,omitempty"`
}

// LongPollHeader is the header of every gate answer of an App that honours wait_ms: the longest
// wait it honours, in milliseconds.
const LongPollHeader = "Latestwins-Long-Poll"

// RenewRequest extends a grant's leases (POST .../renew).
type RenewRequest struct {
	Grant          authority.Grant `json:"grant"`
	LeaseTTLMillis int64           `json:"lease_ttl_ms"`
}

// ReleaseRequest gives up a grant's leases (POST .../release).
type ReleaseRequest struct {
	Grant authority.Grant `json:"grant"`
}

// CompleteRequest records how a pass ended (POST .../complete).
type CompleteRequest struct {
	Completion authority.Completion `json:"completion"`
}

// RollbackRequest rolls one scope back (POST .../rollback): To (empty: the commit live before the
// current one) is accepted ahead of everything pending and the scope frozen. Request identifies
// the request: a repeat rolls back once. The actor is the token's.
type RollbackRequest struct {
	Scope   string `json:"scope"`
	To      string `json:"to,omitempty"`
	Reason  string `json:"reason"`
	Request string `json:"request,omitempty"`
}

// RollbackResponse is what a rollback did: its generation and commit, and the workflows the App
// dispatched for it (none for a repeat, or without App credentials: then the caller deploys the
// generation itself).
type RollbackResponse struct {
	Generation int64      `json:"generation"`
	Sha        string     `json:"sha"`
	Duplicate  bool       `json:"duplicate,omitempty"`
	Dispatched []Dispatch `json:"dispatched,omitempty"`
	// DispatchFailed says why a dispatch failed: the rollback is recorded all the same, and the
	// recovery sweep starts its workflow again.
	DispatchFailed string `json:"dispatch_failed,omitempty"`
}

// Dispatch is a workflow the App started.
type Dispatch struct {
	Repository string `json:"repository"`
	Workflow   string `json:"workflow"`
	Ref        string `json:"ref"`
}

// PromoteRequest asks for the commit live in a scope of another environment (From: one the
// environment requires; empty: the first it requires) in the same scope of this one (POST
// .../promote). Request identifies the request: a repeat promotes once. The actor is the token's.
type PromoteRequest struct {
	Scope   string `json:"scope"`
	From    string `json:"from,omitempty"`
	Request string `json:"request,omitempty"`
}

// PromoteResponse is what a promotion did: the environment the commit came from, the new
// generation and its commit, and the workflows the App dispatched for it (none for a repeat, or
// without App credentials: then the caller deploys the generation itself).
type PromoteResponse struct {
	From           string     `json:"from"`
	Generation     int64      `json:"generation"`
	Sha            string     `json:"sha"`
	Duplicate      bool       `json:"duplicate,omitempty"`
	Dispatched     []Dispatch `json:"dispatched,omitempty"`
	DispatchFailed string     `json:"dispatch_failed,omitempty"`
}

// UnfreezeRequest lifts the freeze of one scope (POST .../unfreeze). Freeze names the freeze, by
// its rollback's generation: only that freeze is lifted.
type UnfreezeRequest struct {
	Scope   string `json:"scope"`
	Freeze  int64  `json:"freeze,omitempty"`
	Reason  string `json:"reason"`
	Request string `json:"request,omitempty"`
}

// UnfreezeResponse is the freeze lifted.
type UnfreezeResponse struct {
	Freeze *authority.Freeze `json:"freeze"`
}

// StatusResponse is an environment's state as the store holds it (GET .../status), and the App's
// clock reading.
type StatusResponse struct {
	Env *authority.Env `json:"env"`
	Now time.Time      `json:"now"`
}

// OverviewResponse is what is live where (GET /v1/environments) across the environments the
// token's repository feeds, and the App's clock reading.
type OverviewResponse struct {
	Overview *report.Overview `json:"overview"`
	Now      time.Time        `json:"now"`
}

// OK is the body of a successful renew or release.
type OK struct {
	OK bool `json:"ok"`
}

// ErrorBody is every refusal: a stable code, a message that says what to fix, and the code's data.
type ErrorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`

	// locked
	// Wait is the deploy gate's reason (authority.Reason): what the pass waits for, as
	// "locked", "queued", "barrier", "blocked", "frozen", "promotion", "soaking", "approval" or
	// "window". The fields below say more.
	Wait       authority.Reason `json:"wait,omitempty"`
	RetryAfter int64            `json:"retry_after,omitempty"` // whole seconds, at least one
	Resource   string           `json:"resource,omitempty"`    // locked, lease_lost
	Holder     string           `json:"holder,omitempty"`      // locked, lease_lost (who holds it now)
	Purpose    string           `json:"purpose,omitempty"`
	ExpiresAt  time.Time        `json:"expires_at,omitzero"`
	// Ahead > 0: the pass waits in the scope's queue with that many intents ahead of its own; the
	// head is generation Generation, commit HeadSha. Barrier is the commit of the barrier it waits
	// for (policy latest); Blocked says the head failed terminally and waits for a decision.
	Ahead   int    `json:"ahead,omitempty"`
	HeadSha string `json:"head_sha,omitempty"`
	Barrier string `json:"barrier,omitempty"`
	Blocked bool   `json:"blocked,omitempty"`
	// Frozen: a rollback froze the scope (who, which commit, why); nothing else deploys until
	// someone unfreezes it. Also freeze_mismatch's: the scope's current freeze.
	Frozen *authority.Freeze `json:"frozen,omitempty"`
	// Promotion: the pass's commit is not live yet in an environment this one requires (which
	// environment, which commit waits, what is live there instead).
	Promotion *authority.PromotionWait `json:"promotion,omitempty"`
	// Soak, Approval and Window: the pass's commit soaks in a required environment, waits for
	// approvals, or waits for the change window to open; Until is when the hold ends by itself
	// (zero for approvals). A pass ends held when Until is past its wait (authority.HeldError.Outlasts).
	Soak     *authority.SoakWait     `json:"soak,omitempty"`
	Approval *authority.ApprovalWait `json:"approval,omitempty"`
	Window   *authority.WindowWait   `json:"window,omitempty"`
	Until    time.Time               `json:"until,omitzero"`

	// queue_full (Scope too)
	Pending int `json:"pending,omitempty"` // intents the scope holds
	Limit   int `json:"limit,omitempty"`   // the most it may hold
	Bytes   int `json:"bytes,omitempty"`   // > 0: refused for the size of the environment's state instead

	// superseded, queue_full
	Scope string `json:"scope,omitempty"`
	By    int64  `json:"by,omitempty"`
	BySha string `json:"by_sha,omitempty"`
	// Generation is, when locked, the holder's generation; when superseded, the refused pass's;
	// when freeze_mismatch, the freeze the unfreeze named (absent: none).
	Generation int64 `json:"generation,omitempty"`

	// lease_lost
	Token   int64  `json:"token,omitempty"`
	Current int64  `json:"current,omitempty"`
	Reason  string `json:"reason,omitempty"`

	// invalid
	Field string `json:"field,omitempty"`
	Value string `json:"value,omitempty"`
	Fix   string `json:"fix,omitempty"`
}
