// Package benchmarks measures the protocol end to end on every store: concurrent claimers on one
// environment, and the newest commit's time to live in the A -> B -> C race beside a serialized-lock
// model. Each benchmark also checks what it measured (no lost intent, no duplicate generation, no
// stale deploy) and fails when a guarantee broke; none asserts on time.
package benchmarks

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

func TestMain(m *testing.M) { dynalitetest.Main(m) }

// storeKind opens one store for a test and returns a function that makes clients of it: each
// client is what one process would have (its own file handle or connection pool), all on the same
// data.
type storeKind struct {
	name string
	open func(tb testing.TB) func(tb testing.TB) authority.Store
}

var storeKinds = []storeKind{
	{"memory", func(testing.TB) func(testing.TB) authority.Store {
		s := memory.New() // in-process: every client shares the one map
		return func(testing.TB) authority.Store { return s }
	}},
	{"bolt", func(tb testing.TB) func(testing.TB) authority.Store {
		path := filepath.Join(tb.TempDir(), "latestwins.db")
		return func(tb testing.TB) authority.Store {
			s, err := bolt.Open(path)
			if err != nil {
				tb.Fatalf("open bolt store: %v", err)
			}
			tb.Cleanup(func() { _ = s.Close() })
			return s
		}
	}},
	{"dynalite", func(tb testing.TB) func(testing.TB) authority.Store {
		ep := dynalitetest.Endpoint(tb)
		table := dynalitetest.TableName(tb)
		ctx, cancel := context.WithTimeout(tb.Context(), time.Minute)
		defer cancel()
		if _, err := dynamo.New(dynalitetest.NewClient(ep, nil), table).Migrate(ctx); err != nil {
			tb.Fatalf("create table: %v", err)
		}
		return func(testing.TB) authority.Store { return dynamo.New(dynalitetest.NewClient(ep, nil), table) }
	}},
}

// countingStore counts a client's requests to its store by kind, the writes that lost a revision
// race, and the bytes written: a document in its stored form (authority.EncodeDoc, what bolt keeps),
// a record as JSON.
type countingStore struct {
	authority.Store
	c *counts
}

type counts struct {
	gets, puts, conflicts atomic.Int64
	adds                  atomic.Int64 // counter requests (Add)
	records               atomic.Int64 // PutRecords and GetRecords calls
	putRecs, getRecs      atomic.Int64
	bytes                 atomic.Int64
}

// snapshot is what counts held at one moment.
type snapshot struct{ gets, puts, conflicts, putRecs, getRecs, adds, bytes int64 }

func (c *counts) snapshot() snapshot {
	return snapshot{c.gets.Load(), c.puts.Load(), c.conflicts.Load(), c.putRecs.Load(), c.getRecs.Load(), c.adds.Load(), c.bytes.Load()}
}

// since is what was counted between then and s.
func (s snapshot) since(then snapshot) snapshot {
	return snapshot{s.gets - then.gets, s.puts - then.puts, s.conflicts - then.conflicts, s.putRecs - then.putRecs, s.getRecs - then.getRecs, s.adds - then.adds, s.bytes - then.bytes}
}

func (s snapshot) requests() int64 { return s.gets + s.puts + s.putRecs + s.getRecs + s.adds }

var _ authority.Store = (*countingStore)(nil)

func (s *countingStore) Get(ctx context.Context, key string) (*authority.Doc, error) {
	s.c.gets.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *countingStore) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	s.c.puts.Add(1)
	if b, err := authority.EncodeDoc(doc); err == nil {
		s.c.bytes.Add(int64(len(b)))
	}
	rev, err := s.Store.Put(ctx, doc)
	if errors.Is(err, authority.ErrConflict) {
		s.c.conflicts.Add(1)
	}
	return rev, err
}

func (s *countingStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	s.c.adds.Add(1)
	return s.Store.Add(ctx, key, delta)
}

func (s *countingStore) PutRecords(ctx context.Context, recs []authority.Record) error {
	s.c.records.Add(1)
	s.c.putRecs.Add(1)
	for i := range recs {
		if b, err := json.Marshal(&recs[i]); err == nil {
			s.c.bytes.Add(int64(len(b)))
		}
	}
	return s.Store.PutRecords(ctx, recs)
}

func (s *countingStore) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	s.c.records.Add(1)
	s.c.getRecs.Add(1)
	return s.Store.GetRecords(ctx, keys)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
