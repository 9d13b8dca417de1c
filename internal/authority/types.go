package authority

import (
	"context"
	"time"
)

// Store is the port every adapter implements: single-document reads and conditional writes, plus the
// sparse index of environments with pending work. Adapters make one attempt per call; retries on
// conflict live in Authority. Every write is one document, so a store needs no transactions.
type Store interface {
	// Get returns the document stored under key, or an error matching ErrNotFound.
	Get(ctx context.Context, key string) (*Doc, error)
	// Put stores doc iff the stored revision equals doc.Rev (0: nothing stored yet) and returns the
	// new revision, doc.Rev+1. A failed condition returns an error matching ErrConflict. A write that
	// may or may not have committed (a lost response) must be resolved by the adapter before it
	// answers: it returns success only if its own write is the one stored.
	Put(ctx context.Context, doc *Doc) (int64, error)
	// Pending lists the environments whose last stored document had Pending set.
	Pending(ctx context.Context) ([]string, error)
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
}

// Document keys.
const (
	envKeyPrefix   = "env#"
	leaseKeyPrefix = "lease#"
)

// EnvKey is the document key of an environment.
func EnvKey(env string) string { return envKeyPrefix + env }

// LeaseKey is the document key of a named lease.
func LeaseKey(name string) string { return leaseKeyPrefix + name }

// Env is an environment's authoritative state: counters, per-scope mailbox, owner, live state and
// lease, the intents it has seen and its recent timeline. It is stored as one document so that
// every transition is one conditional write.
type Env struct {
	Name     string                  `json:"name"`
	Desired  int64                   `json:"desired"`
	Observed int64                   `json:"observed"`
	Scopes   map[string]*Scope       `json:"scopes,omitempty"`
	Intents  map[string]IntentRecord `json:"intents,omitempty"`
	Events   []Event                 `json:"events,omitempty"`
	EventSeq int64                   `json:"event_seq"`
}

// Scope is one separately deployed part of an environment.
type Scope struct {
	Mailbox  *Ref      `json:"mailbox,omitempty"` // newest accepted intent not yet reconciled
	Owner    int64     `json:"owner"`             // generation of the newest pass that claimed the scope
	Live     *Live     `json:"live,omitempty"`
	Lease    Lease     `json:"lease"`
	Failure  *Failure  `json:"failure,omitempty"` // the last terminal error, until a deploy succeeds
	ActiveAt time.Time `json:"active_at"`         // last activity, for the recovery sweep
}

// Ref is a mailbox entry: a commit accepted for a scope.
type Ref struct {
	Generation int64     `json:"generation"`
	Sha        string    `json:"sha"`
	Ref        string    `json:"ref,omitempty"`
	Before     string    `json:"before,omitempty"`
	Lineage    []string  `json:"lineage,omitempty"` // shas this commit is known to build on, nearest first
	Source     string    `json:"source,omitempty"`
	Actor      string    `json:"actor,omitempty"`
	IntentID   string    `json:"intent_id"`
	Origin     string    `json:"origin,omitempty"`  // how to start the work again (see Intent.Origin)
	Attempt    int       `json:"attempt,omitempty"` // failed attempts so far
	At         time.Time `json:"at"`
}

// Live is what is deployed in a scope.
type Live struct {
	Sha        string    `json:"sha"`
	Ref        string    `json:"ref,omitempty"`
	Generation int64     `json:"generation"`
	Run        string    `json:"run,omitempty"`
	Token      int64     `json:"token"`
	Lineage    []string  `json:"lineage,omitempty"`
	At         time.Time `json:"at"`
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

// IntentRecord remembers an accepted intent so that a re-delivery returns its generation.
type IntentRecord struct {
	Generation int64 `json:"generation"`
}

// NamedLease is a lease on a resource outside any environment (a remote refresh, say), with its own
// short timeline.
type NamedLease struct {
	Name   string  `json:"name"`
	Lease  Lease   `json:"lease"`
	Events []Event `json:"events,omitempty"`
	Seq    int64   `json:"seq"`
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
	EventRedriven   EventKind = "redriven"  // the recovery sweep re-drove stalled work
	EventWithdrawn  EventKind = "withdrawn" // pending work ended because what asked for it is gone
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
}
