package authority

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// Pure tests of the transitions on an environment document: no store, no clock, no Authority.

var t0 = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

func testSha(i int) string { return fmt.Sprintf("%040d", i) }

func mainPush(id string, sha string, before string, scopes ...string) *Intent {
	return &Intent{ID: id, Environment: "staging", Scopes: scopes, Sha: sha, Ref: "refs/heads/main", Before: before, Source: "example/app"}
}

// pushedAt gives a push the repository.pushed_at of second n after t0.
func pushedAt(in *Intent, n int) *Intent {
	in.Order.PushedAt = t0.Add(time.Duration(n) * time.Second).Truncate(time.Second)
	return in
}

// cloneEnv deep-copies an environment through its document encoding.
func cloneEnv(t *testing.T, e *Env) *Env {
	t.Helper()
	return cloneDoc(&Doc{Key: EnvKey(e.Name), Env: e}).Env
}

func TestSettle(t *testing.T) {
	cases := []struct {
		name              string
		desired, observed int64
		mailbox           []int64
		want              int64
	}{
		{"empty mailbox: settled", 9, 3, nil, 9},
		{"oldest pending bounds it", 9, 3, []int64{7, 5, 9}, 4},
		{"pending right after observed", 9, 3, []int64{4}, 3},
		{"never goes back", 9, 6, []int64{5}, 6},
		{"nothing accepted", 0, 0, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv("staging")
			e.Desired, e.Observed = c.desired, c.observed
			for i, g := range c.mailbox {
				e.scope(fmt.Sprint("s", i)).Mailbox = &Ref{Generation: g}
			}
			e.settle()
			if e.Observed != c.want {
				t.Fatalf("observed %d, want %d", e.Observed, c.want)
			}
			if e.HasPending() != (len(c.mailbox) > 0) {
				t.Fatalf("HasPending %v with mailbox %v", e.HasPending(), c.mailbox)
			}
		})
	}
}

func TestAcceptAssignsGenerationsAndReplacesOwnScope(t *testing.T) {
	e := newEnv("staging")
	r1 := testAccept(e, mainPush("d1", testSha(1), "", "api", "web"), t0)
	r2 := testAccept(e, mainPush("d2", testSha(2), "", "api"), t0.Add(time.Second))
	if r1.Generation != 1 || r2.Generation != 2 || e.Desired != 2 {
		t.Fatalf("generations %d, %d, desired %d; want 1, 2, 2", r1.Generation, r2.Generation, e.Desired)
	}
	if !slices.Equal(r1.Accepted, []string{"api", "web"}) || !slices.Equal(r2.Accepted, []string{"api"}) {
		t.Fatalf("accepted %v, %v", r1.Accepted, r2.Accepted)
	}
	if m := e.Scopes["api"].Mailbox; m.IntentID != "d2" || m.Generation != 2 {
		t.Fatalf("api mailbox %+v; want d2", m)
	}
	if m := e.Scopes["web"].Mailbox; m.IntentID != "d1" || m.Generation != 1 || !m.At.Equal(t0) {
		t.Fatalf("web mailbox %+v; want d1, untouched", m)
	}
	if e.Observed != 0 {
		t.Fatalf("observed %d; want 0 (web's generation 1 is pending)", e.Observed)
	}
	var superseded []Event
	for _, ev := range e.Outbox {
		if ev.Kind == EventSuperseded {
			superseded = append(superseded, ev)
		}
	}
	if len(superseded) != 1 || superseded[0].Scope != "api" || superseded[0].Generation != 1 || !strings.Contains(superseded[0].Message, "generation 2") {
		t.Fatalf("superseded events %+v; want one for api's generation 1", superseded)
	}
}

func TestAcceptDuplicateChangesNothing(t *testing.T) {
	e := newEnv("staging")
	first := testAccept(e, mainPush("d1", testSha(1), "", "api"), t0)
	testAccept(e, mainPush("d2", testSha(2), "", "web"), t0)
	before := cloneEnv(t, e)
	again := testAccept(e, mainPush("d1", testSha(1), "", "api"), t0.Add(time.Hour))
	if !again.Duplicate || again.Generation != first.Generation || !slices.Equal(again.Accepted, first.Accepted) {
		t.Fatalf("re-delivery: %+v; want %+v as a duplicate", again, first)
	}
	if diff := cmp.Diff(before, e); diff != "" {
		t.Fatalf("a re-delivery changed the environment (-before +after):\n%s", diff)
	}
	// The same id with another commit, or scopes it was not accepted for, is not a repeat: it is
	// refused, saying why.
	for _, in := range []*Intent{mainPush("d1", testSha(9), "", "api"), mainPush("d1", testSha(1), "", "api", "db")} {
		_, err := e.accept(in, e.pendingAccept(in.ID), nil, DefaultQueueLimit, t0)
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != "intent-id" || !strings.Contains(ie.Fix, "intent d1 was accepted for") {
			t.Fatalf("intent d1 again with %s %v: %v; want bad input naming what it was accepted for", shortSha(in.Sha), in.Scopes, err)
		}
		if diff := cmp.Diff(before, e); diff != "" {
			t.Fatalf("a refused intent changed the environment (-before +after):\n%s", diff)
		}
	}
}

// A second intent for the very commit a scope has pending (the workflow the App dispatched claims the
// push the App accepted) joins that generation: no new generation, nothing superseded, and its pass
// can claim the scope.
func TestAcceptJoinsThePendingCommit(t *testing.T) {
	e := newEnv("staging")
	first := testAccept(e, mainPush("a", testSha(1), testSha(0), "api", "web"), t0)
	before := cloneEnv(t, e).Scopes
	res := testAccept(e, mainPush("run-7", testSha(1), testSha(0), "api", "web"), t0.Add(time.Minute))
	if !res.Joined || res.Duplicate || res.Generation != first.Generation || e.Desired != first.Generation || !slices.Equal(res.Accepted, []string{"api", "web"}) {
		t.Fatalf("joining intent: %+v, desired %d; want generation %d joined for api and web", res, e.Desired, first.Generation)
	}
	for _, s := range []string{"api", "web"} {
		if diff := cmp.Diff(before[s].Mailbox, e.Scopes[s].Mailbox); diff != "" {
			t.Fatalf("%s mailbox changed (-before +after):\n%s", s, diff)
		}
	}
	if cr := e.claim(res.Generation, res.Accepted, t0); len(cr.Claimed) != 2 {
		t.Fatalf("the joining pass cannot claim: %+v", cr)
	}
	if again := testAccept(e, mainPush("run-7", testSha(1), testSha(0), "api", "web"), t0); !again.Duplicate || again.Generation != first.Generation {
		t.Fatalf("a repeat of the joining intent: %+v", again)
	}
	// Only when every scope has that commit pending at one generation: otherwise a new generation.
	mixed := testAccept(e, mainPush("b", testSha(1), testSha(0), "api", "db"), t0)
	if mixed.Joined || mixed.Generation != first.Generation+1 || mixed.Stale["api"] != first.Generation {
		t.Fatalf("partly pending intent: %+v", mixed)
	}
}

func TestAcceptOutOfOrder(t *testing.T) {
	a, b := pushedAt(mainPush("a", testSha(1), testSha(0), "api"), 10), pushedAt(mainPush("b", testSha(2), testSha(1), "api"), 20)
	forced := func(in *Intent) *Intent { in.Order.Forced = true; return in }
	committed := func(in *Intent, n int) *Intent {
		in.Order.CommittedAt = t0.Add(time.Duration(n) * time.Minute)
		return in
	}
	cases := []struct {
		name      string
		setup     []*Intent
		deploy    bool // deploy the last setup intent before the late one arrives
		late      *Intent
		wantStale bool
	}{
		{"entry's parent arrives late", []*Intent{a, b}, false, pushedAt(mainPush("late", testSha(1), testSha(0), "api"), 10), true},
		{"the parent, without a push time, by the chain", []*Intent{a, b}, false, mainPush("late", testSha(1), testSha(0), "api"), true},
		{"entry's grandparent arrives late", []*Intent{a, b}, false, pushedAt(mainPush("late", testSha(0), "", "api"), 5), true},
		{"parent of the live commit", []*Intent{a, b}, true, pushedAt(mainPush("late", testSha(1), testSha(0), "api"), 10), true},
		{"grandparent of the live commit", []*Intent{a, b}, true, pushedAt(mainPush("late", testSha(0), "", "api"), 5), true},
		{"a new commit on top", []*Intent{a}, false, pushedAt(mainPush("next", testSha(2), testSha(1), "api"), 30), false},
		{"a new commit on top, in the same second", []*Intent{a}, false, pushedAt(mainPush("next", testSha(2), testSha(1), "api"), 10), false},
		{"pushed later, unrelated", []*Intent{a}, false, pushedAt(mainPush("other", testSha(7), testSha(6), "api"), 30), false},
		{"pushed earlier, unrelated", []*Intent{b}, false, pushedAt(mainPush("other", testSha(7), testSha(6), "api"), 15), true},
		{"same second: a forced push is newer", []*Intent{b}, false, forced(pushedAt(mainPush("f", testSha(7), testSha(6), "api"), 20)), false},
		{"same second: an entry that was forced is newer", []*Intent{forced(pushedAt(mainPush("f", testSha(7), testSha(6), "api"), 20))}, false, b, true},
		{"same second: commit times decide", []*Intent{committed(pushedAt(mainPush("c1", testSha(7), "", "api"), 20), 5)}, false,
			committed(pushedAt(mainPush("c0", testSha(8), "", "api"), 20), 3), true},
		{"nothing decides: taken as it arrives", []*Intent{mainPush("u1", testSha(7), "", "api")}, false, mainPush("u2", testSha(8), "", "api"), false},
		{"same commit on another branch", []*Intent{a, b}, false,
			&Intent{ID: "rel", Environment: "staging", Scopes: []string{"api"}, Sha: testSha(1), Ref: "refs/heads/release"}, false},
		{"no ref: never compared", []*Intent{a, b}, false, &Intent{ID: "cli", Environment: "staging", Scopes: []string{"api"}, Sha: testSha(1)}, false},
		{"redeploy bypasses the guard", []*Intent{a, b}, false,
			&Intent{ID: "redeploy", Environment: "staging", Scopes: []string{"api"}, Sha: testSha(1), Ref: "refs/heads/main", Redeploy: true}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv("staging")
			var last *AcceptResult
			for _, in := range c.setup {
				last = testAccept(e, in, t0)
			}
			if c.deploy {
				sc := e.Scopes["api"]
				sc.Live = &Live{Sha: sc.Mailbox.Sha, Ref: sc.Mailbox.Ref, Generation: last.Generation, Before: sc.Mailbox.Before, Order: sc.Mailbox.Order}
				sc.Mailbox = nil
				e.settle()
			}
			before := cloneEnv(t, e).Scopes["api"].Mailbox
			res := testAccept(e, c.late, t0.Add(time.Minute))
			if res.Generation != e.Desired || res.Duplicate {
				t.Fatalf("late intent: %+v; it still takes the next generation", res)
			}
			if c.wantStale {
				if res.Stale["api"] != last.Generation || len(res.Accepted) != 0 {
					t.Fatalf("result %+v; want api held back as older than generation %d", res, last.Generation)
				}
				if diff := cmp.Diff(before, e.Scopes["api"].Mailbox); diff != "" {
					t.Fatalf("a late intent changed the mailbox (-before +after):\n%s", diff)
				}
				if ev := e.Outbox[len(e.Outbox)-1]; ev.Kind != EventSuperseded || ev.Generation != res.Generation || !strings.HasPrefix(ev.Message, "Arrived out of order") {
					t.Fatalf("newest event %+v; want the late intent recorded as arrived out of order", ev)
				}
				return
			}
			if len(res.Stale) != 0 || e.Scopes["api"].Mailbox.IntentID != c.late.ID {
				t.Fatalf("result %+v, mailbox %+v; want the intent accepted", res, e.Scopes["api"].Mailbox)
			}
		})
	}
}

// TestEveryArrivalOrder: a chain of pushes with their push times, delivered in every order, ends with
// the newest pending, and every older one recorded as arrived out of order or superseded.
func TestEveryArrivalOrder(t *testing.T) {
	for _, n := range []int{3, 5} {
		pushes := make([]*Intent, n)
		for i := range pushes {
			pushes[i] = pushedAt(mainPush(fmt.Sprintf("p%d", i), testSha(i+1), testSha(i), "api"), i)
		}
		count := 0
		permute(len(pushes), func(order []int) {
			count++
			e := newEnv("staging")
			for _, k := range order {
				testAccept(e, pushes[k], t0)
			}
			if m := e.Scopes["api"].Mailbox; m == nil || m.Sha != pushes[n-1].Sha {
				t.Fatalf("order %v: pending %+v; want the newest push %s", order, m, shortSha(pushes[n-1].Sha))
			}
		})
		t.Logf("%d pushes: %d arrival orders", n, count)
	}
}

// permute calls f with every permutation of 0..n-1 (Heap's algorithm).
func permute(n int, f func([]int)) {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	var gen func(k int)
	gen = func(k int) {
		if k <= 1 {
			f(slices.Clone(p))
			return
		}
		for i := 0; i < k; i++ {
			gen(k - 1)
			if k%2 == 0 {
				p[i], p[k-1] = p[k-1], p[i]
			} else {
				p[0], p[k-1] = p[k-1], p[0]
			}
		}
	}
	gen(n)
}

func TestOutboxNumbersEveryEvent(t *testing.T) {
	e := newEnv("staging")
	for i := 1; i <= 300; i++ {
		testAccept(e, mainPush(fmt.Sprint("d", i), testSha(i), "", "api"), t0)
	}
	if len(e.Accepts) != 300 {
		t.Fatalf("%d intents in the outbox, want 300", len(e.Accepts))
	}
	for i := 1; i < len(e.Outbox); i++ {
		if e.Outbox[i].Seq != e.Outbox[i-1].Seq+1 {
			t.Fatalf("event sequence broken at %d: %d after %d", i, e.Outbox[i].Seq, e.Outbox[i-1].Seq)
		}
	}
	if last := e.Outbox[len(e.Outbox)-1]; last.Seq != e.EventSeq {
		t.Fatalf("newest event %d, counter %d", last.Seq, e.EventSeq)
	}
}

func TestLongMessagesAreCutOnACharacterBoundary(t *testing.T) {
	for _, msg := range []string{strings.Repeat("é", maxMessageSize), strings.Repeat("x", maxMessageSize) + "✓", "x" + strings.Repeat("✓", maxMessageSize)} {
		e := newEnv("staging")
		e.record(t0, Event{Kind: EventFailed, Message: msg})
		got := e.Outbox[0].Message
		if len(got) > maxMessageSize || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || !strings.HasPrefix(msg, strings.TrimSuffix(got, "…")) {
			t.Fatalf("message of %d bytes kept as %d bytes (valid UTF-8: %v): %q", len(msg), len(got), utf8.ValidString(got), got[max(0, len(got)-12):])
		}
	}
	e := newEnv("staging")
	e.record(t0, Event{Kind: EventFailed, Message: "short"})
	if e.Outbox[0].Message != "short" {
		t.Fatalf("a short message was changed to %q", e.Outbox[0].Message)
	}
}

func TestClaimTransition(t *testing.T) {
	e := newEnv("staging")
	testAccept(e, mainPush("d1", testSha(1), "", "api"), t0) // 1
	testAccept(e, mainPush("d2", testSha(2), "", "web"), t0) // 2
	testAccept(e, mainPush("d3", testSha(3), "", "db"), t0)  // 3
	e.Scopes["web"].Owner = 3                                // a newer pass owns web

	res := e.claim(2, []string{"api", "web", "db", "worker"}, t0)
	if got := res.Scopes(); !slices.Equal(got, []string{"api"}) {
		t.Fatalf("claimed %v; want api", got)
	}
	if res.Claimed[0].IntentGen != 1 || res.Claimed[0].Sha != testSha(1) || res.Claimed[0].IntentID != "d1" {
		t.Fatalf("claimed %+v; want intent d1 at generation 1", res.Claimed[0])
	}
	by := map[string]int64{}
	for _, s := range res.Superseded {
		by[s.Scope] = s.By
	}
	if diff := cmp.Diff(map[string]int64{"web": 3, "db": 3}, by); diff != "" {
		t.Fatalf("superseded (-want +got):\n%s", diff)
	}
	if !slices.Equal(res.Idle, []string{"worker"}) {
		t.Fatalf("idle %v; want worker", res.Idle)
	}
	if e.Scopes["api"].Owner != 2 || e.Scopes["web"].Owner != 3 || e.Scopes["db"].Owner != 0 {
		t.Fatalf("owners api %d, web %d, db %d; want 2, 3, 0", e.Scopes["api"].Owner, e.Scopes["web"].Owner, e.Scopes["db"].Owner)
	}
	seq := e.EventSeq
	if again := e.claim(2, []string{"api"}, t0); len(again.Claimed) != 1 || e.EventSeq != seq {
		t.Fatalf("re-claim: %+v, %d new events; want claimed, nothing recorded", again, e.EventSeq-seq)
	}
	// Every pending scope, in name order.
	all := e.claim(3, nil, t0)
	if got := all.Scopes(); !slices.Equal(got, []string{"api", "db", "web"}) {
		t.Fatalf("claim all at 3: %v; want api, db, web", got)
	}
}

func TestAuthorize(t *testing.T) {
	cases := []struct {
		name          string
		owner, gen    int64
		mailbox       *Ref
		live          *Live
		wantBy        int64
		wantBySha     string
		wantAuthority bool
	}{
		{"owner, nothing newer", 4, 4, &Ref{Generation: 3, Sha: "m3"}, nil, 0, "", true},
		{"owner, its work already ended", 4, 4, nil, &Live{Generation: 4, Sha: "l4"}, 0, "", false},
		{"newer intent accepted", 4, 4, &Ref{Generation: 5, Sha: "m5"}, nil, 5, "m5", false},
		{"newer intent and newer pass", 6, 4, &Ref{Generation: 5, Sha: "m5"}, nil, 5, "m5", false},
		{"newer pass owns it, pending", 6, 4, &Ref{Generation: 4, Sha: "m4"}, nil, 6, "m4", false},
		{"newer pass deployed it", 6, 4, nil, &Live{Generation: 6, Sha: "l6"}, 6, "l6", false},
		{"never claimed by this pass", 2, 4, &Ref{Generation: 3, Sha: "m3"}, nil, 0, "m3", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv("staging")
			sc := e.scope("api")
			sc.Owner, sc.Mailbox, sc.Live = c.owner, c.mailbox, c.live
			sup := e.authorize(c.gen, "api")
			if c.wantAuthority {
				if sup != nil {
					t.Fatalf("refused: %v", sup)
				}
				return
			}
			if sup == nil || sup.By != c.wantBy || sup.BySha != c.wantBySha || sup.Generation != c.gen {
				t.Fatalf("refusal %+v; want by %d (%q)", sup, c.wantBy, c.wantBySha)
			}
		})
	}
	if sup := newEnv("staging").authorize(1, "unknown"); sup == nil {
		t.Fatalf("authority over a scope that does not exist")
	}
}

func TestHeldErrorRetryAfter(t *testing.T) {
	skew := 5 * time.Second
	l := &Lease{Holder: "run-1", Purpose: "deploy", Generation: 3, ExpiresAt: t0.Add(30 * time.Second)}
	cases := []struct {
		at   time.Duration // since t0
		want time.Duration
	}{
		{0, 35 * time.Second},
		{300 * time.Millisecond, 35 * time.Second},
		{time.Second, 34 * time.Second},
		{34*time.Second + time.Nanosecond, time.Second},
		{35*time.Second - time.Nanosecond, time.Second},
		{35 * time.Second, time.Second}, // never below one second
		{40 * time.Second, time.Second},
	}
	for _, c := range cases {
		h := heldError("staging/api", l, t0.Add(c.at), skew)
		if h.RetryAfter != c.want {
			t.Errorf("at +%v: retry after %v, want %v", c.at, h.RetryAfter, c.want)
		}
		if h.Holder != "run-1" || h.Purpose != "deploy" || h.Generation != 3 || h.Resource != "staging/api" {
			t.Errorf("refusal %+v does not say who holds it, for what", h)
		}
	}
}

func TestLeaseFree(t *testing.T) {
	skew := 5 * time.Second
	held := Lease{Holder: "a", Generation: 1, ExpiresAt: t0.Add(30 * time.Second)}
	cases := []struct {
		name   string
		lease  Lease
		holder string
		gen    int64
		at     time.Duration
		want   bool
	}{
		{"free", Lease{Token: 4}, "b", 2, 0, true},
		{"held by another", held, "b", 2, 0, false},
		{"held by another, expired but within skew", held, "b", 2, 34 * time.Second, false},
		{"held by another, expired past skew", held, "b", 2, 35 * time.Second, true},
		{"own lease", held, "a", 1, 0, true},
		{"same holder name, another generation", held, "a", 2, 0, false},
		{"same holder name, another generation, expired past skew", held, "a", 2, 35 * time.Second, true},
	}
	for _, c := range cases {
		if got := leaseFree(&c.lease, c.holder, c.gen, t0.Add(c.at), skew); got != c.want {
			t.Errorf("%s: free %v, want %v", c.name, got, c.want)
		}
	}
}

func TestGrantTokens(t *testing.T) {
	var l Lease
	if prev := grant(&l, "a", "deploy", 1, time.Minute, t0); prev != nil || l.Token != 1 || l.Holder != "a" || !l.AcquiredAt.Equal(t0) {
		t.Fatalf("first grant: %+v (took over %v)", l, prev)
	}
	// The pass's repeat while live is a new grant: a greater token, and the expiry from now.
	if prev := grant(&l, "a", "deploy", 1, time.Minute, t0.Add(10*time.Second)); prev != nil || l.Token != 2 || !l.ExpiresAt.Equal(t0.Add(70*time.Second)) {
		t.Fatalf("repeat by the holder: %+v (took over %v)", l, prev)
	}
	// Another holder takes over: a greater token and the displaced lease.
	prev := grant(&l, "b", "deploy", 2, time.Minute, t0.Add(2*time.Minute))
	if prev == nil || prev.Holder != "a" || prev.Purpose != "deploy" || l.Token != 3 || l.Holder != "b" {
		t.Fatalf("takeover: %+v from %+v", l, prev)
	}
	// After a release the next grant, even to the same holder, gets a greater token, and is no takeover.
	l.Holder, l.ExpiresAt = "", time.Time{}
	if prev := grant(&l, "b", "deploy", 2, time.Minute, t0.Add(3*time.Minute)); prev != nil || l.Token != 4 {
		t.Fatalf("grant after release: %+v (took over %v)", l, prev)
	}
}

// gateEnv is an environment where the pass at generation 1 owns scopes.
func gateEnv(t *testing.T, scopes ...string) *Env {
	t.Helper()
	e := newEnv("staging")
	testAccept(e, mainPush("d1", testSha(1), "", scopes...), t0)
	if res := e.claim(1, nil, t0); len(res.Claimed) != len(scopes) {
		t.Fatalf("setup claim: %+v", res)
	}
	return e
}

func TestGateIsAllOrNothing(t *testing.T) {
	e := gateEnv(t, "api", "web", "db")
	if _, err := e.gate(1, []string{"web"}, "deploy", "other", time.Minute, t0, 5*time.Second, nil); err != nil {
		t.Fatalf("gate web: %v", err)
	}
	before := cloneEnv(t, e)
	for range 3 { // a waiter polling: one timeline line, not one per poll
		g, err := e.gate(1, []string{"api", "web", "db"}, "deploy", "me", time.Minute, t0.Add(time.Second), 5*time.Second, nil)
		if g != nil || err == nil || err.(*HeldError).Holder != "other" {
			t.Fatalf("gate over a held scope: %+v, %v; want a refusal naming other", g, err)
		}
	}
	for _, s := range []string{"api", "web", "db"} {
		if diff := cmp.Diff(before.Scopes[s].Lease, e.Scopes[s].Lease); diff != "" {
			t.Fatalf("%s: a refused gate changed the lease (-before +after):\n%s", s, diff)
		}
	}
	if got := e.EventSeq - before.EventSeq; got != 1 || e.Outbox[len(e.Outbox)-1].Kind != EventLocked {
		t.Fatalf("%d events for three refused polls; want one locked event", got)
	}
	g, err := e.gate(1, []string{"api", "db"}, "deploy", "me", time.Minute, t0.Add(2*time.Second), 5*time.Second, nil)
	if err != nil || len(g.Tokens) != 2 || g.Tokens["api"] != 1 || g.Tokens["db"] != 1 {
		t.Fatalf("gate over free scopes: %+v, %v", g, err)
	}
}

// TestWaitersOnTwoScopesWriteOneLineEach: two passes polling held leases of different scopes in
// turn record one line each, not one per poll.
func TestWaitersOnTwoScopesWriteOneLineEach(t *testing.T) {
	e := gateEnv(t, "api", "web")
	for _, s := range []string{"api", "web"} {
		if _, err := e.gate(1, []string{s}, "deploy", "holder-"+s, time.Minute, t0, 5*time.Second, nil); err != nil {
			t.Fatalf("gate %s: %v", s, err)
		}
	}
	before := e.EventSeq
	for i := range 20 {
		s := []string{"api", "web"}[i%2]
		if _, err := e.gate(1, []string{s}, "deploy", "waiter-"+s, time.Minute, t0.Add(time.Second), 5*time.Second, nil); err == nil {
			t.Fatalf("poll %d on %s was granted a held lease", i, s)
		}
	}
	if got := e.EventSeq - before; got != 2 {
		t.Fatalf("%d events for 20 alternating polls on two scopes; want one per scope", got)
	}
}

func TestCompleteOutcomes(t *testing.T) {
	cases := []struct {
		name        string
		outcome     Outcome
		attempt     int
		useTokens   bool
		want        Result
		wantLive    bool
		wantFailure bool
		wantMailbox bool
	}{
		{"success", OutcomeSuccess, 1, true, ResultDeployed, true, false, false},
		{"failure, first attempt", OutcomeFailure, 1, true, ResultRetry, false, false, true},
		{"failure, final attempt", OutcomeFailure, 3, true, ResultFailed, false, true, false},
		{"failure past the final attempt", OutcomeFailure, 4, true, ResultFailed, false, true, false},
		{"invalid", OutcomeInvalid, 1, true, ResultFailed, false, true, false},
		{"lost", OutcomeLost, 1, true, ResultRetry, false, false, true},
		{"interrupted", OutcomeInterrupted, 1, false, ResultRetry, false, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := gateEnv(t, "api")
			g, err := e.gate(1, []string{"api"}, "deploy", "me", time.Minute, t0, 5*time.Second, nil)
			if err != nil {
				t.Fatalf("gate: %v", err)
			}
			comp := &Completion{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Holder: "me", Outcome: c.outcome,
				Attempt: c.attempt, MaxAttempts: 3, Message: "why", Run: "run-1"}
			if c.useTokens {
				comp.Tokens = g.Tokens
			}
			res, err := e.complete(comp, t0.Add(time.Minute), time.Second)
			if err != nil {
				t.Fatalf("complete: %v", err)
			}
			sc := e.Scopes["api"]
			if res.Results["api"] != c.want || (sc.Live != nil) != c.wantLive || (sc.Failure != nil) != c.wantFailure || (sc.Mailbox != nil) != c.wantMailbox {
				t.Fatalf("result %s, live %+v, failure %+v, mailbox %+v", res.Results["api"], sc.Live, sc.Failure, sc.Mailbox)
			}
			if c.wantLive && (sc.Live.Sha != testSha(1) || sc.Live.Token != g.Tokens["api"] || sc.Live.Run != "run-1" || sc.Live.Generation != 1) {
				t.Fatalf("live %+v", sc.Live)
			}
			if c.useTokens && sc.Lease.Holder != "" {
				t.Fatalf("the lease was not released: %+v", sc.Lease)
			}
			if !c.useTokens && sc.Lease.Holder != "me" {
				t.Fatalf("a completion without tokens released the lease: %+v", sc.Lease)
			}
			if c.outcome == OutcomeFailure && c.want == ResultRetry && sc.Mailbox.Attempt != c.attempt {
				t.Fatalf("failed attempts %d, want %d", sc.Mailbox.Attempt, c.attempt)
			}
			settled := !c.wantMailbox
			if (e.Observed == e.Desired) != settled {
				t.Fatalf("observed %d/%d", e.Observed, e.Desired)
			}
		})
	}
}

func TestCompleteFencing(t *testing.T) {
	e := gateEnv(t, "api", "web")
	old, err := e.gate(1, []string{"api"}, "deploy", "old", time.Minute, t0, 5*time.Second, nil)
	if err != nil {
		t.Fatalf("gate: %v", err)
	}
	cur, err := e.gate(1, []string{"api"}, "deploy", "new", time.Minute, t0.Add(2*time.Minute), 5*time.Second, nil)
	if err != nil || cur.TookOver[0] != "api" {
		t.Fatalf("takeover: %+v, %v", cur, err)
	}
	before := cloneEnv(t, e)
	for _, o := range []Outcome{OutcomeSuccess, OutcomeFailure, OutcomeInvalid, OutcomeInterrupted} {
		_, err := e.complete(&Completion{Generation: 1, Scopes: []string{"api"}, Holder: "old", Tokens: old.Tokens, Outcome: o, Attempt: 3, MaxAttempts: 3}, t0.Add(3*time.Minute), time.Second)
		lost, ok := err.(*LostError)
		if !ok || lost.Holder != "new" || lost.Current != cur.Tokens["api"] || lost.Token != old.Tokens["api"] {
			t.Fatalf("%s with a stale token: %v; want a *LostError naming new", o, err)
		}
		if diff := cmp.Diff(before, e); diff != "" {
			t.Fatalf("%s with a stale token changed the environment (-before +after):\n%s", o, diff)
		}
	}
	res, err := e.complete(&Completion{Generation: 1, Scopes: []string{"api"}, Holder: "old", Tokens: old.Tokens, Outcome: OutcomeLost}, t0.Add(3*time.Minute), time.Second)
	if err != nil || res.Results["api"] != ResultRetry || e.Scopes["api"].Lease.Holder != "new" {
		t.Fatalf("lost with a stale token: %+v, %v, lease %+v; want retry, lease kept by new", res, err, e.Scopes["api"].Lease)
	}
}

func TestOverall(t *testing.T) {
	cases := []struct {
		results map[string]Result
		want    Result
	}{
		{map[string]Result{}, ResultDeployed},
		{map[string]Result{"a": ResultDeployed, "b": ResultSuperseded}, ResultSuperseded},
		{map[string]Result{"a": ResultSuperseded, "b": ResultRetry}, ResultRetry},
		{map[string]Result{"a": ResultRetry, "b": ResultFailed, "c": ResultDeployed}, ResultFailed},
	}
	for _, c := range cases {
		if got := (&CompleteResult{Results: c.results}).Overall(); got != c.want {
			t.Errorf("Overall(%v) = %s, want %s", c.results, got, c.want)
		}
	}
}

func TestParseOutcome(t *testing.T) {
	for _, s := range []string{"success", "failure", "lost", "interrupted", "invalid"} {
		if o, err := ParseOutcome(s); err != nil || string(o) != s {
			t.Errorf("ParseOutcome(%q) = %q, %v", s, o, err)
		}
	}
	for _, s := range []string{"", "Success", "ok", "failed"} {
		if _, err := ParseOutcome(s); err == nil {
			t.Errorf("ParseOutcome(%q) accepted", s)
		}
	}
}

// Pushes delivered newest first: C (on B), then B (on A), then A. B is behind C by the chain; A,
// not adjacent to C, by its push time, and never replaces C.
func TestLatePushesNewestFirstNeverReplaceTheNewest(t *testing.T) {
	e := newEnv("staging")
	c := testAccept(e, pushedAt(mainPush("c", testSha(3), testSha(2), "api"), 3), t0)
	for _, late := range []*Intent{pushedAt(mainPush("b", testSha(2), testSha(1), "api"), 2), pushedAt(mainPush("a", testSha(1), testSha(0), "api"), 1)} {
		res := testAccept(e, late, t0)
		if res.Stale["api"] != c.Generation {
			t.Fatalf("late push %s: %+v; want it held back behind generation %d", late.ID, res, c.Generation)
		}
	}
	if m := e.Scopes["api"].Mailbox; m.Sha != testSha(3) || m.Generation != c.Generation {
		t.Fatalf("mailbox %+v; want C still pending", m)
	}
}

// testAccept accepts an intent on a document whose outbox is never emptied, so that the outbox
// alone knows the intents seen; it fails the test on bad input.
func testAccept(e *Env, in *Intent, now time.Time) *AcceptResult {
	res, err := e.accept(in, e.pendingAccept(in.ID), nil, DefaultQueueLimit, now)
	if err != nil {
		panic(err)
	}
	return res
}
