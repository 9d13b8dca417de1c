package authority

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// mapStore is the smallest Store: JSON documents in a map, with hooks to inject faults.
type mapStore struct {
	mu        sync.Mutex
	docs      map[string][]byte
	records   map[string]Record
	counts    map[string]int64
	gets      int
	puts      int
	conflicts int
	// beforePut, when set, may fail a write before it is applied.
	beforePut func(n int, doc *Doc) error
}

var _ Store = (*mapStore)(nil)

func newMapStore() *mapStore {
	return &mapStore{docs: map[string][]byte{}, records: map[string]Record{}, counts: map[string]int64{}}
}

func (s *mapStore) PutRecords(ctx context.Context, recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.records[r.Key] = r
	}
	return nil
}

func (s *mapStore) GetRecords(ctx context.Context, keys []string) ([]Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, k := range keys {
		if r, ok := s.records[k]; ok {
			out = append(out, r)
		}
	}
	return out, nil
}

func (s *mapStore) Get(ctx context.Context, key string) (*Doc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gets++
	b, ok := s.docs[key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	return DecodeDoc(b)
}

func (s *mapStore) Put(ctx context.Context, doc *Doc) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	if s.beforePut != nil {
		if err := s.beforePut(s.puts, doc); err != nil {
			return 0, err
		}
	}
	var rev int64
	if b, ok := s.docs[doc.Key]; ok {
		cur, err := DecodeDoc(b)
		if err != nil {
			return 0, err
		}
		rev = cur.Rev
	}
	if rev != doc.Rev {
		s.conflicts++
		return 0, fmt.Errorf("put %s: %w", doc.Key, ErrConflict)
	}
	next := *doc
	next.Rev++
	b, err := EncodeDoc(&next)
	if err != nil {
		return 0, err
	}
	s.docs[doc.Key] = b
	return next.Rev, nil
}

func (s *mapStore) Pending(ctx context.Context) ([]string, error) { return nil, nil }

func (s *mapStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if delta < 0 {
		return 0, fmt.Errorf("add %d to %s: %w", delta, key, ErrInvalidInput)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[key] += delta
	return s.counts[key], nil
}

func eventsOfKind(events []Event, kind EventKind) []Event {
	var out []Event
	for _, e := range events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time { return c.now }

func newTestAuthority(s Store) *Authority {
	return New(s, WithClock(fixedClock{t0}), WithSkew(5*time.Second))
}

func TestUpdateReappliesOnConflict(t *testing.T) {
	ctx := t.Context()
	s := newMapStore()
	a, b := newTestAuthority(s), newTestAuthority(s)
	if _, err := a.Accept(ctx, *mainPush("d1", testSha(1), "", "api"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Accept(ctx, *mainPush("d2", testSha(2), "", "web"), false); err != nil {
		t.Fatal(err)
	}
	// a remembers the document at generation 1: its write conflicts, and it re-applies on a fresh read.
	res, err := a.Accept(ctx, *mainPush("d3", testSha(3), "", "db"), false)
	if err != nil || res.Generation != 3 {
		t.Fatalf("accept from stale memory: %+v, %v; want generation 3", res, err)
	}
	if s.conflicts != 1 {
		t.Fatalf("%d conflicts; want the one stale write", s.conflicts)
	}
	env, err := b.Status(ctx, "staging")
	if err != nil || env.Desired != 3 || len(eventsOfKind(env.Events, EventAccepted)) != 3 {
		t.Fatalf("status: %+v, %v; want all three intents", env, err)
	}
}

// TestStaleMemoryIsConfirmed: a decision that writes nothing is never taken on remembered state
// alone: another process may have moved on.
func TestStaleMemoryIsConfirmed(t *testing.T) {
	ctx := t.Context()
	s := newMapStore()
	a, b := newTestAuthority(s), newTestAuthority(s)
	if _, err := a.Accept(ctx, *mainPush("d1", testSha(1), "", "api"), true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Accept(ctx, *mainPush("d2", testSha(2), "", "api"), true); err != nil {
		t.Fatal(err)
	}
	// a's memory says it owns api at generation 1; the store says generation 2 does.
	res, err := a.Claim(ctx, "staging", 1, []string{"api"})
	if err != nil || len(res.Claimed) != 0 || len(res.Superseded) != 1 || res.Superseded[0].By != 2 {
		t.Fatalf("re-claim from stale memory: %+v, %v; want superseded by 2", res, err)
	}
	if _, err := a.Gate(ctx, GateRequest{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Phase: "build"}); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("gate from stale memory: %v; want superseded", err)
	}
}

func TestStoreErrorsAreWrappedAndForgotten(t *testing.T) {
	ctx := t.Context()
	s := newMapStore()
	a := newTestAuthority(s)
	if _, err := a.Accept(ctx, *mainPush("d1", testSha(1), "", "api"), false); err != nil {
		t.Fatal(err)
	}
	unreachable := errors.New("connection reset")
	s.beforePut = func(int, *Doc) error { return unreachable }
	_, err := a.Accept(ctx, *mainPush("d2", testSha(2), "", "api"), false)
	if !errors.Is(err, unreachable) || errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), `accept intent "d2" in staging`) {
		t.Fatalf("accept with the store down: %v; want the store's error, wrapped with what was being done", err)
	}
	// After a failed write the process forgets the document: the next operation reads it first.
	s.beforePut = nil
	gets := s.gets
	if _, err := a.Accept(ctx, *mainPush("d3", testSha(3), "", "api"), false); err != nil {
		t.Fatal(err)
	}
	if s.gets != gets+1 || s.conflicts != 0 {
		t.Fatalf("%d reads and %d conflicts after a failed write; want one read and no conflict", s.gets-gets, s.conflicts)
	}
}

func TestConflictLoopHonoursContext(t *testing.T) {
	s := newMapStore()
	a := newTestAuthority(s)
	if _, err := a.Accept(t.Context(), *mainPush("d1", testSha(1), "", "api"), false); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s.beforePut = func(n int, _ *Doc) error {
		if n >= 4 {
			cancel()
		}
		return fmt.Errorf("always: %w", ErrConflict)
	}
	_, err := a.Accept(ctx, *mainPush("d2", testSha(2), "", "api"), false)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("accept against a store that always conflicts: %v; want it to stop when the context ends", err)
	}
	if s.puts > 6 {
		t.Fatalf("%d writes after the context ended", s.puts-4)
	}
}

func TestReleaseOnlyByHolder(t *testing.T) {
	ctx := t.Context()
	s := newMapStore()
	a := newTestAuthority(s)
	res, err := a.Accept(ctx, *mainPush("d1", testSha(1), "", "api"), true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Gate(ctx, GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	other := &Grant{Environment: "staging", Generation: g.Generation, Holder: "run-2", Tokens: g.Tokens}
	var lost *LostError
	if err := newTestAuthority(s).Release(ctx, other); !errors.As(err, &lost) || lost.Holder != "run-1" {
		t.Fatalf("release by a non-holder: %v; want a *LostError naming run-1", err)
	}
	env, _ := a.Status(ctx, "staging")
	if env.Scopes["api"].Lease.Holder != "run-1" {
		t.Fatalf("a non-holder released the lease: %+v", env.Scopes["api"].Lease)
	}
	if err := a.Release(ctx, g); err != nil {
		t.Fatalf("release by the holder: %v", err)
	}
	if err := a.Release(ctx, g); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("second release: %v; want ErrLeaseLost (it is no longer held)", err)
	}
	if err := a.Release(ctx, &Grant{Environment: "never-seen", Holder: "run-1", Tokens: map[string]int64{"api": 1}}); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("release in an unknown environment: %v; want ErrLeaseLost", err)
	}
}

func TestUnlock(t *testing.T) {
	ctx := t.Context()
	s := newMapStore()
	a := newTestAuthority(s)
	res, err := a.Accept(ctx, *mainPush("d1", testSha(1), "", "api"), true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Gate(ctx, GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1", LeaseTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctx, "refresh", "host-1", "refresh", time.Minute); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		resource   string
		wantHolder string
		wantErr    error
	}{
		{"staging/api", "run-1", nil},
		{"staging/api", "", ErrNotFound}, // already free
		{"refresh", "host-1", nil},
		{"refresh", "", ErrNotFound},
		{"never-seen", "", ErrInvalidInput},         // a typo, not "not locked"
		{"staging/never-seen", "", ErrInvalidInput}, // likewise
	}
	for _, c := range cases {
		was, err := a.Unlock(ctx, c.resource, "stuck", "octocat")
		if c.wantErr != nil {
			if !errors.Is(err, c.wantErr) {
				t.Errorf("unlock %s: %+v, %v; want %v", c.resource, was, err, c.wantErr)
			}
			continue
		}
		if err != nil || was.Holder != c.wantHolder {
			t.Errorf("unlock %s: %+v, %v; want the lease of %s", c.resource, was, err, c.wantHolder)
		}
	}
	env, _ := a.Status(ctx, "staging")
	if l := env.Scopes["api"].Lease; l.Holder != "" || l.Token != 1 {
		t.Fatalf("unlocked lease %+v; want free, keeping token 1", l)
	}
	if ev := env.Events[len(env.Events)-1]; ev.Kind != EventUnlocked || !strings.Contains(ev.Message, "octocat") || !strings.Contains(ev.Message, "stuck") {
		t.Fatalf("newest event %+v; want the unlock, by whom and why", ev)
	}
}

func TestParseRetention(t *testing.T) {
	for in, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "2160h": 2160 * time.Hour, "1d": 24 * time.Hour} {
		if got, err := ParseRetention(in); err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0d", "23h", "-5d", "ninety", "90"} {
		if _, err := ParseRetention(in); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("ParseRetention(%q): %v; want an input error", in, err)
		}
	}
}

// TestCloneKeepsRefusalsApart: a transition works on a copy of the remembered document, and
// recordRefusal edits the scope's refusal marks in place: the copy must not share them, or a
// write that fails would leave the remembered document with marks it never stored.
func TestCloneKeepsRefusalsApart(t *testing.T) {
	e := &Env{Name: "prod", Scopes: map[string]*Scope{"api": {Refused: []string{"1 a", "2 b"}}}}
	c := e.clone()
	c.Scopes["api"].Refused[0] = "3 c"
	if e.Scopes["api"].Refused[0] != "1 a" {
		t.Fatalf("editing the copy's refusal marks changed the original's: %v", e.Scopes["api"].Refused)
	}
}
