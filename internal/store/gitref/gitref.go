// Package gitref is a Store on git refs: any git server that speaks the pack protocol (a local
// bare repository, smart HTTP) holds the state, and its receive-pack's old-id check is the
// compare-and-swap.
//
// Layout, all under refs/latestwins/ (never a branch or a tag; ref names encode keys, refname.go):
//
//   - docs/KEY: one ref per document (an environment, a named lease). Each write is a commit whose
//     tree holds one blob, doc.json (authority.EncodeDoc, its revision included), and whose parent
//     is the commit the write was computed from, so a document's history is its first-parent
//     chain.
//   - pending/ENV: present iff the environment's last stored document had Pending set; it points
//     at that document's commit and moves with it in the same atomic push, so Pending is one read
//     of the ref names.
//   - records/ENV: the environment's records (events, accepted intents), one blob each in a tree
//     fanned out by a hash of the key, written in batches under the same compare-and-swap.
//   - counters/KEY: one ref per counter (Add), at a root commit whose tree holds the value, moved
//     by a compare-and-swap loop (counter.go).
//
// Every Get, Pending and GetRecords is one fetch (the ref advertisement, and a pack only for
// commits not seen before); every Put is one push that names the expected old id of each ref, so
// the server updates nothing unless every ref is still where the write was computed from.
//
// The history of each ref stays bounded: a write that would make its chain longer than 64 commits
// is a root commit instead, and a push whose answer was lost is settled by the writes the stored
// commit names, not by walking its parents (compact.go). The recovery sweep deletes the records
// past their expiry (DeleteExpired). The objects no ref reaches any more are the server's gc's to
// delete.
package gitref

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/latestwins/latestwins/internal/authority"
)

// maxAttempts bounds the pushes of one Put whose answer was lost and whose ref did not move.
const maxAttempts = 3

// Store is an authority.Store on the refs of one repository. It is safe for concurrent use; its
// processes coordinate only through the server's compare-and-swap.
type Store struct {
	tr  Transport
	log *slog.Logger
	now func() time.Time

	mu   sync.Mutex
	docs map[string]*seen // the commit last read or written of each document
	// counters is the commit last read or written of each counter (counter.go)
	counters map[string]counterSeen

	recMu  sync.Mutex // one records operation at a time in the process
	groups map[string]*group

	compactEvery int // the longest chain of commits a ref keeps (compact.go)
	keep         int // how many earlier writes a document's commit names
}

// seen is a document's commit as this Store last saw it.
type seen struct {
	hash    plumbing.Hash
	rev     int64
	pending bool // the pending marker points at hash
	data    []byte
	hist    history // what the commit says of the ref's history
}

var (
	_ authority.Store  = (*Store)(nil)
	_ authority.Lister = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// New returns a Store on the repository tr reaches.
func New(tr Transport, opts ...Option) *Store {
	s := &Store{tr: tr, log: slog.New(slog.DiscardHandler), now: time.Now, docs: map[string]*seen{}, counters: map[string]counterSeen{}, groups: map[string]*group{},
		compactEvery: defaultCompactEvery, keep: keptWrites}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Get implements authority.Store.
func (s *Store) Get(ctx context.Context, key string) (*authority.Doc, error) {
	c, err := s.read(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if c == nil {
		return nil, fmt.Errorf("get %s: %w", key, authority.ErrNotFound)
	}
	d, err := authority.DecodeDoc(c.data)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return d, nil
}

// read returns the document stored under key now (nil: none), in one fetch: the advertisement
// tells the ref's commit, and its objects are fetched only if this Store has not seen it.
func (s *Store) read(ctx context.Context, key string) (*seen, error) {
	ref, err := docRef(key)
	if err != nil {
		return nil, err
	}
	known := s.seen(key)
	objs := memory.NewStorage()
	var tip plumbing.Hash
	_, err = s.tr.Fetch(ctx, func(refs map[plumbing.ReferenceName]plumbing.Hash) ([]plumbing.Hash, []plumbing.Hash) {
		tip = refs[ref]
		if tip.IsZero() || known != nil && known.hash == tip {
			return nil, nil
		}
		return []plumbing.Hash{tip}, nil
	}, 1, objs)
	switch {
	case err != nil:
		return nil, err
	case tip.IsZero():
		return nil, nil
	case known != nil && known.hash == tip:
		return known, nil
	}
	data, _, hist, err := readDoc(objs, tip)
	if err != nil {
		return nil, err
	}
	d, err := authority.DecodeDoc(data)
	if err != nil {
		return nil, err
	}
	c := &seen{hash: tip, rev: d.Rev, pending: isEnv(key) && d.Pending, data: data, hist: hist}
	s.remember(key, c)
	return c, nil
}

func (s *Store) seen(key string) *seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.docs[key]
}

func (s *Store) remember(key string, c *seen) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.docs[key]; old == nil || old.rev <= c.rev {
		s.docs[key] = c
	}
}

func isEnv(key string) bool { return strings.HasPrefix(key, authority.EnvKey("")) }

// Put implements authority.Store. The push names the commit of revision doc.Rev as the ref's old
// id, and the server applies it only if the ref still points there. A push that fails is settled
// by reading the ref again, whatever the failure said: the write succeeded iff its own commit
// (unique: it carries a random write id) is the one stored, or an ancestor of it at revision
// doc.Rev+1; the write lost iff another commit is stored; an unchanged ref after a lost answer
// is pushed again, the same commit, at most maxAttempts times in all.
func (s *Store) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	if doc.Key == "" {
		return 0, errors.New("put: empty document key")
	}
	ref, err := docRef(doc.Key)
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", doc.Key, err)
	}
	next := *doc
	next.Rev = doc.Rev + 1
	data, err := authority.EncodeDoc(&next)
	if err != nil {
		return 0, fmt.Errorf("put %s: encode: %w", doc.Key, err)
	}
	var old seen // revision 0: nothing stored
	if doc.Rev > 0 {
		c := s.seen(doc.Key)
		if c == nil || c.rev != doc.Rev {
			if c, err = s.read(ctx, doc.Key); err != nil {
				return 0, fmt.Errorf("put %s: read the revision it replaces: %w", doc.Key, err)
			}
		}
		if c == nil || c.rev != doc.Rev {
			stored := int64(0)
			if c != nil {
				stored = c.rev
			}
			return 0, fmt.Errorf("put %s at revision %d: stored revision is %d: %w", doc.Key, doc.Rev, stored, authority.ErrConflict)
		}
		old = *c
	}
	// The commit goes on the one it was computed from, or is a root when that chain is at its bound
	// (compact.go); either way it names the writes before it, which settle a lost answer.
	parent, chain := old.hist.next(old.hash, s.compactEvery)
	hist := history{chain: chain, after: kept(old.rev, old.hash, old.hist.after, s.keep)}
	msg := fmt.Sprintf("%s revision %d\n\nwrite %s\n%s", doc.Key, next.Rev, writeID(), hist.trailer())
	commit, objs, err := docObjects(data, parent, msg, s.now())
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", doc.Key, err)
	}
	updates := []Update{{Name: ref, Old: old.hash, New: commit}}
	pending := isEnv(doc.Key) && next.Pending
	if isEnv(doc.Key) && (old.pending || pending) {
		p, err := pendingRef(strings.TrimPrefix(doc.Key, authority.EnvKey("")))
		if err != nil {
			return 0, fmt.Errorf("put %s: %w", doc.Key, err)
		}
		u := Update{Name: p}
		if old.pending {
			u.Old = old.hash
		}
		if pending {
			u.New = commit
		}
		updates = append(updates, u)
	}
	for attempt := 1; ; attempt++ {
		err := s.tr.Push(ctx, updates, objs)
		if err == nil {
			s.remember(doc.Key, &seen{hash: commit, rev: next.Rev, pending: pending, data: data, hist: hist})
			return next.Rev, nil
		}
		out, serr := s.settle(ctx, ref, old.hash, commit, next.Rev)
		switch {
		case serr != nil:
			return 0, fmt.Errorf("put %s: the push failed (%v) and its outcome is unknown: reading the ref again failed: %w", doc.Key, err, serr)
		case out == applied:
			s.log.WarnContext(ctx, "push reported an error but the write is stored", "key", doc.Key, "rev", next.Rev, "error", err)
			s.remember(doc.Key, &seen{hash: commit, rev: next.Rev, pending: pending, data: data, hist: hist})
			return next.Rev, nil
		case out == moved:
			return 0, fmt.Errorf("put %s at revision %d: another write is stored (%v): %w", doc.Key, doc.Rev, err, authority.ErrConflict)
		}
		var refused *RefusedError
		if errors.As(err, &refused) {
			return 0, fmt.Errorf("put %s: not written, the ref is unchanged: %w", doc.Key, err)
		}
		if attempt == maxAttempts || ctx.Err() != nil {
			return 0, fmt.Errorf("put %s: not written after %d attempts: %w", doc.Key, attempt, err)
		}
	}
}

// outcome is what reading a ref again says of a push that failed.
type outcome int

const (
	unchanged outcome = iota // the ref still has the old id: nothing was applied
	applied                  // the push's commit is stored (perhaps under newer writes)
	moved                    // another write is stored
)

// settle reads ref again to decide a push of commit (revision rev) on old that failed. Another
// commit stored decides by the writes it names (compact.go): the push is applied iff the commit
// named at revision rev is its own; a commit that names no write at rev is walked back from, to
// one that does. A compacted root that names none leaves the outcome unknown (errCompacted):
// neither a success nor a conflict can be told then.
func (s *Store) settle(ctx context.Context, ref plumbing.ReferenceName, old, commit plumbing.Hash, rev int64) (outcome, error) {
	depth := 1
	for range 8 {
		objs := memory.NewStorage()
		var tip plumbing.Hash
		_, err := s.tr.Fetch(ctx, func(refs map[plumbing.ReferenceName]plumbing.Hash) ([]plumbing.Hash, []plumbing.Hash) {
			tip = refs[ref]
			if tip.IsZero() || tip == old || tip == commit {
				return nil, nil
			}
			return []plumbing.Hash{tip}, nil
		}, depth, objs)
		switch {
		case err != nil:
			return 0, err
		case tip == commit:
			return applied, nil
		case tip == old:
			return unchanged, nil
		case tip.IsZero():
			return 0, errors.New("the ref is gone")
		}
		// Another commit is stored; this write is in its history iff the commit at revision rev is
		// this write's. Walk back from the tip, deepening the fetch as far as needed, until a commit
		// names the write at rev.
		h := tip
		for h != commit {
			data, parent, hist, err := readDoc(objs, h)
			if errors.Is(err, plumbing.ErrObjectNotFound) {
				break // the fetch was too shallow: deepen it
			}
			if err != nil {
				return 0, err
			}
			d, err := authority.DecodeDoc(data)
			if err != nil {
				return 0, err
			}
			if h == tip { // the ref may move on meanwhile: deepen past what this tip needs
				depth = max(2*depth, int(max(d.Rev-rev, 0))+4)
			}
			if named, ok := hist.covers(rev); ok {
				if named == commit {
					return applied, nil
				}
				return moved, nil
			}
			if d.Rev <= rev {
				return moved, nil
			}
			if parent.IsZero() && len(hist.after) == 0 { // the ref's first commit: nothing came before it
				return moved, nil
			}
			if parent.IsZero() {
				return 0, fmt.Errorf("revision %d is older than what revision %d names: %w", rev, d.Rev, errCompacted)
			}
			h = parent
		}
		if h == commit {
			return applied, nil
		}
	}
	return 0, errors.New("the history of the ref could not be read")
}

// errCompacted: a push's commit is out of what the ref's history keeps, so whether it was applied
// cannot be told.
var errCompacted = errors.New("the ref's history was compacted past the write")

// writeID is a random id that makes every write's commit unique.
func writeID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

// Pending implements authority.Store: the names of the pending markers, in one read of the refs.
func (s *Store) Pending(ctx context.Context) ([]string, error) {
	out, err := s.list(ctx, pendingPrefix, authority.EnvKey(""))
	if err != nil {
		return nil, fmt.Errorf("list pending: %w", err)
	}
	return out, nil
}

// Environments lists every environment stored, sorted (authority.Lister).
func (s *Store) Environments(ctx context.Context) ([]string, error) {
	out, err := s.list(ctx, docsPrefix, authority.EnvKey(""))
	if err != nil {
		return nil, fmt.Errorf("list environments: %w", err)
	}
	return out, nil
}

// list reads the refs and returns the keys named under prefix that start with keyPrefix (which is
// cut off), sorted. A long key's ref name holds its hash: its commit, fetched in the same
// request, tells the key.
func (s *Store) list(ctx context.Context, prefix, keyPrefix string) ([]string, error) {
	var hashed []plumbing.Hash
	objs := memory.NewStorage()
	refs, err := s.tr.Fetch(ctx, func(refs map[plumbing.ReferenceName]plumbing.Hash) ([]plumbing.Hash, []plumbing.Hash) {
		hashed = nil
		for name, h := range refs {
			if enc, ok := strings.CutPrefix(name.String(), prefix); ok && strings.Contains(enc, hashMark) {
				hashed = append(hashed, h)
			}
		}
		return hashed, nil
	}, 1, objs)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for name, h := range refs {
		enc, ok := strings.CutPrefix(name.String(), prefix)
		if !ok {
			continue
		}
		key, err := decodeName(enc)
		if errors.Is(err, errHashed) {
			key, err = docKey(objs, h)
		}
		if err != nil {
			return nil, err
		}
		if prefix == pendingPrefix {
			key = authority.EnvKey(key)
		}
		if rest, ok := strings.CutPrefix(key, keyPrefix); ok {
			out = append(out, rest)
		}
	}
	slices.Sort(out)
	return out, nil
}

// docKey reads the key of the document commit h holds.
func docKey(objs storer.EncodedObjectStorer, h plumbing.Hash) (string, error) {
	data, _, _, err := readDoc(objs, h)
	if err != nil {
		return "", err
	}
	d, err := authority.DecodeDoc(data)
	if err != nil {
		return "", err
	}
	return d.Key, nil
}
