package authority

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ErrMoved: the environment's state was moved to another store (Authority.Move); nothing may
// change it here any more.
var ErrMoved = errors.New("environment moved to another store")

// Moved is the marker Move leaves in the environment's document in the store it moved from: the
// document keeps its state as it was (a later Move to the same store carries on from it), and every
// transition and read there is refused with where the state went.
type Moved struct {
	To string    `json:"to"` // the store, as the mover named it (without credentials)
	At time.Time `json:"at"`
}

// MovedError refuses a transition or a read of an environment whose state went elsewhere.
type MovedError struct {
	Environment string
	Moved       Moved
}

func (e *MovedError) Error() string {
	return fmt.Sprintf("environment %s was moved to %s at %s: point --store (LATESTWINS_STORE, the Action's store) there",
		e.Environment, e.Moved.To, e.Moved.At.UTC().Format(time.RFC3339))
}

func (e *MovedError) Is(target error) bool { return target == ErrMoved }

// movedError is the refusal for d when its environment was moved, or nil.
func movedError(d *Doc) error {
	if d == nil || d.Env == nil || d.Env.Moved == nil {
		return nil
	}
	return &MovedError{Environment: d.Env.Name, Moved: *d.Env.Moved}
}

// RecordLister is what a store offers to list its records by key prefix, so that Move can copy
// an environment's intent records, whose keys are the intents' ids. A store without it moves the
// events and the intents still in the document, and Move says that the older ids stayed behind.
type RecordLister interface {
	ListRecords(ctx context.Context, prefix string) ([]Record, error)
}

// MoveResult is what Move copied.
type MoveResult struct {
	Environment string `json:"environment"`
	Generation  int64  `json:"generation"` // the environment's newest generation
	Scopes      int    `json:"scopes"`
	Events      int    `json:"events"`  // events within the retention
	Intents     int    `json:"intents"` // intent records within the retention
	// IntentsLeft: the source cannot list its records, so intent ids accepted before those still
	// in the document were not copied (a re-delivery of one would be taken as a new intent).
	IntentsLeft bool `json:"intents_left,omitempty"`
	// Already: an earlier Move had copied it all; nothing was written this time.
	Already bool `json:"already,omitempty"`
}

// LeasedError refuses to move an environment while a pass holds a lease there.
type LeasedError struct {
	Environment string
	Scope       string
	Lease       Lease
}

func (e *LeasedError) Error() string {
	return fmt.Sprintf("%s/%s is leased by %s (%s, generation %d) until %s: move the environment when no pass runs there, or unlock it",
		e.Environment, e.Scope, e.Lease.Holder, e.Lease.Purpose, e.Lease.Generation, e.Lease.ExpiresAt.UTC().Format(time.RFC3339))
}

func (e *LeasedError) Is(target error) bool { return target == ErrLeaseHeld }

// Move copies environment env's state and history (the events and intent records within the
// retention) to the store target, and leaves a marker in this store that refuses every later
// transition with where the state went (named to). It refuses while any scope's lease is live.
// Lease tokens move with the state, so every grant in the target fences every grant made here.
//
// The marker is written first, conditional on the revision read, so nothing changes here while
// the copy is made; the copy writes the records, then the document, which the target must not
// hold yet (or hold as an earlier Move of the same state left it). Interrupted at any request,
// Move run again carries on and ends in the same state.
func (a *Authority) Move(ctx context.Context, env, to string, target Store) (*MoveResult, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, err
	}
	// A target that holds the environment already is refused before anything is marked here,
	// unless an earlier Move to it was interrupted (then the source carries its marker).
	if have, err := target.Get(ctx, EnvKey(env)); err == nil && have.Env != nil {
		if cur, err := a.store.Get(ctx, EnvKey(env)); err == nil && (cur.Env == nil || cur.Env.Moved == nil) {
			return nil, &InputError{Field: "to", Value: to, Fix: fmt.Sprintf("the target already holds environment %s: move it into a store that does not", env)}
		}
	} else if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("move %s: read the target: %w", env, err)
	}
	// A move to the per-scope layout that a stopped process began is finished first.
	if d, err := a.load(ctx, EnvKey(env)); err != nil {
		return nil, fmt.Errorf("move %s: %w", env, err)
	} else if d, err = a.finishIfMoving(ctx, env, d); err != nil {
		return nil, fmt.Errorf("move %s: %w", env, err)
	} else if isSplit(d) {
		return a.moveSplit(ctx, env, to, target)
	}
	d, err := a.markMoved(ctx, env, to)
	if err != nil {
		return nil, err
	}
	e := d.Env
	res := &MoveResult{Environment: env, Generation: e.Desired, Scopes: len(e.Scopes)}
	keys := make([]string, 0, e.EventSeq)
	for seq := int64(1); seq <= e.EventSeq; seq++ {
		keys = append(keys, EventKey(e.Name, seq))
	}
	recs, left, err := a.movedRecords(ctx, env, keys, []*Env{e})
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", env, err)
	}
	res.IntentsLeft = left
	for _, r := range recs {
		if r.Event != nil {
			res.Events++
		} else {
			res.Intents++
		}
	}
	copied := e.clone()
	copied.Moved, copied.Outbox, copied.Accepts, copied.Events = nil, nil, nil, nil
	switch have, err := target.Get(ctx, EnvKey(env)); {
	case err == nil && have.Env != nil && have.Env.Moved == nil && have.Env.Desired >= e.Desired && have.Env.EventSeq >= e.EventSeq:
		// This move landed before (and the target may have gone on since).
		res.Already = true
		return res, nil
	case err == nil:
		return nil, &InputError{Field: "to", Value: to, Fix: fmt.Sprintf("the target already holds environment %s: move it into a store that does not", env)}
	case !errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("move %s: read the target: %w", env, err)
	}
	for chunk := range slices.Chunk(recs, maxRecordsPerRead) {
		if err := target.PutRecords(ctx, chunk); err != nil {
			return nil, fmt.Errorf("move %s: store the records in the target: %w", env, err)
		}
	}
	if _, err := target.Put(ctx, &Doc{Key: EnvKey(env), Pending: copied.HasPending(), Env: copied}); err != nil {
		return nil, fmt.Errorf("move %s: write the state in the target: %w", env, err)
	}
	return res, nil
}

// markMoved writes the marker into env's document (unless it holds one to the same place) and
// returns the document as it was marked.
func (a *Authority) markMoved(ctx context.Context, env, to string) (*Doc, error) {
	key := EnvKey(env)
	unlock := a.lock(key)
	defer unlock()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		d, err := a.store.Get(ctx, key)
		if errors.Is(err, ErrNotFound) || (err == nil && d.Env == nil) {
			return nil, &InputError{Field: "environment", Value: env, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
		}
		if err != nil {
			return nil, fmt.Errorf("move %s: read %s: %w", env, key, err)
		}
		if m := d.Env.Moved; m != nil {
			if m.To != to {
				return nil, &MovedError{Environment: env, Moved: *m}
			}
			return d, nil
		}
		now := a.clock.Now()
		for _, name := range slices.Sorted(maps.Keys(d.Env.Scopes)) {
			if l := d.Env.Scopes[name].Lease; liveLease(&l, now, a.skew) {
				return nil, &LeasedError{Environment: env, Scope: name, Lease: l}
			}
		}
		work := cloneDoc(d)
		work.Env.Moved = &Moved{To: to, At: now}
		work.Pending = false // nothing here is for the sweep any more
		if _, err := a.store.Put(ctx, work); err == nil {
			a.forget(key)
			a.woke(key)
			return work, nil
		} else if !errors.Is(err, ErrConflict) {
			return nil, fmt.Errorf("move %s: mark %s: %w", env, key, err)
		}
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("move %s: gave up after %d conflicting attempts: %w", env, maxAttempts, ErrConflict)
}

// movedRecords reads what env's history holds within the retention: its events by their keys,
// its intent records by listing (when the store can), and what the outboxes of its documents
// parts hold, which wins.
func (a *Authority) movedRecords(ctx context.Context, env string, eventKeys []string, parts []*Env) ([]Record, bool, error) {
	now := a.clock.Now()
	byKey := map[string]Record{}
	keys := make([]string, 0, maxRecordsPerRead)
	flush := func() error {
		got, err := a.store.GetRecords(ctx, keys)
		if err != nil {
			return fmt.Errorf("read the events: %w", err)
		}
		for _, r := range got {
			if r.Event != nil && now.Before(r.ExpiresAt) {
				byKey[r.Key] = r
			}
		}
		keys = keys[:0]
		return nil
	}
	for _, k := range eventKeys {
		if keys = append(keys, k); len(keys) == maxRecordsPerRead {
			if err := flush(); err != nil {
				return nil, false, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, false, err
	}
	left := true
	if l, ok := a.store.(RecordLister); ok {
		left = false
		prefix := IntentKey(env, "")
		got, err := l.ListRecords(ctx, prefix)
		if err != nil {
			return nil, false, fmt.Errorf("list the intent records: %w", err)
		}
		for _, r := range got {
			if r.Intent != nil && strings.HasPrefix(r.Key, prefix) && now.Before(r.ExpiresAt) {
				byKey[r.Key] = r
			}
		}
	}
	for _, e := range parts {
		for _, r := range a.records(e) {
			if now.Before(r.ExpiresAt) {
				byKey[r.Key] = r
			}
		}
	}
	out := make([]Record, 0, len(byKey))
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[k])
	}
	return out, left, nil
}

// moveSplit is Move for an environment in the per-scope layout. The head is marked first, with
// a conditional write, so that no new generation and no new scope appear here; then every scope's
// document, each with a conditional write, so that no transition that read the head before its
// mark changes a scope after the copy read it (a transition refuses a scope document that holds
// the marker). The copy then reads the marked documents, writes the records, the scopes'
// documents and the directory into the target, and the head last: a target holds the
// environment once its head is there. Interrupted at any request, Move run again carries on.
func (a *Authority) moveSplit(ctx context.Context, env, to string, target Store) (*MoveResult, error) {
	head, err := a.markMovedSplit(ctx, env, to)
	if err != nil {
		return nil, err
	}
	// The directory next: an accept of one scope writes no head, so the head's mark does not
	// stop one that read the head before it from adding a scope; the directory's does (putDir
	// refuses a marked directory), and a scope it listed before its mark is marked below, its
	// document made if the accept has not made it yet.
	dir, err := a.markDirMoved(ctx, env, *head.Env.Moved)
	if err != nil {
		return nil, err
	}
	var names []string
	if dir.Env != nil {
		names = dir.Env.Dir
	}
	for _, name := range names {
		if err := a.markScopeMoved(ctx, env, name, *head.Env.Moved); err != nil {
			return nil, err
		}
	}
	v, err := a.readView(ctx, env, head, nil, true)
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", env, err)
	}
	e := v.doc.Env
	now := a.clock.Now()
	for _, name := range sortedKeys(e.Scopes) {
		// A pass that took its lease between the head's mark and its scope's is refused its next
		// write here; the move waits for the lease to end.
		if l := e.Scopes[name].Lease; liveLease(&l, now, a.skew) {
			return nil, &LeasedError{Environment: env, Scope: name, Lease: l}
		}
	}
	res := &MoveResult{Environment: env, Generation: e.Desired, Scopes: len(e.Scopes)}
	var keys []string
	parts := []*Env{head.Env}
	for seq := int64(1); seq <= head.Env.EventSeq; seq++ {
		keys = append(keys, EventKey(env, seq))
	}
	for _, name := range sortedKeys(v.scopes) {
		d := v.scopes[name]
		if d.Env == nil {
			continue
		}
		parts = append(parts, d.Env)
		for seq := int64(1); seq <= d.Env.EventSeq; seq++ {
			keys = append(keys, ScopeEventKey(env, name, seq))
		}
	}
	recs, left, err := a.movedRecords(ctx, env, keys, parts)
	if err != nil {
		return nil, fmt.Errorf("move %s: %w", env, err)
	}
	res.IntentsLeft = left
	for _, r := range recs {
		if r.Event != nil {
			res.Events++
		} else {
			res.Intents++
		}
	}
	switch have, err := target.Get(ctx, EnvKey(env)); {
	case err == nil && have.Env != nil && have.Env.Moved == nil && have.Env.Desired >= e.Desired && have.Env.EventSeq >= head.Env.EventSeq:
		res.Already = true
		return res, nil
	case err == nil:
		return nil, &InputError{Field: "to", Value: to, Fix: fmt.Sprintf("the target already holds environment %s: move it into a store that does not", env)}
	case !errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("move %s: read the target: %w", env, err)
	}
	for chunk := range slices.Chunk(recs, maxRecordsPerRead) {
		if err := target.PutRecords(ctx, chunk); err != nil {
			return nil, fmt.Errorf("move %s: store the records in the target: %w", env, err)
		}
	}
	// The target's documents: each scope with its own event numbers, the directory, the head.
	// Nothing reads them before the head is there, so one an interrupted move left is replaced.
	docs := make([]*Doc, 0, len(e.Scopes)+2)
	for _, name := range sortedKeys(e.Scopes) {
		s := &Env{Name: env, Part: partScope, Scopes: map[string]*Scope{name: e.Scopes[name]}, Applied: e.Desired}
		if d := v.scopes[name]; d != nil && d.Env != nil {
			s.EventSeq = d.Env.EventSeq
		}
		docs = append(docs, &Doc{Key: ScopeKey(env, name), Pending: s.HasPending(), Env: s})
	}
	docs = append(docs, &Doc{Key: DirKey(env), Env: &Env{Name: env, Part: partDir, Dir: sortedKeys(e.Scopes)}})
	for _, d := range docs {
		if err := replaceDoc(ctx, target, d); err != nil {
			return nil, fmt.Errorf("move %s: write %s in the target: %w", env, d.Key, err)
		}
	}
	h := &Env{Name: env, Part: partHead, Policy: e.Policy, Requires: e.Requires, Gates: e.Gates, AlertAfter: e.AlertAfter,
		Desired: e.Desired, EventSeq: head.Env.EventSeq, Counted: true}
	if _, err := target.Put(ctx, &Doc{Key: EnvKey(env), Env: h}); err != nil {
		return nil, fmt.Errorf("move %s: write the state in the target: %w", env, err)
	}
	return res, nil
}

// replaceDoc writes d into s whatever s holds under its key.
func replaceDoc(ctx context.Context, s Store, d *Doc) error {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		cur, err := s.Get(ctx, d.Key)
		switch {
		case errors.Is(err, ErrNotFound):
			d.Rev = 0
		case err != nil:
			return err
		default:
			d.Rev = cur.Rev
		}
		if _, err = s.Put(ctx, d); !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("gave up after %d conflicting attempts: %w", maxAttempts, ErrConflict)
}

// markMovedSplit writes the marker into the head of env in the per-scope layout, unless it holds
// one to the same place, refusing while a scope's lease is live; it returns the head as marked.
func (a *Authority) markMovedSplit(ctx context.Context, env, to string) (*Doc, error) {
	key := EnvKey(env)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		head, err := a.load(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("move %s: %w", env, err)
		}
		if m := head.Env.Moved; m != nil {
			if m.To != to {
				return nil, &MovedError{Environment: env, Moved: *m}
			}
			return head, nil
		}
		v, err := a.readView(ctx, env, head, nil, true)
		if err != nil {
			return nil, fmt.Errorf("move %s: %w", env, err)
		}
		now := a.clock.Now()
		for _, name := range sortedKeys(v.doc.Env.Scopes) {
			if l := v.doc.Env.Scopes[name].Lease; liveLease(&l, now, a.skew) {
				return nil, &LeasedError{Environment: env, Scope: name, Lease: l}
			}
		}
		work := cloneDoc(head)
		work.Env.Moved = &Moved{To: to, At: now}
		work.Pending = false
		if _, err := a.store.Put(ctx, work); err == nil {
			a.forget(key)
			a.woke(key)
			return work, nil
		} else if !errors.Is(err, ErrConflict) {
			return nil, fmt.Errorf("move %s: mark %s: %w", env, key, err)
		}
		a.forget(key)
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("move %s: gave up after %d conflicting attempts: %w", env, maxAttempts, ErrConflict)
}

// markDirMoved writes the marker m into env's directory, unless it holds one, and returns the
// directory as marked.
func (a *Authority) markDirMoved(ctx context.Context, env string, m Moved) (*Doc, error) {
	return a.markPartMoved(ctx, env, DirKey(env), &Env{Name: env, Part: partDir}, m)
}

// markScopeMoved writes the marker m into scope name's document, unless it holds one.
func (a *Authority) markScopeMoved(ctx context.Context, env, name string, m Moved) error {
	// A scope listed and not made yet by the accept that listed it gets a document that holds
	// only the mark, which that accept's write of the scope cannot go past.
	_, err := a.markPartMoved(ctx, env, ScopeKey(env, name), &Env{Name: env, Part: partScope, Scopes: map[string]*Scope{}}, m)
	return err
}

// markPartMoved writes the marker m into the document of key, or into blank where none is
// stored, with a conditional write, unless it holds one; it returns the document as marked.
func (a *Authority) markPartMoved(ctx context.Context, env, key string, blank *Env, m Moved) (*Doc, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		d, err := a.load(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("move %s: %w", env, err)
		}
		if d.Env != nil && d.Env.Moved != nil {
			return d, nil
		}
		work := cloneDoc(d)
		if work.Env == nil {
			work.Env = blank
		}
		work.Env.Moved = &m
		work.Pending = false
		rev, err := a.store.Put(ctx, work)
		if err == nil {
			a.forget(key)
			work.Rev = rev
			return work, nil
		} else if !errors.Is(err, ErrConflict) {
			return nil, fmt.Errorf("move %s: mark %s: %w", env, key, err)
		}
		a.forget(key)
		if err := backoff(ctx, attempt); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("move %s: mark %s: gave up after %d conflicting attempts: %w", env, key, maxAttempts, ErrConflict)
}
