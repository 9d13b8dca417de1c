package authority

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// invariantsBase makes, through the transitions, an environment that holds something of every
// kind a read checks: under policy queue, api has a head that holds the deploy lease and two
// intents waiting behind it; web has a live commit and a terminal failure at its head; db is frozen
// by a rollback; the outbox holds the last write's events and intent. It returns the store.
func invariantsBase(t *testing.T) *mapStore {
	t.Helper()
	ctx := t.Context()
	s := newMapStore()
	a := newTestAuthority(s)
	queued := func(id string, i int, scope string) Intent {
		in := *mainPush(id, testSha(i), "", scope)
		in.Policy = PolicyQueue
		return in
	}
	deploy := func(gen int64, scope, holder string) *Grant {
		t.Helper()
		g, err := a.Gate(ctx, GateRequest{Environment: "staging", Generation: gen, Scopes: []string{scope}, Phase: "deploy", Holder: holder, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	in := queued("a1", 1, "api")
	must(a.Accept(ctx, in, true))
	deploy(1, "api", "run-1")
	in = queued("a2", 2, "api")
	must(a.Accept(ctx, in, false))
	in = queued("a3", 3, "api")
	must(a.Accept(ctx, in, false))

	in = queued("w4", 4, "web")
	must(a.Accept(ctx, in, true))
	g := deploy(4, "web", "run-4")
	must(a.Complete(ctx, Completion{Environment: "staging", Generation: 4, Scopes: []string{"web"}, Holder: g.Holder, Tokens: g.Tokens, Outcome: OutcomeSuccess}))
	in = queued("w5", 5, "web")
	must(a.Accept(ctx, in, true))
	g = deploy(5, "web", "run-5")
	must(a.Complete(ctx, Completion{Environment: "staging", Generation: 5, Scopes: []string{"web"}, Holder: g.Holder, Tokens: g.Tokens,
		Outcome: OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "exit status 1"}))

	in = queued("d6", 6, "db")
	must(a.Accept(ctx, in, true))
	must(a.Rollback(ctx, RollbackRequest{Environment: "staging", Scope: "db", To: testSha(90), Actor: "octocat", Reason: "broken"}))
	return s
}

// editStored changes the stored form of the environment under key in place, as a hand edit of the
// store would.
func editStored(t *testing.T, s *mapStore, key string, edit func(*storedEnv)) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var d storedDoc
	if err := json.Unmarshal(s.docs[key], &d); err != nil {
		t.Fatal(err)
	}
	var e storedEnv
	if err := json.Unmarshal(d.Env, &e); err != nil {
		t.Fatal(err)
	}
	edit(&e)
	b, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	d.Env = b
	if s.docs[key], err = json.Marshal(&d); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptStateIsRefusedOnRead: a stored environment edited to break any one invariant is
// refused when read, with an error naming the document and the invariant; no verb acts on it
// (an accept hands out no generation, a gate grants nothing) and nothing is written.
func TestCorruptStateIsRefusedOnRead(t *testing.T) {
	key := EnvKey("staging")
	base := invariantsBase(t)
	d, err := DecodeDoc(base.docs[key])
	if err != nil {
		t.Fatalf("the base document is refused: %v", err)
	}
	e := d.Env
	api, web, db := e.Scopes["api"], e.Scopes["web"], e.Scopes["db"]
	if e.Policy != PolicyQueue || api.Lease.Holder == "" || len(api.Queue) != 2 || web.Live == nil || web.Failure == nil ||
		db.Freeze == nil || len(e.Outbox) < 2 || len(e.Accepts) == 0 {
		t.Fatalf("the base document lacks something the cases corrupt: %+v", e)
	}

	cases := []struct {
		name string
		want string
		edit func(*storedEnv)
	}{
		{"observed 50, desired 1", InvariantObserved, func(e *storedEnv) { e.O, e.D = 50, 1 }},
		{"observed above desired", InvariantObserved, func(e *storedEnv) { e.O = e.D + 1 }},
		{"observed negative", InvariantObserved, func(e *storedEnv) { e.O = -1 }},
		{"unknown policy", InvariantPolicy, func(e *storedEnv) { e.P = "fifo" }},
		{"owner above desired", InvariantOwner, func(e *storedEnv) { e.S["api"].O = e.D + 1 }},
		{"owner negative", InvariantOwner, func(e *storedEnv) { e.S["web"].O = -1 }},
		{"head above desired", InvariantPending, func(e *storedEnv) { e.S["db"].M.G = e.D + 1 }},
		{"head at generation 0", InvariantPending, func(e *storedEnv) { e.S["api"].M.G = 0 }},
		{"waiting intent above desired", InvariantPending, func(e *storedEnv) { e.S["api"].W[1].G = e.D + 1 }},
		{"waiting intent at generation 0", InvariantPending, func(e *storedEnv) { e.S["api"].W[0].G = 0 }},
		{"queue out of order", InvariantOrder, func(e *storedEnv) { w := e.S["api"].W; w[0], w[1] = w[1], w[0] }},
		{"queue repeats the head generation", InvariantOrder, func(e *storedEnv) { e.S["api"].W[0].G = e.S["api"].M.G }},
		{"queue without a head", InvariantQueueHead, func(e *storedEnv) { e.S["api"].M = nil }},
		{"queue past every limit", InvariantQueueBound, func(e *storedEnv) {
			e.D = 10_000
			w := e.S["api"].W
			for g := int64(4); len(w) <= MaxWaitingOnRead; g++ {
				w = append(w, &storedRef{G: g, S: testSha(int(g)), I: "x"})
			}
			e.S["api"].W = w
		}},
		{"lease held by a generation above owner", InvariantLease, func(e *storedEnv) { e.S["api"].K.G = e.S["api"].O + 1 }},
		{"lease held at generation 0", InvariantLease, func(e *storedEnv) { e.S["api"].K.G = 0 }},
		{"live above desired", InvariantLive, func(e *storedEnv) { e.S["web"].L.G = e.D + 1 }},
		{"live at generation 0", InvariantLive, func(e *storedEnv) { e.S["web"].L.G = 0 }},
		{"freeze above desired", InvariantFreeze, func(e *storedEnv) { e.S["db"].Fz.G = e.D + 1 }},
		{"failure above desired", InvariantFailure, func(e *storedEnv) { e.S["web"].F.G = e.D + 1 }},
		{"outbox event past the event seq", InvariantEvents, func(e *storedEnv) { e.X[len(e.X)-1].Q = e.Q + 1 }},
		{"outbox events out of order", InvariantEvents, func(e *storedEnv) { e.X[0], e.X[1] = e.X[1], e.X[0] }},
		{"outbox event numbered 0", InvariantEvents, func(e *storedEnv) { e.X[0].Q = 0 }},
		{"event seq negative", InvariantEvents, func(e *storedEnv) { e.Q, e.X = -1, nil }},
		{"outbox intent above desired", InvariantIntents, func(e *storedEnv) { e.A[0].G = e.D + 1 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := invariantsBase(t)
			editStored(t, s, key, tc.edit)
			stored := bytes.Clone(s.docs[key])
			check := func(what string, err error) {
				t.Helper()
				ce, ok := errors.AsType[*CorruptError](err)
				if !ok || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s: %v; want a *CorruptError matching ErrCorrupt", what, err)
				}
				if ce.Key != key || ce.Invariant != tc.want {
					t.Fatalf("%s: key %q, invariant %q; want %q, %q", what, ce.Key, ce.Invariant, key, tc.want)
				}
				if msg := err.Error(); !strings.Contains(msg, key+" is corrupt: "+tc.want+" does not hold") {
					t.Fatalf("%s: message %q does not name the document and the invariant", what, msg)
				}
			}
			_, err := DecodeDoc(stored)
			check("decode", err)
			a := newTestAuthority(s) // another process: nothing remembered
			_, err = a.Status(t.Context(), "staging")
			check("status", err)
			res, err := a.Accept(t.Context(), *mainPush("late", testSha(77), "", "api"), true)
			check("accept", err)
			if res != nil {
				t.Fatalf("accept on a corrupt document returned %+v", res)
			}
			_, err = a.Gate(t.Context(), GateRequest{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1", LeaseTTL: time.Minute})
			check("gate", err)
			_, err = a.SetPolicy(t.Context(), "staging", PolicyLatest, "octocat")
			check("policy", err)
			if !bytes.Equal(s.docs[key], stored) {
				t.Fatal("a refused document was written over")
			}
		})
	}
}

// TestDecodeEnvChecksEveryLayout: the check applies to an environment read on its own (the
// DynamoDB adapter's path) and to one of the first layout; the key comes from the stored name.
func TestDecodeEnvChecksEveryLayout(t *testing.T) {
	for name, doc := range map[string]string{
		"current layout": `{"v":2,"n":"staging","d":1,"o":50}`,
		"first layout":   `{"name":"staging","desired":1,"observed":50}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeEnv([]byte(doc))
			ce, ok := errors.AsType[*CorruptError](err)
			if !ok || ce.Key != "env#staging" || ce.Invariant != InvariantObserved || ce.Detail != "observed 50, desired 1" {
				t.Fatalf("DecodeEnv = %v; want the observed invariant of env#staging", err)
			}
		})
	}
	// A document stored under another key than its name is named by the key it is stored under.
	_, err := DecodeDoc([]byte(`{"key":"env#prod","rev":3,"env":{"v":2,"n":"staging","d":1,"o":50}}`))
	if ce, ok := errors.AsType[*CorruptError](err); !ok || ce.Key != "env#prod" {
		t.Fatalf("DecodeDoc = %v; want a *CorruptError naming env#prod", err)
	}
}

// TestQueueBoundOnRead: the bound a read checks is one that no queue limit passes: an accept lets
// MaxWaitingOnRead intents of the smallest stored form wait, and refuses one more.
func TestQueueBoundOnRead(t *testing.T) {
	b, err := json.Marshal(encodeRef(&Ref{Generation: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if len(b)+1 != minWaitingBytes {
		t.Fatalf("the smallest waiting intent %s takes %d bytes with its separator; minWaitingBytes says %d", b, len(b)+1, minWaitingBytes)
	}
	e := &Env{Name: "staging", Policy: PolicyQueue, Scopes: map[string]*Scope{"api": {Mailbox: &Ref{Generation: 1}}}}
	for range MaxWaitingOnRead {
		e.Scopes["api"].Queue = append(e.Scopes["api"].Queue, &Ref{Generation: 1})
	}
	if err := e.checkQueuedSize(); err != nil {
		t.Fatalf("%d of the smallest waiting intents are refused by an accept: the read bound is too low: %v", MaxWaitingOnRead, err)
	}
	e.Scopes["api"].Queue = append(e.Scopes["api"].Queue, &Ref{Generation: 1})
	if err := e.checkQueuedSize(); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("an accept lets %d intents wait, more than the read bound: %v", MaxWaitingOnRead+1, err)
	}
}
