package cli

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// TestCorruptStateIsSaidPlainly: an environment edited in the store to observed 50, desired 1 is
// refused by every verb with the store's error code (1), and the message names the document, the
// invariant and what to do, without the chain of operations that read it; a claim prints no
// generation, and nothing is written.
func TestCorruptStateIsSaidPlainly(t *testing.T) {
	h := newHarness(t)
	path := strings.TrimPrefix(h.store, "bolt://")
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a")
	key := []byte(authority.EnvKey("staging"))
	update := func(fn func(*bbolt.Tx) error) {
		t.Helper()
		db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
	}
	var stored []byte
	update(func(tx *bbolt.Tx) error {
		stored = storetest.HandEdit(t, slices.Clone(tx.Bucket([]byte("docs")).Get(key)))
		return tx.Bucket([]byte("docs")).Put(key, stored)
	})
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := `env#staging is corrupt: 0 <= observed <= desired does not hold (observed 50, desired 1); nothing was decided from it: restore the document from a backup, or repair it`
	for _, args := range [][]string{
		{"status", "staging"},
		{"claim", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "b"},
		{"gate", "--environment", "staging", "--generation", "1", "--scopes", "api", "--phase", "deploy"},
		{"policy", "staging", "queue"},
		{"history", "staging"},
	} {
		o := h.must(ExitError, args...)
		if line := "latestwins " + args[0] + ": " + want; !strings.HasPrefix(o.stderr, line) {
			t.Errorf("latestwins %s: stderr %q; want it to start %q", strings.Join(args, " "), o.stderr, line)
		}
		if strings.Contains(o.stderr, "decode") || strings.Contains(o.stdout, "generation") {
			t.Errorf("latestwins %s: stdout %q, stderr %q; want the corruption said once, and no generation handed out", strings.Join(args, " "), o.stdout, o.stderr)
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Error("a verb wrote to the store holding the corrupt environment")
	}
}
