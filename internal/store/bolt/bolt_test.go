package bolt_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/bbolt"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "latestwins.db") }

func open(t testing.TB, path string, opts ...bolt.Option) *bolt.Store {
	t.Helper()
	s, err := bolt.Open(path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// envDoc is a realistic environment document: two scopes, a lease, an intent and a timeline.
func envDoc(name string, desired int64) *authority.Doc {
	return &authority.Doc{
		Key:     authority.EnvKey(name),
		Pending: true,
		Env: &authority.Env{
			Name: name, Desired: desired, Observed: desired - 1, EventSeq: 2,
			Scopes: map[string]*authority.Scope{
				"api": {
					Mailbox: &authority.Ref{Generation: desired, Sha: "c0ffee", Ref: "refs/heads/main", IntentID: "d-1", At: t0, Before: "b0b"},
					Owner:   desired,
					Lease:   authority.Lease{Holder: "run-9", Purpose: "deploy", Generation: desired, Token: 4, AcquiredAt: t0, ExpiresAt: t0.Add(2 * time.Minute)},
				},
				"web": {Live: &authority.Live{Sha: "b0b", Generation: max(desired-1, 1), Token: 3, At: t0}},
			},
			Accepts: []authority.IntentRecord{{ID: "d-1", Generation: desired, Sha: "c0ffee", Scopes: []string{"api"}, At: t0}},
			Outbox: []authority.Event{
				{Seq: 1, At: t0, Kind: authority.EventAccepted, Scope: "api", Generation: desired, Sha: "c0ffee", Message: "accepted"},
				{Seq: 2, At: t0, Kind: authority.EventClaimed, Scope: "api", Generation: desired, Message: "claimed"},
			},
		},
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) authority.Store { return open(t, dbPath(t), bolt.WithOpenTimeout(time.Minute)) })
}

func TestPutGetCompareAndSet(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, dbPath(t))
	key := authority.EnvKey("staging")

	if _, err := s.Get(ctx, key); !errors.Is(err, authority.ErrNotFound) {
		t.Fatalf("Get of an absent key: err = %v, want ErrNotFound", err)
	}
	d := envDoc("staging", 1)
	rev, err := s.Put(ctx, d)
	if err != nil || rev != 1 {
		t.Fatalf("first Put = %d, %v; want 1, nil", rev, err)
	}
	if d.Rev != 0 {
		t.Errorf("Put changed the caller's document: Rev = %d", d.Rev)
	}
	if _, err := s.Put(ctx, envDoc("staging", 7)); !errors.Is(err, authority.ErrConflict) {
		t.Fatalf("second create at revision 0: err = %v, want ErrConflict", err)
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	want := envDoc("staging", 1)
	want.Rev = 1
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Get after Put (-want +got):\n%s", diff)
	}

	got.Env.Desired = 2
	if rev, err := s.Put(ctx, got); err != nil || rev != 2 {
		t.Fatalf("Put at revision 1 = %d, %v; want 2, nil", rev, err)
	}
	for _, stale := range []int64{0, 1, 3, 99, -1} {
		d := envDoc("staging", 100)
		d.Rev = stale
		if _, err := s.Put(ctx, d); !errors.Is(err, authority.ErrConflict) {
			t.Errorf("Put at revision %d with 2 stored: err = %v, want ErrConflict", stale, err)
		}
	}
	got, err = s.Get(ctx, key)
	if err != nil || got.Rev != 2 || got.Env.Desired != 2 {
		t.Fatalf("after refused writes: Get = rev %d desired %d, %v; want rev 2 desired 2", got.Rev, got.Env.Desired, err)
	}

	lease := &authority.Doc{Key: authority.LeaseKey("refresh"), Lease: &authority.NamedLease{Name: "refresh", Lease: authority.Lease{Holder: "h", Token: 1}}}
	if rev, err := s.Put(ctx, lease); err != nil || rev != 1 {
		t.Fatalf("Put of another key at revision 0 = %d, %v; want 1, nil (keys are independent)", rev, err)
	}
	if _, err := s.Put(ctx, &authority.Doc{}); err == nil {
		t.Error("Put with an empty key succeeded")
	}
}

func TestPendingIndex(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := open(t, dbPath(t))
	put := func(d *authority.Doc) int64 {
		t.Helper()
		rev, err := s.Put(ctx, d)
		if err != nil {
			t.Fatalf("Put %s: %v", d.Key, err)
		}
		return rev
	}
	check := func(want ...string) {
		t.Helper()
		got, err := s.Pending(ctx)
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		if want == nil {
			want = []string{}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Pending (-want +got):\n%s", diff)
		}
	}

	check()
	revA := put(envDoc("staging", 1))
	check("staging")
	put(envDoc("preview/pr-803", 1))
	put(envDoc("prod", 1))
	check("preview/pr-803", "prod", "staging")

	settled := envDoc("staging", 1)
	settled.Rev, settled.Pending = revA, false
	put(settled)
	check("preview/pr-803", "prod")

	// A refused write changes neither the document nor the index.
	again := envDoc("staging", 2)
	again.Rev = revA // stale
	if _, err := s.Put(ctx, again); !errors.Is(err, authority.ErrConflict) {
		t.Fatalf("stale Put: err = %v, want ErrConflict", err)
	}
	check("preview/pr-803", "prod")

	// Only environment documents are indexed.
	put(&authority.Doc{Key: authority.LeaseKey("refresh"), Pending: true, Lease: &authority.NamedLease{Name: "refresh"}})
	check("preview/pr-803", "prod")
}

func TestReopenKeepsData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path)
	if _, err := s.Put(ctx, envDoc("staging", 3)); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := s.Get(ctx, authority.EnvKey("staging")); !errors.Is(err, bolt.ErrClosed) {
		t.Errorf("Get after Close: err = %v, want ErrClosed", err)
	}

	s2 := open(t, path)
	got, err := s2.Get(ctx, authority.EnvKey("staging"))
	if err != nil {
		t.Fatalf("Get after reopening: %v", err)
	}
	want := envDoc("staging", 3)
	want.Rev = 1
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("reopened document (-want +got):\n%s", diff)
	}
	if p, err := s2.Pending(ctx); err != nil || !slices.Equal(p, []string{"staging"}) {
		t.Fatalf("Pending after reopening = %v, %v; want [staging]", p, err)
	}
}

// rawSchema reads the schema version straight from the file.
func rawSchema(t *testing.T, path string) string {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("bbolt.Open: %v", err)
	}
	defer db.Close()
	var v string
	_ = db.View(func(tx *bbolt.Tx) error {
		if b := tx.Bucket([]byte("meta")); b != nil {
			v = string(b.Get([]byte("schema")))
		}
		return nil
	})
	return v
}

func rawUpdate(t *testing.T, path string, fn func(*bbolt.Tx) error) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("bbolt.Open: %v", err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatalf("bbolt Update: %v", err)
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()

	t.Run("idempotent and keeps data", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		path := dbPath(t)
		s := open(t, path)
		if v := rawSchema(t, path); v != "2" {
			t.Fatalf("schema after Open = %q, want 2", v)
		}
		if _, err := s.Put(ctx, envDoc("staging", 1)); err != nil {
			t.Fatalf("Put: %v", err)
		}
		for i := range 3 {
			if err := s.Migrate(ctx); err != nil {
				t.Fatalf("Migrate #%d: %v", i+1, err)
			}
		}
		open(t, path) // Open migrates too
		if d, err := s.Get(ctx, authority.EnvKey("staging")); err != nil || d.Rev != 1 {
			t.Fatalf("Get after migrating again = %+v, %v; want the document at revision 1", d, err)
		}
		if p, err := s.Pending(ctx); err != nil || !slices.Equal(p, []string{"staging"}) {
			t.Fatalf("Pending after migrating again = %v, %v", p, err)
		}
		if v := rawSchema(t, path); v != "2" {
			t.Fatalf("schema = %q, want 2", v)
		}
	})

	t.Run("creates missing buckets", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		path := dbPath(t)
		rawUpdate(t, path, func(tx *bbolt.Tx) error { // a bbolt file holding someone else's bucket
			b, err := tx.CreateBucket([]byte("other"))
			if err != nil {
				return err
			}
			return b.Put([]byte("k"), []byte("v"))
		})
		s := open(t, path)
		if _, err := s.Put(ctx, envDoc("staging", 1)); err != nil {
			t.Fatalf("Put: %v", err)
		}
		if v := rawSchema(t, path); v != "2" {
			t.Fatalf("schema = %q, want 2", v)
		}
	})

	t.Run("refuses a newer schema", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		path := dbPath(t)
		s := open(t, path)
		if _, err := s.Put(ctx, envDoc("staging", 1)); err != nil {
			t.Fatalf("Put: %v", err)
		}
		rawUpdate(t, path, func(tx *bbolt.Tx) error { return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("3")) })

		checkErr := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, bolt.ErrNewerSchema) || !strings.Contains(err.Error(), "schema version 3") || !strings.Contains(err.Error(), "upgrade latestwins") {
				t.Errorf("%s on a schema 3 file: err = %v, want ErrNewerSchema naming version 3 and the fix", op, err)
			}
		}
		checkErr("Migrate", s.Migrate(ctx))
		_, err := bolt.Open(path)
		checkErr("Open", err)
		_, err = s.Get(ctx, authority.EnvKey("staging"))
		checkErr("Get", err)
		_, err = s.Put(ctx, envDoc("prod", 1))
		checkErr("Put", err)
		_, err = s.Pending(ctx)
		checkErr("Pending", err)
		if v := rawSchema(t, path); v != "3" {
			t.Fatalf("schema = %q after refusals, want 3 kept", v)
		}
	})
}

// TestFirstLayoutFile: a file of schema 1 holding an environment of the first layout (its timeline
// and intent ids inside) is read as it is; the first write raises the schema, the timeline and the
// intents wait in the outbox, and the write that stores the outbox (here Compact, which latestwins
// migrate runs) moves them into records: nothing is lost, a re-delivery is still a repeat, and a
// latestwins of schema 1 now refuses the file instead of misreading it.
func TestFirstLayoutFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	ts := t0.Format(time.RFC3339Nano)
	legacy := `{"key":"env#staging","rev":4,"pending":true,"env":{"name":"staging","desired":2,"observed":1,` +
		`"scopes":{"api":{"mailbox":{"generation":2,"sha":"` + strings.Repeat("b", 40) + `","ref":"refs/heads/main","lineage":["x"],"intent_id":"d-2","at":"` + ts + `"},` +
		`"owner":2,"lease":{"token":1},"active_at":"` + ts + `"}},"intents":{"d-1":{"generation":1},"d-2":{"generation":2}},` +
		`"events":[{"seq":1,"at":"` + ts + `","kind":"accepted","scope":"api","generation":1,"message":"Accepted aaaaaaa"},` +
		`{"seq":2,"at":"` + ts + `","kind":"accepted","scope":"api","generation":2,"message":"Accepted bbbbbbb"}],"event_seq":2}}`
	rawUpdate(t, path, func(tx *bbolt.Tx) error {
		for _, name := range []string{"docs", "pending", "meta"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		if err := tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("1")); err != nil {
			return err
		}
		if err := tx.Bucket([]byte("pending")).Put([]byte("staging"), nil); err != nil {
			return err
		}
		return tx.Bucket([]byte("docs")).Put([]byte("env#staging"), []byte(legacy))
	})
	s, err := bolt.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	clock := storetest.NewClock(t0.Add(time.Hour))
	a := authority.New(s, authority.WithClock(clock))
	if res, err := a.Accept(ctx, authority.Intent{ID: "d-1", Environment: "staging", Scopes: []string{"api"}, Sha: strings.Repeat("a", 40)}, false); err != nil || !res.Duplicate || res.Generation != 1 {
		t.Fatalf("re-delivery of an intent of the first layout: %+v, %v", res, err)
	}
	for i := 3; i <= 4; i++ {
		if _, err := a.Accept(ctx, authority.Intent{ID: fmt.Sprintf("d-%d", i), Environment: "staging", Scopes: []string{"api"}, Sha: strings.Repeat(fmt.Sprint(i), 40)}, false); err != nil {
			t.Fatal(err)
		}
	}
	if v := rawSchema(t, path); v != "2" {
		t.Fatalf("schema after writes = %q, want 2", v)
	}
	if _, err := a.Compact(ctx, "staging"); err != nil {
		t.Fatal(err)
	}
	page, err := a.History(ctx, "staging", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) < 4 || page.Events[0].Message != "Accepted aaaaaaa" || page.Events[1].Message != "Accepted bbbbbbb" {
		t.Fatalf("timeline after the move: %+v", page.Events)
	}
	d, err := s.Get(ctx, authority.EnvKey("staging"))
	if err != nil || len(d.Env.Outbox) > 0 || len(d.Env.Accepts) > 0 {
		t.Fatalf("document after the move: %+v, %v; want the first layout's events and intents moved out", d, err)
	}
	if res, err := authority.New(s, authority.WithClock(clock)).Accept(ctx, authority.Intent{ID: "d-2", Environment: "staging", Scopes: []string{"api"},
		Sha: strings.Repeat("b", 40)}, false); err != nil || !res.Duplicate || res.Generation != 2 {
		t.Fatalf("re-delivery of d-2 after the move: %+v, %v", res, err)
	}
}

func TestOpenBadPaths(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		path   string
		want   string
		target error
	}{
		"parent directory missing": {filepath.Join(dir, "missing", "latestwins.db"), "does not exist; create it first", fs.ErrNotExist},
		"path is a directory":      {dir, "is a directory", nil},
		"parent is a file":         {filepath.Join(file, "latestwins.db"), "is not a directory", nil},
		"not a database":           {garbage, "is not a latestwins database", nil},
		"empty path":               {"", "no database path", nil},
	}
	if os.Geteuid() != 0 { // permissions do not bind root
		ro := filepath.Join(dir, "read-only")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		roFile := filepath.Join(dir, "read-only.db")
		if _, err := bolt.Open(roFile); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(roFile, 0o400); err != nil {
			t.Fatal(err)
		}
		cases["directory not writable"] = struct {
			path   string
			want   string
			target error
		}{filepath.Join(ro, "latestwins.db"), "is not writable", fs.ErrPermission}
		cases["file not writable"] = struct {
			path   string
			want   string
			target error
		}{roFile, "is not writable", fs.ErrPermission}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := bolt.Open(tc.path)
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%q) succeeded", tc.path)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q) error %q does not say %q", tc.path, err, tc.want)
			}
			if tc.target != nil && !errors.Is(err, tc.target) {
				t.Errorf("Open(%q) error %v does not match %v", tc.path, err, tc.target)
			}
			if !errors.Is(err, bolt.ErrUnusable) {
				t.Errorf("Open(%q) error %v is not ErrUnusable: the path can never work", tc.path, err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(file, "latestwins.db")); err == nil {
		t.Error("a failed Open created a file")
	}
}

func TestDamagedDocument(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path)
	for key, v := range map[string]string{"env#garbage": "{not json", "env#norev": `{"key":"env#norev"}`, "env#array": `[1]`} {
		rawUpdate(t, path, func(tx *bbolt.Tx) error { return tx.Bucket([]byte("docs")).Put([]byte(key), []byte(v)) })
		d := &authority.Doc{Key: key, Rev: 0}
		if _, err := s.Put(ctx, d); err == nil || errors.Is(err, authority.ErrConflict) || !strings.Contains(err.Error(), "decode stored revision") {
			t.Errorf("Put over a damaged %s: err = %v, want a decode error that is not a conflict", key, err)
		}
	}
	if _, err := s.Get(ctx, "env#garbage"); err == nil || errors.Is(err, authority.ErrNotFound) {
		t.Errorf("Get of a damaged document: err = %v, want a decode error", err)
	}
}

// TestHandEditedDocumentIsRefused: an environment edited in the file to observed 50, desired 1
// is refused when read, and a claim after it hands out no generation.
func TestHandEditedDocumentIsRefused(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	s := open(t, path)
	key := []byte(authority.EnvKey("staging"))
	storetest.SeedForHandEdit(t, s, "staging")
	raw := func() []byte {
		var b []byte
		rawUpdate(t, path, func(tx *bbolt.Tx) error {
			b = slices.Clone(tx.Bucket([]byte("docs")).Get(key))
			return nil
		})
		return b
	}
	edited := storetest.HandEdit(t, raw())
	rawUpdate(t, path, func(tx *bbolt.Tx) error { return tx.Bucket([]byte("docs")).Put(key, edited) })
	storetest.CheckHandEditRefused(t, s, "staging", raw)
}

func TestFileRemovedAfterOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "k"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Get on a removed file: err = %v, want one saying the file does not exist", err)
	}
	if _, err := s.Put(ctx, envDoc("staging", 1)); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Put on a removed file: err = %v, want one saying the file does not exist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an operation recreated the removed file: stat err = %v", err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if _, err := s.Put(ctx, envDoc("staging", 1)); err != nil {
		t.Fatalf("Put after Migrate recreated the file: %v", err)
	}
}

// signalHandler closes ch at the first record whose message is msg.
type signalHandler struct {
	msg  string
	once sync.Once
	ch   chan struct{}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}
func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }

// holdFile takes the exclusive file lock as another process would, until release is called.
func holdFile(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("bbolt.Open: %v", err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = db.Close() }) }
	t.Cleanup(release)
	return release
}

// The file lock is waited for by blocking on flock where it exists, by polling elsewhere; both are
// tested here.
func TestBusyFile(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"blocking", "polling"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			testBusyFile(t, mode == "polling")
		})
	}
}

func testBusyFile(t *testing.T, poll bool) {
	open := func(t *testing.T, path string, opts ...bolt.Option) *bolt.Store {
		s := open(t, path, opts...)
		if poll {
			bolt.PollForLock(s)
		}
		return s
	}

	t.Run("times out with a clear error", func(t *testing.T) {
		t.Parallel()
		path := dbPath(t)
		const timeout = 150 * time.Millisecond
		s := open(t, path, bolt.WithOpenTimeout(timeout))
		holdFile(t, path)
		start := time.Now()
		_, err := s.Get(t.Context(), "k")
		if !errors.Is(err, bolt.ErrBusy) || !strings.Contains(err.Error(), "another process has held the file") {
			t.Fatalf("Get on a held file: err = %v, want ErrBusy saying another process holds it", err)
		}
		if el := time.Since(start); el < timeout {
			t.Errorf("gave up after %s, before the %s timeout", el, timeout)
		}
		if _, err := s.Put(t.Context(), envDoc("staging", 1)); !errors.Is(err, bolt.ErrBusy) {
			t.Errorf("Put on a held file: err = %v, want ErrBusy", err)
		}
	})

	t.Run("context ends the wait", func(t *testing.T) {
		t.Parallel()
		path := dbPath(t)
		s := open(t, path, bolt.WithOpenTimeout(time.Minute))
		holdFile(t, path)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if _, err := s.Put(ctx, envDoc("staging", 1)); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Put on a held file with a 100ms context: err = %v, want DeadlineExceeded", err)
		}
	})

	t.Run("waits for the holder", func(t *testing.T) {
		t.Parallel()
		path := dbPath(t)
		h := &signalHandler{msg: "database file busy; waiting", ch: make(chan struct{})}
		s := open(t, path, bolt.WithOpenTimeout(time.Minute), bolt.WithLogger(slog.New(h)))
		release := holdFile(t, path)
		done := make(chan error, 1)
		go func() {
			_, err := s.Put(t.Context(), envDoc("staging", 1))
			done <- err
		}()
		select {
		case <-h.ch: // the Put found the file held and is waiting
		case err := <-done:
			t.Fatalf("Put finished while the file was held: %v", err)
		}
		release()
		if err := <-done; err != nil {
			t.Fatalf("Put after the holder released the file: %v", err)
		}
		if d, err := s.Get(t.Context(), authority.EnvKey("staging")); err != nil || d.Rev != 1 {
			t.Fatalf("Get = %+v, %v; want revision 1", d, err)
		}
	})
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	s := open(t, dbPath(t))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Get(ctx, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("Get: err = %v, want Canceled", err)
	}
	if _, err := s.Put(ctx, envDoc("staging", 1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put: err = %v, want Canceled", err)
	}
	if _, err := s.Pending(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Pending: err = %v, want Canceled", err)
	}
}

// A commit that reports an error may still have reached the disk; Put answers from what is stored.
func TestCommitErrorIsResolved(t *testing.T) {
	t.Parallel()
	errSync := errors.New("injected: fdatasync failed")
	cases := map[string]struct {
		commit  func(*bbolt.Tx) error
		stored  bool
		wantErr bool
	}{
		"written then failed": {
			commit: func(tx *bbolt.Tx) error {
				if err := tx.Commit(); err != nil {
					return err
				}
				return errSync
			},
			stored: true,
		},
		"failed unwritten": {
			commit: func(tx *bbolt.Tx) error {
				_ = tx.Rollback()
				return errSync
			},
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			s := open(t, dbPath(t))
			if _, err := s.Put(ctx, envDoc("staging", 1)); err != nil {
				t.Fatalf("Put: %v", err)
			}
			bolt.SetCommit(s, tc.commit)
			d := envDoc("staging", 2)
			d.Rev = 1
			rev, err := s.Put(ctx, d)
			if tc.wantErr {
				if err == nil || errors.Is(err, authority.ErrConflict) || !errors.Is(err, errSync) {
					t.Fatalf("Put = %d, %v; want the commit error, not a conflict", rev, err)
				}
			} else if err != nil || rev != 2 {
				t.Fatalf("Put = %d, %v; want 2, nil", rev, err)
			}
			got, err := s.Get(ctx, authority.EnvKey("staging"))
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if wantRev := map[bool]int64{true: 2, false: 1}[tc.stored]; got.Rev != wantRev {
				t.Fatalf("stored revision = %d, want %d", got.Rev, wantRev)
			}
		})
	}
}

// --- concurrency ------------------------------------------------------------------------------------

const counterKey = "env#counter"

// increment adds one to the counter document by compare-and-set, retrying on conflict, and returns
// the value it wrote and how many conflicts it met.
func increment(ctx context.Context, s authority.Store) (value int64, conflicts int, err error) {
	for {
		d, err := s.Get(ctx, counterKey)
		if errors.Is(err, authority.ErrNotFound) {
			d = &authority.Doc{Key: counterKey, Env: &authority.Env{Name: "counter"}}
		} else if err != nil {
			return 0, conflicts, err
		}
		d.Env.Desired++
		_, err = s.Put(ctx, d)
		if err == nil {
			return d.Env.Desired, conflicts, nil
		}
		if !errors.Is(err, authority.ErrConflict) {
			return 0, conflicts, err
		}
		conflicts++
	}
}

// checkCounter verifies that the written values are exactly 1..n, each once, and that the stored
// counter and its revision are n.
func checkCounter(t *testing.T, s *bolt.Store, values []int64, n int) {
	t.Helper()
	slices.Sort(values)
	for i, v := range values {
		if v != int64(i+1) {
			t.Fatalf("written values are not 1..%d each once: position %d holds %d (%d values)", n, i, v, len(values))
		}
	}
	if len(values) != n {
		t.Fatalf("%d increments succeeded, want %d", len(values), n)
	}
	d, err := s.Get(context.Background(), counterKey)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if d.Env.Desired != int64(n) || d.Rev != int64(n) {
		t.Fatalf("stored counter = %d at revision %d, want %d at %d", d.Env.Desired, d.Rev, n, n)
	}
}

func TestConcurrentIncrements(t *testing.T) {
	t.Parallel()
	const goroutines, each = 32, 10
	for _, stores := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d store(s) on one file", stores), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			path := dbPath(t)
			ss := make([]*bolt.Store, stores)
			for i := range ss {
				ss[i] = open(t, path, bolt.WithOpenTimeout(time.Minute))
			}
			var (
				mu        sync.Mutex
				values    []int64
				conflicts int
				wg        sync.WaitGroup
				start     = make(chan struct{})
			)
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					<-start
					for range each {
						v, c, err := increment(ctx, ss[g%stores])
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						values, conflicts = append(values, v), conflicts+c
						mu.Unlock()
					}
				})
			}
			began := time.Now()
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("increment: %v", err)
			}
			checkCounter(t, ss[0], values, goroutines*each)
			t.Logf("%d increments by %d goroutines on %d store(s) in %s (%d conflicts)", len(values), goroutines, stores, time.Since(began).Round(time.Millisecond), conflicts)
		})
	}
}

// Child-process mode of TestTwoProcessesIncrement.
const (
	helperEnv       = "LATESTWINS_BOLT_TEST_HELPER"
	helperCountEnv  = "LATESTWINS_BOLT_TEST_COUNT"
	helperResultTag = "result "
)

type helperResult struct {
	Values    []int64 `json:"values"`
	Conflicts int     `json:"conflicts"`
}

// TestHelperProcess is not a test: TestTwoProcessesIncrement runs the test binary as a child in this
// mode. The child opens the file, says "ready", waits for a line on stdin, does its increments and
// prints the values it wrote.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		return
	}
	n, err := strconv.Atoi(os.Getenv(helperCountEnv))
	if err != nil {
		t.Fatalf("%s: %v", helperCountEnv, err)
	}
	ctx := t.Context()
	s, err := bolt.Open(path, bolt.WithOpenTimeout(time.Minute))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatalf("waiting for the start signal: %v", err)
	}
	var res helperResult
	for range n {
		v, c, err := increment(ctx, s)
		if err != nil {
			t.Fatalf("increment: %v", err)
		}
		res.Values, res.Conflicts = append(res.Values, v), res.Conflicts+c
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println(helperResultTag + string(b))
}

type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

func startChild(t *testing.T, ctx context.Context, path string, n int) *child {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+path, helperCountEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	c.out.Buffer(nil, 1<<20)
	if !c.out.Scan() || c.out.Text() != "ready" {
		t.Fatalf("child did not get ready: %q %v", c.out.Text(), c.out.Err())
	}
	return c
}

func (c *child) result(t *testing.T) helperResult {
	t.Helper()
	for c.out.Scan() {
		if line, ok := strings.CutPrefix(c.out.Text(), helperResultTag); ok {
			var r helperResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("child result %q: %v", line, err)
			}
			return r
		}
	}
	t.Fatalf("child ended without a result: %v", c.out.Err())
	return helperResult{}
}

// Two processes increment one counter in one file at the same time: every increment lands exactly
// once, and the processes' writes interleave (they really ran concurrently).
func TestTwoProcessesIncrement(t *testing.T) {
	t.Parallel()
	const each = 150
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	path := dbPath(t)
	s := open(t, path)
	children := []*child{startChild(t, ctx, path, each), startChild(t, ctx, path, each)}
	began := time.Now()
	for _, c := range children {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	owner := map[int64]int{}
	var values []int64
	conflicts := 0
	for i, c := range children {
		r := c.result(t)
		for _, v := range r.Values {
			owner[v] = i
		}
		values, conflicts = append(values, r.Values...), conflicts+r.Conflicts
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
	}
	elapsed := time.Since(began)
	checkCounter(t, s, values, 2*each)
	switches := 0
	for v := int64(2); v <= 2*each; v++ {
		if owner[v] != owner[v-1] {
			switches++
		}
	}
	// A waiting process gets the file when the other releases it (a blocked flock), so the writers
	// alternate often; polling for the lock let one process run long streaks.
	if switches < each/10 {
		t.Fatalf("the processes' writes interleaved only %d times in %d increments: they did not run concurrently, or one starved the other", switches, 2*each)
	}
	t.Logf("%d increments by 2 processes in %s: %d conflicts, %d switches between writers", 2*each, elapsed.Round(time.Millisecond), conflicts, switches)
}

// --- benchmarks -----------------------------------------------------------------------------------

// fullDoc is an environment document at its largest in practice: an outbox of 100 events the store
// has not yet taken as records, and 64 intents waiting likewise.
func fullDoc() *authority.Doc {
	d := envDoc("staging", 300)
	d.Env.Outbox = d.Env.Outbox[:0]
	for i := range 100 {
		d.Env.Outbox = append(d.Env.Outbox, authority.Event{Seq: int64(i + 1), At: t0, Kind: authority.EventDeployed, Scope: "api",
			Generation: int64(i + 1), Sha: fmt.Sprintf("%040x", i), Holder: "run-12345678-1", Token: int64(i),
			Message: "Deployed c0ffee to staging/api (generation 12, run 12345678)"})
	}
	d.Env.EventSeq = int64(len(d.Env.Outbox)) // a document as transitions leave it: its outbox numbered up to the event seq
	for i := range 64 {
		d.Env.Accepts = append(d.Env.Accepts, authority.IntentRecord{ID: fmt.Sprintf("delivery-%08d-aaaa-bbbb-cccc", i), Generation: int64(i + 1), At: t0})
	}
	return d
}

func benchDocs() map[string]*authority.Doc {
	return map[string]*authority.Doc{"small": envDoc("staging", 1), "full": fullDoc()}
}

func BenchmarkGet(b *testing.B) {
	for name, doc := range benchDocs() {
		b.Run(name, func(b *testing.B) {
			ctx := b.Context()
			s := open(b, dbPath(b))
			if _, err := s.Put(ctx, doc); err != nil {
				b.Fatal(err)
			}
			enc, _ := json.Marshal(doc)
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := s.Get(ctx, doc.Key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPut(b *testing.B) {
	for name, doc := range benchDocs() {
		b.Run(name, func(b *testing.B) {
			ctx := b.Context()
			s := open(b, dbPath(b))
			d := *doc // a fresh file each run: start from revision 0
			enc, _ := json.Marshal(&d)
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				rev, err := s.Put(ctx, &d)
				if err != nil {
					b.Fatal(err)
				}
				d.Rev = rev
			}
		})
	}
}

// TestMove moves an environment from one bolt file to another: a backup, or a move of hosts.
func TestMove(t *testing.T) {
	storetest.RunMove(t, func(t *testing.T) authority.Store { return open(t, dbPath(t)) }, func(t *testing.T) authority.Store { return open(t, dbPath(t)) })
}

func TestConformanceSplit(t *testing.T) {
	storetest.RunSplit(t, func(t *testing.T) authority.Store { return open(t, dbPath(t), bolt.WithOpenTimeout(time.Minute)) })
}
