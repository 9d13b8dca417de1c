package authority

import "testing"

// TestChangedClosesAtTheNextWrite: a waiter's channel closes at this process's next write of its
// environment, not at a write of another environment nor at a refused write, and a channel taken
// after the write waits for the one after.
func TestChangedClosesAtTheNextWrite(t *testing.T) {
	ctx := t.Context()
	s := newMapStore()
	a := newTestAuthority(s)
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
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
