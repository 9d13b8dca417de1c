package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// The suite has teeth: run against stores with one typical adapter bug each, the subtests meant to
// catch that bug fail. Each broken store runs in a child process (this test binary again), because
// a failing subtest cannot be contained inside the parent test.

const mutantVar = "LATESTWINS_STORETEST_MUTANT"

type mutant struct {
	name     string
	make     func() authority.Store
	run      string   // -test.run pattern below TestMutantStore
	wantFail []string // subtests that must fail, as Group/Case
}

var mutants = []mutant{
	{"last-write-wins", func() authority.Store { return &lastWriteWins{memory.New()} },
		"^(Port|Mailbox)$/^(Revisions|Concurrent64)$",
		[]string{"Port/Revisions", "Mailbox/Concurrent64"}},
	{"check-then-write", func() authority.Store { return &checkThenWrite{inner: memory.New()} },
		"^(Port|Mailbox|Leases)$/^(Revisions|ConcurrentCreate|ConcurrentIncrement|Concurrent64|ExpiredRace|NamedExpiredRace)$",
		[]string{"Port/ConcurrentCreate", "Port/ConcurrentIncrement", "Mailbox/Concurrent64", "Leases/ExpiredRace", "Leases/NamedExpiredRace"}},
	{"sticky-pending", func() authority.Store { return &stickyPending{Store: memory.New(), seen: map[string]bool{}} },
		"^(Port|Pending|Mailbox)$/^(PendingIndex|ListsWhileWorkIsPending|Concurrent64)$",
		[]string{"Port/PendingIndex", "Pending/ListsWhileWorkIsPending", "Mailbox/Concurrent64"}},
	{"shared-documents", func() authority.Store { return &sharedDocs{docs: map[string]*authority.Doc{}, records: *memory.New()} },
		"^Port$/^(Isolation|Revisions)$",
		[]string{"Port/Isolation"}},
	{"second-precision-times", func() authority.Store { return &rewriting{Store: memory.New(), rewrite: truncateTimes} },
		"^Port$/^(RoundTrip|Revisions)$",
		[]string{"Port/RoundTrip"}},
	{"drops-order", func() authority.Store { return &rewriting{Store: memory.New(), rewrite: dropOrder} },
		"^(Port|OutOfOrder)$/^(RoundTrip|LateDeliveries|BehindLive|EveryArrivalOrder)$",
		[]string{"Port/RoundTrip", "OutOfOrder/LateDeliveries", "OutOfOrder/BehindLive", "OutOfOrder/EveryArrivalOrder"}},
	{"loses-records", func() authority.Store { return &losesRecords{Store: memory.New()} },
		"^(Port|OutOfOrder|Outbox)$/^(Records|RedeliveryAfterThousandsOfIntents|EveryEventOnce)$",
		[]string{"Port/Records", "OutOfOrder/RedeliveryAfterThousandsOfIntents", "Outbox/EveryEventOnce"}},
	{"lagging-record-reads", func() authority.Store { return &laggingRecords{Store: memory.New()} },
		"^Outbox$/^(RedeliveryRightAfterTheMove|ConcurrentRedeliveries)$",
		[]string{"Outbox/RedeliveryRightAfterTheMove"}},
	{"ignores-cancel", func() authority.Store { return &ignoresCancel{memory.New()} },
		"^Port$/^(Canceled|Revisions)$",
		[]string{"Port/Canceled"}},
	{"acks-lost-writes", func() authority.Store { return &losesWrites{Store: memory.New(), every: 7} },
		"^(Generations|Port)$/^(StrictlyIncreasing|Revisions)$",
		[]string{"Generations/StrictlyIncreasing", "Port/Revisions"}},
}

// TestMutantStore runs the suite against the broken store named by LATESTWINS_STORETEST_MUTANT. It
// runs only as a child of TestSuiteCatchesBrokenStores.
func TestMutantStore(t *testing.T) {
	name := os.Getenv(mutantVar)
	if name == "" {
		return // it runs only as a child process of TestSuiteCatchesBrokenStores
	}
	i := slices.IndexFunc(mutants, func(m mutant) bool { return m.name == name })
	if i < 0 {
		t.Fatalf("unknown mutant %q", name)
	}
	storetest.Run(t, func(t *testing.T) authority.Store { return mutants[i].make() })
}

func TestSuiteCatchesBrokenStores(t *testing.T) {
	if os.Getenv(mutantVar) != "" {
		return // a child process runs only TestMutantStore
	}
	for _, m := range mutants {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMutantStore$/"+m.run, "-test.short", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantVar+"="+m.name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed a store that %s (err %v); output:\n%s", m.name, err, out)
			}
			for _, want := range m.wantFail {
				if !strings.Contains(string(out), "--- FAIL: TestMutantStore/"+want+" ") {
					t.Errorf("subtest %s did not catch a store that %s; output:\n%s", want, m.name, tail(out, 60))
				}
			}
		})
	}
}

func tail(out []byte, lines int) string {
	l := strings.Split(string(out), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

// lastWriteWins ignores the revision a write is based on: it writes over whatever is stored.
type lastWriteWins struct{ inner *memory.Store }

func (s *lastWriteWins) Get(ctx context.Context, key string) (*authority.Doc, error) {
	return s.inner.Get(ctx, key)
}

func (s *lastWriteWins) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	d := *doc
	d.Rev = 0
	if cur, err := s.inner.Get(ctx, doc.Key); err == nil {
		d.Rev = cur.Rev
	}
	return s.inner.Put(ctx, &d)
}

func (s *lastWriteWins) Pending(ctx context.Context) ([]string, error) { return s.inner.Pending(ctx) }

func (s *lastWriteWins) Add(ctx context.Context, key string, delta int64) (int64, error) {
	return s.inner.Add(ctx, key, delta)
}

func (s *lastWriteWins) PutRecords(ctx context.Context, recs []authority.Record) error {
	return s.inner.PutRecords(ctx, recs)
}

func (s *lastWriteWins) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	return s.inner.GetRecords(ctx, keys)
}

// checkThenWrite checks the revision, then writes in a second step: a compare-and-swap that is
// not atomic, as an adapter that reads before an unconditional write would be.
type checkThenWrite struct {
	inner *memory.Store
	mu    sync.Mutex // serialises the final write only
}

func (s *checkThenWrite) Get(ctx context.Context, key string) (*authority.Doc, error) {
	return s.inner.Get(ctx, key)
}

func (s *checkThenWrite) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	var rev int64
	if cur, err := s.inner.Get(ctx, doc.Key); err == nil {
		rev = cur.Rev
	}
	if rev != doc.Rev {
		return 0, fmt.Errorf("put %s: %w", doc.Key, authority.ErrConflict)
	}
	// The round trip between the check and the write: long enough that a loaded machine's
	// scheduler still lets the other writers check in between (a yield alone did not, once).
	time.Sleep(100 * time.Microsecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	d := *doc
	d.Rev = 0
	if cur, err := s.inner.Get(ctx, doc.Key); err == nil {
		d.Rev = cur.Rev
	}
	if _, err := s.inner.Put(ctx, &d); err != nil {
		return 0, err
	}
	return doc.Rev + 1, nil
}

func (s *checkThenWrite) Pending(ctx context.Context) ([]string, error) { return s.inner.Pending(ctx) }

func (s *checkThenWrite) Add(ctx context.Context, key string, delta int64) (int64, error) {
	return s.inner.Add(ctx, key, delta)
}

func (s *checkThenWrite) PutRecords(ctx context.Context, recs []authority.Record) error {
	return s.inner.PutRecords(ctx, recs)
}

func (s *checkThenWrite) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	return s.inner.GetRecords(ctx, keys)
}

// stickyPending never drops an environment from its pending index.
type stickyPending struct {
	*memory.Store
	mu   sync.Mutex
	seen map[string]bool
}

func (s *stickyPending) Pending(ctx context.Context) ([]string, error) {
	envs, err := s.Store.Pending(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range envs {
		s.seen[e] = true
	}
	out := make([]string, 0, len(s.seen))
	for e := range s.seen {
		out = append(out, e)
	}
	slices.Sort(out)
	return out, nil
}

// sharedDocs keeps the caller's documents themselves, and hands them out again.
type sharedDocs struct {
	mu      sync.Mutex
	docs    map[string]*authority.Doc
	records memory.Store
}

func (s *sharedDocs) PutRecords(ctx context.Context, recs []authority.Record) error {
	return s.records.PutRecords(ctx, recs)
}

func (s *sharedDocs) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	return s.records.GetRecords(ctx, keys)
}

func (s *sharedDocs) Add(ctx context.Context, key string, delta int64) (int64, error) {
	return s.records.Add(ctx, key, delta)
}

func (s *sharedDocs) Get(ctx context.Context, key string) (*authority.Doc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.docs[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, authority.ErrNotFound)
	}
	return d, nil
}

func (s *sharedDocs) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rev int64
	if d, ok := s.docs[doc.Key]; ok {
		rev = d.Rev
	}
	if rev != doc.Rev {
		return 0, fmt.Errorf("put %s: %w", doc.Key, authority.ErrConflict)
	}
	doc.Rev++
	s.docs[doc.Key] = doc
	return doc.Rev, nil
}

func (s *sharedDocs) Pending(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, d := range s.docs {
		if name, ok := strings.CutPrefix(k, "env#"); ok && d.Pending {
			out = append(out, name)
		}
	}
	return out, nil
}

// rewriting changes every document on its way into the store, as an adapter with a lossy
// encoding would.
type rewriting struct {
	*memory.Store
	rewrite func(*authority.Doc) *authority.Doc
}

func (s *rewriting) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	return s.Store.Put(ctx, s.rewrite(doc))
}

func truncateTimes(d *authority.Doc) *authority.Doc {
	c := copyDoc(d)
	if c.Env != nil {
		for _, sc := range c.Env.Scopes {
			sc.ActiveAt = sc.ActiveAt.Truncate(time.Second)
			sc.Lease.ExpiresAt = sc.Lease.ExpiresAt.Truncate(time.Second)
			sc.Lease.AcquiredAt = sc.Lease.AcquiredAt.Truncate(time.Second)
			if sc.Mailbox != nil {
				sc.Mailbox.At = sc.Mailbox.At.Truncate(time.Second)
			}
			if sc.Live != nil {
				sc.Live.At = sc.Live.At.Truncate(time.Second)
			}
		}
		for i := range c.Env.Outbox {
			c.Env.Outbox[i].At = c.Env.Outbox[i].At.Truncate(time.Second)
		}
	}
	return c
}

func dropOrder(d *authority.Doc) *authority.Doc {
	c := copyDoc(d)
	if c.Env != nil {
		for _, sc := range c.Env.Scopes {
			if sc.Mailbox != nil {
				sc.Mailbox.Order, sc.Mailbox.Before = authority.Order{}, ""
			}
			if sc.Live != nil {
				sc.Live.Order, sc.Live.Before = authority.Order{}, ""
			}
		}
	}
	return c
}

// losesRecords acknowledges records without storing them.
type losesRecords struct{ *memory.Store }

func (s *losesRecords) PutRecords(ctx context.Context, recs []authority.Record) error {
	return ctx.Err()
}

// laggingRecords reads records as an eventually consistent read would: those of the newest two
// PutRecords calls are not seen yet.
type laggingRecords struct {
	*memory.Store
	mu     sync.Mutex
	recent [2]map[string]bool
}

func (s *laggingRecords) PutRecords(ctx context.Context, recs []authority.Record) error {
	if err := s.Store.PutRecords(ctx, recs); err != nil {
		return err
	}
	keys := map[string]bool{}
	for _, r := range recs {
		keys[r.Key] = true
	}
	s.mu.Lock()
	s.recent[0], s.recent[1] = s.recent[1], keys
	s.mu.Unlock()
	return nil
}

func (s *laggingRecords) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	recs, err := s.Store.GetRecords(ctx, keys)
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.DeleteFunc(recs, func(r authority.Record) bool { return s.recent[0][r.Key] || s.recent[1][r.Key] }), err
}

// copyDoc deep-copies a document through a memory store, so that rewrites never touch the caller's.
func copyDoc(d *authority.Doc) *authority.Doc {
	s := memory.New()
	c := *d
	c.Rev = 0
	if _, err := s.Put(context.Background(), &c); err != nil {
		panic(err)
	}
	out, err := s.Get(context.Background(), d.Key)
	if err != nil {
		panic(err)
	}
	out.Rev = d.Rev
	return out
}

// ignoresCancel answers even when the caller's context has ended.
type ignoresCancel struct{ inner *memory.Store }

func (s *ignoresCancel) Get(ctx context.Context, key string) (*authority.Doc, error) {
	return s.inner.Get(context.WithoutCancel(ctx), key)
}

func (s *ignoresCancel) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	return s.inner.Put(context.WithoutCancel(ctx), doc)
}

func (s *ignoresCancel) Pending(ctx context.Context) ([]string, error) {
	return s.inner.Pending(context.WithoutCancel(ctx))
}

func (s *ignoresCancel) Add(ctx context.Context, key string, delta int64) (int64, error) {
	return s.inner.Add(context.WithoutCancel(ctx), key, delta)
}

func (s *ignoresCancel) PutRecords(ctx context.Context, recs []authority.Record) error {
	return s.inner.PutRecords(context.WithoutCancel(ctx), recs)
}

func (s *ignoresCancel) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	return s.inner.GetRecords(context.WithoutCancel(ctx), keys)
}

// losesWrites acknowledges every n-th write without storing it: an ambiguous write resolved wrongly.
type losesWrites struct {
	*memory.Store
	every int
	mu    sync.Mutex
	n     int
}

func (s *losesWrites) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	s.mu.Lock()
	s.n++
	lose := s.n%s.every == 0
	s.mu.Unlock()
	if lose {
		return doc.Rev + 1, nil
	}
	return s.Store.Put(ctx, doc)
}
