package gitref

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/latestwins/latestwins/internal/authority"
)

// hooked runs before ahead of the first push it is given, as another process's write landing
// between this one's read and its push.
type hooked struct {
	Transport
	once   sync.Once
	before func()
}

func (h *hooked) Push(ctx context.Context, updates []Update, objects []plumbing.EncodedObject) error {
	h.once.Do(h.before)
	return h.Transport.Push(ctx, updates, objects)
}

// storeOn is a new Store (as a new process would have) on the bare repository at path.
func storeOn(t *testing.T, path string) *Store {
	t.Helper()
	tr, err := NewFileTransport(path)
	if err != nil {
		t.Fatal(err)
	}
	return New(tr)
}

// chainLength counts the commits reachable from ref, with git itself.
func chainLength(t *testing.T, path string, ref plumbing.ReferenceName) int {
	t.Helper()
	n, err := strconv.Atoi(git(t, "-C", path, "rev-list", "--count", ref.String()))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func eventRecord(env string, seq int64, expires time.Time) authority.Record {
	ev := authority.Event{Seq: seq, Kind: authority.EventAccepted, Message: "m"}
	return authority.Record{Key: authority.EventKey(env, seq), ExpiresAt: expires, Event: &ev}
}

func keysOf(recs []authority.Record) map[string]bool {
	out := map[string]bool{}
	for _, r := range recs {
		out[r.Key] = true
	}
	return out
}

// TestHistoryStaysBounded: however many writes a document and a records ref take, the commits
// reachable from each stay within the bound, and what they hold reads back whole, in a new process
// and in one that read each commit before the next (its fetches bring only what is new, across
// the roots).
func TestHistoryStaysBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := fileStore(t)
	s.compactEvery = 4
	reader := storeOn(t, path)
	key := authority.EnvKey("prod")
	var keys []string
	for i := range 13 {
		mustPut(t, s, envDoc("prod", int64(i), int64(i+1), i%2 == 0))
		r := eventRecord("prod", int64(i+1), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
		if err := s.PutRecords(ctx, []authority.Record{r}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, r.Key)
		if got, err := reader.GetRecords(ctx, keys); err != nil || len(got) != i+1 {
			t.Fatalf("GetRecords after write %d = %d records, %v; want %d", i+1, len(got), err, i+1)
		}
		if d, err := reader.Get(ctx, key); err != nil || d.Rev != int64(i+1) {
			t.Fatalf("Get after write %d = %+v, %v", i+1, d, err)
		}
	}
	doc, _ := docRef(key)
	rec, _ := recordsRef("prod")
	for _, ref := range []plumbing.ReferenceName{doc, rec} {
		if n := chainLength(t, path, ref); n > 4 {
			t.Errorf("%s reaches %d commits after 13 writes, want at most 4", ref, n)
		}
	}
	fresh := storeOn(t, path)
	if d, err := fresh.Get(ctx, key); err != nil || d.Rev != 13 || d.Env.Desired != 13 {
		t.Fatalf("Get after compactions = %+v, %v; want revision 13", d, err)
	}
	if p, err := fresh.Pending(ctx); err != nil || len(p) != 1 {
		t.Fatalf("Pending = %v, %v; want [prod] (revision 13 is pending)", p, err)
	}
	if got, err := fresh.GetRecords(ctx, keys); err != nil || len(got) != 13 {
		t.Fatalf("GetRecords after compactions = %d records, %v; want 13", len(got), err)
	}
	if out, err := exec("git", "-C", path, "fsck", "--connectivity-only", "--no-dangling"); err != nil {
		t.Fatalf("git fsck: %v\n%s", err, out)
	}
}

// TestLostAnswersAcrossCompaction: a push whose answer is lost is settled by the writes the stored
// commit names, also when a compaction cut the chain between the tip and that push's commit:
// success iff its own commit is named at its revision, a conflict iff another is, and an outcome
// unknown (neither) when the writes kept no longer reach back to it.
func TestLostAnswersAcrossCompaction(t *testing.T) {
	t.Parallel()
	srv := newGitServer(t)
	ctx := context.Background()
	key := authority.EnvKey("prod")
	ref, _ := docRef(key)
	// writeOn has other write n more revisions on top of what it reads.
	writeOn := func(t *testing.T, other *Store, n int) {
		for range n {
			d, err := other.Get(ctx, key)
			if err != nil {
				t.Error(err)
				return
			}
			d.Env.Desired += 10
			if _, err := other.Put(ctx, d); err != nil {
				t.Error(err)
				return
			}
		}
	}
	// rooted checks that the ref's tip is a root: the chain really was cut.
	rooted := func(t *testing.T, url string) {
		t.Helper()
		path := srv.root + strings.TrimPrefix(url, srv.URL)
		if n := chainLength(t, path, ref); n != 1 {
			t.Fatalf("the tip reaches %d commits; the test needs a compacted root", n)
		}
	}

	t.Run("applied, then compacted", func(t *testing.T) {
		t.Parallel()
		url := srv.repo(t)
		other := srv.storeAt(t, url)
		other.compactEvery = 2
		l := &losing{lose: func(n int) bool { return n == 3 }, send: true}
		l.after = func() { writeOn(t, other, 1) } // revision 4: a root, past this write's 3
		s := losingStore(t, srv, url, l)
		mustPut(t, s, envDoc("prod", 0, 1, false))
		mustPut(t, s, envDoc("prod", 1, 2, false))
		if rev, err := s.Put(ctx, envDoc("prod", 2, 3, false)); err != nil || rev != 3 {
			t.Fatalf("Put applied, its answer lost and the chain compacted before it was settled = %d, %v; want 3, nil", rev, err)
		}
		rooted(t, url)
		if d, err := srv.storeAt(t, url).Get(ctx, key); err != nil || d.Rev != 4 || d.Env.Desired != 13 {
			t.Fatalf("Get = %+v, %v; want revision 4 written on this write's 3", d, err)
		}
	})
	t.Run("lost to another write, then compacted", func(t *testing.T) {
		t.Parallel()
		url := srv.repo(t)
		other := srv.storeAt(t, url)
		other.compactEvery = 2
		l := &losing{lose: func(n int) bool { return n == 3 }, send: true}
		s := losingStore(t, srv, url, l)
		mustPut(t, s, envDoc("prod", 0, 1, false))
		mustPut(t, s, envDoc("prod", 1, 2, false))
		writeOn(t, other, 3) // revision 3 is another's, 5 a root that names it
		rooted(t, url)
		_, err := s.Put(ctx, envDoc("prod", 2, 99, false))
		if !errors.Is(err, authority.ErrConflict) {
			t.Fatalf("Put refused, its answer lost, after another write and a compaction = %v, want ErrConflict", err)
		}
		if d, err := srv.storeAt(t, url).Get(ctx, key); err != nil || d.Rev != 5 || d.Env.Desired != 32 {
			t.Fatalf("Get = %+v, %v; want the other's revision 5", d, err)
		}
	})
	t.Run("applied under more writes than a commit names", func(t *testing.T) {
		t.Parallel()
		url := srv.repo(t)
		other := srv.storeAt(t, url)
		other.keep = 1 // each of its commits names only the write before it: the chain is walked
		l := &losing{lose: func(n int) bool { return n == 2 }, send: true}
		l.after = func() { writeOn(t, other, 2) }
		s := losingStore(t, srv, url, l)
		mustPut(t, s, envDoc("prod", 0, 1, false))
		if rev, err := s.Put(ctx, envDoc("prod", 1, 2, false)); err != nil || rev != 2 {
			t.Fatalf("Put applied under two writes that name only their parents = %d, %v; want 2, nil", rev, err)
		}
	})
	t.Run("compacted past the write", func(t *testing.T) {
		t.Parallel()
		url := srv.repo(t)
		other := srv.storeAt(t, url)
		other.compactEvery, other.keep = 2, 1
		l := &losing{lose: func(n int) bool { return n == 2 }, send: true}
		l.after = func() { writeOn(t, other, 3) } // revisions 3, 4 and 5 (a root naming only 4)
		s := losingStore(t, srv, url, l)
		mustPut(t, s, envDoc("prod", 0, 1, false))
		_, err := s.Put(ctx, envDoc("prod", 1, 2, false))
		if err == nil || errors.Is(err, authority.ErrConflict) || !errors.Is(err, errCompacted) {
			t.Fatalf("Put whose commit is past what the compacted root names = %v; want an unknown outcome (neither success nor conflict)", err)
		}
		rooted(t, url)
	})
}

// TestCompactionRacesAWriter: a compacting write and a plain one computed from the same revision
// race; the server's compare-and-swap refuses the second to push, whichever it is, and the
// first's write is the one stored, whole.
func TestCompactionRacesAWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := authority.EnvKey("prod")
	for _, first := range []string{"plain", "compacting"} {
		t.Run(first+" first", func(t *testing.T) {
			t.Parallel()
			seed, path := fileStore(t)
			mustPut(t, seed, envDoc("prod", 0, 1, false))
			mustPut(t, seed, envDoc("prod", 1, 2, false))
			h := &hooked{}
			h.Transport, _ = NewFileTransport(path)
			late, early := New(h), storeOn(t, path)
			compacting := late
			if first == "compacting" {
				compacting = early
			}
			compacting.compactEvery = 2 // revision 3 is a root for it; for the other, on 2
			for _, s := range []*Store{late, early} {
				if _, err := s.Get(ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			h.before = func() { mustPut(t, early, envDoc("prod", 2, 300, false)) }
			_, err := late.Put(ctx, envDoc("prod", 2, 400, false))
			if !errors.Is(err, authority.ErrConflict) {
				t.Fatalf("the second push = %v, want ErrConflict", err)
			}
			ref, _ := docRef(key)
			want := 3
			if first == "compacting" {
				want = 1
			}
			if n := chainLength(t, path, ref); n != want {
				t.Fatalf("the ref reaches %d commits, want %d (the first write's)", n, want)
			}
			d, err := storeOn(t, path).Get(ctx, key)
			if err != nil || d.Rev != 3 || d.Env.Desired != 300 {
				t.Fatalf("Get = %+v, %v; want the first write's revision 3", d, err)
			}
			// The loser reads again and writes on the winner's commit.
			d.Env.Desired = 400
			if rev := mustPut(t, late, d); rev != 4 {
				t.Fatalf("the loser's write again = revision %d, want 4", rev)
			}
		})
	}
}

// TestCompactionKeepsEveryIntent: racers, each a process of its own (Store and Authority), accept
// intents into one environment while its document is compacted every second write: every intent
// gets its own generation and is remembered, none lost.
func TestCompactionKeepsEveryIntent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, path := fileStore(t)
	const racers, each = 3, 3
	var wg sync.WaitGroup
	gens := make([][]int64, racers)
	for r := range racers {
		s := storeOn(t, path)
		s.compactEvery = 2
		a := authority.New(s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := a.Accept(ctx, authority.Intent{ID: fmt.Sprintf("delivery-%d-%d", r, i), Environment: "prod", Scopes: []string{"api"},
					Sha: fmt.Sprintf("%040x", r*each+i+1), Ref: "refs/heads/main"}, false)
				if err != nil {
					t.Errorf("racer %d accept %d: %v", r, i, err)
					return
				}
				gens[r] = append(gens[r], res.Generation)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	seen := map[int64]bool{}
	for _, g := range gens {
		for _, gen := range g {
			if seen[gen] {
				t.Fatalf("generation %d given twice: %v", gen, gens)
			}
			seen[gen] = true
		}
	}
	a := authority.New(storeOn(t, path))
	for r := range racers {
		for i := range each {
			res, err := a.Accept(ctx, authority.Intent{ID: fmt.Sprintf("delivery-%d-%d", r, i), Environment: "prod", Scopes: []string{"api"},
				Sha: fmt.Sprintf("%040x", r*each+i+1), Ref: "refs/heads/main"}, false)
			if err != nil || res.Generation != gens[r][i] {
				t.Fatalf("redelivery of racer %d's intent %d = generation %d, %v; want %d", r, i, res.Generation, err, gens[r][i])
			}
		}
	}
	d, err := storeOn(t, path).Get(ctx, authority.EnvKey("prod"))
	if err != nil || d.Env.Desired != racers*each {
		t.Fatalf("desired = %+v, %v; want %d", d, err, racers*each)
	}
}

// reachable lists every object reachable from a ref of the repository at path.
func reachable(t *testing.T, path string) string {
	t.Helper()
	return git(t, "-C", path, "rev-list", "--objects", "--all")
}

// TestDeleteExpired: the records past their expiry leave the records refs (and the objects any
// ref reaches), those at or before it stay, in every environment, a long name's too; a second
// call finds nothing to do and pushes nothing.
func TestDeleteExpired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := fileStore(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	long := strings.Repeat("Long/", 25) + "env" // its records ref is named by a hash
	var recs []authority.Record
	for _, env := range []string{"prod", "staging", long} {
		recs = append(recs, eventRecord(env, 1, t0.Add(-time.Hour)), eventRecord(env, 2, t0.Add(-time.Nanosecond)),
			eventRecord(env, 3, t0), eventRecord(env, 4, t0.Add(time.Hour)))
	}
	recs = append(recs, authority.Record{Key: authority.IntentKey("prod", "old"), ExpiresAt: t0.Add(-24 * time.Hour),
		Intent: &authority.IntentRecord{ID: "old", Generation: 1, At: t0.Add(-48 * time.Hour)}})
	if err := s.PutRecords(ctx, recs); err != nil {
		t.Fatal(err)
	}
	expiredBlob := map[string]string{}
	for _, r := range recs {
		if r.ExpiresAt.Before(t0) {
			expiredBlob[r.Key] = blobHash(t, s, r.Key)
		}
	}
	before := reachable(t, path)
	for k, h := range expiredBlob {
		if !strings.Contains(before, h) {
			t.Fatalf("record %s (%s) is not in the repository before expiry", k, h)
		}
	}

	n, err := storeOn(t, path).DeleteExpired(ctx, t0)
	if err != nil || n != 7 {
		t.Fatalf("DeleteExpired = %d, %v; want 7 (two events of each environment and an intent)", n, err)
	}
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	got, err := storeOn(t, path).GetRecords(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	left := keysOf(got)
	for _, r := range recs {
		if want := !r.ExpiresAt.Before(t0); left[r.Key] != want {
			t.Errorf("record %s expiring at %s: stored %v after expiry at %s, want %v", r.Key, r.ExpiresAt, left[r.Key], t0, want)
		}
	}
	after := reachable(t, path)
	for k, h := range expiredBlob {
		if strings.Contains(after, h) {
			t.Errorf("expired record %s is still reachable (%s) from a ref's history", k, h)
		}
	}
	tips := git(t, "-C", path, "for-each-ref", Namespace)
	if n, err := storeOn(t, path).DeleteExpired(ctx, t0); err != nil || n != 0 {
		t.Fatalf("DeleteExpired again = %d, %v; want 0", n, err)
	}
	if again := git(t, "-C", path, "for-each-ref", Namespace); again != tips {
		t.Fatalf("a DeleteExpired with nothing to do moved refs:\n%s\nthen\n%s", tips, again)
	}
}

// blobHash is the hash of the blob that holds record key in s's records refs.
func blobHash(t *testing.T, s *Store, key string) string {
	t.Helper()
	g := s.groups[recordGroup(key)]
	b, ok := g.leaves[g.root[bucket(escape(key))]][escape(key)]
	if !ok {
		t.Fatalf("record %s is not stored", key)
	}
	return b.String()
}

// TestExpiryRacesARecordsWriter: another process stores a record between the expiry's read of the
// records ref and its push; the server refuses the push, and the expiry reads the ref again and
// deletes on what is there: the new record stays, the expired one goes.
func TestExpiryRacesARecordsWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w, path := fileStore(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	old, kept, late := eventRecord("prod", 1, t0.Add(-time.Hour)), eventRecord("prod", 2, t0.Add(time.Hour)), eventRecord("prod", 3, t0.Add(time.Hour))
	if err := w.PutRecords(ctx, []authority.Record{old, kept}); err != nil {
		t.Fatal(err)
	}
	h := &hooked{}
	h.Transport, _ = NewFileTransport(path)
	h.before = func() {
		if err := w.PutRecords(ctx, []authority.Record{late}); err != nil {
			t.Error(err)
		}
	}
	if n, err := New(h).DeleteExpired(ctx, t0); err != nil || n != 1 {
		t.Fatalf("DeleteExpired racing a records write = %d, %v; want 1, nil", n, err)
	}
	got, err := storeOn(t, path).GetRecords(ctx, []string{old.Key, kept.Key, late.Key})
	if err != nil {
		t.Fatal(err)
	}
	if k := keysOf(got); k[old.Key] || !k[kept.Key] || !k[late.Key] {
		t.Fatalf("records after the race: %v; want %s and %s, not %s", k, kept.Key, late.Key, old.Key)
	}
}

// TestSweepDeletesExpiredRecords: the recovery sweep reaches the git store's expiry, as bolt's.
func TestSweepDeletesExpiredRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, path := fileStore(t)
	t0 := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	if err := s.PutRecords(ctx, []authority.Record{eventRecord("prod", 1, t0.Add(-time.Minute)), eventRecord("prod", 2, t0.Add(time.Minute))}); err != nil {
		t.Fatal(err)
	}
	a := authority.New(storeOn(t, path), authority.WithClock(fixedNow{t0}))
	rep, err := a.Sweep(ctx, time.Minute, 3, func(context.Context, authority.StalledWork) error { return nil })
	if err != nil || rep.Expired != 1 || len(rep.Failed) != 0 {
		t.Fatalf("Sweep = %+v, %v; want 1 record expired", rep, err)
	}
	got, err := storeOn(t, path).GetRecords(ctx, []string{authority.EventKey("prod", 1), authority.EventKey("prod", 2)})
	if err != nil || len(got) != 1 || got[0].Key != authority.EventKey("prod", 2) {
		t.Fatalf("records after the sweep = %v, %v; want only event 2", got, err)
	}
}

type fixedNow struct{ t time.Time }

func (c fixedNow) Now() time.Time { return c.t }

// beforePack runs hook once, ahead of the first pack request: after the refs were read, before the
// commit they showed is asked for.
type beforePack struct {
	next http.RoundTripper
	once sync.Once
	hook func()
}

func (b *beforePack) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/git-upload-pack") {
		b.once.Do(b.hook)
	}
	return b.next.RoundTrip(req)
}

// TestReadAcrossACompaction: over HTTP a read sees the refs in one request and asks for the
// commit in the next; a compacting write in between leaves that commit unreachable, and the read
// reads the refs again instead of failing.
func TestReadAcrossACompaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := newGitServer(t)
	url := srv.repo(t)
	w := srv.storeAt(t, url)
	w.compactEvery = 1 // every write is a root
	mustPut(t, w, envDoc("prod", 0, 1, false))
	mustPut(t, w, envDoc("prod", 1, 2, false))
	b := &beforePack{next: srv.Client().Transport, hook: func() { mustPut(t, w, envDoc("prod", 2, 3, false)) }}
	tr, err := NewHTTPTransport(url, "", &http.Client{Transport: b})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(tr).Get(ctx, authority.EnvKey("prod"))
	if err != nil || d.Rev != 3 {
		t.Fatalf("Get across a compaction = %+v, %v; want revision 3", d, err)
	}
}
