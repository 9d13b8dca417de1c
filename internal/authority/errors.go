package authority

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors name the categories callers branch on. The typed errors below carry the data and
// match their category with errors.Is.
var (
	// ErrNotFound: the store holds no document under the key.
	ErrNotFound = errors.New("not found")
	// ErrConflict: a conditional write found another revision than the one it was based on.
	ErrConflict = errors.New("revision conflict")
	// ErrSuperseded: a newer intent or pass owns the scope; this pass must stop before its next phase.
	ErrSuperseded = errors.New("superseded")
	// ErrLeaseHeld: another holder has a live lease on the resource.
	ErrLeaseHeld = errors.New("lease held")
	// ErrLeaseLost: the caller's lease expired, was taken over or was unlocked.
	ErrLeaseLost = errors.New("lease lost")
	// ErrInvalidInput: a name, flag or value is malformed; terminal, the message says what to fix.
	ErrInvalidInput = errors.New("invalid input")
	// ErrPermanent marks a failure that retrying cannot cure (a re-drive whose workflow or branch is
	// gone, say): the sweep counts the attempt instead of giving it back.
	ErrPermanent = errors.New("permanent failure")
	// ErrOutboxFull: an environment's outbox holds as many events as it may, because the store has
	// not taken them as records; retryable once the store does.
	ErrOutboxFull = errors.New("outbox full")
	// ErrRepeated: the request (a webhook delivery) was carried out before; nothing was done again.
	ErrRepeated = errors.New("already carried out")
	// ErrFreezeMismatch: an unfreeze did not name the scope's current freeze (it named an older
	// one, or none); nothing was unfrozen.
	ErrFreezeMismatch = errors.New("not the current freeze")
)

// InputError is a bad name, flag or value. It is terminal: retrying cannot help.
type InputError struct {
	Field string
	Value string
	Fix   string
}

func (e *InputError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("invalid %s: %s", e.Field, e.Fix)
	}
	return fmt.Sprintf("invalid %s %q: %s", e.Field, e.Value, e.Fix)
}

func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// FreezeMismatchError refuses an unfreeze that did not name the scope's current freeze: the one
// it named (by its rollback's generation) was lifted already and another rollback froze the scope
// again, or it named none. Nothing was unfrozen; Current is the freeze to name.
type FreezeMismatchError struct {
	Environment string
	Scope       string
	Named       int64 // the generation named; 0: none
	Current     *Freeze
}

func (e *FreezeMismatchError) Error() string {
	resource := resourceName(e.Environment, e.Scope)
	switch {
	case e.Current == nil:
		return fmt.Sprintf("freeze %d is not the current freeze of %s; nothing was unfrozen", e.Named, resource)
	case e.Named == 0:
		return fmt.Sprintf("no freeze was named, and %s is frozen by %s: name it (%d) to lift it; nothing was unfrozen",
			resource, e.Current.Describe(), e.Current.Generation)
	}
	return fmt.Sprintf("freeze %d is not the current freeze of %s (%s): it is frozen by %s; name that one (%d) to lift it; nothing was unfrozen",
		e.Named, resource, e.Why(), e.Current.Describe(), e.Current.Generation)
}

// Why says what is wrong with the freeze named: none was, a newer rollback has frozen the scope
// since (the one named was replaced, or lifted first), or no rollback ever set it.
func (e *FreezeMismatchError) Why() string {
	switch {
	case e.Named == 0:
		return "no freeze was named"
	case e.Current == nil || e.Named < e.Current.Generation:
		return "a newer rollback has frozen the scope since"
	}
	return "no rollback set it"
}

func (e *FreezeMismatchError) Is(target error) bool { return target == ErrFreezeMismatch }

// SupersededError says that a pass lost authority over a scope, and to whom.
type SupersededError struct {
	Environment string
	Scope       string
	Generation  int64 // the pass that was refused
	By          int64 // the newer generation that owns or waits for the scope
	BySha       string
	// Done: nothing newer, but the pass's work in the scope already ended (deployed, failed
	// terminally, withdrawn), so it may start nothing more there.
	Done bool `json:"done,omitempty"`
}

func (e *SupersededError) Error() string {
	if e.Done {
		return fmt.Sprintf("%s/%s: generation %d has nothing left to do: its work here already ended", e.Environment, e.Scope, e.Generation)
	}
	if e.By == 0 {
		return fmt.Sprintf("%s/%s: generation %d does not own the scope: it never claimed it (claim it first, or run with the generation that did)", e.Environment, e.Scope, e.Generation)
	}
	by := fmt.Sprintf("generation %d", e.By)
	if e.BySha != "" {
		by += fmt.Sprintf(" (%s)", shortSha(e.BySha))
	}
	return fmt.Sprintf("%s/%s: generation %d superseded by %s", e.Environment, e.Scope, e.Generation, by)
}

func (e *SupersededError) Is(target error) bool { return target == ErrSuperseded }

// HeldError is a refused lease: who holds it, for what, and when to try again.
type HeldError struct {
	// Reason is the evaluator's (Verdict.Reason): what the pass waits for. A HeldError read back
	// from an older App's answer may lack it; the fields below then say.
	Reason     Reason `json:"reason,omitempty"`
	Resource   string
	Holder     string
	Purpose    string
	Generation int64
	ExpiresAt  time.Time
	RetryAfter time.Duration // whole seconds, at least one
	// Until is when the hold ends by itself (a soak, a closed change window); zero when it ends
	// only when someone acts (approvals) or something else happens first.
	Until time.Time `json:",omitzero"`

	// Ahead > 0: the pass waits in the scope's queue, with that many intents ahead of its own; the
	// head is Generation, commit HeadSha (Holder, when set, holds the lease).
	Ahead   int
	HeadSha string
	// Barrier is the commit of the barrier the pass waits for (policy latest).
	Barrier string
	// Blocked: the head failed terminally and blocks the scope until someone decides (Decide).
	Blocked bool
	// Frozen: a rollback froze the scope; nothing but the rollback deploys until Unfreeze.
	Frozen *Freeze
	// Promotion: the pass's commit is not live yet in an environment this one requires.
	Promotion *PromotionWait
	// Soak, Approval and Window: what the pass's commit waits for at the gates.
	Soak     *SoakWait     `json:",omitempty"`
	Approval *ApprovalWait `json:",omitempty"`
	Window   *WindowWait   `json:",omitempty"`
}

func (e *HeldError) Error() string {
	switch e.reason() {
	case ReasonPromotion:
		return fmt.Sprintf("%s: %s; it deploys here once it is live there; retry after %ds",
			e.Resource, e.Promotion.text(), int64(e.RetryAfter/time.Second))
	case ReasonSoaking, ReasonApproval, ReasonWindow:
		return fmt.Sprintf("%s: %s; retry after %ds", e.Resource, waitText(e), int64(e.RetryAfter/time.Second))
	case ReasonFrozen:
		return fmt.Sprintf("%s: held by a freeze: rolled back to %s by %s (%s); nothing newer deploys until someone unfreezes it (latestwins unfreeze %s --freeze %d); retry after %ds",
			e.Resource, shortSha(e.Frozen.Sha), orUnknown(e.Frozen.Actor), e.Frozen.Reason, e.Resource, e.Frozen.Generation, int64(e.RetryAfter/time.Second))
	case ReasonBlocked:
		return fmt.Sprintf("%s: blocked: generation %d (%s) failed terminally; nothing behind it deploys until someone decides (latestwins skip or retry %s); retry after %ds",
			e.Resource, e.Generation, shortSha(e.HeadSha), e.Resource, int64(e.RetryAfter/time.Second))
	case ReasonBarrier:
		return fmt.Sprintf("%s: waiting for barrier %s; retry after %ds", e.Resource, shortSha(e.Barrier), int64(e.RetryAfter/time.Second))
	case ReasonQueued:
		return fmt.Sprintf("%s: queued: %d ahead of this commit (generation %d, %s, goes first); retry after %ds",
			e.Resource, e.Ahead, e.Generation, shortSha(e.HeadSha), int64(e.RetryAfter/time.Second))
	}
	return fmt.Sprintf("%s is locked by %s (%s, generation %d); retry after %ds",
		e.Resource, e.Holder, e.Purpose, e.Generation, int64(e.RetryAfter/time.Second))
}

// reason is the evaluator's reason, or, for an answer that came without one, the one its fields say.
func (e *HeldError) reason() Reason {
	if e.Reason != ReasonGo {
		return e.Reason
	}
	switch {
	case e.Promotion != nil:
		return ReasonPromotion
	case e.Soak != nil:
		return ReasonSoaking
	case e.Approval != nil:
		return ReasonApproval
	case e.Window != nil:
		return ReasonWindow
	case e.Frozen != nil:
		return ReasonFrozen
	case e.Blocked:
		return ReasonBlocked
	case e.Barrier != "":
		return ReasonBarrier
	case e.Ahead > 0:
		return ReasonQueued
	}
	return ReasonLocked
}

// Outlasts reports whether the hold is a lasting one (Reason.Lasting) that does not end by itself
// before deadline: a pass that may wait until deadline should end held instead.
func (e *HeldError) Outlasts(deadline time.Time) bool {
	return e.reason().Lasting() && (e.Until.IsZero() || e.Until.After(deadline))
}

// Why is the reason the pass waits: the evaluator's, or the one the error's fields say.
func (e *HeldError) Why() Reason { return e.reason() }

func (e *HeldError) Is(target error) bool { return target == ErrLeaseHeld }

// LostError says that a lease the caller held is no longer its own.
type LostError struct {
	Resource string
	Token    int64  // the caller's token
	Holder   string // who holds the resource now ("" when nobody does)
	Current  int64  // the resource's current token
	Reason   string
}

func (e *LostError) Error() string {
	msg := fmt.Sprintf("lease on %s with token %d lost", e.Resource, e.Token)
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if e.Holder != "" {
		msg += fmt.Sprintf(" (now held by %s with token %d)", e.Holder, e.Current)
	}
	return msg
}

func (e *LostError) Is(target error) bool { return target == ErrLeaseLost }
