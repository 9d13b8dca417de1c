package gitref

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/latestwins/latestwins/internal/authority"
)

func envDoc(name string, rev int64, desired int64, pending bool) *authority.Doc {
	return &authority.Doc{Key: authority.EnvKey(name), Rev: rev, Pending: pending,
		Env: &authority.Env{Name: name, Desired: desired, Observed: desired}}
}

func mustPut(t *testing.T, s *Store, d *authority.Doc) int64 {
	t.Helper()
	rev, err := s.Put(context.Background(), d)
	if err != nil {
		t.Fatalf("Put(%s at %d): %v", d.Key, d.Rev, err)
	}
	return rev
}

// refAt reads where ref points in the bare repository at path, with git itself.
func refAt(t *testing.T, path string, ref plumbing.ReferenceName) string {
	t.Helper()
	out, err := exec("git", "-C", path, "rev-parse", "--verify", "-q", ref.String())
	if err != nil {
		return ""
	}
	return out
}

// TestStaleWriteIsRefused: two processes read revision 1, one writes revision 2, and the other's
// write at revision 1 must be refused, with the winner's commit left in place. A push that does
// not name the old id it was computed from (a forced push) would overwrite it.
func TestStaleWriteIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, path := fileStore(t)
	tr, err := NewFileTransport(path)
	if err != nil {
		t.Fatal(err)
	}
	b := New(tr)
	mustPut(t, a, envDoc("prod", 0, 1, false))
	if _, err := b.Get(ctx, authority.EnvKey("prod")); err != nil {
		t.Fatal(err)
	}
	mustPut(t, a, envDoc("prod", 1, 2, true))
	ref, _ := docRef(authority.EnvKey("prod"))
	won := refAt(t, path, ref)

	_, err = b.Put(ctx, envDoc("prod", 1, 3, false))
	if !errors.Is(err, authority.ErrConflict) {
		t.Fatalf("stale Put = %v, want ErrConflict", err)
	}
	if got := refAt(t, path, ref); got != won {
		t.Fatalf("the ref moved from the winner's %s to %s", won, got)
	}
	d, err := b.Get(ctx, authority.EnvKey("prod"))
	if err != nil || d.Rev != 2 || d.Env.Desired != 2 {
		t.Fatalf("Get after the refused write = %+v, %v; want the winner's revision 2", d, err)
	}
	if p, err := b.Pending(ctx); err != nil || len(p) != 1 || p[0] != "prod" {
		t.Fatalf("Pending = %v, %v; want the winner's [prod]", p, err)
	}
}

// TestServerChecksTheOldID: the compare-and-swap is the server's: a push naming an old id the ref
// no longer has is refused by receive-pack itself, whatever the client believed.
func TestServerChecksTheOldID(t *testing.T) {
	t.Parallel()
	for name, tr := range transports(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := New(tr.tr)
			mustPut(t, s, envDoc("prod", 0, 1, false))
			ref, _ := docRef(authority.EnvKey("prod"))
			first := s.seen(authority.EnvKey("prod")).hash
			mustPut(t, s, envDoc("prod", 1, 2, false))
			second := s.seen(authority.EnvKey("prod")).hash
			commit, objs, err := docObjects([]byte(`{}`), first, "stale\n", s.now())
			if err != nil {
				t.Fatal(err)
			}
			err = tr.tr.Push(ctx, []Update{{Name: ref, Old: first, New: commit}}, objs)
			var refused *RefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("push on a stale old id = %v, want a *RefusedError", err)
			}
			if got := refAt(t, tr.path, ref); got != second.String() {
				t.Fatalf("ref is %s, want %s", got, second)
			}
		})
	}
}

type testTransport struct {
	tr   Transport
	path string // the bare repository on disk
}

func transports(t *testing.T) map[string]testTransport {
	t.Helper()
	_, path := fileStore(t)
	ft, err := NewFileTransport(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := newGitServer(t)
	url := srv.repo(t)
	ht, err := NewHTTPTransport(url, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]testTransport{"file": {ft, path}, "http": {ht, srv.root + strings.TrimPrefix(url, srv.URL)}}
}

// losing is an HTTP transport that loses the answers of the pushes lose picks: the request reaches
// the server, which applies it, and the client sees a broken connection. after runs between the
// server's answer and the loss.
type losing struct {
	next  http.RoundTripper
	mu    sync.Mutex
	n     int
	lose  func(n int) bool // n counts receive-pack posts from 1
	send  bool             // lost requests still reach the server
	after func()
}

var errLost = errors.New("connection reset (the answer was lost)")

func (l *losing) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/git-receive-pack") {
		return l.next.RoundTrip(req)
	}
	l.mu.Lock()
	l.n++
	n := l.n
	l.mu.Unlock()
	if !l.lose(n) {
		return l.next.RoundTrip(req)
	}
	if !l.send {
		return nil, errLost
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body) // the server has answered: the push is applied
	resp.Body.Close()
	if l.after != nil {
		l.after()
	}
	return nil, errLost
}

func losingStore(t *testing.T, srv *gitServer, url string, l *losing) *Store {
	t.Helper()
	l.next = srv.Client().Transport
	tr, err := NewHTTPTransport(url, "", &http.Client{Transport: l})
	if err != nil {
		t.Fatal(err)
	}
	return New(tr)
}

// TestLostAnswers: a push whose answer is lost is settled by reading the ref again: success iff the
// write's own commit is stored (also under a newer write), a push again while the ref did not
// move, a conflict if another write won.
func TestLostAnswers(t *testing.T) {
	t.Parallel()
	srv := newGitServer(t)
	ctx := context.Background()
	key := authority.EnvKey("prod")

	t.Run("applied", func(t *testing.T) {
		t.Parallel()
		url := srv.repo(t)
		s := losingStore(t, srv, url, &losing{lose: func(int) bool { return true }, send: true})
		if rev, err := s.Put(ctx, envDoc("prod", 0, 1, true)); err != nil || rev != 1 {
			t.Fatalf("Put with its answer lost = %d, %v; want 1, nil", rev, err)
		}
		if rev, err := s.Put(ctx, envDoc("prod", 1, 2, false)); err != nil || rev != 2 {
			t.Fatalf("second Put with its answer lost = %d, %v; want 2, nil", rev, err)
		}
		other := srv.storeAt(t, url)
		if d, err := other.Get(ctx, key); err != nil || d.Rev != 2 {
			t.Fatalf("Get = %+v, %v; want revision 2", d, err)
		}
	})
	t.Run("not sent", func(t *testing.T) {
		t.Parallel()
		l := &losing{lose: func(n int) bool { return n == 1 }}
		s := losingStore(t, srv, srv.repo(t), l)
		if rev, err := s.Put(ctx, envDoc("prod", 0, 1, false)); err != nil || rev != 1 {
			t.Fatalf("Put whose first push was lost before the server = %d, %v; want 1, nil", rev, err)
		}
		if l.n != 2 {
			t.Fatalf("%d pushes, want 2 (the same commit again)", l.n)
		}
	})
	t.Run("never answered", func(t *testing.T) {
		t.Parallel()
		s := losingStore(t, srv, srv.repo(t), &losing{lose: func(int) bool { return true }})
		_, err := s.Put(ctx, envDoc("prod", 0, 1, false))
		if err == nil || errors.Is(err, authority.ErrConflict) || !strings.Contains(err.Error(), "not written") {
			t.Fatalf("Put never answered = %v, want a not-written error (neither success nor conflict)", err)
		}
	})
	t.Run("applied under a newer write", func(t *testing.T) {
		t.Parallel()
		url := srv.repo(t)
		other := srv.storeAt(t, url)
		l := &losing{lose: func(n int) bool { return n == 2 }, send: true}
		l.after = func() { // another process writes on top before the first reads the ref again
			d, err := other.Get(ctx, key)
			if err != nil {
				t.Error(err)
				return
			}
			d.Env.Desired++
			if _, err := other.Put(ctx, d); err != nil {
				t.Error(err)
			}
		}
		s := losingStore(t, srv, url, l)
		mustPut(t, s, envDoc("prod", 0, 1, false))
		if rev, err := s.Put(ctx, envDoc("prod", 1, 2, false)); err != nil || rev != 2 {
			t.Fatalf("Put applied and overwritten before it was settled = %d, %v; want 2, nil", rev, err)
		}
		if d, err := other.Get(ctx, key); err != nil || d.Rev != 3 {
			t.Fatalf("Get = %+v, %v; want revision 3", d, err)
		}
	})
	t.Run("lost to another write", func(t *testing.T) {
		t.Parallel()
		url := srv.repo(t)
		other := srv.storeAt(t, url)
		l := &losing{lose: func(n int) bool { return n == 2 }}
		l.after = nil
		s := losingStore(t, srv, url, l)
		mustPut(t, s, envDoc("prod", 0, 1, false))
		d, err := other.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, other, d)
		_, err = s.Put(ctx, envDoc("prod", 1, 5, false))
		if !errors.Is(err, authority.ErrConflict) {
			t.Fatalf("Put after another write = %v, want ErrConflict", err)
		}
	})
}

func (g *gitServer) storeAt(t *testing.T, url string) *Store {
	t.Helper()
	tr, err := NewHTTPTransport(url, "", g.Client())
	if err != nil {
		t.Fatal(err)
	}
	return New(tr)
}

// TestRoundTrips holds the Store to its HTTP requests: a read is the ref advertisement, and the
// pack only for a commit it has not seen; a write is the advertisement and the push; records of
// many keys come in one fetch, and what is new since the last one in an incremental one.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	srv := newGitServer(t)
	url := srv.repo(t)
	c := &counting{next: srv.Client().Transport}
	open := func() *Store {
		tr, err := NewHTTPTransport(url, "", &http.Client{Transport: c})
		if err != nil {
			t.Fatal(err)
		}
		return New(tr)
	}
	ctx := context.Background()
	a, b := open(), open()
	step := func(name string, want int64, f func() error) {
		t.Helper()
		c.n.Store(0)
		if err := f(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := c.n.Load(); got != want {
			t.Errorf("%s: %d requests, want %d", name, got, want)
		}
	}
	key := authority.EnvKey("prod")
	step("first put", 2, func() error { _, err := a.Put(ctx, envDoc("prod", 0, 1, true)); return err })
	step("get of a commit written", 1, func() error { _, err := a.Get(ctx, key); return err })
	step("get of a commit not seen", 2, func() error { _, err := b.Get(ctx, key); return err })
	step("get of a commit seen", 1, func() error { _, err := b.Get(ctx, key); return err })
	step("put on what was read", 2, func() error { _, err := b.Put(ctx, envDoc("prod", 1, 2, false)); return err })
	step("pending", 1, func() error { _, err := a.Pending(ctx); return err })

	var recs []authority.Record
	var keys []string
	for i := range 50 {
		ev := authority.Event{Seq: int64(i + 1), Kind: authority.EventAccepted, Message: "m"}
		recs = append(recs, authority.Record{Key: authority.EventKey("prod", ev.Seq), Event: &ev})
		keys = append(keys, recs[i].Key)
	}
	step("put 40 records", 2+1, func() error { return a.PutRecords(ctx, recs[:40]) })
	step("get 50 records, 40 stored", 2, func() error {
		got, err := b.GetRecords(ctx, keys)
		if err == nil && len(got) != 40 {
			err = fmt.Errorf("%d records, want 40", len(got))
		}
		return err
	})
	step("put 10 more, on the records ref it wrote", 2, func() error { return a.PutRecords(ctx, recs[40:]) })
	step("get 50 records, incrementally", 2, func() error {
		got, err := b.GetRecords(ctx, keys)
		if err == nil && len(got) != 50 {
			err = fmt.Errorf("%d records, want 50", len(got))
		}
		return err
	})
	step("get them again", 1, func() error { _, err := b.GetRecords(ctx, keys); return err })
	step("put them again", 0, func() error { return a.PutRecords(ctx, recs) })
	// a writes after b's last read: b's push on what it knew is refused, and it reads the ref and
	// pushes again.
	ev51, ev52 := authority.Event{Seq: 51, Kind: authority.EventAccepted, Message: "m"}, authority.Event{Seq: 52, Kind: authority.EventAccepted, Message: "m"}
	step("put one more", 2, func() error {
		return a.PutRecords(ctx, []authority.Record{{Key: authority.EventKey("prod", 51), Event: &ev51}})
	})
	step("put on a records ref that moved", 2+2+2, func() error {
		return b.PutRecords(ctx, []authority.Record{{Key: authority.EventKey("prod", 52), Event: &ev52}})
	})
	fresh := open()
	all := append(keys, authority.EventKey("prod", 51), authority.EventKey("prod", 52))
	step("a new store reads them all", 2, func() error {
		got, err := fresh.GetRecords(ctx, all)
		if err == nil && len(got) != 52 {
			err = fmt.Errorf("%d records, want 52", len(got))
		}
		return err
	})
}
