package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// The Store port's own contract: revisions as a compare-and-swap, documents that round-trip exactly
// and are never shared with the caller, and the sparse index of environments with pending work.
func portCases() []testCase {
	return []testCase{
		{"GetMissing", testPortGetMissing},
		{"Revisions", testPortRevisions},
		{"RoundTrip", testPortRoundTrip},
		{"Isolation", testPortIsolation},
		{"ConcurrentCreate", testPortConcurrentCreate},
		{"ConcurrentIncrement", testPortConcurrentIncrement},
		{"PendingIndex", testPortPendingIndex},
		{"Canceled", testPortCanceled},
		{"LargeDocument", testPortLargeDocument},
		{"Records", testPortRecords},
		{"FirstLayout", testPortFirstLayout},
		{"KeptValues", testPortKept},
	}
}

// testPortKept: a value kept beside an environment (the report's rollup) round-trips as a
// document, conditional on its revision, and as immutable records read back by id; an
// environment's listing and the pending index never show it.
func testPortKept(t *testing.T, h *harness) {
	a := h.process()
	v, rev, err := a.ReadKept(h.ctx, "staging", "rollup")
	if err != nil || v != nil || rev != 0 {
		t.Fatalf("ReadKept before any write: %s, %d, %v; want nothing", v, rev, err)
	}
	head := []byte(`{"version":1,"through":42,"days":[{"date":"2026-03-01","deploys":3}]}`)
	if rev, err = a.WriteKept(h.ctx, "staging", "rollup", 0, head); err != nil || rev != 1 {
		t.Fatalf("WriteKept: %d, %v", rev, err)
	}
	if _, err := a.WriteKept(h.ctx, "staging", "rollup", 0, head); !errors.Is(err, authority.ErrConflict) {
		t.Fatalf("a second first write: %v; want ErrConflict", err)
	}
	got, rev, err := a.ReadKept(h.ctx, "staging", "rollup")
	if err != nil || rev != 1 || !jsonEqual(got, head) {
		t.Fatalf("ReadKept: %s at %d, %v; want %s at 1", got, rev, err, head)
	}
	days := map[string]json.RawMessage{"2026-02-27": []byte(`{"date":"2026-02-27","deploys":1}`), "2026-02-28": []byte(`{"date":"2026-02-28","deploys":2}`)}
	kept := map[string]authority.KeptValue{}
	for id, v := range days {
		kept[id] = authority.KeptValue{Value: v, At: h.clock.Now()}
	}
	if err := a.KeepRecords(h.ctx, "staging", "rollup", kept); err != nil {
		t.Fatal(err)
	}
	back, err := a.ReadKeptRecords(h.ctx, "staging", "rollup", []string{"2026-02-27", "2026-02-28", "2026-02-26"})
	if err != nil || len(back) != 2 || !jsonEqual(back["2026-02-27"], days["2026-02-27"]) || !jsonEqual(back["2026-02-28"], days["2026-02-28"]) {
		t.Fatalf("ReadKeptRecords: %v, %v; want the two days kept", back, err)
	}
	if p := h.pending(); len(p) != 0 {
		t.Errorf("pending lists %v; a kept value is no environment", p)
	}
	if l, ok := h.store.inner.(authority.Lister); ok {
		if envs, err := l.Environments(h.ctx); err != nil || len(envs) != 0 {
			t.Errorf("Environments: %v, %v; a kept value is no environment", envs, err)
		}
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func testPortGetMissing(t *testing.T, h *harness) {
	for _, key := range []string{authority.EnvKey("never-written"), authority.LeaseKey("never-written")} {
		d, err := h.store.Get(h.ctx, key)
		if !errors.Is(err, authority.ErrNotFound) {
			t.Errorf("Get(%q) = %v, %v; want an error matching ErrNotFound", key, d, err)
		}
	}
}

// put writes doc and fails the test unless the store answers rev.
func (h *harness) put(doc *authority.Doc, rev int64) {
	h.t.Helper()
	got, err := h.store.Put(h.ctx, doc)
	if err != nil {
		h.t.Fatalf("Put(%s at revision %d): %v", doc.Key, doc.Rev, err)
	}
	if got != rev {
		h.t.Fatalf("Put(%s at revision %d) = revision %d, want %d", doc.Key, doc.Rev, got, rev)
	}
}

// putConflict writes doc and fails the test unless the store refuses it with ErrConflict.
func (h *harness) putConflict(doc *authority.Doc) {
	h.t.Helper()
	got, err := h.store.Put(h.ctx, doc)
	if !errors.Is(err, authority.ErrConflict) {
		h.t.Fatalf("Put(%s at revision %d) = %d, %v; want an error matching ErrConflict", doc.Key, doc.Rev, got, err)
	}
}

// wantDoc fails the test unless the stored document under want.Key equals want.
func (h *harness) wantDoc(want *authority.Doc) {
	h.t.Helper()
	if diff := cmp.Diff(want, h.doc(want.Key)); diff != "" {
		h.t.Fatalf("stored %s differs (-want +got):\n%s", want.Key, diff)
	}
}

func counterDoc(key string, rev, n int64) *authority.Doc {
	return &authority.Doc{Key: key, Rev: rev, Env: &authority.Env{Name: strings.TrimPrefix(key, "env#"), Desired: n, Observed: n}}
}

func testPortRevisions(t *testing.T, h *harness) {
	key := authority.EnvKey("revisions")

	// A revision other than 0 cannot create a document.
	h.putConflict(counterDoc(key, 3, 1))
	if _, err := h.store.Get(h.ctx, key); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("a refused create stored something: Get = %v", err)
	}

	h.put(counterDoc(key, 0, 1), 1)
	h.wantDoc(counterDoc(key, 1, 1))

	// Creating again, or writing at a wrong revision, is refused and changes nothing.
	for _, rev := range []int64{0, 2, 7, -1} {
		h.putConflict(counterDoc(key, rev, 99))
	}
	h.wantDoc(counterDoc(key, 1, 1))

	h.put(counterDoc(key, 1, 2), 2)
	h.put(counterDoc(key, 2, 3), 3)
	h.putConflict(counterDoc(key, 2, 99)) // stale: based on revision 2, stored is 3
	h.putConflict(counterDoc(key, 1, 99))
	h.wantDoc(counterDoc(key, 3, 3))

	// Revisions are per document.
	other := authority.EnvKey("revisions/other")
	lease := authority.LeaseKey("revisions")
	h.put(counterDoc(other, 0, 1), 1)
	h.put(&authority.Doc{Key: lease, Lease: &authority.NamedLease{Name: "revisions"}}, 1)
	h.wantDoc(counterDoc(key, 3, 3))
	h.wantDoc(counterDoc(other, 1, 1))
}

// fullEnvDoc is an environment document with every field set, times with nanoseconds, and text
// that needs escaping in any encoding.
func fullEnvDoc(key, name string, now time.Time) *authority.Doc {
	return &authority.Doc{Key: key, Pending: true, Env: &authority.Env{
		Name: name, Desired: 9, Observed: 6, EventSeq: 12,
		Scopes: map[string]*authority.Scope{
			"api": {
				Mailbox: &authority.Ref{Generation: 9, Sha: sha("a", 9), Ref: "refs/heads/main", Before: sha("a", 8),
					Order:  authority.Order{PushedAt: now.Truncate(time.Second), CommittedAt: now.Add(-time.Hour), Forced: true},
					Source: "example/api", Actor: "octocat", IntentID: "3f6a1c2e-delivery-9", Origin: "github:1/example/api#main", Attempt: 2, At: now},
				Owner: 8,
				Live: &authority.Live{Sha: sha("a", 6), Ref: "refs/heads/main", Generation: 6, Run: "1234567/2", Token: 41,
					Before: sha("a", 5), Order: authority.Order{PushedAt: now.Add(-time.Hour).Truncate(time.Second)}, At: now.Add(-time.Minute), Since: now.Add(-time.Hour)},
				Lease: authority.Lease{Holder: "1234568/1", Purpose: "deploy", Generation: 8, Token: 42,
					AcquiredAt: now.Add(-time.Second), ExpiresAt: now.Add(testTTL), Sha: sha("a", 8), Ref: "refs/heads/main"},
				Failure: &authority.Failure{Generation: 7, Sha: sha("a", 7), Message: "exit status 1: «déploiement» échoué ✗ \"quoted\" <b>&amp;</b>\nsecond line\ttab",
					Attempt: 3, MaxAttempts: 3, At: now.Add(-2 * time.Minute)},
				ActiveAt: now,
			},
			"web": {Owner: 5, Lease: authority.Lease{Token: 3}, ActiveAt: now.Add(-time.Hour)}, // a released lease keeps its token
		},
		Accepts: []authority.IntentRecord{
			{ID: "3f6a1c2e-delivery-9", Generation: 9, Sha: sha("a", 9), Scopes: []string{"api"}, At: now},
			{ID: "run 77/attempt 1", Generation: 5, At: now.Add(-time.Hour)},
		},
		Outbox: []authority.Event{
			{Seq: 11, At: now.Add(-time.Second), Kind: authority.EventTookOver, Scope: "api", Generation: 8, Holder: "1234568/1", Token: 42,
				Message: "Recovered an interrupted operation (Interrupted: deploy) held by 1234567/2, generation 6"},
			{Seq: 12, At: now, Kind: authority.EventAccepted, Scope: "api", Generation: 9, Sha: sha("a", 9), Message: "Accepted a000000 from example/api by octocat — «ok» ✓"},
		},
	}}
}

func testPortRoundTrip(t *testing.T, h *harness) {
	now := h.clock.Now()
	env := fullEnvDoc(authority.EnvKey("preview/pr-803"), "preview/pr-803", now)
	h.put(env, 1)
	want := fullEnvDoc(env.Key, "preview/pr-803", now)
	want.Rev = 1
	h.wantDoc(want)

	// A named lease document, under a long name with characters a key encoding must survive.
	name := "refresh: config of example/app#main ✓ " + strings.Repeat("x", 200)
	lease := &authority.Doc{Key: authority.LeaseKey(name), Lease: &authority.NamedLease{Name: name, Seq: 2,
		Lease:  authority.Lease{Holder: "host-1:4242", Purpose: "refresh", Token: 7, AcquiredAt: now, ExpiresAt: now.Add(testTTL)},
		Events: []authority.Event{{Seq: 2, At: now, Kind: authority.EventTookOver, Holder: "host-1:4242", Token: 7, Message: "Recovered an interrupted operation (Interrupted: refresh) held by host-2:1"}},
	}}
	h.put(lease, 1)
	lease.Rev = 1
	h.wantDoc(lease)

	// A second revision replaces the whole document: nothing of the first one survives.
	next := &authority.Doc{Key: env.Key, Rev: 1, Env: &authority.Env{Name: "preview/pr-803", Desired: 10, Observed: 10,
		Scopes: map[string]*authority.Scope{"web": {Owner: 10}}, Accepts: []authority.IntentRecord{{ID: "x", Generation: 10, At: now}}, EventSeq: 12}}
	h.put(next, 2)
	next.Rev = 2
	h.wantDoc(next)
}

func testPortIsolation(t *testing.T, h *harness) {
	now := h.clock.Now()
	key := authority.EnvKey("isolation")
	doc := fullEnvDoc(key, "isolation", now)
	h.put(doc, 1)

	// Changing the caller's copy after the write changes nothing stored.
	doc.Env.Desired = 1000
	doc.Env.Scopes["api"].Mailbox.Sha = "changed"
	doc.Env.Scopes["api"].Lease.Holder = "changed"
	doc.Env.Outbox[0].Message = "changed"
	doc.Env.Accepts[0].Scopes[0] = "changed"
	want := fullEnvDoc(key, "isolation", now)
	want.Rev = 1
	h.wantDoc(want)

	// Changing a document that was read changes nothing stored, nor the next read.
	got := h.doc(key)
	got.Rev = 1000
	got.Env.Scopes["api"].Live.Sha = "changed"
	got.Env.Scopes["api"].Mailbox.Order.Forced = false
	got.Env.Accepts[0].Scopes[0] = "changed"
	delete(got.Env.Scopes, "web")
	got.Env.Outbox = got.Env.Outbox[:1]
	h.wantDoc(want)
}

// testPortConcurrentCreate: of many writers creating one document, exactly one wins.
func testPortConcurrentCreate(t *testing.T, h *harness) {
	const writers = 32
	key := authority.EnvKey("concurrent-create")
	errs := make([]error, writers)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-begin
			_, errs[i] = h.store.Put(h.ctx, counterDoc(key, 0, int64(i+1)))
		})
	}
	close(begin)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both created %s", winner, i, key)
		case err == nil:
			winner = i
		case !errors.Is(err, authority.ErrConflict):
			t.Fatalf("writer %d: %v; want success or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("no writer created %s", key)
	}
	h.wantDoc(counterDoc(key, 1, int64(winner+1)))
}

// testPortConcurrentIncrement: read-modify-write loops over the revision CAS lose no update, and
// every successful write gets a revision of its own.
func testPortConcurrentIncrement(t *testing.T, h *harness) {
	workers, each := 8, rounds(16, 6)
	key := authority.EnvKey("concurrent-increment")
	h.put(counterDoc(key, 0, 0), 1)
	revs := make([][]int64, workers)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			<-begin
			for n := 0; n < each; {
				d, err := h.store.Get(h.ctx, key)
				if err != nil {
					t.Errorf("worker %d: get: %v", w, err)
					return
				}
				d.Env.Desired++
				rev, err := h.store.Put(h.ctx, d)
				switch {
				case err == nil:
					revs[w] = append(revs[w], rev)
					n++
				case !errors.Is(err, authority.ErrConflict):
					t.Errorf("worker %d: put: %v", w, err)
					return
				}
			}
		})
	}
	close(begin)
	wg.Wait()
	if t.Failed() {
		return
	}
	total := int64(workers * each)
	seen := map[int64]int{}
	for w, rs := range revs {
		for _, r := range rs {
			if prev, dup := seen[r]; dup {
				t.Fatalf("workers %d and %d both wrote revision %d", prev, w, r)
			}
			seen[r] = w
		}
	}
	for r := int64(2); r <= total+1; r++ {
		if _, ok := seen[r]; !ok {
			t.Fatalf("no write returned revision %d (revisions 2..%d expected once each)", r, total+1)
		}
	}
	d := h.doc(key)
	if d.Rev != total+1 || d.Env.Desired != total {
		t.Fatalf("after %d increments: revision %d, counter %d; want %d, %d", total, d.Rev, d.Env.Desired, total+1, total)
	}
}

func testPortPendingIndex(t *testing.T, h *harness) {
	wantPending := func(want ...string) {
		t.Helper()
		if want == nil {
			want = []string{}
		}
		if diff := cmp.Diff(want, h.pending()); diff != "" {
			t.Fatalf("Pending (-want +got):\n%s", diff)
		}
	}
	wantPending()

	envDoc := func(name string, rev int64, pending bool) *authority.Doc {
		d := counterDoc(authority.EnvKey(name), rev, rev+1)
		d.Pending = pending
		return d
	}
	h.put(envDoc("staging", 0, true), 1)
	h.put(envDoc("preview/pr-803", 0, true), 1)
	h.put(envDoc("prod", 0, false), 1)
	h.put(&authority.Doc{Key: authority.LeaseKey("refresh"), Lease: &authority.NamedLease{Name: "refresh"}}, 1)
	wantPending("preview/pr-803", "staging")

	h.put(envDoc("staging", 1, false), 2) // settled: dropped
	wantPending("preview/pr-803")
	h.put(envDoc("prod", 1, true), 2)
	wantPending("preview/pr-803", "prod")

	// A refused write does not touch the index.
	h.putConflict(envDoc("staging", 0, true))
	h.putConflict(envDoc("prod", 1, false))
	wantPending("preview/pr-803", "prod")

	h.put(envDoc("staging", 2, true), 3)
	h.put(envDoc("preview/pr-803", 1, false), 2)
	h.put(envDoc("prod", 2, false), 3)
	wantPending("staging")
}

func testPortCanceled(t *testing.T, h *harness) {
	key := authority.EnvKey("canceled")
	h.put(counterDoc(key, 0, 1), 1)
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	if rev, err := h.store.Put(ctx, counterDoc(key, 1, 2)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a canceled context = %d, %v; want an error matching context.Canceled", rev, err)
	}
	if _, err := h.store.Put(ctx, counterDoc(authority.EnvKey("canceled-new"), 0, 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put of a new document with a canceled context: %v; want an error matching context.Canceled", err)
	}
	if d, err := h.store.Get(ctx, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a canceled context = %v, %v; want an error matching context.Canceled", d, err)
	}
	if _, err := h.store.Pending(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Pending with a canceled context: %v; want an error matching context.Canceled", err)
	}
	h.wantDoc(counterDoc(key, 1, 1))
	if _, err := h.store.Get(h.ctx, authority.EnvKey("canceled-new")); !errors.Is(err, authority.ErrNotFound) {
		t.Errorf("a Put with a canceled context created a document: Get = %v", err)
	}
}

// testPortLargeDocument stores a heavy environment document, over 200 KB: a full outbox of long
// messages (the store refused records for a while), the most scopes an environment may have, each
// with a pending and a live commit and a failure. Stores must keep it whole.
func testPortLargeDocument(t *testing.T, h *harness) {
	now := h.clock.Now()
	const name = "large"
	e := &authority.Env{Name: name, Desired: 5000, Observed: 4000, EventSeq: 9000, Scopes: map[string]*authority.Scope{}}
	for i := range 256 {
		e.Accepts = append(e.Accepts, authority.IntentRecord{ID: fmt.Sprintf("%08x-1d2e-4f3a-9b8c-%012x", i, i), Generation: int64(4744 + i),
			Sha: sha("i", i), Scopes: []string{"api"}, At: now})
	}
	for i := range 256 {
		e.Outbox = append(e.Outbox, authority.Event{Seq: int64(8745 + i), At: now, Kind: authority.EventFailed, Scope: "api",
			Generation: int64(4800 + i), Sha: sha("f", i), Message: fmt.Sprintf("Attempt 1 of 3 failed; will retry: %s…", strings.Repeat("é", 148))})
	}
	for i := range authority.MaxScopes {
		e.Scopes[fmt.Sprintf("scope-%02d", i)] = &authority.Scope{
			Mailbox: &authority.Ref{Generation: 4001 + int64(i), Sha: sha("m", i), Ref: "refs/heads/main", Before: sha("l", i),
				Source: "example/service-" + fmt.Sprint(i), Actor: "octocat", IntentID: fmt.Sprintf("%08x-1d2e-4f3a-9b8c-%012x", i, i), At: now},
			Owner:    4000,
			Live:     &authority.Live{Sha: sha("v", i), Ref: "refs/heads/main", Generation: 4000, Run: "1234567890/1", Token: int64(i), At: now},
			Lease:    authority.Lease{Token: int64(i)},
			Failure:  &authority.Failure{Generation: 3999, Sha: sha("x", i), Message: strings.Repeat("ü", 150), Attempt: 3, MaxAttempts: 3, At: now},
			ActiveAt: now,
		}
	}
	doc := &authority.Doc{Key: authority.EnvKey(name), Pending: true, Env: e}
	b, err := authority.EncodeEnv(e)
	if err != nil || len(b) < 200_000 {
		t.Fatalf("the large document is %d bytes (%v); the test wants it above 200 KB", len(b), err)
	}
	t.Logf("large document: %d bytes", len(b))
	h.put(doc, 1)
	doc.Rev = 1
	h.wantDoc(doc)
	doc.Env.Desired++
	h.put(doc, 2)
}

// testPortRecords: records are stored whole, found by key with a consistent read, missing keys are
// left out, and storing one again changes nothing.
func testPortRecords(t *testing.T, h *harness) {
	now := h.clock.Now()
	ev := authority.Event{Seq: 7, At: now, Kind: authority.EventUnlocked, Scope: "api", Generation: 3, Holder: "run 9/1", Token: 4,
		Message: "Unlocked by octocat: «stuck» ✗ \"quoted\" <b>&amp;</b>\nsecond line"}
	in := authority.IntentRecord{ID: "delivery 72d3162e-cc78-11e3-81ab ✓", Generation: 3, Sha: sha("a", 3), Scopes: []string{"api", "web"}, At: now}
	recs := []authority.Record{
		{Key: authority.EventKey("preview/pr-7", 7), ExpiresAt: now.Add(time.Hour), Event: &ev},
		{Key: authority.IntentKey("preview/pr-7", in.ID), ExpiresAt: now.Add(2 * time.Hour), Intent: &in},
	}
	for range 2 {
		if err := h.store.PutRecords(h.ctx, recs); err != nil {
			t.Fatalf("put records: %v", err)
		}
	}
	keys := []string{recs[1].Key, "event#preview/pr-7#missing", recs[0].Key, authority.EventKey("preview/pr-8", 7)}
	got, err := h.store.GetRecords(h.ctx, keys)
	if err != nil {
		t.Fatalf("get records: %v", err)
	}
	slices.SortFunc(got, func(a, b authority.Record) int { return strings.Compare(a.Key, b.Key) })
	if diff := cmp.Diff(recs, got); diff != "" {
		t.Fatalf("records (-stored +read):\n%s", diff)
	}
	if got, err := h.store.GetRecords(h.ctx, []string{"event#nothing#1"}); err != nil || len(got) != 0 {
		t.Fatalf("get of a missing record: %+v, %v; want nothing", got, err)
	}
	// Records never show up as documents, nor documents as records.
	if _, err := h.store.Get(h.ctx, recs[0].Key); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("a record read as a document: %v", err)
	}
	h.put(counterDoc(authority.EnvKey("pr-9"), 0, 1), 1)
	if got, err := h.store.GetRecords(h.ctx, []string{authority.EnvKey("pr-9")}); err != nil || len(got) != 0 {
		t.Fatalf("a document read as a record: %+v, %v", got, err)
	}
	// Many at once: a page of history.
	var many []authority.Record
	var manyKeys []string
	for i := range 150 {
		e := authority.Event{Seq: int64(i + 1), At: now, Kind: authority.EventAccepted, Message: strings.Repeat("m", 200)}
		many = append(many, authority.Record{Key: authority.EventKey("many", e.Seq), ExpiresAt: now.Add(time.Hour), Event: &e})
		manyKeys = append(manyKeys, many[i].Key)
	}
	if err := h.store.PutRecords(h.ctx, many); err != nil {
		t.Fatalf("put 150 records: %v", err)
	}
	for chunk := range slices.Chunk(manyKeys, 100) {
		got, err := h.store.GetRecords(h.ctx, chunk)
		if err != nil || len(got) != len(chunk) {
			t.Fatalf("get %d records: %d, %v", len(chunk), len(got), err)
		}
	}
}

// testPortFirstLayout: a document written by the first layout (the timeline and intent ids inside
// the environment) is read with its events and intents in the outbox; the next write stores them as
// records and leaves the document small, and the timeline and the intent ids are all still there.
func testPortFirstLayout(t *testing.T, h *harness) {
	now := h.clock.Now()
	raw := firstLayoutDoc(now)
	d, err := authority.DecodeDoc(raw)
	if err != nil {
		t.Fatalf("decode a first-layout document: %v", err)
	}
	if len(d.Env.Outbox) != 3 || len(d.Env.Accepts) != 2 || d.Env.Scopes["api"].Mailbox.Sha != sha("a", 9) {
		t.Fatalf("first-layout document read as %+v", d.Env)
	}
	h.put(d, 1)
	a := h.process()
	// An old intent id is still a repeat; an accept writes, moving the outbox to records.
	if res := h.accept(a, push("staging", "delivery-9", sha("a", 9), "api"), false); !res.Duplicate || res.Generation != 9 {
		t.Fatalf("re-delivery of an intent of the first layout: %+v", res)
	}
	h.accept(a, push("staging", "delivery-10", sha("a", 10), "api"), false)
	h.accept(a, push("staging", "delivery-11", sha("a", 11), "api"), false)
	e := h.env("staging")
	if len(e.Accepts) > 1 || len(e.Outbox) > 4 {
		t.Fatalf("after two writes the outbox still holds %d events and %d intents", len(e.Outbox), len(e.Accepts))
	}
	if len(e.Events) < 3 || e.Events[0].Seq != 10 || e.Events[0].Message != "first" {
		t.Fatalf("timeline %+v; want the first layout's events first", e.Events)
	}
	for i := 1; i < len(e.Events); i++ {
		if e.Events[i].Seq != e.Events[i-1].Seq+1 {
			t.Fatalf("timeline numbers %d after %d", e.Events[i].Seq, e.Events[i-1].Seq)
		}
	}
	if res := h.accept(h.process(), push("staging", "run 77/attempt 1", sha("a", 5), "web"), false); !res.Duplicate || res.Generation != 5 {
		t.Fatalf("re-delivery of the other first-layout intent after the move: %+v", res)
	}
}

// firstLayoutDoc is a stored document of the first layout, as memory and bolt kept it.
func firstLayoutDoc(now time.Time) []byte {
	ts := now.UTC().Format(time.RFC3339Nano)
	return []byte(`{"key":"env#staging","rev":0,"pending":true,"env":{"name":"staging","desired":9,"observed":8,` +
		`"scopes":{"api":{"mailbox":{"generation":9,"sha":"` + sha("a", 9) + `","ref":"refs/heads/main","lineage":["x"],"intent_id":"delivery-9","at":"` + ts + `"},` +
		`"owner":8,"lease":{"token":4},"active_at":"` + ts + `"},"web":{"owner":5,"lease":{"token":2},"active_at":"` + ts + `"}},` +
		`"intents":{"delivery-9":{"generation":9},"run 77/attempt 1":{"generation":5}},` +
		`"events":[{"seq":10,"at":"` + ts + `","kind":"accepted","message":"first"},{"seq":11,"at":"` + ts + `","kind":"claimed","message":"second"},` +
		`{"seq":12,"at":"` + ts + `","kind":"accepted","scope":"api","generation":9,"message":"third"}],"event_seq":12}}`)
}
