// Package memory is an in-process Store: a mutex and maps. It backs unit tests and the conformance
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

// Store keeps documents and records in their stored forms, so that callers never share memory with
// it.
type Store struct {
	mu      sync.Mutex
	docs    map[string][]byte
	revs    map[string]int64
	pending map[string]bool
	records map[string][]byte
	counts  map[string]int64 // the counters (Add), apart from the documents
}

var _ authority.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store {
	return &Store{docs: map[string][]byte{}, revs: map[string]int64{}, pending: map[string]bool{}, records: map[string][]byte{}, counts: map[string]int64{}}
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
	d, err := authority.DecodeDoc(b)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return d, nil
}

// Put implements authority.Store.
func (s *Store) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	next := *doc
	next.Rev = doc.Rev + 1
	b, err := authority.EncodeDoc(&next)
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

// Add implements authority.Store: the read and the write of the counter under one lock.
func (s *Store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if delta < 0 {
		return 0, fmt.Errorf("add %d to counter %s: %w", delta, key, authority.ErrInvalidInput)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[key] += delta
	return s.counts[key], nil
}

// Environments lists every environment stored, sorted (authority.Lister).
func (s *Store) Environments(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for key := range s.docs {
		if name, ok := strings.CutPrefix(key, authority.EnvKey("")); ok {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// PutRecords implements authority.Store.
func (s *Store) PutRecords(ctx context.Context, recs []authority.Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	enc := make(map[string][]byte, len(recs))
	for i := range recs {
		b, err := json.Marshal(&recs[i])
		if err != nil {
			return fmt.Errorf("encode record %s: %w", recs[i].Key, err)
		}
		enc[recs[i].Key] = b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, b := range enc {
		s.records[k] = b
	}
	return nil
}

// GetRecords implements authority.Store.
func (s *Store) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	found := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if b, ok := s.records[k]; ok {
			found = append(found, b)
		}
	}
	s.mu.Unlock()
	return decodeRecords(found)
}

// Len tells how many documents and records the store holds (tests check nothing is duplicated).
func (s *Store) Len() (docs, records int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.docs), len(s.records)
}

var _ authority.RecordLister = (*Store)(nil)

// ListRecords returns the records whose keys begin with prefix (authority.RecordLister).
func (s *Store) ListRecords(ctx context.Context, prefix string) ([]authority.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	var found [][]byte
	for k, b := range s.records {
		if strings.HasPrefix(k, prefix) {
			found = append(found, b)
		}
	}
	s.mu.Unlock()
	return decodeRecords(found)
}

// decodeRecords reads records from their stored forms.
func decodeRecords(stored [][]byte) ([]authority.Record, error) {
	out := make([]authority.Record, len(stored))
	for i, b := range stored {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("decode record: %w", err)
		}
	}
	return out, nil
}
