package core

import (
	"errors"

	"github.com/google/go-github/v60/github"
)

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
	OutcomeApproved   Outcome = "approved"    // /latestwins approve ran (the reply says what it recorded)
	OutcomeBrokeGlass Outcome = "broke-glass" // /latestwins break-glass waived a pending commit's gates
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

// Delivery is one verified webhook delivery.
type Delivery struct {
	ID    string // X-GitHub-Delivery: the intent id of what it causes, so a re-delivery is idempotent
	Event string // X-GitHub-Event
	// Payload is the parsed event (*github.PushEvent, *github.PullRequestEvent, ...) of an event the
	// App uses, or nil for any other event, which is acknowledged without being parsed.
	Payload any
}

// ErrMalformed: a correctly signed delivery that cannot be read (400).
var ErrMalformed = errors.New("malformed webhook delivery")

// MalformedError says what is wrong with a signed delivery.
type MalformedError struct{ Reason string }

func (e *MalformedError) Error() string { return "malformed webhook delivery: " + e.Reason }

// Is matches ErrMalformed.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// EventProtectionRule is the X-GitHub-Event of a deployment protection rule's request.
const EventProtectionRule = "deployment_protection_rule"

// ProtectionRuleEvent is a deployment_protection_rule delivery: go-github's event plus the commit
// and ref GitHub sends beside it (always, even when the job creates no deployment), which go-github
// v60 does not read.
type ProtectionRuleEvent struct {
	github.DeploymentProtectionRuleEvent
	Sha string `json:"sha,omitempty"`
	Ref string `json:"ref,omitempty"`
}
