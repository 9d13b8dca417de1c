package gitref

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/latestwins/latestwins/internal/authority"
)

var _ authority.Expirer = (*Store)(nil)

// DeleteExpired implements authority.Expirer: the recovery sweep calls it, since a git server
// keeps no time to live. It reads every records ref in one fetch and, for each that holds records
// whose expiry is before now, pushes a root commit of the records that remain, named against the
// ref's commit it read: the expired records leave the ref's reachable history (for the server's gc
// to delete), and a write that raced it is not lost, since the server refuses one of the two and
// the loser reads the ref again and computes its write anew. A record without an expiry is kept.
// It returns how many expired records it found that are gone when it ends.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	names, err := s.readAllGroups(ctx)
	if err != nil {
		return 0, fmt.Errorf("delete expired records: %w", err)
	}
	total := 0
	var errs []error
	for _, name := range names {
		if strings.HasPrefix(name, hashedGroup) {
			continue // holds no record
		}
		n, err := s.expireGroup(ctx, name, now)
		total += n
		if err != nil {
			errs = append(errs, fmt.Errorf("records of %q: %w", name, err))
		}
	}
	if len(errs) > 0 {
		return total, fmt.Errorf("delete expired records: %w", errors.Join(errs...))
	}
	return total, nil
}

// expireGroup deletes the expired records of one group, reading its ref again after every push
// that failed, whatever the failure (a refusal, or an answer lost after the push landed).
func (s *Store) expireGroup(ctx context.Context, name string, now time.Time) (int, error) {
	ref, err := recordsRef(name)
	if err != nil {
		return 0, err
	}
	found := map[string]bool{} // the expired records seen, by name
	gone := func() int {
		n := 0
		for r := range found {
			if s.groups[name].record(r) == nil {
				n++
			}
		}
		return n
	}
	var last error
	for attempt := 1; attempt <= maxRecordAttempts; attempt++ {
		if attempt > 1 {
			if err := pause(ctx, attempt); err != nil {
				return gone(), fmt.Errorf("%w (last: %w)", err, last)
			}
			if err := s.refresh(ctx, []string{name}); err != nil {
				last = err
				continue
			}
		}
		g := s.groups[name]
		expired, err := g.expired(now)
		if err != nil {
			return gone(), err
		}
		if len(expired) == 0 {
			return gone(), nil
		}
		for _, r := range expired {
			found[r] = true
		}
		ng, objs, err := g.without(expired, s.now())
		if err != nil {
			return gone(), err
		}
		if last = s.tr.Push(ctx, []Update{{Name: ref, Old: g.tip, New: ng.tip}}, objs); last == nil {
			s.groups[name] = ng
			s.log.InfoContext(ctx, "deleted expired records", "group", name, "records", len(expired))
			return gone(), nil
		}
	}
	return gone(), fmt.Errorf("not deleted after %d attempts: %w", maxRecordAttempts, last)
}

// expired names the records of g whose expiry is before now, sorted.
func (g *group) expired(now time.Time) ([]string, error) {
	var out []string
	for _, tree := range g.root {
		for name, blob := range g.leaves[tree] {
			var r struct {
				ExpiresAt time.Time `json:"expires_at"`
			}
			if err := json.Unmarshal(g.blobs[blob], &r); err != nil {
				return nil, fmt.Errorf("decode record %s: %w", name, err)
			}
			if !r.ExpiresAt.IsZero() && r.ExpiresAt.Before(now) {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// without returns g with the records names dropped, as a root commit (none of g's history stays
// reachable from it), and the objects the server lacks for it.
func (g *group) without(names []string, at time.Time) (*group, []plumbing.EncodedObject, error) {
	ng := &group{root: maps.Clone(g.root), leaves: maps.Clone(g.leaves), blobs: map[plumbing.Hash][]byte{}}
	changed := map[string]map[string]plumbing.Hash{}
	for _, name := range names {
		b := bucket(name)
		entries, ok := changed[b]
		if !ok {
			entries = maps.Clone(g.leaves[g.root[b]])
			changed[b] = entries
		}
		delete(entries, name)
	}
	var objs []plumbing.EncodedObject
	for b, entries := range changed {
		delete(ng.leaves, g.root[b])
		if len(entries) == 0 {
			delete(ng.root, b)
			continue
		}
		tree, err := treeObject(treeEntries(entries, filemode.Regular))
		if err != nil {
			return nil, nil, err
		}
		ng.root[b] = tree.Hash()
		ng.leaves[tree.Hash()] = entries
		objs = append(objs, tree)
	}
	for _, tree := range ng.root {
		for _, blob := range ng.leaves[tree] {
			ng.blobs[blob] = g.blobs[blob]
		}
	}
	o, err := ng.commit(plumbing.ZeroHash, 1, at)
	if err != nil {
		return nil, nil, err
	}
	return ng, append(objs, o...), nil
}

// hashedGroup marks, in s.groups, a records ref whose name holds its group's hash until a record
// in it tells the group; no group's name holds a '#'.
const hashedGroup = "#"

// readAllGroups brings every records ref on the server up to date in one fetch (a second one if
// the server sent less than asked) and returns their groups, sorted.
func (s *Store) readAllGroups(ctx context.Context) ([]string, error) {
	var names []string
	choose := func(all map[plumbing.ReferenceName]plumbing.Hash) map[string]plumbing.ReferenceName {
		out := map[string]plumbing.ReferenceName{}
		names = nil
		for ref := range all {
			enc, ok := strings.CutPrefix(ref.String(), recordsPrefix)
			if !ok {
				continue
			}
			name, err := "", error(nil)
			if enc != noGroup {
				name, err = decodeName(enc)
			}
			switch {
			case errors.Is(err, errHashed):
				name = hashedGroup + ref.String()
			case err != nil:
				s.log.WarnContext(ctx, "a records ref whose name this version cannot read is left as it is", "ref", ref.String(), "error", err)
				continue
			}
			out[name] = ref
			names = append(names, name)
		}
		return out
	}
	err := s.fetchRefs(ctx, choose, true)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		err = s.fetchRefs(ctx, choose, false)
	}
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		if !strings.HasPrefix(name, hashedGroup) {
			continue
		}
		g := s.groups[name]
		real, err := g.name()
		if err != nil {
			return nil, err
		}
		if real == "" {
			continue // empty: nothing to expire, nor to tell its name
		}
		delete(s.groups, name)
		s.groups[real], names[i] = g, real
	}
	slices.Sort(names)
	return names, nil
}

// name reads the group's name from one of its records ("" when it holds none).
func (g *group) name() (string, error) {
	for _, tree := range g.root {
		for _, blob := range g.leaves[tree] {
			var r struct {
				Key string `json:"key"`
			}
			if err := json.Unmarshal(g.blobs[blob], &r); err != nil {
				return "", fmt.Errorf("decode a record: %w", err)
			}
			return recordGroup(r.Key), nil
		}
	}
	return "", nil
}
