package bolt_test

import (
	"errors"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// TestCounterSurvivesReopening: a counter's value is in the file: a Store opened on it later,
// read-only or not, goes on from it, and a read-only one refuses to add.
func TestCounterSurvivesReopening(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	key := authority.CounterKey("staging")
	s := open(t, path)
	for want := int64(1); want <= 3; want++ {
		if n, err := s.Add(ctx, key, 1); err != nil || n != want {
			t.Fatalf("Add = %d, %v; want %d", n, err, want)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	ro := open(t, path, bolt.WithReadOnly())
	if n, err := ro.Add(ctx, key, 0); err != nil || n != 3 {
		t.Fatalf("read-only read after reopening = %d, %v; want 3", n, err)
	}
	if n, err := ro.Add(ctx, key, 1); !errors.Is(err, bolt.ErrReadOnly) {
		t.Fatalf("read-only Add = %d, %v; want ErrReadOnly", n, err)
	}
	again := open(t, path)
	if n, err := again.Add(ctx, key, 1); err != nil || n != 4 {
		t.Fatalf("Add after reopening = %d, %v; want 4", n, err)
	}
	if n, err := again.Add(ctx, authority.CounterKey("prod"), 0); err != nil || n != 0 {
		t.Fatalf("another counter after reopening = %d, %v; want 0", n, err)
	}
}

// TestCounterAcrossStores: Stores opened on one file apart, as separate processes open it, add
// to one counter at once; the file lock makes each addition atomic.
func TestCounterAcrossStores(t *testing.T) {
	t.Parallel()
	path := dbPath(t)
	clients := make([]authority.Store, 8)
	for i := range clients {
		clients[i] = open(t, path, bolt.WithOpenTimeout(time.Minute))
	}
	res := storetest.RaceCounter(t, clients, authority.CounterKey("prod"), 20)
	if res.Final != 160 || res.Skipped != 0 {
		t.Fatalf("after 160 additions the counter reads %d, %d values skipped; want 160, none", res.Final, res.Skipped)
	}
}

// TestCounterOfAFileWithoutCounters: a file of this schema that holds no counter yet (written
// before counters existed) reads 0 and takes the first addition.
func TestCounterOfAFileWithoutCounters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := dbPath(t)
	s := open(t, path)
	if _, err := s.Put(ctx, envDoc("staging", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		if tx.Bucket([]byte("counters")) == nil {
			return nil
		}
		return tx.DeleteBucket([]byte("counters"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if n, err := s.Add(ctx, authority.CounterKey("staging"), 0); err != nil || n != 0 {
		t.Fatalf("read = %d, %v; want 0", n, err)
	}
	if n, err := s.Add(ctx, authority.CounterKey("staging"), 2); err != nil || n != 2 {
		t.Fatalf("Add = %d, %v; want 2", n, err)
	}
	if _, err := s.Get(ctx, authority.EnvKey("staging")); err != nil {
		t.Fatalf("the environment after the first addition: %v", err)
	}
}
