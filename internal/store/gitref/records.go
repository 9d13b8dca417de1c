package gitref

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/latestwins/latestwins/internal/authority"
)

// maxRecordAttempts bounds the pushes of one PutRecords that lose a race for a records ref; the
// records wait in the outbox if it gives up.
const maxRecordAttempts = 8

// group is what the Store knows of one records ref: its commit, and the tree of that commit: a
// root of buckets (two hex digits of a hash of the record's name), each a tree of records, so
// that a write rewrites one small bucket and the root instead of a tree of every record.
type group struct {
	tip    plumbing.Hash
	chain  int                                        // what tip's commit says of its chain (compact.go)
	root   map[string]plumbing.Hash                   // bucket -> its tree
	leaves map[plumbing.Hash]map[string]plumbing.Hash // bucket tree -> record name -> blob
	blobs  map[plumbing.Hash][]byte
}

func newGroup() *group {
	return &group{root: map[string]plumbing.Hash{}, leaves: map[plumbing.Hash]map[string]plumbing.Hash{}, blobs: map[plumbing.Hash][]byte{}}
}

func bucket(name string) string {
	sum := sha256.Sum256([]byte(name))
	return fmt.Sprintf("%02x", sum[0])
}

// record returns the stored form of the record named name, or nil.
func (g *group) record(name string) []byte {
	b, ok := g.leaves[g.root[bucket(name)]][name]
	if !ok {
		return nil
	}
	return g.blobs[b]
}

// encodedRecord is a record in its stored form.
type encodedRecord struct {
	group, name string
	data        []byte
}

// PutRecords implements authority.Store: per environment, one commit that adds the records to
// its records ref, all in one atomic push; a push that loses a race is computed again on the
// ref's new commit (records only accumulate, so nothing is lost by recomputing).
func (s *Store) PutRecords(ctx context.Context, recs []authority.Record) error {
	if len(recs) == 0 {
		return nil
	}
	byGroup := map[string][]encodedRecord{}
	for i := range recs {
		b, err := json.Marshal(&recs[i])
		if err != nil {
			return fmt.Errorf("encode record %s: %w", recs[i].Key, err)
		}
		g := recordGroup(recs[i].Key)
		byGroup[g] = append(byGroup[g], encodedRecord{group: g, name: escape(recs[i].Key), data: b})
	}
	names := slices.Sorted(maps.Keys(byGroup))
	s.recMu.Lock()
	defer s.recMu.Unlock()
	var last error
	for attempt := 1; attempt <= maxRecordAttempts; attempt++ {
		if attempt > 1 {
			if err := pause(ctx, attempt); err != nil {
				return fmt.Errorf("put records: %w (last: %w)", err, last)
			}
		}
		// The first attempt pushes on the commits this Store knows, when it knows every ref: the
		// server's old-id check refuses a push on a ref that moved since, and the next attempt reads
		// it first. Records only accumulate, so what it knows to be stored is stored.
		if attempt > 1 || !s.knowsGroups(names) {
			if err := s.refresh(ctx, names); err != nil {
				last = err
				continue
			}
		}
		var updates []Update
		var objs []plumbing.EncodedObject
		next := map[string]*group{}
		for _, name := range names {
			ref, err := recordsRef(name)
			if err != nil {
				return fmt.Errorf("put records: %w", err)
			}
			g := s.groups[name]
			ng, o, err := g.with(byGroup[name], s.now(), s.compactEvery)
			if err != nil {
				return fmt.Errorf("put records: %w", err)
			}
			if ng == nil {
				continue // all stored already
			}
			next[name] = ng
			objs = append(objs, o...)
			updates = append(updates, Update{Name: ref, Old: g.tip, New: ng.tip})
		}
		if len(updates) == 0 {
			return nil
		}
		if last = s.tr.Push(ctx, updates, objs); last == nil {
			maps.Copy(s.groups, next)
			return nil
		}
	}
	return fmt.Errorf("put records: not stored after %d attempts: %w", maxRecordAttempts, last)
}

// knowsGroups reports whether this Store has read or written every records ref of names.
func (s *Store) knowsGroups(names []string) bool {
	for _, name := range names {
		if s.groups[name] == nil {
			return false
		}
	}
	return true
}

// pause waits a random while that grows with the attempt, so racing writers spread out.
func pause(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(min(2*time.Millisecond<<attempt, 200*time.Millisecond)))) + time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// with returns the group with recs added, and the objects its commit needs that the server lacks;
// a nil group when every record is stored as it is. The commit goes on g's, or is a root when
// g's chain has reached every commits.
func (g *group) with(recs []encodedRecord, at time.Time, every int) (*group, []plumbing.EncodedObject, error) {
	var objs []plumbing.EncodedObject
	changed := map[string]map[string]plumbing.Hash{} // bucket -> its new entries
	blobs := map[plumbing.Hash][]byte{}
	for _, r := range recs {
		blob := blobObject(r.data)
		b := bucket(r.name)
		entries, ok := changed[b]
		if !ok {
			entries = maps.Clone(g.leaves[g.root[b]])
			if entries == nil {
				entries = map[string]plumbing.Hash{}
			}
		}
		if entries[r.name] == blob.Hash() {
			continue
		}
		entries[r.name] = blob.Hash()
		changed[b] = entries
		blobs[blob.Hash()] = r.data
		objs = append(objs, blob)
	}
	if len(changed) == 0 {
		return nil, nil, nil
	}
	ng := &group{root: maps.Clone(g.root), leaves: maps.Clone(g.leaves), blobs: maps.Clone(g.blobs)}
	maps.Copy(ng.blobs, blobs)
	for b, entries := range changed {
		tree, err := treeObject(treeEntries(entries, filemode.Regular))
		if err != nil {
			return nil, nil, err
		}
		delete(ng.leaves, g.root[b])
		ng.root[b] = tree.Hash()
		ng.leaves[tree.Hash()] = entries
		objs = append(objs, tree)
	}
	parent, chain := history{chain: g.chain}.next(g.tip, every)
	o, err := ng.commit(parent, chain, at)
	if err != nil {
		return nil, nil, err
	}
	return ng, append(objs, o...), nil
}

// commit encodes the root tree of g and a commit of it on parent (zero: a root) whose chain is
// chain, and makes it g's tip.
func (g *group) commit(parent plumbing.Hash, chain int, at time.Time) ([]plumbing.EncodedObject, error) {
	root, err := treeObject(treeEntries(g.root, filemode.Dir))
	if err != nil {
		return nil, err
	}
	commit, err := commitObject(root.Hash(), parent, fmt.Sprintf("records\n\nwrite %s\n%s", writeID(), history{chain: chain}.trailer()), at)
	if err != nil {
		return nil, err
	}
	g.tip, g.chain = commit.Hash(), chain
	return []plumbing.EncodedObject{root, commit}, nil
}

func treeEntries(m map[string]plumbing.Hash, mode filemode.FileMode) []object.TreeEntry {
	out := make([]object.TreeEntry, 0, len(m))
	for name, h := range m {
		out = append(out, object.TreeEntry{Name: name, Mode: mode, Hash: h})
	}
	return out
}

// GetRecords implements authority.Store: one fetch brings what changed in the records refs of
// every environment the keys name since this Store last read them.
func (s *Store) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	groups := map[string]bool{}
	for _, k := range keys {
		groups[recordGroup(k)] = true
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	if err := s.refresh(ctx, slices.Sorted(maps.Keys(groups))); err != nil {
		return nil, fmt.Errorf("get records: %w", err)
	}
	var out []authority.Record
	for _, k := range keys {
		b := s.groups[recordGroup(k)].record(escape(k))
		if b == nil {
			continue
		}
		var r authority.Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("get records: decode %s: %w", k, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// refresh brings the Store's knowledge of the records refs of groups up to the server's, in one
// fetch that sends the commits it knows, so that only what is new comes. If that answer lacks an
// object (a server that sent less than asked), it reads the refs again from nothing.
func (s *Store) refresh(ctx context.Context, names []string) error {
	err := s.fetchGroups(ctx, names, true)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		err = s.fetchGroups(ctx, names, false)
	}
	return err
}

func (s *Store) fetchGroups(ctx context.Context, names []string, incremental bool) error {
	refs := map[string]plumbing.ReferenceName{}
	for _, name := range names {
		ref, err := recordsRef(name)
		if err != nil {
			return err
		}
		refs[name] = ref
	}
	return s.fetchRefs(ctx, func(map[plumbing.ReferenceName]plumbing.Hash) map[string]plumbing.ReferenceName { return refs }, incremental)
}

// fetchRefs reads, in one fetch, the records refs that choose picks from the refs the server has,
// each under the name of its group in s.groups, bringing only what is new when incremental.
func (s *Store) fetchRefs(ctx context.Context, choose func(map[plumbing.ReferenceName]plumbing.Hash) map[string]plumbing.ReferenceName, incremental bool) error {
	var refs map[string]plumbing.ReferenceName
	tips := map[string]plumbing.Hash{}
	objs := memory.NewStorage()
	_, err := s.tr.Fetch(ctx, func(all map[plumbing.ReferenceName]plumbing.Hash) ([]plumbing.Hash, []plumbing.Hash) {
		refs = choose(all)
		var wants, haves []plumbing.Hash
		for name, ref := range refs {
			if s.groups[name] == nil || !incremental {
				s.groups[name] = newGroup()
			}
			tip, g := all[ref], s.groups[name]
			tips[name] = tip
			if tip.IsZero() || tip == g.tip {
				continue
			}
			wants = append(wants, tip)
			if !g.tip.IsZero() {
				haves = append(haves, g.tip)
			}
		}
		return wants, haves
	}, 1, objs)
	if err != nil {
		return err
	}
	for name := range refs {
		tip, g := tips[name], s.groups[name]
		if tip == g.tip {
			continue
		}
		if tip.IsZero() {
			s.groups[name] = newGroup()
			continue
		}
		ng, err := g.absorb(objs, tip)
		if err != nil {
			return fmt.Errorf("records of %q: %w", name, err)
		}
		s.groups[name] = ng
	}
	return nil
}

// absorb reads commit tip's tree, taking from objs what is new and from g what it already knew.
func (g *group) absorb(objs storer.EncodedObjectStorer, tip plumbing.Hash) (*group, error) {
	c, err := object.GetCommit(objs, tip)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", tip, err)
	}
	root, err := object.GetTree(objs, c.TreeHash)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", c.TreeHash, err)
	}
	ng := newGroup()
	ng.tip, ng.chain = tip, parseHistory(c.Message).chain
	for _, e := range root.Entries {
		ng.root[e.Name] = e.Hash
		if entries, ok := g.leaves[e.Hash]; ok {
			ng.leaves[e.Hash] = entries
			for _, b := range entries {
				ng.blobs[b] = g.blobs[b]
			}
			continue
		}
		leaf, err := object.GetTree(objs, e.Hash)
		if err != nil {
			return nil, fmt.Errorf("read tree %s: %w", e.Hash, err)
		}
		entries := make(map[string]plumbing.Hash, len(leaf.Entries))
		for _, f := range leaf.Entries {
			entries[f.Name] = f.Hash
			if data, ok := g.blobs[f.Hash]; ok {
				ng.blobs[f.Hash] = data
				continue
			}
			data, err := readBlob(objs, f.Hash)
			if err != nil {
				return nil, err
			}
			ng.blobs[f.Hash] = data
		}
		ng.leaves[e.Hash] = entries
	}
	return ng, nil
}
