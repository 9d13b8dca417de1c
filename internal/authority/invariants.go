package authority

import (
	"errors"
	"fmt"
	"math"
)

// ErrCorrupt: a stored environment breaks an invariant that every transition keeps (it was edited
// by hand, damaged, or written by a faulty build). It is refused when read, whichever store it
// comes from, so that nothing is decided from it: retrying cannot help until someone restores or
// repairs the document.
var ErrCorrupt = errors.New("corrupt stored state")

// CorruptError names the stored document that breaks an invariant, the invariant, and what in the
// document breaks it. It matches ErrCorrupt.
type CorruptError struct {
	Key       string // the document's key, e.g. env#staging
	Invariant string // one of the Invariant constants
	Detail    string // what breaks it, e.g. "observed 50, desired 1"
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s is corrupt: %s does not hold (%s); nothing was decided from it: restore the document from a backup, or repair it so that the invariant holds (docs/design.md, \"Invariants checked on read\")",
		e.Key, e.Invariant, e.Detail)
}

func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// The invariants a read checks (Env.checkInvariants). Each is kept by every transition; the
// conformance suite runs them all against the check. docs/design.md, "Invariants checked on read",
// says why each holds.
const (
	InvariantObserved   = "0 <= observed <= desired"
	InvariantPolicy     = "the policy is latest or queue"
	InvariantOwner      = "0 <= owner <= desired"
	InvariantPending    = "1 <= pending generation <= desired"
	InvariantOrder      = "pending intents in strictly increasing generation order"
	InvariantQueueHead  = "a queue waits behind a head"
	InvariantQueueBound = "the waiting intents within the queue bound"
	InvariantLease      = "1 <= generation of a held lease <= owner"
	InvariantLive       = "1 <= live generation <= desired"
	InvariantFreeze     = "1 <= freeze generation <= desired"
	InvariantFailure    = "1 <= failure generation <= desired"
	InvariantEvents     = "outbox events numbered from 1 to the event seq, increasing"
	InvariantIntents    = "0 <= outbox intent generation <= desired"
)

// minWaitingBytes is the least an intent waiting behind a head takes in checkQueuedSize's count:
// its stored form with a one-digit generation and nothing else, and a separator.
const minWaitingBytes = len(`{"g":1,"s":"","i":""}`) + 1

// MaxWaitingOnRead bounds the intents waiting behind the heads of one environment, all scopes
// together, as a read checks them. The queue limit a process runs with (WithQueueLimit,
// --queue-limit) is not stored, and processes sharing a store may run with different ones, so a
// read cannot check it. What no limit lets past is the size bound every accept checks
// (checkQueuedSize): the waiting intents' stored form within maxQueuedBytes. Only an accept adds a
// waiting intent, so however the entries grow afterwards (a claim mark, an attempt count), no more
// than this many ever wait.
const MaxWaitingOnRead = maxQueuedBytes / minWaitingBytes

// checkInvariants returns a *CorruptError for the first invariant e breaks, in a fixed order
// (scopes by name), or nil.
func (e *Env) checkInvariants() error {
	bad := func(inv, format string, args ...any) error {
		return &CorruptError{Key: EnvKey(e.Name), Invariant: inv, Detail: fmt.Sprintf(format, args...)}
	}
	if e.Part == partScope || e.Part == partDir || e.Counted {
		// A scope's document and the directory hold no generation counter, and a counted head's
		// generations come from the counter above its Desired (counter.go): a read of one of
		// them alone cannot bound their generations.
		c := *e
		c.Desired = math.MaxInt64
		e = &c
	}
	if e.Observed < 0 || e.Observed > e.Desired {
		return bad(InvariantObserved, "observed %d, desired %d", e.Observed, e.Desired)
	}
	if e.Policy != "" && e.Policy != PolicyLatest && e.Policy != PolicyQueue {
		return bad(InvariantPolicy, "policy %q", e.Policy)
	}
	waiting := 0
	for _, name := range sortedKeys(e.Scopes) {
		sc := e.Scopes[name]
		if sc == nil {
			continue
		}
		if sc.Owner < 0 || sc.Owner > e.Desired {
			return bad(InvariantOwner, "scope %s: owner %d, desired %d", name, sc.Owner, e.Desired)
		}
		if sc.Mailbox == nil && len(sc.Queue) > 0 {
			return bad(InvariantQueueHead, "scope %s: %d intents wait behind no head", name, len(sc.Queue))
		}
		var prev int64
		for i, r := range sc.Entries() {
			if r == nil {
				return bad(InvariantPending, "scope %s: pending intent %d is empty", name, i)
			}
			if r.Generation < 1 || r.Generation > e.Desired {
				return bad(InvariantPending, "scope %s: pending intent %d (%s) has generation %d, desired %d", name, i, shortSha(r.Sha), r.Generation, e.Desired)
			}
			if i > 0 && r.Generation <= prev {
				return bad(InvariantOrder, "scope %s: generation %d waits behind generation %d", name, r.Generation, prev)
			}
			prev = r.Generation
		}
		waiting += len(sc.Queue)
		if l := sc.Lease; l.Holder != "" && (l.Generation < 1 || l.Generation > sc.Owner) {
			return bad(InvariantLease, "scope %s: the lease of %s has generation %d, owner %d", name, l.Holder, l.Generation, sc.Owner)
		}
		if l := sc.Live; l != nil && (l.Generation < 1 || l.Generation > e.Desired) {
			return bad(InvariantLive, "scope %s: live %s has generation %d, desired %d", name, shortSha(l.Sha), l.Generation, e.Desired)
		}
		if f := sc.Freeze; f != nil && (f.Generation < 1 || f.Generation > e.Desired) {
			return bad(InvariantFreeze, "scope %s: the freeze has generation %d, desired %d", name, f.Generation, e.Desired)
		}
		if f := sc.Failure; f != nil && (f.Generation < 1 || f.Generation > e.Desired) {
			return bad(InvariantFailure, "scope %s: the failure has generation %d, desired %d", name, f.Generation, e.Desired)
		}
	}
	if waiting > MaxWaitingOnRead {
		return bad(InvariantQueueBound, "%d intents wait behind the heads, more than the %d any queue limit lets in", waiting, MaxWaitingOnRead)
	}
	if e.EventSeq < 0 {
		return bad(InvariantEvents, "event seq %d", e.EventSeq)
	}
	var seq int64
	for i, ev := range e.Outbox {
		if ev.Seq <= seq || ev.Seq > e.EventSeq {
			return bad(InvariantEvents, "outbox event %d is number %d, after number %d; event seq %d", i, ev.Seq, seq, e.EventSeq)
		}
		seq = ev.Seq
	}
	for _, in := range e.Accepts {
		if in.Generation < 0 || in.Generation > e.Desired {
			return bad(InvariantIntents, "intent %q has generation %d, desired %d", truncate(in.ID, 40), in.Generation, e.Desired)
		}
	}
	return nil
}
