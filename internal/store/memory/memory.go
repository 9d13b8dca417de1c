// Package memory is an in-process Store: a mutex and a map. It backs unit tests and the conformance
// suite's reference run; it keeps nothing across processes.
package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/latestwins/latestwins/internal/authority"
)

// Store keeps documents as JSON so that callers never share memory with it.
type Store struct {
	mu      sync.Mutex
	docs    map[string][]byte
	revs    map[string]int64
	pending map[string]bool
}

var _ authority.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{docs: map[string][]byte{}, revs: map[string]int64{}, pending: map[string]bool{}}
}

// Get implements authority.Store.
func (s *Store) Get(ctx context.Context, key string) (*authority.Doc, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	b, ok := s.docs[key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, authority.ErrNotFound)
	}
	var d authority.Doc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("decode %s: %w", key, err)
	}
	return &d, nil
}

// Put implements authority.Store.
func (s *Store) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	next := *doc
	next.Rev = doc.Rev + 1
	b, err := json.Marshal(&next)
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", doc.Key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revs[doc.Key] != doc.Rev {
		return 0, fmt.Errorf("put %s at revision %d: stored revision is %d: %w", doc.Key, doc.Rev, s.revs[doc.Key], authority.ErrConflict)
	}
	s.docs[doc.Key], s.revs[doc.Key] = b, next.Rev
	if name, ok := strings.CutPrefix(doc.Key, "env#"); ok {
		if doc.Pending {
			s.pending[name] = true
		} else {
			delete(s.pending, name)
		}
	}
	return next.Rev, nil
}

// Pending implements authority.Store.
func (s *Store) Pending(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.pending))
	for name := range s.pending {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}
