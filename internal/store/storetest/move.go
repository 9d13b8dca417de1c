package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latestwins/latestwins/internal/authority"
)

// RunMove checks Authority.Move from the stores newSource makes to those newTarget makes: the
// state, the whole timeline and the intent ids arrive as they were, lease tokens go on above every
// earlier grant, the source then refuses every transition with where the state went, a repeat
// changes nothing, a live lease or a target that holds the environment is refused before anything
// changes, and a move interrupted at its last write ends in the same state when run again.
func RunMove(t *testing.T, newSource, newTarget func(t *testing.T) authority.Store) {
	t.Helper()
	for _, c := range []struct {
		name string
		run  func(t *testing.T, src, dst authority.Store, split bool)
	}{
		{"CarriesStateHistoryAndIntents", testMoveCarries},
		{"RefusedWhileLeased", testMoveRefusedWhileLeased},
		{"RefusedIntoATargetThatHoldsIt", testMoveRefusedIntoHolder},
		{"InterruptedThenRunAgain", testMoveInterrupted},
		{"RacingPasses", testMoveRacingPasses},
		{"TransitionThatReadTheStateBefore", testMoveAfterARead},
		{"AcceptOfANewScope", testMoveMeetsANewScope},
	} {
		for _, split := range []bool{false, true} {
			name := c.name
			if split {
				name += "PerScope" // the environment in the per-scope layout, here and there
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newSource(t), newTarget(t), split)
			})
		}
	}
}

// movePair is the harnesses of a move's source and target, on one clock.
func movePair(t *testing.T, src, dst authority.Store, split bool) (*harness, *harness) {
	h, th := newHarness(t, src), newHarness(t, dst)
	th.clock = h.clock
	h.split, th.split = split, split
	return h, th
}

const moveEnv = "moving"

// seedMove gives the source an environment with history: two scopes live, api deployed twice (so
// it keeps the previous commit), rolled back and frozen, a push held by the freeze, and web's
// lease granted and released (so its token moved on). It returns the newest token granted.
func seedMove(t *testing.T, h *harness) int64 {
	t.Helper()
	a := h.process()
	h.accept(a, push(moveEnv, "push-1", sha("a", 1), "api", "web"), true)
	h.deploy(a, moveEnv, 1, "run-1", "run-1", "api", "web")
	h.accept(a, push(moveEnv, "push-2", sha("b", 2), "api"), true)
	h.deploy(a, moveEnv, 2, "run-2", "run-2", "api")
	if _, err := a.Rollback(h.ctx, authority.RollbackRequest{Environment: moveEnv, Scope: "api", Actor: "oncall", Reason: "b breaks checkout", Request: "rb-1"}); err != nil {
		t.Fatal(err)
	}
	h.deploy(a, moveEnv, 3, "run-rb", "run-rb", "api")
	h.accept(a, push(moveEnv, "push-4", sha("c", 4), "api"), false)
	h.accept(a, push(moveEnv, "push-5", sha("d", 5), "web"), true)
	g := h.gate(a, moveEnv, 5, "run-5", "web")
	if err := a.Release(h.ctx, g); err != nil {
		t.Fatal(err)
	}
	return g.Tokens["web"]
}

// comparable is e's state without what a move does not carry as state (the outbox and the
// intents waiting there become records; Events is filled by reading).
func comparable(e *authority.Env) *authority.Env {
	c := *e
	c.Outbox, c.Accepts, c.Events, c.Moved, c.Streams = nil, nil, nil, nil, nil
	return &c
}

func testMoveCarries(t *testing.T, src, dst authority.Store, split bool) {
	h, th := movePair(t, src, dst, split)
	maxToken := seedMove(t, h)
	before := h.env(moveEnv)
	mover := h.authority(src)
	res, err := mover.Move(h.ctx, moveEnv, "dynamodb://elsewhere", dst)
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	_, lists := src.(authority.RecordLister)
	if res.Generation != 5 || res.Scopes != 2 || res.Events != len(before.Events) || res.IntentsLeft == lists || res.Already {
		t.Errorf("move result %+v; want generation 5, 2 scopes, %d events, intents left only by a store that cannot list them (%v)", res, len(before.Events), !lists)
	}
	after := th.env(moveEnv)
	if diff := cmp.Diff(comparable(before), comparable(after), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("state in the target (-source +target):\n%s", diff)
	}
	if diff := cmp.Diff(before.Events, after.Events, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("timeline in the target (-source +target):\n%s", diff)
	}
	tgt := th.process()
	if lists {
		// Every intent id is remembered there: a re-delivery changes nothing.
		for id, gen := range map[string]int64{"push-1": 1, "push-2": 2, "push-5": 5} {
			in := push(moveEnv, id, map[string]string{"push-1": sha("a", 1), "push-2": sha("b", 2), "push-5": sha("d", 5)}[id], "api")
			if id == "push-5" {
				in.Scopes = []string{"web"}
			}
			r, err := tgt.Accept(h.ctx, in, false)
			if err != nil || !r.Duplicate || r.Generation != gen {
				t.Errorf("re-delivery of %s in the target: %+v, %v; want generation %d as a duplicate", id, r, err, gen)
			}
		}
	}
	// The freeze moved with the state: the held push waits there; web's next grant fences every
	// earlier one.
	h6 := h.accept(tgt, push(moveEnv, "push-6", sha("e", 6), "web"), true)
	g := th.gate(tgt, moveEnv, h6.Generation, "run-6", "web")
	if g.Tokens["web"] <= maxToken {
		t.Errorf("the target granted web token %d; want above %d, the newest granted before the move", g.Tokens["web"], maxToken)
	}
	if after.Scopes["api"].Freeze == nil {
		t.Errorf("api's freeze did not move: %+v", after.Scopes["api"])
	}

	// The source refuses every transition and read of the state with where it went.
	stale := h.process()
	for what, err := range map[string]error{
		"accept": func() error {
			_, err := stale.Accept(h.ctx, push(moveEnv, "push-7", sha("f", 7), "api"), true)
			return err
		}(),
		"status":  func() error { _, err := stale.Status(h.ctx, moveEnv); return err }(),
		"history": func() error { _, err := stale.History(h.ctx, moveEnv, 0, 10); return err }(),
		"gate": func() error {
			_, err := stale.Gate(h.ctx, authority.GateRequest{Environment: moveEnv, Generation: 4, Scopes: []string{"api"}, Phase: "deploy", Holder: "x", LeaseTTL: testTTL})
			return err
		}(),
	} {
		var moved *authority.MovedError
		if !errors.As(err, &moved) || !errors.Is(err, authority.ErrMoved) || !strings.Contains(err.Error(), "dynamodb://elsewhere") {
			t.Errorf("%s in the source after the move: %v; want it refused with where the state went", what, err)
		}
	}
	if p := h.pending(); len(p) != 0 {
		t.Errorf("the source still lists %v as pending; the sweep must leave a moved environment alone", p)
	}
	again, err := mover.Move(h.ctx, moveEnv, "dynamodb://elsewhere", dst)
	if err != nil || !again.Already {
		t.Errorf("the move repeated: %+v, %v; want it done already", again, err)
	}
	if _, err := mover.Move(h.ctx, moveEnv, "git+file:///other.git", dst); !errors.Is(err, authority.ErrMoved) {
		t.Errorf("a move of a moved environment to another place: %v; want it refused with where it went", err)
	}
}

func testMoveRefusedWhileLeased(t *testing.T, src, dst authority.Store, split bool) {
	h, _ := movePair(t, src, dst, split)
	a := h.process()
	h.accept(a, push(moveEnv, "push-1", sha("a", 1), "api"), true)
	g := h.gate(a, moveEnv, 1, "run-1", "api")
	mover := h.authority(src)
	var leased *authority.LeasedError
	if _, err := mover.Move(h.ctx, moveEnv, "elsewhere", dst); !errors.As(err, &leased) || !errors.Is(err, authority.ErrLeaseHeld) || leased.Scope != "api" {
		t.Fatalf("move while api is leased: %v; want it refused naming the lease", err)
	}
	// Nothing changed: the pass goes on here, and nothing arrived there.
	h.complete(a, g, authority.OutcomeSuccess, "run-1")
	if _, err := dst.Get(h.ctx, authority.EnvKey(moveEnv)); !errors.Is(err, authority.ErrNotFound) {
		t.Errorf("the target after a refused move: %v; want nothing there", err)
	}
	if _, err := mover.Move(h.ctx, moveEnv, "elsewhere", dst); err != nil {
		t.Errorf("the move once the lease was released: %v", err)
	}
}

func testMoveRefusedIntoHolder(t *testing.T, src, dst authority.Store, split bool) {
	h, th := movePair(t, src, dst, split)
	h.accept(h.process(), push(moveEnv, "push-1", sha("a", 1), "api"), false)
	th.accept(th.process(), push(moveEnv, "other", sha("b", 1), "api"), false)
	mover := h.authority(src)
	if _, err := mover.Move(h.ctx, moveEnv, "elsewhere", dst); !errors.Is(err, authority.ErrInvalidInput) {
		t.Fatalf("move into a store that holds the environment: %v; want it refused", err)
	}
	// The source was not marked: it goes on.
	h.accept(h.process(), push(moveEnv, "push-2", sha("c", 2), "api"), false)
}

// failingPut fails the first write of a document, as a move cut off before its last write.
type failingPut struct {
	authority.Store
	failed bool
}

func (s *failingPut) Put(ctx context.Context, d *authority.Doc) (int64, error) {
	if !s.failed {
		s.failed = true
		return 0, errors.New("connection reset")
	}
	return s.Store.Put(ctx, d)
}

func testMoveInterrupted(t *testing.T, src, dst authority.Store, split bool) {
	h, th := movePair(t, src, dst, split)
	seedMove(t, h)
	before := h.env(moveEnv)
	mover := h.authority(src)
	cut := &failingPut{Store: dst}
	if _, err := mover.Move(h.ctx, moveEnv, "elsewhere", cut); err == nil {
		t.Fatal("the move cut off before its last write reported success")
	}
	if _, err := h.process().Accept(h.ctx, push(moveEnv, "push-late", sha("f", 9), "api"), false); !errors.Is(err, authority.ErrMoved) {
		t.Errorf("a write to the source mid-move: %v; want it refused", err)
	}
	res, err := mover.Move(h.ctx, moveEnv, "elsewhere", cut)
	if err != nil || res.Already {
		t.Fatalf("the move run again: %+v, %v; want it completed", res, err)
	}
	after := th.env(moveEnv)
	if diff := cmp.Diff(comparable(before), comparable(after), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("state in the target (-source +target):\n%s", diff)
	}
	if diff := cmp.Diff(before.Events, after.Events, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("timeline in the target (-source +target):\n%s", diff)
	}
}

// testMoveRacingPasses: passes on eight scopes run while the environment moves: each step of a
// pass lands before the move read it, and is in the target, or is refused with where the state
// went; none is lost.
func testMoveRacingPasses(t *testing.T, src, dst authority.Store, split bool) {
	h, th := movePair(t, src, dst, split)
	scopes := []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}
	h.accept(h.process(), push(moveEnv, "seed", sha("a", 0), scopes...), false)
	var wg sync.WaitGroup
	begin := make(chan struct{})
	accepted := make([]int64, len(scopes))
	deployed := make([]bool, len(scopes))
	for i, s := range scopes {
		wg.Go(func() {
			<-begin
			a := h.process()
			res, err := a.Accept(h.ctx, push(moveEnv, "run-"+s, sha("b", i), s), true)
			if err != nil {
				if !errors.Is(err, authority.ErrMoved) {
					t.Errorf("accept in %s beside the move: %v", s, err)
				}
				return
			}
			accepted[i] = res.Generation
			g, err := a.Gate(h.ctx, authority.GateRequest{Environment: moveEnv, Generation: res.Generation, Scopes: []string{s}, Phase: "deploy", Holder: "run-" + s, LeaseTTL: testTTL})
			if err != nil {
				if !errors.Is(err, authority.ErrMoved) {
					t.Errorf("gate in %s beside the move: %v", s, err)
				}
				return
			}
			c, err := a.Complete(h.ctx, authority.Completion{Environment: moveEnv, Generation: g.Generation, Scopes: []string{s}, Holder: g.Holder,
				Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3})
			switch {
			case err == nil:
				deployed[i] = c.Results[s] == authority.ResultDeployed
			case !errors.Is(err, authority.ErrMoved):
				t.Errorf("complete in %s beside the move: %v", s, err)
			}
		})
	}
	mover := h.authority(src)
	close(begin)
	var moveErr error
	for attempt := range 40 {
		// A pass that holds its lease refuses the move. Each pass ends by its completion or by
		// the refusal of its next step; once all have, a lease a refused pass left runs out.
		if _, moveErr = mover.Move(h.ctx, moveEnv, "elsewhere", dst); !errors.Is(moveErr, authority.ErrLeaseHeld) {
			break
		}
		if attempt >= 20 {
			wg.Wait()
			h.clock.Advance(testTTL + testSkew + time.Second)
		}
	}
	wg.Wait()
	if moveErr != nil {
		t.Fatalf("move beside the passes: %v", moveErr)
	}
	after := th.env(moveEnv)
	for i, s := range scopes {
		sc := after.Scopes[s]
		switch {
		case deployed[i] && (sc.Live == nil || sc.Live.Generation != accepted[i]):
			t.Errorf("%s deployed generation %d in the source, and the target has %+v live", s, accepted[i], sc.Live)
		case accepted[i] > 0 && (sc.Mailbox == nil || sc.Mailbox.Generation != accepted[i]) && (sc.Live == nil || sc.Live.Generation != accepted[i]):
			t.Errorf("%s accepted generation %d in the source, and the target has neither it pending nor live: %+v", s, accepted[i], sc)
		}
	}
}

// pausingStore stops its process right after its first read of key, until resumed.
type pausingStore struct {
	authority.Store
	key     string
	once    sync.Once
	paused  chan struct{}
	resumed chan struct{}
}

func (s *pausingStore) Get(ctx context.Context, key string) (*authority.Doc, error) {
	d, err := s.Store.Get(ctx, key)
	if key == s.key {
		s.once.Do(func() {
			close(s.paused)
			<-s.resumed
		})
	}
	return d, err
}

// testMoveAfterARead: a transition that read the environment before the move began, and writes
// after the move read it, is refused with where the state went: its change would be lost.
func testMoveAfterARead(t *testing.T, src, dst authority.Store, split bool) {
	h, th := movePair(t, src, dst, split)
	res := h.accept(h.process(), push(moveEnv, "push-1", sha("a", 1), "api", "web"), false)
	p := &pausingStore{Store: src, key: authority.EnvKey(moveEnv), paused: make(chan struct{}), resumed: make(chan struct{})}
	claimed := make(chan error, 1)
	go func() {
		_, err := h.authority(p).Claim(h.ctx, moveEnv, res.Generation, []string{"api"})
		claimed <- err
	}()
	<-p.paused
	if _, err := h.authority(src).Move(h.ctx, moveEnv, "elsewhere", dst); err != nil {
		close(p.resumed)
		t.Fatalf("move: %v", err)
	}
	close(p.resumed)
	if err := <-claimed; !errors.Is(err, authority.ErrMoved) {
		t.Fatalf("a claim that read the environment before the move and wrote after it: %v; want it refused with where the state went", err)
	}
	if sc := th.env(moveEnv).Scopes["api"]; sc.Owner != 0 {
		t.Fatalf("api in the target: owner %d; want the state the move copied, unclaimed", sc.Owner)
	}
}

// testMoveMeetsANewScope: an accept of a scope the environment does not have yet, which read the
// environment before the move began and stopped before its write of the directory, or after it
// and before its scope's first write, is refused with where the state went once the move is
// done: the scope's intent is in neither store, and the target holds what the move copied. In
// the per-scope layout an accept of one scope writes no head, so only the directory's mark and
// the scope's stop it.
func testMoveMeetsANewScope(t *testing.T, src, dst authority.Store, split bool) {
	h, th := movePair(t, src, dst, split)
	for i, stop := range []string{"directory", "scope"} {
		env := fmt.Sprintf("%s-%d", moveEnv, i)
		key := map[string]string{"directory": authority.DirKey(env), "scope": authority.ScopeKey(env, "db")}[stop]
		if !split {
			if i > 0 {
				return // the single document is one write
			}
			key = authority.EnvKey(env)
		}
		h.live(h.process(), env, "push-1", sha("a", 1), "api")
		p := newPutNthPausing(src, key, 1)
		accepted := make(chan error, 1)
		go func() {
			_, err := h.authority(p).Accept(h.ctx, push(env, "new-scope", sha("n", 1), "db"), false)
			accepted <- err
		}()
		<-p.paused
		if _, err := h.authority(src).Move(h.ctx, env, "elsewhere", dst); err != nil {
			close(p.resumed)
			t.Fatalf("stopped before writing the %s: move: %v", stop, err)
		}
		close(p.resumed)
		if err := <-accepted; !errors.Is(err, authority.ErrMoved) {
			t.Fatalf("stopped before writing the %s: an accept of a new scope that read the environment before the move: %v; want it refused with where the state went", stop, err)
		}
		if e := th.env(env); e.Scopes["db"] != nil || e.Scopes["api"] == nil || e.Scopes["api"].Live == nil {
			t.Fatalf("stopped before writing the %s: the target holds %v; want api as copied and no db", stop, sortedKeys(e.Scopes))
		}
	}
}
