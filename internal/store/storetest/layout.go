package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Moving an environment of the single document (layout 4) to the per-scope layout (layout 7):
// everything it holds stays, a stop at any request is finished by whoever comes next, and a move
// racing writers and other moves loses nothing.
func layoutCases() []testCase {
	return []testCase{
		{"MoveKeepsEverything", testMoveKeepsEverything},
		{"MoveStoppedAtEveryRequest", testMoveStopped},
		{"MoveRacingWriters", testMoveRacing},
		{"NewEnvironmentsFollowTheSettings", testLayoutSettings},
		{"AThousandScopes", testThousandScopes},
	}
}

// maxItem is DynamoDB's limit on one item.
const maxItem = 400 << 10

// testThousandScopes: an environment of a thousand scopes (300 under -short) works as one of a
// few does. A push naming every scope is accepted, claimed and deployed on all of them; a pass on
// one scope then makes exactly the requests a pass makes in an environment of one scope; every
// stored document stays far inside DynamoDB's item limit; the state reads whole and the timeline
// pages.
func testThousandScopes(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document holds at most 64 scopes")
	}
	n := rounds(1000, 300)
	const env, small = "monorepo", "one-service"
	names := scopeNames(0, n)
	a := h.process()
	res := h.accept(a, push(env, "everything", sha("a", 1), names...), true)
	if len(res.Accepted) != n || res.Claim == nil || len(res.Claim.Claimed) != n {
		t.Fatalf("a push naming %d scopes: accepted %d, claim %v", n, len(res.Accepted), res.Claim)
	}
	h.clock.Advance(time.Second)
	g := h.gate(a, env, res.Generation, "wide-run", names...)
	h.clock.Advance(time.Second)
	out := h.complete(a, g, authority.OutcomeSuccess, "run-1")
	for _, s := range names {
		if out.Results[s] != authority.ResultDeployed {
			t.Fatalf("%s: %s; want deployed", s, out.Results[s])
		}
	}
	e := h.env(env)
	if len(e.Scopes) != n || e.Observed != e.Desired {
		t.Fatalf("%d scopes, observed %d of %d; want %d, all observed", len(e.Scopes), e.Observed, e.Desired, n)
	}
	for _, s := range names {
		if l := e.Scopes[s].Live; l == nil || l.Sha != sha("a", 1) {
			t.Fatalf("%s live %+v; want %s", s, l, sha("a", 1))
		}
	}

	// A pass on one scope, from a process of its own, after one to warm each environment up.
	h.live(a, small, "s-0", sha("s", 0), names[n-1])
	requests := func(env, scope string, i int) int64 {
		h.clock.Advance(time.Second)
		before := h.store.gets.Load() + h.store.puts.Load() + h.store.recPuts.Load() + h.store.recGets.Load()
		p := h.process()
		h.complete(p, h.pass(p, env, fmt.Sprintf("%s-%d", env, i), sha("p", i), "run", scope), authority.OutcomeSuccess, "run")
		return h.store.gets.Load() + h.store.puts.Load() + h.store.recPuts.Load() + h.store.recGets.Load() - before
	}
	requests(env, names[n-1], 1)
	requests(small, names[n-1], 1)
	if big, one := requests(env, names[n-1], 2), requests(small, names[n-1], 2); big != one {
		t.Fatalf("a pass on one scope made %d requests in an environment of %d scopes and %d in one of one scope; want the same", big, n, one)
	}

	for _, key := range []string{authority.EnvKey(env), authority.DirKey(env), authority.ScopeKey(env, names[0]), authority.ScopeKey(env, names[n-1])} {
		d, err := h.store.inner.Get(h.ctx, key)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		b, err := authority.EncodeDoc(d)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > maxItem/4 {
			t.Fatalf("%s is %d bytes; want far inside DynamoDB's %d (a quarter at most)", key, len(b), maxItem)
		}
	}
	page, err := a.History(h.ctx, env, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Events) < 50 || !page.Timed || page.Before == 0 {
		t.Fatalf("the newest page of the timeline: %d events (timed %v, before %d); want 50 and an older page", len(page.Events), page.Timed, page.Before)
	}
}

// fullScopes is the most scopes one document of layout 4 holds.
const fullScopes = authority.MaxScopes

func scopeNames(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("svc-%03d", i))
	}
	return out
}

// layout4 is an environment of the single document with every kind of state in its 64 scopes,
// and the grant of the pass that holds leases in some of them.
type layout4 struct {
	env   string
	n     int // scopes
	grant *authority.Grant
	held  []string // scopes whose leases the grant holds
	queue []string // scopes with an intent waiting behind another
}

// buildLayout4 fills env's n scopes (with its required environment, env-staging) through a: commits live
// and previous-live everywhere or in half, a rollback's freeze, a pass holding leases, a queue
// under policy queue, a terminal failure, and events and intent ids in the document and in
// records.
func (h *harness) buildLayout4(a *authority.Authority, env string, n int) *layout4 {
	h.t.Helper()
	all, half := scopeNames(0, n), scopeNames(0, n/2)
	l := &layout4{env: env, n: n, held: scopeNames(n/2, 3*n/4), queue: scopeNames(3*n/4, n-1)}
	last := fmt.Sprintf("svc-%03d", n-1)
	staging := env + "-staging"
	h.live(a, staging, env+"-sa", sha("a", 1), all...)
	req := &authority.Requirements{Environments: []string{staging}}
	deploy := func(id, commit string, scopes ...string) {
		in := push(env, id, commit, scopes...)
		in.Requires = req
		res := h.accept(a, in, false)
		h.deploy(a, env, res.Generation, "run-"+id, "run-"+id, scopes...)
	}
	deploy(env+"-a", sha("a", 1), all...)
	h.live(a, staging, env+"-sb", sha("b", 1), half...)
	deploy(env+"-b", sha("b", 1), half...)
	if _, err := a.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "svc-000", To: sha("a", 1), Actor: "oncall", Reason: "b breaks checkout", Request: env + "-rb"}); err != nil {
		h.t.Fatalf("rollback: %v", err)
	}
	held := push(env, env+"-c", sha("a", 1), l.held...)
	held.Requires = req
	res := h.accept(a, held, true)
	l.grant = h.gate(a, env, res.Generation, "run-c/1", l.held...)
	failing := push(env, env+"-f", sha("a", 1), last)
	failing.Requires = req
	res = h.accept(a, failing, true)
	fg := h.gate(a, env, res.Generation, "run-f/1", last)
	if _, err := a.Complete(h.ctx, authority.Completion{Environment: env, Generation: fg.Generation, Scopes: []string{last}, Holder: fg.Holder,
		Tokens: fg.Tokens, Outcome: authority.OutcomeFailure, Message: "exit 1", Attempt: 3, MaxAttempts: 3}); err != nil {
		h.t.Fatalf("complete with a failure: %v", err)
	}
	if _, err := a.SetPolicy(h.ctx, env, authority.PolicyQueue, "ops"); err != nil {
		h.t.Fatalf("policy queue: %v", err)
	}
	h.live(a, staging, env+"-sd", sha("d", 1), l.queue...)
	for i := range 2 {
		in := push(env, fmt.Sprintf("%s-q%d", env, i), sha("d", 1+i), l.queue...)
		in.Requires = req
		h.accept(a, in, false)
	}
	e := h.env(env)
	if len(e.Scopes) != n || e.Scopes["svc-000"].Freeze == nil || len(e.Scopes[l.queue[0]].Queue) != 1 ||
		e.Scopes[l.held[0]].Lease.Token == 0 || e.Scopes["svc-001"].Prev == nil || e.Scopes[last].Failure == nil {
		h.t.Fatalf("the environment to move lacks some state: %d scopes, freeze %v, queue %v, lease %+v, prev %v, failure %v", len(e.Scopes),
			e.Scopes["svc-000"].Freeze, e.Scopes[l.queue[0]].Queue, e.Scopes[l.held[0]].Lease, e.Scopes["svc-001"].Prev, e.Scopes[last].Failure)
	}
	return l
}

// movedEnv reads an environment whatever its layout, whole, with its timeline.
func (h *harness) movedEnv(env string) *authority.Env {
	h.t.Helper()
	e, err := h.authority(h.store.inner).State(h.ctx, env)
	if err != nil || e == nil {
		h.t.Fatalf("state of %s: %v, %v", env, e, err)
	}
	e.Events = h.history(env)
	return e
}

// layoutOf says which layout env's stored document is in: "single", "per-scope", or "moving"
// for a move not finished (a head that still holds the scopes).
func (h *harness) layoutOf(env string) string {
	h.t.Helper()
	d, err := h.store.inner.Get(h.ctx, authority.EnvKey(env))
	if err != nil {
		h.t.Fatalf("get %s: %v", env, err)
	}
	switch {
	case d.Env.Part != "head":
		return "single"
	case len(d.Env.Scopes) > 0:
		return "moving"
	}
	return "per-scope"
}

// wantSame fails the test unless after holds what before did: every scope exactly, the
// counters, the settings, and the timeline (which may have grown since).
func wantSame(t *testing.T, what string, before, after *authority.Env) {
	t.Helper()
	if after.Desired != before.Desired || after.Observed != before.Observed || after.Policy != before.Policy {
		t.Fatalf("%s: %d/%d policy %q; want %d/%d policy %q", what, after.Observed, after.Desired, after.Policy, before.Observed, before.Desired, before.Policy)
	}
	if diff := cmp.Diff(before.Requires, after.Requires); diff != "" {
		t.Fatalf("%s: requirements changed (-before +after):\n%s", what, diff)
	}
	if diff := cmp.Diff(before.Scopes, after.Scopes); diff != "" {
		t.Fatalf("%s: scopes changed (-before +after):\n%s", what, diff)
	}
	// The per-scope layout's timeline is in time order, then by scope: the events before the
	// move are the head's, numbered as they were.
	type ev struct {
		Seq   int64
		Kind  authority.EventKind
		Scope string
		Gen   int64
	}
	have := map[ev]int{}
	for _, e := range after.Events {
		have[ev{e.Seq, e.Kind, e.Scope, e.Generation}]++
	}
	for _, e := range before.Events {
		k := ev{e.Seq, e.Kind, e.Scope, e.Generation}
		if have[k] == 0 {
			t.Fatalf("%s: event %+v of the timeline before is missing (or repeated before)", what, k)
		}
		have[k]--
	}
}

// testMoveKeepsEverything: a full environment of layout 4 moved to the per-scope layout keeps
// every scope's state, its counters and its timeline; the pass that held leases before the move
// completes with its tokens after it, the queue moves on, intent ids accepted before are still
// repeats, and the environment takes scopes past the single document's cap.
func testMoveKeepsEverything(t *testing.T, h *harness) {
	h.singleDocument("moves environments of the single document")
	a := h.process()
	l := h.buildLayout4(a, "prod", fullScopes)
	before := h.movedEnv("prod")
	mover := h.process()
	res, err := mover.MoveToScopes(h.ctx, "prod")
	if err != nil {
		t.Fatalf("move: %v", err)
	}
	if res.Already || res.Scopes != fullScopes || res.Desired != before.Desired {
		t.Fatalf("move: %+v; want %d scopes moved at generation %d", res, fullScopes, before.Desired)
	}
	if got := h.layoutOf("prod"); got != "per-scope" {
		t.Fatalf("after the move the environment is %s; want per-scope", got)
	}
	after := h.movedEnv("prod")
	wantSame(t, "after the move", before, after)
	if len(after.Events) != len(before.Events) {
		t.Fatalf("the move recorded %d events; want none", len(after.Events)-len(before.Events))
	}
	if again, err := h.process().MoveToScopes(h.ctx, "prod"); err != nil || !again.Already {
		t.Fatalf("move again: %+v, %v; want already moved", again, err)
	}
	h.wantWorksAfterMove(a, l, before)
}

// wantWorksAfterMove checks that a moved environment goes on: the grant taken before completes
// (from the process that took it, which remembers the single document), a repeat of an intent
// accepted before is a repeat, the queue's next intent deploys, and scopes past 64 are taken.
func (h *harness) wantWorksAfterMove(old *authority.Authority, l *layout4, before *authority.Env) {
	h.t.Helper()
	env := l.env
	res := h.complete(old, l.grant, authority.OutcomeSuccess, "run-c")
	for s, r := range res.Results {
		if r != authority.ResultDeployed {
			h.t.Fatalf("the pass that held %s before the move completed it as %s; want deployed", s, r)
		}
	}
	again := push(env, env+"-c", sha("a", 1), l.held...)
	again.Requires = before.Requires
	if rep := h.accept(h.process(), again, false); !rep.Duplicate || rep.Generation != l.grant.Generation {
		h.t.Fatalf("a re-delivery of an intent accepted before the move: %+v; want a repeat of generation %d", rep, l.grant.Generation)
	}
	a := h.process()
	head := before.Scopes[l.queue[0]].Mailbox.Generation
	h.deploy(a, env, head, "run-q0", "run-q0", l.queue...)
	after := h.movedEnv(env)
	if m := after.Scopes[l.queue[0]].Mailbox; m == nil || m.Generation != before.Scopes[l.queue[0]].Queue[0].Generation {
		h.t.Fatalf("after the queue's head deployed the mailbox is %+v; want the intent that waited behind it", m)
	}
	wide := push(env, env+"-wide", sha("a", 1), scopeNames(0, 3*fullScopes)...)
	wide.Requires = before.Requires
	if _, err := a.Accept(h.ctx, wide, false); err != nil {
		h.t.Fatalf("an intent of %d scopes after the move: %v", 3*fullScopes, err)
	}
	if n := len(h.movedEnv(env).Scopes); n != max(3*fullScopes, l.n) {
		h.t.Fatalf("after an intent of %d scopes the environment has %d", 3*fullScopes, n)
	}
}

// testMoveStoppedAtEveryRequest: a move stopped at each of its requests in turn leaves a whole
// environment to every reader, and whoever comes next (the move run again, a writer, or the
// sweep) finishes it with nothing lost: at every request of an environment of 8 scopes with every
// kind of state, and at every seventh of a full one of 64.
func testMoveStopped(t *testing.T, h *harness) {
	h.singleDocument("moves environments of the single document")
	for _, size := range []struct{ n, every int }{{8, 1}, {fullScopes, 7}} {
		count := &stoppingStore{Store: h.store}
		l := h.buildLayout4(h.process(), fmt.Sprintf("count-%d", size.n), size.n)
		if _, err := h.authority(count).MoveToScopes(h.ctx, l.env); err != nil {
			t.Fatalf("move: %v", err)
		}
		total := count.steps
		if total < size.n+3 {
			t.Fatalf("a move of %d scopes made %d requests; want one per scope and more", size.n, total)
		}
		for stop := 1; stop <= total; stop += size.every {
			h.moveStoppedAt(t, size.n, stop, total)
		}
	}
	// One stopped half way goes on as any environment does.
	last := h.process()
	l := h.buildLayout4(last, "stop-last", fullScopes)
	before := h.movedEnv(l.env)
	if _, err := h.authority(&stoppingStore{Store: h.store, stop: fullScopes / 2}).MoveToScopes(h.ctx, l.env); !errors.Is(err, errStopped) {
		t.Fatalf("stopped half way: %v", err)
	}
	h.wantWorksAfterMove(last, l, before)
}

// moveStoppedAt moves an environment of n scopes, stopped at request stop of total, then lets
// the next process finish it (which one turns with stop) and checks what it holds all along.
func (h *harness) moveStoppedAt(t *testing.T, n, stop, total int) {
	t.Helper()
	l := h.buildLayout4(h.process(), fmt.Sprintf("stop-%d-%03d", n, stop), n)
	before := h.movedEnv(l.env)
	_, err := h.authority(&stoppingStore{Store: h.store, stop: stop}).MoveToScopes(h.ctx, l.env)
	if err != nil && !errors.Is(err, errStopped) {
		t.Fatalf("stopped at request %d of %d: %v", stop, total, err)
	}
	state := h.layoutOf(l.env)
	wantSame(t, fmt.Sprintf("read after a stop at request %d of %d (%s)", stop, total, state), before, h.movedEnv(l.env))
	next := h.process()
	switch stop % 3 {
	case 0:
		_, err = next.MoveToScopes(h.ctx, l.env)
	case 1: // a writer: the pass that holds leases renews them
		err = next.Renew(h.ctx, l.grant, testTTL)
	case 2:
		var rep *authority.SweepReport
		if rep, err = next.Sweep(h.ctx, time.Hour, 3, func(context.Context, authority.StalledWork) error { return nil }); err == nil && len(rep.Failed) > 0 {
			err = fmt.Errorf("sweep: %v", rep.Failed)
		}
	}
	if err != nil {
		t.Fatalf("stopped at request %d of %d (%s), then finishing: %v", stop, total, state, err)
	}
	if got := h.layoutOf(l.env); state == "moving" && got != "per-scope" {
		t.Fatalf("stopped at request %d of %d: the next process left the move %s", stop, total, got)
	}
	if _, err := h.process().MoveToScopes(h.ctx, l.env); err != nil {
		t.Fatalf("stopped at request %d of %d: move again: %v", stop, total, err)
	}
	wantSame(t, fmt.Sprintf("stopped at request %d of %d (%s), then finished", stop, total, state), before, h.movedEnv(l.env))
	if got := h.layoutOf(l.env); got != "per-scope" {
		t.Fatalf("stopped at request %d of %d: the environment is %s after the move ran again", stop, total, got)
	}
}

// testMoveRacing: four processes move one environment at once while eight others accept intents
// in its scopes: the move ends once, and every intent accepted is in its scope's pending work.
func testMoveRacing(t *testing.T, h *harness) {
	h.singleDocument("moves environments of the single document")
	for round := range rounds(4, 2) {
		l := h.buildLayout4(h.process(), fmt.Sprintf("race-%d", round), fullScopes)
		var wg sync.WaitGroup
		begin := make(chan struct{})
		accepted := make([]*authority.AcceptResult, 8)
		for i := range 12 {
			wg.Go(func() {
				<-begin
				a := h.process()
				if i >= 8 {
					if _, err := a.MoveToScopes(h.ctx, l.env); err != nil {
						t.Errorf("move: %v", err)
					}
					return
				}
				in := push(l.env, fmt.Sprintf("racer-%d", i), sha("a", 1), fmt.Sprintf("svc-%03d", 16+i))
				in.Requires = &authority.Requirements{Environments: []string{l.env + "-staging"}}
				res, err := a.Accept(h.ctx, in, false)
				if err != nil {
					t.Errorf("accept beside the move: %v", err)
					return
				}
				accepted[i] = res
			})
		}
		close(begin)
		wg.Wait()
		if t.Failed() {
			return
		}
		if res, err := h.process().MoveToScopes(h.ctx, l.env); err != nil || !res.Already {
			t.Fatalf("round %d: move after the race: %+v, %v; want it done already", round, res, err)
		}
		e := h.movedEnv(l.env)
		for i, res := range accepted {
			sc := e.Scopes[fmt.Sprintf("svc-%03d", 16+i)]
			found := sc.Mailbox != nil && sc.Mailbox.Generation == res.Generation
			for _, q := range sc.Queue {
				found = found || q.Generation == res.Generation
			}
			if !found {
				t.Fatalf("round %d: racer %d's intent (generation %d) is not pending in its scope after the move: %+v", round, i, res.Generation, sc)
			}
		}
	}
}

// testLayoutSettings: the store's settings choose the layout of new environments, for every
// process that reads them; environments already stored keep theirs until moved.
func testLayoutSettings(t *testing.T, h *harness) {
	h.singleDocument("the settings choose the layout; this subtest forces one")
	old := h.process()
	if per, err := old.PerScopeDefault(h.ctx); err != nil || per {
		t.Fatalf("a fresh store: per-scope %v, %v; want the single document", per, err)
	}
	h.accept(old, push("before", "b1", sha("b", 1), "api"), false)
	if err := h.process().SetPerScopeDefault(h.ctx); err != nil {
		t.Fatalf("set the per-scope layout: %v", err)
	}
	if err := h.process().SetPerScopeDefault(h.ctx); err != nil {
		t.Fatalf("set it again: %v", err)
	}
	h.accept(h.process(), push("after", "a1", sha("a", 1), scopeNames(0, fullScopes+1)...), false)
	if got := h.layoutOf("after"); got != "per-scope" {
		t.Fatalf("an environment created after the setting is %s; want per-scope", got)
	}
	if got := h.layoutOf("before"); got != "single" {
		t.Fatalf("an environment created before the setting is %s; want it kept until moved", got)
	}
	// A process that read the settings before they changed reads them again within a minute.
	h.clock.Advance(time.Minute)
	h.accept(old, push("later", "l1", sha("c", 1), "api"), false)
	if got := h.layoutOf("later"); got != "per-scope" {
		t.Fatalf("an environment created a minute after the setting by an older process is %s; want per-scope", got)
	}
}
