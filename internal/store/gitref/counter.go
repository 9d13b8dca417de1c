package gitref

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/latestwins/latestwins/internal/authority"
)

// Counters (authority.Store's Add) are refs of their own, counters/KEY, each at a root commit
// whose tree holds one blob, count: the value in decimal. git has no increment, so an Add is a
// compare-and-swap loop: read the ref, push a commit of the value plus delta that names the commit
// read as the ref's old id, and, when the push fails, wait a random while that grows with the
// attempts and read again. Every commit is a root (a
// counter's history is worth nothing) and carries a random write id, so that two Adds that
// computed the same value from the same commit still push different commits, and a push whose
// answer was lost is settled by whether the ref holds this very commit.

// countFile is the one blob of a counter's commit.
const countFile = "count"

// maxCounterAttempts bounds the pushes of one Add: each one that loses to another Add reads the
// counter again, so a counter many processes add to at once can refuse an Add with ErrConflict.
const maxCounterAttempts = 16

// counterSeen is a counter's commit as this Store last saw it.
type counterSeen struct {
	hash  plumbing.Hash
	value int64
}

// Add implements authority.Store.
func (s *Store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if delta < 0 {
		return 0, fmt.Errorf("add %d to counter %s: %w", delta, key, authority.ErrInvalidInput)
	}
	ref, err := counterRef(key)
	if err != nil {
		return 0, fmt.Errorf("add to counter %s: %w", key, err)
	}
	cur, err := s.readCounter(ctx, key, ref)
	if err != nil {
		return 0, fmt.Errorf("read counter %s: %w", key, err)
	}
	if delta == 0 {
		return cur.value, nil
	}
	for attempt := 1; ; attempt++ {
		next := cur.value + delta
		if next < cur.value {
			return 0, fmt.Errorf("add %d to counter %s at %d: it overflows: %w", delta, key, cur.value, authority.ErrInvalidInput)
		}
		commit, objs, err := counterObjects(key, next, s.now())
		if err != nil {
			return 0, fmt.Errorf("add to counter %s: %w", key, err)
		}
		perr := s.tr.Push(ctx, []Update{{Name: ref, Old: cur.hash, New: commit}}, objs)
		if perr == nil {
			s.rememberCounter(key, counterSeen{hash: commit, value: next})
			return next, nil
		}
		// Settle the push by reading the ref again: this commit there is a success; another is
		// another Add's, which this one goes on from (had this push landed under it, its value is
		// skipped, never returned); the old one still there is a push that did not land.
		now, err := s.readCounter(ctx, key, ref)
		switch {
		case err != nil:
			return 0, fmt.Errorf("add %d to counter %s: the push failed (%v) and reading the ref again failed (the counter may have moved): %w", delta, key, perr, err)
		case now.hash == commit:
			s.log.WarnContext(ctx, "push reported an error but the counter is stored", "key", key, "value", next, "error", perr)
			return next, nil
		case now.hash == cur.hash:
			var refused *RefusedError
			if errors.As(perr, &refused) {
				return 0, fmt.Errorf("add %d to counter %s: not written, the ref is unchanged: %w", delta, key, perr)
			}
		}
		if attempt == maxCounterAttempts || ctx.Err() != nil {
			return 0, fmt.Errorf("add %d to counter %s: not added after %d attempts (%v): %w", delta, key, attempt, perr, authority.ErrConflict)
		}
		// Racing adders spread out, so that each round of pushes has few losers.
		if err := pause(ctx, attempt); err != nil {
			return 0, fmt.Errorf("add %d to counter %s: %w", delta, key, errors.Join(perr, err))
		}
		if cur, err = s.readCounter(ctx, key, ref); err != nil {
			return 0, fmt.Errorf("read counter %s: %w", key, err)
		}
	}
}

// readCounter reads the counter stored under key now (zero: none), in one fetch: the
// advertisement tells its commit, which is fetched only if this Store has not seen it.
func (s *Store) readCounter(ctx context.Context, key string, ref plumbing.ReferenceName) (counterSeen, error) {
	known := s.seenCounter(key)
	objs := memory.NewStorage()
	var tip plumbing.Hash
	_, err := s.tr.Fetch(ctx, func(refs map[plumbing.ReferenceName]plumbing.Hash) ([]plumbing.Hash, []plumbing.Hash) {
		tip = refs[ref]
		if tip.IsZero() || tip == known.hash {
			return nil, nil
		}
		return []plumbing.Hash{tip}, nil
	}, 1, objs)
	switch {
	case err != nil:
		return counterSeen{}, err
	case tip.IsZero():
		return counterSeen{}, nil
	case tip == known.hash:
		return known, nil
	}
	c, err := object.GetCommit(objs, tip)
	if err != nil {
		return counterSeen{}, fmt.Errorf("read commit %s: %w", tip, err)
	}
	t, err := object.GetTree(objs, c.TreeHash)
	if err != nil {
		return counterSeen{}, fmt.Errorf("read tree of commit %s: %w", tip, err)
	}
	e, err := t.FindEntry(countFile)
	if err != nil {
		return counterSeen{}, fmt.Errorf("commit %s holds no %s: %w", tip, countFile, err)
	}
	b, err := readBlob(objs, e.Hash)
	if err != nil {
		return counterSeen{}, err
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n < 0 {
		return counterSeen{}, fmt.Errorf("commit %s: the counter holds %q, not a count", tip, b)
	}
	got := counterSeen{hash: tip, value: n}
	s.rememberCounter(key, got)
	return got, nil
}

func (s *Store) seenCounter(key string) counterSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counters[key]
}

func (s *Store) rememberCounter(key string, c counterSeen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.value >= s.counters[key].value {
		s.counters[key] = c
	}
}

// counterObjects are the blob, tree and root commit of a counter's value n.
func counterObjects(key string, n int64, at time.Time) (plumbing.Hash, []plumbing.EncodedObject, error) {
	blob := blobObject(strconv.AppendInt(nil, n, 10))
	tree, err := treeObject([]object.TreeEntry{{Name: countFile, Mode: filemode.Regular, Hash: blob.Hash()}})
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	c, err := commitObject(tree.Hash(), plumbing.ZeroHash, fmt.Sprintf("%s count %d\n\nwrite %s\n", key, n, writeID()), at)
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	return c.Hash(), []plumbing.EncodedObject{blob, tree, c}, nil
}
