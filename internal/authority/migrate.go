package authority

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Moving an environment from the single document (layouts 4 to 6) to the per-scope layout
// (layout 7, scoped.go) takes conditional writes of one document each, and a process may stop
// after any of them:
//
//  1. The single document's outbox is stored as records. Then one conditional write replaces the
//     document by a head that still holds every scope: the snapshot. No build writes the single
//     document after that (builds before the per-scope layout refuse to read layout 7), and
//     nothing writes the snapshot but the last step.
//  2. The directory lists every scope, and each scope's document is created from the snapshot,
//     only where none exists: a document that exists is this move's, written by a process that
//     stopped, or one a writer wrote after the move ended.
//  3. One conditional write of the head drops the snapshot. The environment is in the per-scope
//     layout.
//
// Whoever meets a snapshot finishes steps 2 and 3 before anything else: a writer, the sweep (the
// snapshot is in the index of pending work), or the move run again. A reader reads the snapshot as
// the single document it was. So a stop at any request leaves either the single document or a
// snapshot, and both are a whole environment.

// LayoutKey is the document of the store's settings for the layout new environments get.
const LayoutKey = "settings#layout"

// storedLayout is the stored form of LayoutKey.
type storedLayout struct {
	New int   `json:"new"` // the layout of new environments: storedVersionScoped, or 0 for the single document
	At  int64 `json:"at"`
}

// LayoutMove is what MoveToScopes did to one environment.
type LayoutMove struct {
	Environment string `json:"environment"`
	// Already: the environment was in the per-scope layout before (or moved to another store).
	Already bool `json:"already,omitempty"`
	// Finished: a move a stopped process began was finished.
	Finished bool  `json:"finished,omitempty"`
	Scopes   int   `json:"scopes"`
	Desired  int64 `json:"desired"`
}

// isMigrating reports whether d is the head of a move to the per-scope layout not yet finished:
// a head that still holds scopes.
func isMigrating(d *Doc) bool { return isSplit(d) && len(d.Env.Scopes) > 0 }

// singleOf is the snapshot of a head being moved, read as the single document it was.
func singleOf(d *Doc) *Doc {
	e := d.Env.clone()
	e.Part = ""
	return &Doc{Key: d.Key, Rev: d.Rev, Pending: d.Pending, Env: e}
}

// MoveToScopes moves env from the single document to the per-scope layout, or finishes a move a
// stopped process began. Idempotent: an environment already in the per-scope layout is left as it
// is. Every pending intent, lease (with its token), live and previous commit, freeze and failure
// stays as it was; the environment's events and intent records stay where its history reads them.
func (a *Authority) MoveToScopes(ctx context.Context, env string) (*LayoutMove, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, err
	}
	key := EnvKey(env)
	res := &LayoutMove{Environment: env}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		d, err := a.load(ctx, key)
		if err != nil {
			return nil, err
		}
		switch {
		case d.Env == nil:
			return nil, fmt.Errorf("move %s to the per-scope layout: %w", env, ErrNotFound)
		case d.Env.Moved != nil:
			res.Already = true
			return res, nil
		case isMigrating(d):
			res.Finished, res.Scopes, res.Desired = true, len(d.Env.Scopes), d.Env.Desired
			return res, a.finishMove(ctx, env, d)
		case isSplit(d):
			res.Already, res.Desired = true, d.Env.Desired
			if d.Env.Counted {
				// The head's Desired is where its counter starts: the newest is in the scopes.
				all, err := a.readEnv(ctx, env)
				if err != nil {
					return nil, err
				}
				res.Desired = all.Env.Desired
			}
			return res, nil
		}
		// The outbox goes to records first, so that the snapshot holds none of it.
		if err := a.archive(ctx, d); err != nil {
			return nil, fmt.Errorf("move %s to the per-scope layout: %w", env, err)
		}
		snap := d.Env.clone()
		snap.Part, snap.Outbox, snap.Accepts = partHead, nil, nil
		if len(snap.Scopes) == 0 {
			// Nothing to move but the settings and the counter.
			snap.Observed = 0
		}
		head := &Doc{Key: key, Rev: d.Rev, Pending: len(snap.Scopes) > 0, Env: snap}
		rev, err := a.store.Put(ctx, head)
		if errors.Is(err, ErrConflict) {
			a.forget(key)
			if err := backoff(ctx, attempt); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			a.forget(key)
			return nil, fmt.Errorf("move %s to the per-scope layout: write the snapshot: %w", env, err)
		}
		head.Rev = rev
		a.remember(head)
		a.log.InfoContext(ctx, "moving to the per-scope layout", "environment", env, "scopes", len(snap.Scopes), "generation", snap.Desired)
		res.Scopes, res.Desired = len(snap.Scopes), snap.Desired
		if len(snap.Scopes) == 0 {
			return res, nil
		}
		return res, a.finishMove(ctx, env, head)
	}
	return nil, fmt.Errorf("move %s to the per-scope layout: gave up after %d conflicting attempts: %w", env, maxAttempts, ErrConflict)
}

// finishMove finishes the move whose snapshot head is: the directory, every scope's document
// where none exists, then the head without the snapshot.
func (a *Authority) finishMove(ctx context.Context, env string, head *Doc) error {
	snap := head.Env
	names := sortedKeys(snap.Scopes)
	if err := a.putDir(ctx, &Doc{Key: DirKey(env), Env: &Env{Name: env, Part: partDir, Dir: names}}); err != nil {
		return fmt.Errorf("finish moving %s to the per-scope layout: the directory: %w", env, err)
	}
	if err := eachParallel(len(names), func(i int) error { return a.createScope(ctx, env, names[i], snap) }); err != nil {
		return fmt.Errorf("finish moving %s to the per-scope layout: %w", env, err)
	}
	h := &Env{Name: env, Part: partHead, Policy: snap.Policy, Requires: snap.Requires, Gates: snap.Gates, AlertAfter: snap.AlertAfter,
		Desired: snap.Desired, EventSeq: snap.EventSeq, Outbox: snap.Outbox, Accepts: snap.Accepts, Counted: true}
	for attempt := 0; attempt < maxAttempts; attempt++ {
		ok, err := a.putPart(ctx, &Doc{Key: head.Key, Rev: head.Rev, Env: h}, false, true)
		if err != nil {
			return fmt.Errorf("finish moving %s to the per-scope layout: the head: %w", env, err)
		}
		if ok {
			a.log.InfoContext(ctx, "moved to the per-scope layout", "environment", env, "scopes", len(names))
			return nil
		}
		// Only another process finishing the same move writes the snapshot.
		if head, err = a.load(ctx, head.Key); err != nil {
			return err
		}
		if !isMigrating(head) {
			return nil
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("finish moving %s to the per-scope layout: gave up after %d conflicting attempts: %w", env, maxAttempts, ErrConflict)
}

// createScope writes scope name's document from the snapshot snap, unless one exists.
func (a *Authority) createScope(ctx context.Context, env, name string, snap *Env) error {
	c := snap.clone()
	s := &Env{Name: env, Part: partScope, Scopes: map[string]*Scope{name: c.Scopes[name]}}
	d := &Doc{Key: ScopeKey(env, name), Pending: s.HasPending(), Env: s}
	rev, err := a.store.Put(ctx, d)
	switch {
	case errors.Is(err, ErrConflict):
		return nil // written already: by this move, or after it
	case err != nil:
		return fmt.Errorf("write %s: %w", d.Key, err)
	}
	d.Rev = rev
	a.remember(d)
	return nil
}

// finishIfMoving finishes the move of d's environment when d is its snapshot, and reports the
// head then stored; d otherwise.
func (a *Authority) finishIfMoving(ctx context.Context, env string, d *Doc) (*Doc, error) {
	if !isMigrating(d) {
		return d, nil
	}
	if err := a.finishMove(ctx, env, d); err != nil {
		return nil, err
	}
	return a.load(ctx, EnvKey(env))
}

// PerScopeDefault reports whether the store's settings say new environments use the per-scope
// layout (SetPerScopeDefault). An Authority made WithScopeDocuments uses it whatever they say.
func (a *Authority) PerScopeDefault(ctx context.Context) (bool, error) {
	if a.scoped {
		return true, nil
	}
	a.mu.Lock()
	known, at := a.layoutKnown, a.layoutAt
	a.mu.Unlock()
	if known {
		return true, nil
	}
	if !at.IsZero() && a.clock.Now().Sub(at) < layoutRecheck {
		return false, nil
	}
	d, err := a.store.Get(ctx, LayoutKey)
	if errors.Is(err, ErrNotFound) {
		a.mu.Lock()
		a.layoutAt = a.clock.Now()
		a.mu.Unlock()
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read the store's layout settings: %w", err)
	}
	var s storedLayout
	if err := json.Unmarshal(d.Kept, &s); err != nil {
		return false, fmt.Errorf("read the store's layout settings %s: %w", LayoutKey, err)
	}
	if s.New > storedVersionScoped {
		return false, fmt.Errorf("the store's settings ask for layout %d for new environments, newer than this build's %d: upgrade latestwins", s.New, storedVersionScoped)
	}
	per := s.New == storedVersionScoped
	a.mu.Lock()
	a.layoutKnown, a.layoutAt = per, a.clock.Now()
	a.mu.Unlock()
	return per, nil
}

// layoutRecheck is how long a process trusts that the store's settings keep new environments in
// the single document before it reads them again.
const layoutRecheck = time.Minute

// SetPerScopeDefault records in the store's settings that new environments use the per-scope
// layout, from now on for every process of every build that reads them.
func (a *Authority) SetPerScopeDefault(ctx context.Context) error {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		rev := int64(0)
		d, err := a.store.Get(ctx, LayoutKey)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return fmt.Errorf("read the store's layout settings: %w", err)
		default:
			var s storedLayout
			if json.Unmarshal(d.Kept, &s) == nil && s.New == storedVersionScoped {
				return nil
			}
			rev = d.Rev
		}
		b, err := json.Marshal(storedLayout{New: storedVersionScoped, At: nanos(a.clock.Now())})
		if err != nil {
			return err
		}
		_, err = a.store.Put(ctx, &Doc{Key: LayoutKey, Rev: rev, Kept: b})
		if err == nil {
			a.mu.Lock()
			a.layoutKnown = true
			a.mu.Unlock()
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("write the store's layout settings: %w", err)
		}
	}
	return fmt.Errorf("write the store's layout settings: gave up after %d conflicting attempts: %w", maxAttempts, ErrConflict)
}
