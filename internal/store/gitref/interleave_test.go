package gitref

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// beforePush is a RoundTripper that runs hook once, right before it forwards the first request of
// a push (the receive-pack advertisement, GET .../info/refs?service=git-receive-pack): what another
// writer does between what a write was computed from and its push.
type beforePush struct {
	next http.RoundTripper
	once sync.Once
	hook func()
}

func (b *beforePush) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") && r.URL.Query().Get("service") == "git-receive-pack" {
		b.once.Do(b.hook)
	}
	return b.next.RoundTrip(r)
}

// TestRefMovedBeforeThePushIsAConflict: a write computed from the document as this Store read it,
// whose ref another writer moved before the push began, is refused by the server's old-id check
// and answered as a conflict: the other writer's document stays. (A push that named the id the
// push's own advertisement shows, rather than the one the write was computed from, would
// overwrite it.)
func TestRefMovedBeforeThePushIsAConflict(t *testing.T) {
	srv := newGitServer(t)
	url := srv.repo(t)
	ctx := context.Background()
	plain, err := NewHTTPTransport(url, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	other := New(plain)
	mustPut(t, other, envDoc("prod", 0, 1, false))
	hooked := &beforePush{next: srv.Client().Transport, hook: func() {
		d, err := other.Get(ctx, authority.EnvKey("prod"))
		if err != nil {
			t.Error(err)
			return
		}
		d.Env.Desired = 7
		if _, err := other.Put(ctx, d); err != nil {
			t.Error(err)
		}
	}}
	tr, err := NewHTTPTransport(url, "", &http.Client{Transport: hooked})
	if err != nil {
		t.Fatal(err)
	}
	s := New(tr)
	read, err := s.Get(ctx, authority.EnvKey("prod"))
	if err != nil {
		t.Fatal(err)
	}
	read.Env.Desired = 2
	if _, err := s.Put(ctx, read); !errors.Is(err, authority.ErrConflict) {
		t.Fatalf("a write whose ref moved before its push: %v; want a conflict", err)
	}
	d, err := New(plain).Get(ctx, authority.EnvKey("prod"))
	if err != nil {
		t.Fatal(err)
	}
	if d.Rev != 2 || d.Env.Desired != 7 {
		t.Fatalf("stored %d at revision %d; want the other writer's 7 at revision 2", d.Env.Desired, d.Rev)
	}
}
