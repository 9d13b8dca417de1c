package authority

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Policy says how an environment orders its deploys (docs/config.md, "Policies").
type Policy string

// Policies.
const (
	// PolicyLatest deploys the newest accepted commit of each scope and supersedes older pending
	// ones, except barriers: an intent marked a barrier is never superseded, newer ones wait behind it.
	PolicyLatest Policy = "latest"
	// PolicyQueue deploys every accepted intent of each scope in generation order and supersedes
	// none: a pass deploys only once every older intent of its scopes has its outcome.
	PolicyQueue Policy = "queue"
)

// ParsePolicy checks a policy name.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyLatest, PolicyQueue:
		return p, nil
	}
	return "", &InputError{Field: "policy", Value: s, Fix: "use latest (the newest commit wins) or queue (every commit, in order)"}
}

// DefaultQueueLimit is how many intents one scope may hold pending (the head and those waiting
// behind it) unless WithQueueLimit says otherwise.
const DefaultQueueLimit = 100

// maxQueuedBytes bounds the stored form of the intents waiting behind the scopes' heads, together:
// an intent that would take them past this is refused like one past the queue limit. The rest of
// the document can grow after the check (leases, failures, the outbox, freezes) up to its worst
// case, about 340 KB (TestWorstCaseDocumentFitsAnItem: 379 KB with the queues full), so this bound keeps the whole document
// within a DynamoDB item (400 KB) whatever the limit and the lengths of the intents' fields. A
// hundred intents with ordinary fields take about 25 KB.
const maxQueuedBytes = 40_000

// WithQueueLimit sets how many intents one scope may hold pending (at least 1).
func WithQueueLimit(n int) Option { return func(a *Authority) { a.queueLimit = max(n, 1) } }

// ErrQueueFull: a scope already holds as many pending intents as it may; the intent was refused,
// nothing was written. Retryable once some of them have their outcome.
var ErrQueueFull = errors.New("queue full")

// QueueFullError is an intent refused because a scope's queue is full.
type QueueFullError struct {
	Environment string
	Scope       string
	Pending     int
	Limit       int
	Bytes       int // > 0: refused for the document's size rather than the count
}

func (e *QueueFullError) Error() string {
	if e.Bytes > 0 {
		return fmt.Sprintf("%s: the intents waiting would take %d bytes of the environment's document, more than %d: wait until some are deployed, or split the environment",
			e.Environment, e.Bytes, maxQueuedBytes)
	}
	return fmt.Sprintf("%s/%s: %d intents are pending, the most one scope may hold (%d): this one was refused, nothing was written; try again once some are deployed, or raise the queue limit",
		e.Environment, e.Scope, e.Pending, e.Limit)
}

func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }

func (e *Env) policy() Policy {
	if e.Policy == "" {
		return PolicyLatest
	}
	return e.Policy
}

// PolicyOrDefault is the environment's policy, PolicyLatest when none was ever set.
func (e *Env) PolicyOrDefault() Policy { return e.policy() }

// Entries returns the scope's pending intents, oldest first: the head, then those waiting.
func (s *Scope) Entries() []*Ref {
	if s.Mailbox == nil {
		return nil
	}
	return append([]*Ref{s.Mailbox}, s.Queue...)
}

// position returns the index of the pending intent at generation gen among Entries, or -1.
func (s *Scope) position(gen int64) int {
	for i, r := range s.Entries() {
		if r.Generation == gen {
			return i
		}
	}
	return -1
}

// setEntries makes list the scope's pending intents. A new head whose pass claimed it while it
// waited is owned by that pass from now on.
func (s *Scope) setEntries(list []*Ref, now time.Time) {
	prev := s.Mailbox
	s.Mailbox, s.Queue = nil, nil
	if len(list) == 0 {
		return
	}
	head := list[0]
	if head != prev {
		s.ActiveAt = now
	}
	s.Mailbox = head
	if len(list) > 1 {
		s.Queue = slices.Clone(list[1:])
	}
	if head.Claimed && s.Owner < head.Generation {
		s.Owner = head.Generation
	}
}

// collapse applies latest-wins to a scope's pending intents, oldest first: each ordinary intent
// with a newer one behind it is superseded (recorded, with why); barriers stay, and so does the
// newest unless it already failed.
func (e *Env) collapse(name string, list []*Ref, why string, now time.Time) []*Ref {
	out := make([]*Ref, 0, len(list))
	newest := list[len(list)-1]
	for i, r := range list {
		last := i == len(list)-1
		switch {
		case r.Barrier || (last && !r.Failed):
			out = append(out, r)
		case r.Failed:
			// It has its outcome already; it only stops blocking.
		default:
			if s := r.since(); newest.since().After(s) {
				newest.Since = s
			}
			e.record(now, Event{Kind: EventSuperseded, Scope: name, Generation: r.Generation, Sha: r.Sha,
				Message: fmt.Sprintf("Superseded by generation %d (%s)%s", newest.Generation, shortSha(newest.Sha), why)})
		}
	}
	return out
}

// enqueue adds an accepted intent's entry to a scope under the environment's policy: at the end
// of the queue under policy queue; under policy latest it supersedes the pending ordinary intents
// and waits behind the barriers. It refuses, changing nothing, past the queue limit.
func (e *Env) enqueue(name string, sc *Scope, entry *Ref, limit int, now time.Time) error {
	list := append(sc.Entries(), entry)
	if e.policy() == PolicyLatest {
		n := 0
		for i, r := range list {
			if r.Barrier || i == len(list)-1 {
				n++
			}
		}
		if n > limit {
			return &QueueFullError{Environment: e.Name, Scope: name, Pending: n - 1, Limit: limit}
		}
		list = e.collapse(name, list, "", now)
	} else if len(list) > limit {
		return &QueueFullError{Environment: e.Name, Scope: name, Pending: len(list) - 1, Limit: limit}
	}
	sc.setEntries(list, now)
	return nil
}

// endEntry gives the pending intent at pos its outcome. A terminal failure of an intent that
// others must not pass (any intent under policy queue, a barrier under policy latest) stays in
// place, marked failed: at the head it blocks the scope until someone decides.
func (e *Env) endEntry(sc *Scope, pos int, failed bool, now time.Time) {
	list := sc.Entries()
	if pos < 0 || pos >= len(list) {
		return
	}
	if failed && (e.policy() == PolicyQueue || list[pos].Barrier) {
		list[pos].Failed = true
		return
	}
	list = slices.Delete(list, pos, pos+1)
	sc.setEntries(list, now)
}

// setPolicy switches the environment's policy and records the switch. Latest to queue keeps what
// is pending as it is (its head stays the head). Queue to latest applies latest-wins to every
// scope: only the newest intent and the barriers stay pending, the others are superseded.
func (e *Env) setPolicy(p Policy, actor string, now time.Time) {
	from := e.policy()
	if p == "" || p == from {
		return
	}
	e.Policy = p
	if p == PolicyLatest {
		e.Policy = "" // the default is stored as nothing
	}
	e.record(now, Event{Kind: EventPolicy, Message: fmt.Sprintf("Policy changed from %s to %s by %s", from, p, orUnknown(actor))})
	if p != PolicyLatest {
		return
	}
	for _, name := range sortedKeys(e.Scopes) {
		sc := e.Scopes[name]
		if list := sc.Entries(); len(list) > 0 {
			sc.setEntries(e.collapse(name, list, ": the policy changed to latest", now), now)
		}
	}
	e.settle()
}

// queueRetry is how soon a pass waiting in a queue is told to ask again when the head holds no
// lease that says when it frees.
const queueRetry = 5 * time.Second

// SetPolicy sets an environment's policy and records the switch in its timeline (see setPolicy).
// It reports whether the policy changed. An environment nothing was ever accepted for is bad input,
// as for every other verb, and nothing is written: a typo must not make an environment. A new
// environment gets its policy with its first intent (Intent.Policy).
func (a *Authority) SetPolicy(ctx context.Context, env string, p Policy, actor string) (bool, error) {
	if err := ValidateEnvironment(env); err != nil {
		return false, err
	}
	if _, err := ParsePolicy(string(p)); err != nil {
		return false, err
	}
	changed := false
	_, err := a.update(ctx, EnvKey(env), func(d *Doc, now time.Time) (bool, error) {
		if d.Env == nil {
			return false, &InputError{Field: "environment", Value: env, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
		}
		// In the per-scope layout a write that landed its head and decides again for a scope finds
		// the policy it set: what it reports stays.
		changed = d.Env.policy() != p || changed && d.Env.Split
		d.Env.setPolicy(p, actor, now)
		return changed, nil
	})
	if err != nil {
		return false, fmt.Errorf("set the policy of %s: %w", env, err)
	}
	return changed, nil
}

// DecisionAction is what someone decided about a terminal failure that blocks a scope.
type DecisionAction string

// Decisions about a blocking failure.
const (
	// DecideSkip gives up on the failed intent: the next one waiting goes.
	DecideSkip DecisionAction = "skip"
	// DecideRetry tries the failed intent again, from its first attempt: the recovery sweep
	// re-drives it at once (or its pass, run again, claims it).
	DecideRetry DecisionAction = "retry"
)

// Decision unblocks a scope whose head failed terminally under policy queue, or as a barrier.
type Decision struct {
	Environment string
	Scope       string
	Action      DecisionAction
	Reason      string
	Actor       string
	// Request, when set (a webhook delivery id), makes the decision happen once for it: a repeat
	// returns ErrRepeated instead of skipping the next failure too.
	Request string
}

// ErrNotBlocked: a decision was asked for a scope that nothing blocks.
var ErrNotBlocked = errors.New("not blocked")

// Decide carries out a decision about the terminal failure that blocks a scope and records who
// decided and why. It returns the failed intent it decided about; an error matching ErrNotBlocked
// when the scope's head has not failed.
func (a *Authority) Decide(ctx context.Context, d Decision) (*Ref, error) {
	if err := ValidateEnvironment(d.Environment); err != nil {
		return nil, err
	}
	if err := ValidateScope(d.Scope); err != nil {
		return nil, err
	}
	if d.Action != DecideSkip && d.Action != DecideRetry {
		return nil, &InputError{Field: "decision", Value: string(d.Action), Fix: "use skip or retry"}
	}
	if strings.TrimSpace(d.Reason) == "" {
		return nil, &InputError{Field: "reason", Fix: fmt.Sprintf("say why the failure is %sped (--reason TEXT); it goes in the timeline", d.Action)}
	}
	id := ""
	if d.Request != "" {
		id = "decide:" + d.Scope + ":" + d.Request
	}
	var done *IntentRecord
	prepare := a.findRequest(d.Environment, id, &done)
	var decided *Ref
	_, err := a.updatePrepared(ctx, EnvKey(d.Environment), prepare, func(doc *Doc, now time.Time) (bool, error) {
		decided = nil
		if done != nil {
			return false, nil
		}
		if doc.Env == nil {
			return false, &InputError{Field: "environment", Value: d.Environment, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
		}
		if err := doc.Env.requireScopes([]string{d.Scope}); err != nil {
			return false, err
		}
		sc := doc.Env.Scopes[d.Scope]
		if sc.Mailbox == nil || !sc.Mailbox.Failed {
			return false, nil
		}
		m := *sc.Mailbox
		decided = &m
		if d.Action == DecideSkip {
			doc.Env.record(now, Event{Kind: EventSkipped, Scope: d.Scope, Generation: m.Generation, Sha: m.Sha,
				Message: fmt.Sprintf("Failed %s skipped by %s: %s", shortSha(m.Sha), orUnknown(d.Actor), d.Reason)})
			sc.setEntries(sc.Entries()[1:], now)
		} else {
			sc.Mailbox.Failed, sc.Mailbox.Attempt = false, 0
			sc.ActiveAt = time.Time{} // stalled at once: the sweep re-drives it on its next round
			doc.Env.record(now, Event{Kind: EventRetried, Scope: d.Scope, Generation: m.Generation, Sha: m.Sha,
				Message: fmt.Sprintf("Failed %s to be retried, by %s: %s", shortSha(m.Sha), orUnknown(d.Actor), d.Reason)})
		}
		if id != "" {
			doc.Env.Accepts = append(doc.Env.Accepts, IntentRecord{ID: id, At: now})
		}
		doc.Env.settle()
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s in %s/%s: %w", d.Action, d.Environment, d.Scope, err)
	}
	if done != nil {
		return nil, fmt.Errorf("%s in %s/%s for request %s: %w", d.Action, d.Environment, d.Scope, d.Request, ErrRepeated)
	}
	if decided == nil {
		return nil, fmt.Errorf("%s in %s/%s: no terminal failure blocks it: %w", d.Action, d.Environment, d.Scope, ErrNotBlocked)
	}
	return decided, nil
}

// checkQueuedSize refuses a document whose waiting intents (the scopes' queues) take more than
// maxQueuedBytes in its stored form.
func (e *Env) checkQueuedSize() error {
	n := 0
	for _, sc := range e.Scopes {
		for _, q := range sc.Queue {
			b, err := json.Marshal(encodeRef(q))
			if err != nil {
				return err
			}
			n += len(b) + 1
		}
	}
	if n > maxQueuedBytes {
		return &QueueFullError{Environment: e.Name, Bytes: n}
	}
	return nil
}

// waitText says in a few words what a waiting pass waits for: the publications' wording.
func waitText(w *HeldError) string {
	switch w.reason() {
	case ReasonPromotion:
		return w.Promotion.text()
	case ReasonSoaking:
		return w.Soak.text()
	case ReasonApproval:
		return w.Approval.text()
	case ReasonWindow:
		return w.Window.text()
	case ReasonFrozen:
		return fmt.Sprintf("held by a freeze: rolled back to %s by %s; waiting for unfreeze (freeze %d)", shortSha(w.Frozen.Sha), orUnknown(w.Frozen.Actor), w.Frozen.Generation)
	case ReasonBlocked:
		return fmt.Sprintf("blocked: generation %d (%s) failed terminally; waiting for a decision (skip or retry)", w.Generation, shortSha(w.HeadSha))
	case ReasonBarrier:
		return "waiting for barrier " + shortSha(w.Barrier)
	case ReasonQueued:
		return fmt.Sprintf("queued: %d ahead of this commit", w.Ahead)
	}
	return fmt.Sprintf("locked by %s (%s, generation %d)", w.Holder, w.Purpose, w.Generation)
}

// WaitText is waitText for renderers outside the package.
func WaitText(w *HeldError) string { return waitText(w) }
