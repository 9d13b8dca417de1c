package authority

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// RollbackRequest asks for an older commit of one scope, ahead of everything pending.
type RollbackRequest struct {
	Environment string
	Scope       string
	// To is the commit to roll back to: its full sha (any commit), or at least MinShaPrefix hex
	// digits of one that was live in the scope (ResolveCommit); empty: the one live before the
	// current one (Scope.Prev).
	To string
	// Ref is the branch the commit is recorded on; empty: the branch of what is live.
	Ref    string
	Actor  string
	Reason string
	// Request identifies the request, e.g. a comment's delivery: a repeat changes nothing and
	// returns the first answer. Empty: a new request.
	Request string
	// Source and Origin are recorded with the intent as Intent's are (Origin lets the sweep start
	// the deploy again).
	Source string
	Origin string
}

// ErrNotFrozen: an unfreeze was asked for a scope that no rollback holds.
var ErrNotFrozen = errors.New("not frozen")

// Rollback accepts r.To (or the previous live commit) as the newest intent of one scope: a new
// generation that supersedes whatever was pending, deployed by the next pass of that generation,
// and then freezes the scope. Intents accepted afterwards are recorded and wait: none passes a
// deploy gate (they are told they are held by a freeze) until Unfreeze. The rollback's own order
// facts make it the newest commit of its branch, so a late delivery of an older push is recorded as
// out of order and never undoes it. A repeat of r.Request returns the first result (Duplicate).
// r.To given by a prefix is resolved against the scope's history as ResolveCommit does, in the read
// the rollback writes.
func (a *Authority) Rollback(ctx context.Context, r RollbackRequest) (*AcceptResult, error) {
	if err := ValidateEnvironment(r.Environment); err != nil {
		return nil, err
	}
	if err := ValidateScope(r.Scope); err != nil {
		return nil, err
	}
	// A full sha may name any commit; a shorter prefix names one the scope ran (ResolveCommit).
	byPrefix := r.To != "" && ValidateSha(r.To) != nil
	if byPrefix {
		if err := ValidateShaPrefix(r.To); err != nil {
			return nil, err
		}
	}
	if strings.TrimSpace(r.Reason) == "" {
		return nil, &InputError{Field: "reason", Fix: "say why the scope is rolled back (--reason TEXT); it goes in the timeline"}
	}
	r.Reason = truncate(strings.TrimSpace(r.Reason), maxFieldLen) // kept with the freeze: cut, as messages are
	for field, v := range map[string]string{"ref": r.Ref, "source": r.Source, "actor": r.Actor, "origin": r.Origin} {
		if len(v) > maxFieldLen {
			return nil, &InputError{Field: field, Value: truncate(v, 40), Fix: fmt.Sprintf("use at most %d characters", maxFieldLen)}
		}
	}
	id := r.Request
	if id == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("rollback id: %w", err)
		}
		id = hex.EncodeToString(b[:])
	}
	id = "rollback:" + r.Scope + ":" + id
	if len(id) > maxIDLen {
		return nil, &InputError{Field: "request", Value: truncate(r.Request, 40), Fix: fmt.Sprintf("use a request id of at most %d characters", maxIDLen-len("rollback::")-len(r.Scope))}
	}
	var prior *IntentRecord
	findPrior := a.findRequest(r.Environment, id, &prior)
	// The prefix is resolved against the document the rollback writes (each attempt's), and a
	// refusal is decided there, so that a refusal read from remembered state is confirmed afresh.
	var resolved Commit
	var refused error
	prepare := func(ctx context.Context, doc *Doc) error {
		resolved, refused = Commit{}, nil
		if err := findPrior(ctx, doc); err != nil || prior != nil || !byPrefix {
			return err
		}
		var err error
		if resolved, err = a.resolve(ctx, doc.Env, r.Environment, r.Scope, r.To); err != nil && !inputError(err) {
			return err
		}
		refused = err
		return nil
	}
	var res *AcceptResult
	_, err := a.updatePrepared(ctx, EnvKey(r.Environment), prepare, func(doc *Doc, now time.Time) (bool, error) {
		res = nil
		if prior != nil {
			res = &AcceptResult{Generation: prior.Generation, Duplicate: true, Accepted: []string{r.Scope}}
			return false, nil
		}
		if refused != nil {
			return false, refused
		}
		if doc.Env == nil {
			return false, &InputError{Field: "environment", Value: r.Environment, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
		}
		if err := doc.Env.requireScopes([]string{r.Scope}); err != nil {
			return false, err
		}
		req := r
		if byPrefix {
			req.To, req.Ref = resolved.Sha, cmp.Or(r.Ref, resolved.Ref)
		}
		var err error
		res, err = doc.Env.rollback(req, id, now)
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("roll back %s/%s: %w", r.Environment, r.Scope, err)
	}
	return res, nil
}

// rollback is Rollback's transition.
func (e *Env) rollback(r RollbackRequest, id string, now time.Time) (*AcceptResult, error) {
	sc := e.Scopes[r.Scope]
	to, ref := r.To, r.Ref
	if to == "" {
		if f := sc.Freeze; f != nil {
			// What was live before is the commit rolled back from: going there by default would undo
			// the rollback. Say where to go.
			return nil, &InputError{Field: "to", Value: r.Scope,
				Fix: fmt.Sprintf("%s/%s is already rolled back to %s: give the commit to roll back to (--to SHA)", e.Name, r.Scope, shortSha(f.Sha))}
		}
		if sc.Prev == nil {
			return nil, &InputError{Field: "to", Value: r.Scope,
				Fix: fmt.Sprintf("%s/%s has no earlier live commit on record: give the commit to roll back to (--to SHA)", e.Name, r.Scope)}
		}
		to = sc.Prev.Sha
		if ref == "" {
			ref = sc.Prev.Ref
		}
	}
	if ref == "" && sc.Live != nil {
		ref = sc.Live.Ref
	}
	gen, err := e.nextGeneration([]string{r.Scope})
	if err != nil {
		return nil, err
	}
	for _, m := range sc.Entries() {
		if m.Failed {
			continue // it has its outcome already; it only stops blocking
		}
		e.record(now, Event{Kind: EventSuperseded, Scope: r.Scope, Generation: m.Generation, Sha: m.Sha,
			Message: fmt.Sprintf("Superseded by the rollback to %s (generation %d)", shortSha(to), gen)})
	}
	// The deploy being undone does not finish first: its lease is taken back now, as an unlock
	// would, so its pass loses it at its next renewal (its command is stopped within its grace, and
	// its writes are fenced off by the rollback's greater token) and the rollback deploys at once.
	if l := sc.Lease; l.Holder != "" && l.Generation < gen {
		e.unlock(r.Scope, fmt.Sprintf("rolled back to %s", shortSha(to)), r.Actor, now)
	}
	source := r.Source
	if source == "" {
		source = "rollback"
	}
	// Pushed now, as far as ordering goes: whatever was pushed before the rollback is older, so a
	// late delivery of it is recorded as out of order; what is pushed after it is newer, and waits.
	entry := &Ref{Generation: gen, Sha: to, Ref: ref, Order: Order{PushedAt: now.Truncate(time.Second)}, Source: source,
		Actor: r.Actor, IntentID: id, Origin: r.Origin, At: now, Barrier: true, Rollback: true}
	sc.setEntries([]*Ref{entry}, now)
	// The rollback owns the scope from now: a pass of its generation deploys without claiming, and
	// every older pass (the deploy being undone) is superseded at its next gate or renewal.
	sc.Owner = max(sc.Owner, gen)
	sc.ActiveAt = now
	sc.Freeze = &Freeze{Generation: gen, Sha: to, Actor: r.Actor, Reason: r.Reason, At: now}
	e.Accepts = append(e.Accepts, IntentRecord{ID: id, Generation: gen, Sha: to, Scopes: []string{r.Scope}, At: now})
	e.record(now, Event{Kind: EventRollback, Scope: r.Scope, Generation: gen, Sha: to,
		Message: fmt.Sprintf("Rollback to %s (generation %d) by %s: %s; %s is frozen until someone unfreezes it", shortSha(to), gen, orUnknown(r.Actor), r.Reason, r.Scope)})
	e.settle()
	return &AcceptResult{Generation: gen, Accepted: []string{r.Scope}}, nil
}

// UnfreezeRequest lifts the freeze of one scope.
type UnfreezeRequest struct {
	Environment string
	Scope       string
	// Freeze names the freeze to lift: the generation of the rollback that set it (Freeze.Generation,
	// as status shows it); required. Another rollback's freeze is never lifted in its place.
	Freeze int64
	Actor  string
	Reason string
	// Request identifies the request: a repeat changes nothing (ErrRepeated).
	Request string
}

// Unfreeze lifts the freeze a rollback set on a scope, recording who and why: the newest intent held
// meanwhile goes next (once the rollback itself has its outcome), and the recovery sweep starts it
// on its next round. It lifts only the freeze r names: when another rollback froze the scope since
// (the one named was lifted already), or r names none, it is a *FreezeMismatchError naming the
// current freeze, and nothing changes. A scope that is not frozen is an error matching ErrNotFrozen; a repeated
// request one matching ErrRepeated, whatever it names. It returns the freeze it lifted.
func (a *Authority) Unfreeze(ctx context.Context, r UnfreezeRequest) (*Freeze, error) {
	if err := ValidateEnvironment(r.Environment); err != nil {
		return nil, err
	}
	if err := ValidateScope(r.Scope); err != nil {
		return nil, err
	}
	if strings.TrimSpace(r.Reason) == "" {
		return nil, &InputError{Field: "reason", Fix: "say why the scope is unfrozen (--reason TEXT); it goes in the timeline"}
	}
	if r.Freeze < 0 {
		return nil, &InputError{Field: "freeze", Value: fmt.Sprint(r.Freeze), Fix: "name the freeze by its rollback's generation, as status shows it"}
	}
	id := ""
	if r.Request != "" {
		id = "unfreeze:" + r.Scope + ":" + r.Request
	}
	var done *IntentRecord
	prepare := a.findRequest(r.Environment, id, &done)
	var lifted *Freeze
	_, err := a.updatePrepared(ctx, EnvKey(r.Environment), prepare, func(doc *Doc, now time.Time) (bool, error) {
		lifted = nil
		if done != nil {
			return false, nil
		}
		if doc.Env == nil {
			return false, &InputError{Field: "environment", Value: r.Environment, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
		}
		if err := doc.Env.requireScopes([]string{r.Scope}); err != nil {
			return false, err
		}
		sc := doc.Env.Scopes[r.Scope]
		if sc.Freeze == nil {
			return false, nil
		}
		if sc.Freeze.Generation != r.Freeze {
			current := *sc.Freeze
			return false, &FreezeMismatchError{Environment: r.Environment, Scope: r.Scope, Named: r.Freeze, Current: &current}
		}
		f := *sc.Freeze
		lifted = &f
		sc.Freeze = nil
		next := ""
		if list := sc.Entries(); len(list) > 0 {
			held := list
			if list[0].Rollback {
				held = list[1:] // the rollback itself still goes first
			} else {
				sc.ActiveAt = time.Time{} // stalled at once: the sweep starts it on its next round
			}
			if len(held) > 0 {
				next = fmt.Sprintf("; generation %d (%s) goes next", held[0].Generation, shortSha(held[0].Sha))
				if len(held) > 1 {
					next += fmt.Sprintf(", then %d more in order", len(held)-1)
				}
			}
		}
		doc.Env.record(now, Event{Kind: EventUnfrozen, Scope: r.Scope, Generation: f.Generation, Sha: f.Sha,
			Message: fmt.Sprintf("Unfrozen by %s: %s%s", orUnknown(r.Actor), r.Reason, next)})
		if id != "" {
			doc.Env.Accepts = append(doc.Env.Accepts, IntentRecord{ID: id, At: now})
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("unfreeze %s/%s: %w", r.Environment, r.Scope, err)
	}
	if done != nil {
		return nil, fmt.Errorf("unfreeze %s/%s for request %s: %w", r.Environment, r.Scope, r.Request, ErrRepeated)
	}
	if lifted == nil {
		return nil, fmt.Errorf("unfreeze %s/%s: no rollback holds it: %w", r.Environment, r.Scope, ErrNotFrozen)
	}
	return lifted, nil
}

// findRequest is the prepare step of an operation that a request id makes idempotent: before
// each attempt it sets *found to the record of id if the request was answered already (in the
// document's outbox or, within the retention, among the records), nil otherwise. An empty id is
// never found.
func (a *Authority) findRequest(env, id string, found **IntentRecord) func(context.Context, *Doc) error {
	return func(ctx context.Context, doc *Doc) error {
		*found = nil
		if id == "" {
			return nil
		}
		if *found = a.outboxIntent(doc.Env, id); *found != nil {
			return nil
		}
		var err error
		*found, err = a.intentRecord(ctx, env, id)
		return err
	}
}

// frozenFor says whether the freeze of sc holds the pass at gen: every pass but the rollback's.
func frozenFor(sc *Scope, gen int64) bool {
	return sc.Freeze != nil && sc.Freeze.Generation != gen
}

// setLive makes l what is live, keeping what was live before when it was another commit. A deploy
// of the commit already live keeps when it became live (Since), so that a soak counted from then
// does not start again; another commit is live since l.At.
func (s *Scope) setLive(l *Live) {
	l.Since = time.Time{}
	if s.Live != nil && s.Live.Sha == l.Sha {
		l.Since = s.Live.since()
	}
	if s.Live != nil && s.Live.Sha != l.Sha {
		s.Prev = &Live{Sha: s.Live.Sha, Ref: s.Live.Ref}
	}
	s.Live = l
	s.Unapproved = nil
}
