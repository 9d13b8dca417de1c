package authority

import (
	"context"
	"testing"
	"time"
)

// closed reports whether ch is closed, without waiting.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestChangedClosesAtTheNextWrite: a waiter's channel closes at this process's next write of its
// environment, not at a write of another environment nor at a refused write, and a channel taken
// after the write waits for the one after.
func TestChangedClosesAtTheNextWrite(t *testing.T) {
	ctx := t.Context()
	s := newMapStore()
	a := newTestAuthority(s)
	staging := a.Changed("staging")
	if closed(staging) {
		t.Fatal("the channel is closed before any write")
	}
	push := mainPush("d1", testSha(1), "", "api")
	push.Environment = "preview-1"
	if _, err := a.Accept(ctx, *push, false); err != nil {
		t.Fatal(err)
	}
	if closed(staging) {
		t.Fatal("a write of another environment closed staging's channel")
	}
	if _, err := a.Accept(ctx, *mainPush("d2", testSha(2), "", "api"), true); err != nil {
		t.Fatal(err)
	}
	if !closed(staging) {
		t.Fatal("staging's write left its waiters' channel open")
	}
	next := a.Changed("staging")
	if closed(next) {
		t.Fatal("a channel taken after the write is already closed")
	}
	// A refused Gate of a generation nobody claimed writes nothing and wakes nobody.
	if _, err := a.Gate(ctx, GateRequest{Environment: "staging", Generation: 9, Scopes: []string{"api"}, Phase: "deploy", Holder: "h"}); err == nil {
		t.Fatal("a gate of an unknown generation was granted")
	}
	if closed(next) {
		t.Fatal("a write that did not happen closed the channel")
	}
	g, err := a.Gate(ctx, GateRequest{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Phase: "deploy", Holder: "h", LeaseTTL: DefaultLeaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	if !closed(next) {
		t.Fatal("a grant's write left the channel open")
	}
	released := a.Changed("staging")
	if err := a.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if !closed(released) {
		t.Fatal("a release left the waiters' channel open")
	}
}

// TestChangedScopeClosesAtItsScopesWrites: in the per-scope layout a waiter on one scope is woken
// by a write of that scope's document and by a write of the head (which every gate reads), not by
// a write of another scope's document; a waiter on the environment is woken by all of them.
func TestChangedScopeClosesAtItsScopesWrites(t *testing.T) {
	ctx := t.Context()
	a := New(newMapStore(), WithClock(fixedClock{t0}), WithSkew(5*time.Second), WithScopeDocuments())
	res, err := a.Accept(ctx, *mainPush("d1", testSha(1), "", "api", "web"), true)
	if err != nil {
		t.Fatal(err)
	}
	api, web, env := a.ChangedScope("staging", "api"), a.ChangedScope("staging", "web"), a.Changed("staging")
	g, err := a.Gate(ctx, GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "h", LeaseTTL: DefaultLeaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	if !closed(api) || !closed(env) {
		t.Fatalf("a grant on api: api's waiters woken %v, the environment's %v; want both", closed(api), closed(env))
	}
	if closed(web) {
		t.Fatal("a write of api's document woke web's waiters")
	}
	if err := a.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if closed(web) {
		t.Fatal("a release on api woke web's waiters")
	}
	// An accept of one scope takes its generation from the counter and writes no head: web's
	// waiters sleep on.
	if _, err := a.Accept(ctx, *mainPush("d2", testSha(2), "", "api"), false); err != nil {
		t.Fatal(err)
	}
	if closed(web) {
		t.Fatal("an accept on api woke web's waiters")
	}
	// An accept of several scopes goes through the head's log: every scope's waiters are woken.
	if _, err := a.Accept(ctx, *mainPush("d3", testSha(3), "", "api", "db"), false); err != nil {
		t.Fatal(err)
	}
	if !closed(web) {
		t.Fatal("a write of the head left web's waiters asleep")
	}
}

// conflictOnce answers ErrConflict to the first write of key, which it does not make: a race lost
// to another process.
type conflictOnce struct {
	Store
	key  string
	lost bool
}

func (s *conflictOnce) Put(ctx context.Context, d *Doc) (int64, error) {
	if d.Key == s.key && !s.lost {
		s.lost = true
		return 0, ErrConflict
	}
	return s.Store.Put(ctx, d)
}

// TestChangedScopeClosesAtAnEarlierAttemptsWrites: a transition of two scopes whose first attempt
// wrote one and lost the other's race wakes the waiters of both, though its last attempt wrote
// only the second.
func TestChangedScopeClosesAtAnEarlierAttemptsWrites(t *testing.T) {
	ctx := t.Context()
	s := &conflictOnce{Store: newMapStore(), key: ScopeKey("staging", "web"), lost: true}
	a := New(s, WithClock(fixedClock{t0}), WithSkew(5*time.Second), WithScopeDocuments())
	res, err := a.Accept(ctx, *mainPush("d1", testSha(1), "", "api", "web"), true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Gate(ctx, GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"api", "web"}, Phase: "deploy", Holder: "h", LeaseTTL: DefaultLeaseTTL})
	if err != nil {
		t.Fatal(err)
	}
	api := a.ChangedScope("staging", "api")
	s.lost = false // the release's first write of web loses its race, after api's landed
	if err := a.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if !s.lost {
		t.Fatal("the release never wrote web")
	}
	if !closed(api) {
		t.Fatal("api's lease was released by the first attempt, whose write of web lost; api's waiters were left asleep")
	}
	e, err := a.State(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"api", "web"} {
		if l := e.Scopes[name].Lease; l.Holder != "" {
			t.Fatalf("%s still leased to %+v after the release", name, l)
		}
	}
}
