package authority

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Store is the port every adapter implements: single-document reads and conditional writes, the
// sparse index of environments with pending work, atomic counters, and immutable records kept
// beside the documents.
// Adapters make one attempt per call; retries on conflict live in Authority. Every conditional write
// is one document, so a store needs no transactions: records are copied out of a document's outbox
// by a write after the one that put them there (docs/design.md, "The outbox").
type Store interface {
	Documents
	Records
}

// Documents are the mutable items: an environment's hot state, a named lease; and counters.
type Documents interface {
	// Get returns the document stored under key, or an error matching ErrNotFound.
	Get(ctx context.Context, key string) (*Doc, error)
	// Put stores doc iff the stored revision equals doc.Rev (0: nothing stored yet) and returns the
	// new revision, doc.Rev+1. A failed condition returns an error matching ErrConflict. A write that
	// may or may not have committed (a lost response) must be resolved by the adapter before it
	// answers: it returns success only if its own write is the one stored.
	Put(ctx context.Context, doc *Doc) (int64, error)
	// Pending lists the environments whose last stored document had Pending set.
	Pending(ctx context.Context) ([]string, error)
	// Add adds delta to the counter stored under key and returns its value after the addition, in
	// one atomic request to the store; a counter nobody added to reads 0. Delta 0 reads the value
	// (strongly consistently, where the store has the choice) and changes nothing; a negative delta
	// is refused with an error matching ErrInvalidInput. A counter is an item of its own: a key
	// names a counter or a document, never both (the Authority keeps counters under CounterKey),
	// Get does not return a counter, and Pending never lists one.
	//
	// Every value an Add with delta > 0 returns is returned to no other caller, and values are
	// linearizable: an Add that starts after another returned v returns more than v. Unlike Put,
	// a lost response need not be resolved: an adapter (or its client) that sends the request
	// again may move the counter twice for one call, so a value can be skipped, but never handed
	// out twice. An Add that fails may have moved the counter.
	Add(ctx context.Context, key string, delta int64) (int64, error)
}

// Records are immutable items: timeline events and accepted intents, each kept for the retention.
type Records interface {
	// PutRecords stores records as their own items. A record never changes once written (the outbox
	// holds it fixed until then), so storing one again is harmless and PutRecords may be repeated.
	PutRecords(ctx context.Context, recs []Record) error
	// GetRecords returns the records stored under keys, read strongly consistently, in any order.
	// A key with nothing stored is left out. Records past their expiry may be returned (a store's
	// expiry can lag); the Authority ignores them.
	GetRecords(ctx context.Context, keys []string) ([]Record, error)
}

// Expirer is what a store without a time to live of its own (bolt) offers to delete the records past
// their expiry; the recovery sweep calls it.
type Expirer interface {
	DeleteExpired(ctx context.Context, now time.Time) (int, error)
}

// Record is one immutable item: a timeline event or an accepted intent.
type Record struct {
	Key       string        `json:"key"`
	ExpiresAt time.Time     `json:"expires_at"`
	Event     *Event        `json:"event,omitempty"`
	Intent    *IntentRecord `json:"intent,omitempty"`
	// Kept is an immutable value a package above the domain keeps (KeptRecordKey).
	Kept json.RawMessage `json:"kept,omitempty"`
}

// Clock tells the time; tests inject a fake one so that expiry needs no sleeping.
type Clock interface {
	Now() time.Time
}

// Doc is one stored document: the whole state of an environment, or a named lease.
type Doc struct {
	Key     string      `json:"key"`
	Rev     int64       `json:"rev"`
	Pending bool        `json:"pending,omitempty"` // in the sparse index of environments with pending work
	Env     *Env        `json:"env,omitempty"`
	Lease   *NamedLease `json:"lease,omitempty"`
	// Deliveries is the App's cursor over its webhook delivery log (DeliveriesKey).
	Deliveries *DeliveryCursor `json:"deliveries,omitempty"`
	// Kept is a value a package above the domain keeps beside an environment (KeptKey): JSON the
	// Authority never reads.
	Kept json.RawMessage `json:"kept,omitempty"`

	// Assembled: a transition of an environment in the per-scope layout sees this document
	// assembled from its parts (or none yet, for one the transition creates in that layout).
	// Never stored.
	Assembled bool `json:"-"`
	// Taken: the generation a transition of a counted head took from the counter (counter.go),
	// for the environment it creates. Never stored.
	Taken int64 `json:"-"`
}

// Document and record keys. Environment names hold no '#', so a key names one item.
const (
	envKeyPrefix    = "env#"
	leaseKeyPrefix  = "lease#"
	eventKeyPrefix  = "event#"
	intentKeyPrefix = "intent#"
	// counterKeyPrefix: counters (Documents.Add) are no documents, and no "env#" key, so that
	// nothing that lists environments or pending work takes one for an environment.
	counterKeyPrefix = "counter#"
)

// EventKey is the record key of an environment's event number seq.
func EventKey(env string, seq int64) string {
	return fmt.Sprintf("%s%s#%019d", eventKeyPrefix, env, seq)
}

// IntentKey is the record key of an intent accepted in an environment.
func IntentKey(env, id string) string { return intentKeyPrefix + env + "#" + id }

// EnvKey is the document key of an environment.
func EnvKey(env string) string { return envKeyPrefix + env }

// LeaseKey is the document key of a named lease.
func LeaseKey(name string) string { return leaseKeyPrefix + name }

// CounterKey is the key of an environment's counter of generations (Documents.Add).
func CounterKey(env string) string { return counterKeyPrefix + env }

// Env is an environment's authoritative state: counters, and per scope the mailbox, owner, live
// state, lease and last failure. It is stored as one small document (the hot item) so that every
// transition is one conditional write; its size is bounded by its scopes, not by its history.
//
// Events and intent records are their own records. A transition appends them to the outbox of the
// document it writes; a later write copies them out as records before it writes, and drops them
// from the outbox once their copies landed.
type Env struct {
	Name string `json:"name"`
	// Policy says how the environment orders its deploys; empty is PolicyLatest.
	Policy Policy `json:"policy,omitempty"`
	// Requires, when set, names the environments whose live commits gate this one's deploys
	// (promotion, see Requirements).
	Requires *Requirements `json:"requires,omitempty"`
	// Gates, when set, hold commits at the deploy gate for soak time, approvals and change
	// windows (Gates).
	Gates *Gates `json:"gates,omitempty"`
	// AlertAfter is how long a scope may wait for its newest accepted commit before it counts as
	// behind or stuck (Judge); zero: never. Nanoseconds in JSON, as Go spells a time.Duration.
	AlertAfter time.Duration     `json:"alert_after,omitempty"`
	Desired    int64             `json:"desired"`
	Observed   int64             `json:"observed"`
	Scopes     map[string]*Scope `json:"scopes,omitempty"`
	EventSeq   int64             `json:"event_seq"`         // the newest event's number
	Outbox     []Event           `json:"outbox,omitempty"`  // events not yet known to be records
	Accepts    []IntentRecord    `json:"accepts,omitempty"` // intents not yet known to be records
	// Events is not stored: Status fills it with the newest events, for rendering.
	Events []Event `json:"events,omitempty"`
	// Moved, in the store the environment moved from, says where its state went (Move).
	Moved *Moved `json:"moved,omitempty"`

	// The per-scope layout (layout 7, scoped.go) keeps an environment in several documents: part
	// Part says which one this is (empty: a whole environment in one document, layout 4).
	Part docPart `json:"-"`
	// Split: an environment assembled from the documents of the per-scope layout, for a
	// transition or a read (never stored as such).
	Split bool `json:"-"`
	// Log, in the head of the per-scope layout: the intents of several scopes accepted and not yet
	// known to be applied to all of them.
	Log []logEntry `json:"-"`
	// Applied, in a scope document: the newest generation applied to it (of the head's log, and,
	// where generations come from the counter, of any intent).
	Applied int64 `json:"-"`
	// Counted, in the head of the per-scope layout: its generations come from the environment's
	// counter (CounterKey, Documents.Add) above Desired, which then never moves (counter.go).
	// Desired of an environment assembled from such a head is the newest generation its
	// documents hold.
	Counted bool `json:"-"`
	// Taken, in an environment of a counted head as a transition decides on it: the generation
	// the transition took from the counter for the intent it accepts (0: none yet).
	Taken int64 `json:"-"`
	// Counter, in an environment of a counted head as a transition decides on it: the newest
	// generation the counter handed out, when the transition read it (-1: not read).
	Counter int64 `json:"-"`
	// Tops, in an environment of the per-scope layout as a transition decides on it: per scope,
	// the newest generation the transition applied there.
	Tops map[string]int64 `json:"-"`
	// Results, as a transition of the per-scope layout decides: what applying each log entry
	// did on the scopes it applied it to, by generation.
	Results map[int64]*AcceptResult `json:"-"`
	// Wide, set by the transition that applies an intent of several scopes on a counted head:
	// the generation of its entry, which the writes of its scopes complete.
	Wide int64 `json:"-"`
	// Landed, in an environment of the per-scope layout as a retry of a transition decides on
	// it: the scopes whose documents an earlier attempt of the same transition wrote before
	// another's write lost its race. Their part of the transition took effect; the retry does
	// the rest.
	Landed map[string]bool `json:"-"`
	// Dir, in the directory of the per-scope layout: every scope's name, sorted.
	Dir []string `json:"-"`
	// Streams, in an environment of the per-scope layout read whole: its event streams.
	Streams []stream `json:"-"`
}

// Scope is one separately deployed part of an environment.
type Scope struct {
	// Mailbox is the head of the scope's pending work: under policy latest the newest accepted
	// intent not yet reconciled (or a barrier), under policy queue the oldest.
	Mailbox *Ref `json:"mailbox,omitempty"`
	// Queue holds the intents that wait behind the head, oldest first: every newer intent under
	// policy queue; under policy latest the barriers behind a barrier and at most one newest
	// ordinary intent. Bounded (WithQueueLimit).
	Queue []*Ref `json:"queue,omitempty"`
	Owner int64  `json:"owner"` // generation of the newest pass that claimed the scope
	Live  *Live  `json:"live,omitempty"`
	// Prev is what was live before Live, when another commit: where a rollback goes by default.
	// Only its Sha and Ref are kept.
	Prev *Live `json:"prev,omitempty"`
	// Freeze, set by a rollback, holds every newer intent at its deploy gate until Unfreeze.
	Freeze  *Freeze  `json:"freeze,omitempty"`
	Lease   Lease    `json:"lease"`
	Failure *Failure `json:"failure,omitempty"` // the last terminal error, until a deploy succeeds
	// Unapproved is the newest deployment status of a deployment the App never approved, until
	// the next deploy: a warning, never live (Report).
	Unapproved *Unapproved `json:"unapproved,omitempty"`
	ActiveAt   time.Time   `json:"active_at"` // last activity, for the recovery sweep
	// Refused remembers the newest refusal recorded for each generation that asked at a gate
	// ("GEN REASON WAITS-FOR"), so that a poller's repeated refusal is recorded once
	// (Env.recordRefusal). Bounded by maxRefusals.
	Refused []string `json:"refused,omitempty"`
}

// Ref is a mailbox entry: a commit accepted for a scope.
type Ref struct {
	Generation int64     `json:"generation"`
	Sha        string    `json:"sha"`
	Ref        string    `json:"ref,omitempty"`
	Before     string    `json:"before,omitempty"`
	Order      Order     `json:"order,omitzero"`
	Source     string    `json:"source,omitempty"`
	Actor      string    `json:"actor,omitempty"`
	IntentID   string    `json:"intent_id"`
	Origin     string    `json:"origin,omitempty"`  // how to start the work again (see Intent.Origin)
	Attempt    int       `json:"attempt,omitempty"` // failed attempts so far
	At         time.Time `json:"at"`
	// Since is when the oldest intent this one superseded while pending was accepted (zero: none):
	// the commits of the scope have been waiting since then, though the newest came later.
	Since time.Time `json:"since,omitzero"`
	// Barrier: newer intents wait behind this one instead of superseding it (policy latest).
	Barrier bool `json:"barrier,omitempty"`
	// Claimed: its pass claimed it while it waited in the queue; it owns the scope once at the head.
	Claimed bool `json:"claimed,omitempty"`
	// Failed: it ended with a terminal failure, and, at the head, blocks what waits behind it until
	// someone decides (Authority.Decide: skip it, or retry it).
	Failed bool `json:"failed,omitempty"`
	// Rollback: an explicit rollback (Authority.Rollback) asked for this older commit.
	Rollback bool `json:"rollback,omitempty"`
	// SoakFrom is, with a soak and requires-ancestor, when the soak of this commit counts from in
	// each required environment (Soak): the first time its deploy gate saw it or a descendant live
	// there, the Since of the commit that was. It never moves later, so that a busy required
	// environment, where descendants follow each other, does not restart the soak. Written by the
	// deploy gate (or the sweep) as a new map, never changed in place: copies of the entry share it.
	SoakFrom map[string]time.Time `json:"soak_from,omitempty"`
	// BreakGlass, when set, waives the soak time, approvals and change windows of this commit
	// (Authority.BreakGlass); never replaced in place, so a copy of the Ref may share it.
	BreakGlass *Override `json:"break_glass,omitempty"`
	// Approvals are the people who approved this commit here (the approvals gate, ApproveCommit),
	// in order; at most maxRefApprovals.
	Approvals []CommitApproval `json:"approvals,omitempty"`
}

// Freeze holds a scope after a rollback: intents accepted meanwhile are recorded and wait, and none
// but the rollback's own passes a deploy gate until someone unfreezes the scope.
type Freeze struct {
	Generation int64     `json:"generation"` // the rollback's: its pass may deploy
	Sha        string    `json:"sha"`        // the commit rolled back to
	Actor      string    `json:"actor,omitempty"`
	Reason     string    `json:"reason"`
	At         time.Time `json:"at"`
}

// Describe says which freeze f is, for messages: its name (the rollback's generation), the commit
// rolled back to, who rolled back and why.
func (f *Freeze) Describe() string {
	return fmt.Sprintf("freeze %d (the rollback to %s by %s: %s)", f.Generation, shortSha(f.Sha), orUnknown(f.Actor), f.Reason)
}

// Live is what is deployed in a scope.
type Live struct {
	Sha        string    `json:"sha"`
	Ref        string    `json:"ref,omitempty"`
	Generation int64     `json:"generation"`
	Run        string    `json:"run,omitempty"`
	Token      int64     `json:"token"`
	Before     string    `json:"before,omitempty"`
	Order      Order     `json:"order,omitzero"`
	At         time.Time `json:"at"` // when this commit was last deployed
	// Since is when this commit became live in the scope, when it was deployed again since (zero:
	// At): a deploy of the same commit keeps it, another commit going live starts anew. A soak
	// counts from it (Soak).
	Since time.Time `json:"since,omitzero"`
}

// since is when the live commit became live in the scope.
func (l *Live) since() time.Time {
	if l.Since.IsZero() {
		return l.At
	}
	return l.Since
}

// Lease is a short, renewable, fenced lock. The record is never deleted: a released lease keeps its
// token, so the next grant's token is greater than every earlier one of the resource.
type Lease struct {
	Holder     string `json:"holder,omitempty"` // empty: free
	Purpose    string `json:"purpose,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	Token      int64  `json:"token"`
	// Sha and Ref: the commit the holding pass deploys under this grant (scope leases only).
	Sha        string    `json:"sha,omitempty"`
	Ref        string    `json:"ref,omitempty"`
	AcquiredAt time.Time `json:"acquired_at,omitzero"`
	ExpiresAt  time.Time `json:"expires_at,omitzero"`
	// ReleasedAt is when the last grant ended by release or completion, while the lease is free:
	// what the hand-over time of the next pass that waited for it is counted from.
	ReleasedAt time.Time `json:"released_at,omitzero"`
}

// Failure is a terminal error that status shows.
type Failure struct {
	Generation  int64     `json:"generation"`
	Sha         string    `json:"sha"`
	Message     string    `json:"message"`
	Attempt     int       `json:"attempt,omitempty"`
	MaxAttempts int       `json:"max_attempts,omitempty"`
	At          time.Time `json:"at"`
}

// IntentRecord remembers an accepted intent for the retention, so that a re-delivery returns its
// generation and changes nothing, and the same id with another commit or scopes is refused.
type IntentRecord struct {
	ID         string    `json:"id"`
	Generation int64     `json:"generation"`
	Sha        string    `json:"sha,omitempty"` // empty for records migrated from the first layout
	Scopes     []string  `json:"scopes,omitempty"`
	At         time.Time `json:"at"`
}

// NamedLease is a lease on a resource outside any environment (a remote refresh, say), with its own
// short timeline.
type NamedLease struct {
	Name   string  `json:"name"`
	Lease  Lease   `json:"lease"`
	Events []Event `json:"events,omitempty"`
	Seq    int64   `json:"seq"`
	// Alarm is what the alert notifier told, on an alarm's lease (AlarmLease); a build that drops it
	// only tells the current alarm again.
	Alarm *Alarm `json:"alarm,omitempty"`
}

// EventKind names a timeline event.
type EventKind string

// Timeline event kinds.
const (
	EventAccepted   EventKind = "accepted"
	EventClaimed    EventKind = "claimed"
	EventSuperseded EventKind = "superseded"
	EventStopped    EventKind = "stopped" // a superseded pass refused at a phase boundary
	EventLocked     EventKind = "locked"
	EventLeased     EventKind = "leased"
	EventTookOver   EventKind = "took-over"
	EventDeployed   EventKind = "deployed"
	EventFailed     EventKind = "failed"
	EventLost       EventKind = "lost"
	EventReleased   EventKind = "released"
	EventUnlocked   EventKind = "unlocked"
	EventRedriven   EventKind = "redriven"    // the recovery sweep re-drove stalled work
	EventWithdrawn  EventKind = "withdrawn"   // pending work ended because what asked for it is gone
	EventPolicy     EventKind = "policy"      // the environment's policy changed
	EventSkipped    EventKind = "skipped"     // someone decided to skip a blocking terminal failure
	EventRetried    EventKind = "retried"     // someone decided to retry a blocking terminal failure
	EventRollback   EventKind = "rollback"    // an older commit asked for ahead of everything pending; the scope frozen
	EventUnfrozen   EventKind = "unfrozen"    // someone let the newest held intent go
	EventRequires   EventKind = "requires"    // the environments this one's deploys wait for changed
	EventGates      EventKind = "gates"       // the environment's soak time, approvals or change windows changed
	EventBreakGlass EventKind = "break-glass" // someone waived the gates for a pending commit
	EventApproved   EventKind = "approved"    // the deployment protection rule let a deployment run
	EventUnapproved EventKind = "unapproved"  // a deployment status of a deployment nobody approved: not counted
	// EventApprovedCommit: a person approved a commit for the approvals gate (ApproveCommit), the
	// audit trail of who approved what; EventApproved is the deployment protection rule's.
	EventApprovedCommit EventKind = "commit-approved"
)

// Event is one timeline entry.
type Event struct {
	Seq        int64     `json:"seq"`
	At         time.Time `json:"at"`
	Kind       EventKind `json:"kind"`
	Scope      string    `json:"scope,omitempty"`
	Generation int64     `json:"generation,omitempty"`
	Sha        string    `json:"sha,omitempty"`
	Holder     string    `json:"holder,omitempty"`
	Token      int64     `json:"token,omitempty"`
	Message    string    `json:"message"`
	// Wait is the promotion wait a refusal's message words, so that a reader who may not see the
	// required environment reads the message without that environment's commits.
	Wait *PromotionWait `json:"wait,omitempty"`
}

// Order is what GitHub tells about when a commit was pushed, so that the intents of one branch are
// ordered by facts, whatever order they arrive in: the push's repository.pushed_at, the head
// commit's timestamp, and whether the push was forced. Zero fields are unknown.
type Order struct {
	PushedAt    time.Time `json:"pushed_at,omitzero"`
	CommittedAt time.Time `json:"committed_at,omitzero"`
	Forced      bool      `json:"forced,omitempty"`
}
