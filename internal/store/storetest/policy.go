package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Policies beyond latest-wins: under policy queue every accepted intent deploys, in generation
// order, and the queue is bounded with a refusal; under policy latest a barrier is never
// superseded and newer intents wait behind it; a terminal failure of a queue head or a barrier
// blocks until someone decides; switching policies is recorded; the sweep re-drives queue heads.
func policyCases() []testCase {
	return []testCase{
		{"QueueDeploysInGenerationOrder", testQueueOrder},
		{"QueueBound", testQueueBound},
		{"BarrierWaitsAndResumes", testBarrier},
		{"TerminalFailureBlocks", testFailureBlocks},
		{"SwitchBothWays", testPolicySwitch},
		{"SweepRedrivesQueueHead", testSweepQueueHead},
		{"RefusalRecordedOnce", testRefusalRecordedOnce},
		{"TakenOverHeadGoesFirst", testTakenOverHead},
		{"TakenOverHeadThatFailedBlocks", testTakenOverHeadFailed},
		{"TakenOverHeadSupersededWhileDeploying", testTakenOverHeadSwitched},
		{"SecondTakenOverHeadSupersededWhileDeploying", testTakenOverSecondHead},
	}
}

// queued is a push to main with the environment's policy set to queue.
func queued(env, id, commit string, scopes ...string) authority.Intent {
	in := push(env, id, commit, scopes...)
	in.Policy = authority.PolicyQueue
	return in
}

// tryDeploy runs the deploy of the pass at gen as far as it may go now: gate with a lease, and on
// a grant complete with success. It returns the refusal when the pass must wait.
func (h *harness) tryDeploy(a *authority.Authority, env string, gen int64, holder string, scopes ...string) (*authority.HeldError, error) {
	h.t.Helper()
	g, err := a.Gate(h.ctx, authority.GateRequest{Environment: env, Generation: gen, Scopes: scopes, Phase: "deploy", Holder: holder, LeaseTTL: testTTL})
	var held *authority.HeldError
	if errors.As(err, &held) {
		return held, nil
	}
	if err != nil {
		return nil, err
	}
	res := h.complete(a, g, authority.OutcomeSuccess, holder)
	for _, s := range scopes {
		if res.Results[s] != authority.ResultDeployed {
			return nil, fmt.Errorf("deploy %s at %d: %s", s, gen, res.Results[s])
		}
	}
	return nil, nil
}

// Three commits accepted in push order (the App), then their three passes arriving in every
// order, each a process of its own, each trying to deploy as soon as it arrives and again after
// every deploy: they deploy in generation order, every one of them, and each waiting pass is told
// how many are ahead of it.
func testQueueOrder(t *testing.T, h *harness) {
	round := 0
	Permutations(3, func(order []int) {
		round++
		env := fmt.Sprintf("queue-%d", round)
		app := h.process()
		for i := range 3 {
			h.accept(app, queued(env, fmt.Sprintf("push-%d", i), sha("q", i), "api"), false)
		}
		var deployed []int64
		var arrived []int
		passes := map[int]*authority.Authority{}
		for _, k := range order {
			// The pass's own intent (its run) joins the generation the App accepted for its commit.
			p := h.process()
			res := h.accept(p, queued(env, fmt.Sprintf("run-%d", k), sha("q", k), "api"), true)
			if res.Generation != int64(k+1) || !res.Joined || res.Ahead["api"] != k-len(deployed) {
				t.Fatalf("order %v: pass %d accepted %+v; want it to join generation %d with its place in the queue", order, k, res, k+1)
			}
			passes[k] = p
			arrived = append(arrived, k)
			// Every pass that has arrived tries to deploy, oldest arrival first, until none can.
			for progress := true; progress; {
				progress = false
				for _, j := range arrived {
					if slices.Contains(deployed, int64(j+1)) {
						continue
					}
					held, err := h.tryDeploy(passes[j], env, int64(j+1), fmt.Sprintf("run-%d", j), "api")
					if err != nil {
						t.Fatalf("order %v: pass %d: %v", order, j, err)
					}
					if held != nil {
						if want := j - len(deployed); held.Ahead != want || !strings.Contains(held.Error(), fmt.Sprintf("queued: %d ahead of this commit", want)) {
							t.Fatalf("order %v: pass %d told %q (ahead %d); want %d ahead", order, j, held, held.Ahead, want)
						}
						continue
					}
					deployed = append(deployed, int64(j+1))
					progress = true
				}
			}
		}
		if !slices.Equal(deployed, []int64{1, 2, 3}) {
			t.Fatalf("arrival order of the passes %v: deployed generations %v; want 1, 2, 3", order, deployed)
		}
		e := h.env(env)
		if e.Observed != 3 || e.Scopes["api"].Live.Sha != sha("q", 2) || len(eventsOf(e, authority.EventSuperseded)) != 0 {
			t.Fatalf("order %v: observed %d, live %+v, %d superseded; want 3, the newest, none", order, e.Observed, e.Scopes["api"].Live,
				len(eventsOf(e, authority.EventSuperseded)))
		}
	})
}

// A scope holds at most the queue limit of pending intents: one more is refused with
// ErrQueueFull and nothing is written; once the head deploys, there is room again.
func testQueueBound(t *testing.T, h *harness) {
	a := h.authority(h.store, authority.WithQueueLimit(3))
	for i := range 3 {
		h.accept(a, queued("staging", fmt.Sprintf("p%d", i), sha("b", i), "api"), false)
	}
	before := h.doc(authority.EnvKey("staging"))
	_, err := a.Accept(h.ctx, queued("staging", "p3", sha("b", 3), "api"), false)
	var full *authority.QueueFullError
	if !errors.Is(err, authority.ErrQueueFull) || !errors.As(err, &full) || full.Limit != 3 || full.Scope != "api" {
		t.Fatalf("a fourth intent in a queue of 3: %v; want a QueueFullError naming api and the limit", err)
	}
	after := h.doc(authority.EnvKey("staging"))
	if after.Rev != before.Rev || after.Env.Desired != 3 || len(after.Env.Scopes["api"].Entries()) != 3 {
		t.Fatalf("the refused intent wrote: rev %d -> %d, desired %d, %d pending", before.Rev, after.Rev, after.Env.Desired, len(after.Env.Scopes["api"].Entries()))
	}
	h.deploy(a, "staging", 1, "run-1", "run-1", "api")
	// The per-scope layout may skip the generation the refused accept took (design.md §9).
	if res := h.accept(a, queued("staging", "p3", sha("b", 3), "api"), false); res.Generation < 4 || !h.split && res.Generation != 4 || res.Ahead["api"] != 2 {
		t.Fatalf("after the head deployed: %+v; want generation 4 (or newer, in the per-scope layout), 2 ahead", res)
	}
}

// Under policy latest, a barrier is never superseded: the newer intents wait behind it, collapsing
// to the newest among them, and once the barrier has its outcome, the newest goes.
func testBarrier(t *testing.T, h *harness) {
	a := h.process()
	mig := push("staging", "mig", sha("m", 1), "api", "web")
	mig.Barrier = []string{"api"}
	res := h.accept(a, mig, true)
	g := h.gate(a, "staging", res.Generation, "run-mig", "api", "web")
	// Two ordinary commits arrive while the migration deploys.
	h.accept(h.process(), push("staging", "c2", sha("c", 2), "api", "web"), false)
	p3 := h.process()
	r3 := h.accept(p3, push("staging", "c3", sha("c", 3), "api", "web"), true)
	sc := h.scope("staging", "api")
	if sc.Mailbox.Sha != mig.Sha || len(sc.Queue) != 1 || sc.Queue[0].Sha != sha("c", 3) || r3.Ahead["api"] != 1 {
		t.Fatalf("api behind the barrier: head %+v, queue %+v, ahead %v; want the barrier, then only the newest", sc.Mailbox, sc.Queue, r3.Ahead)
	}
	if web := h.scope("staging", "web"); web.Mailbox.Sha != sha("c", 3) || len(web.Queue) != 0 {
		t.Fatalf("web, where the commit is no barrier: %+v %+v; want latest-wins", web.Mailbox, web.Queue)
	}
	// The newest waits on api: told the barrier it waits for.
	_, err := p3.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: r3.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-3", LeaseTTL: testTTL})
	var held *authority.HeldError
	if !errors.As(err, &held) || held.Barrier != mig.Sha || !strings.Contains(err.Error(), "waiting for barrier "+mig.Sha[:7]) {
		t.Fatalf("gate of the newest behind the barrier: %v; want it to wait for barrier %s", err, mig.Sha[:7])
	}
	// The barrier's pass deploys api (web was superseded under it, and its deploy there is recorded).
	h.complete(a, g, authority.OutcomeSuccess, "run-mig")
	if live := h.scope("staging", "api").Live; live == nil || live.Sha != mig.Sha {
		t.Fatalf("api live after the barrier's pass: %+v; want the barrier", live)
	}
	h.gate(p3, "staging", r3.Generation, "run-3", "api")
	e := h.env("staging")
	if n := countEvents(e, authority.EventSuperseded, func(ev authority.Event) bool { return ev.Sha == mig.Sha && ev.Scope == "api" }); n != 0 {
		t.Fatalf("the barrier was superseded %d times on api", n)
	}
	if n := countEvents(e, authority.EventSuperseded, func(ev authority.Event) bool { return ev.Sha == sha("c", 2) && ev.Scope == "api" }); n != 1 {
		t.Fatalf("the commit between the barrier and the newest has %d superseded events on api, want 1", n)
	}
}

// A terminal failure of a queue head blocks what waits behind it: the next pass is told it is
// blocked, the sweep does not re-drive the failure, observed moves past it; skip lets the next go,
// retry puts the failed one back for the sweep.
func testFailureBlocks(t *testing.T, h *harness) {
	for _, action := range []authority.DecisionAction{authority.DecideSkip, authority.DecideRetry} {
		env := "staging-" + string(action)
		a := h.process()
		r1 := h.accept(a, queued(env, "p1", sha("f", 1), "api"), true)
		p2 := h.process()
		r2 := h.accept(p2, queued(env, "p2", sha("f", 2), "api"), true)
		g := h.gate(a, env, r1.Generation, "run-1", "api")
		res, err := a.Complete(h.ctx, authority.Completion{Environment: env, Generation: g.Generation, Scopes: []string{"api"}, Holder: g.Holder,
			Tokens: g.Tokens, Outcome: authority.OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "migration 42 failed"})
		if err != nil || res.Results["api"] != authority.ResultFailed {
			t.Fatalf("%s: final failure of the head: %+v, %v", action, res, err)
		}
		held, err := h.tryDeploy(p2, env, r2.Generation, "run-2", "api")
		if err != nil || held == nil || !held.Blocked || held.HeadSha != sha("f", 1) {
			t.Fatalf("%s: the pass behind a failed head: %+v, %v; want it blocked by %s", action, held, err, sha("f", 1))
		}
		if e := h.env(env); e.Observed != 1 || e.Scopes["api"].Failure == nil {
			t.Fatalf("%s: observed %d, failure %+v; want 1 (the failure is an outcome) and the failure shown", action, e.Observed, e.Scopes["api"].Failure)
		}
		h.clock.Advance(time.Hour)
		var redriven []authority.StalledWork
		if _, err := h.process().Sweep(h.ctx, time.Minute, 3, func(_ context.Context, w authority.StalledWork) error {
			if w.Environment == env {
				redriven = append(redriven, w)
			}
			return nil
		}); err != nil || len(redriven) != 0 {
			t.Fatalf("%s: sweep of a blocked scope: %+v, %v; want nothing re-driven", action, redriven, err)
		}
		if _, err := a.Decide(h.ctx, authority.Decision{Environment: env, Scope: "web", Action: action, Reason: "x"}); err == nil {
			t.Fatalf("%s: a decision about a scope that does not exist was accepted", action)
		}
		failed, err := h.process().Decide(h.ctx, authority.Decision{Environment: env, Scope: "api", Action: action, Reason: "fixed by hand", Actor: "octocat"})
		if err != nil || failed.Sha != sha("f", 1) {
			t.Fatalf("%s: decide: %+v, %v", action, failed, err)
		}
		if _, err := a.Decide(h.ctx, authority.Decision{Environment: env, Scope: "api", Action: action, Reason: "again"}); action == authority.DecideSkip && !errors.Is(err, authority.ErrNotBlocked) {
			t.Fatalf("%s: a second skip: %v; want ErrNotBlocked", action, err)
		}
		held, err = h.tryDeploy(p2, env, r2.Generation, "run-2", "api")
		switch action {
		case authority.DecideSkip:
			if err != nil || held != nil {
				t.Fatalf("skip: the next pass: %+v, %v; want it deployed", held, err)
			}
		case authority.DecideRetry:
			if err != nil || held == nil || held.Blocked || held.Ahead != 1 {
				t.Fatalf("retry: the next pass: %+v, %v; want it waiting, one ahead, not blocked", held, err)
			}
			if _, err := h.process().Sweep(h.ctx, time.Minute, 3, func(_ context.Context, w authority.StalledWork) error {
				if w.Environment == env {
					redriven = append(redriven, w)
				}
				return nil
			}); err != nil || len(redriven) != 1 || redriven[0].Generation != 1 || redriven[0].Attempt != 1 {
				t.Fatalf("retry: sweep: %+v, %v; want generation 1 re-driven from its first attempt", redriven, err)
			}
		}
	}
}

// Latest to queue keeps the pending intent as the queue's head; queue to latest supersedes all
// but the newest (barriers stay). Each switch is one recorded event.
func testPolicySwitch(t *testing.T, h *harness) {
	a := h.process()
	h.accept(a, push("staging", "p1", sha("s", 1), "api"), false)
	h.accept(a, queued("staging", "p2", sha("s", 2), "api"), false)
	h.accept(a, queued("staging", "p3", sha("s", 3), "api"), false)
	sc := h.scope("staging", "api")
	if got := shas(sc.Entries()); !slices.Equal(got, []string{sha("s", 1), sha("s", 2), sha("s", 3)}) {
		t.Fatalf("after switching to queue: pending %v; want the latest-wins entry kept as the head, then the two newer", got)
	}
	barrier := queued("staging", "p4", sha("s", 4), "api")
	barrier.Barrier = []string{"api"}
	h.accept(a, barrier, false)
	h.accept(a, queued("staging", "p5", sha("s", 5), "api"), false)
	if changed, err := a.SetPolicy(h.ctx, "staging", authority.PolicyLatest, "octocat"); err != nil || !changed {
		t.Fatalf("set policy latest: %v, %v", changed, err)
	}
	e := h.env("staging")
	if got := shas(e.Scopes["api"].Entries()); !slices.Equal(got, []string{sha("s", 4), sha("s", 5)}) {
		t.Fatalf("after switching to latest: pending %v; want the barrier and the newest", got)
	}
	for _, i := range []int{1, 2, 3} {
		if n := countEvents(e, authority.EventSuperseded, func(ev authority.Event) bool { return ev.Sha == sha("s", i) }); n != 1 {
			t.Fatalf("after switching to latest: %s has %d superseded events, want 1", sha("s", i), n)
		}
	}
	if e.PolicyOrDefault() != authority.PolicyLatest || len(eventsOf(e, authority.EventPolicy)) != 2 || e.Observed != 3 {
		t.Fatalf("policy %q, %d policy events, observed %d; want latest, 2, 3", e.PolicyOrDefault(), len(eventsOf(e, authority.EventPolicy)), e.Observed)
	}
	if changed, err := a.SetPolicy(h.ctx, "staging", authority.PolicyLatest, "octocat"); err != nil || changed {
		t.Fatalf("setting the policy it has: changed %v, %v; want nothing", changed, err)
	}
}

func shas(refs []*authority.Ref) []string {
	out := []string{}
	for _, r := range refs {
		out = append(out, r.Sha)
	}
	return out
}

// The recovery sweep re-drives the head of a queue, never an intent behind it: a crashed head is
// re-driven first, and the next only once the head deployed and it stalled in turn.
func testSweepQueueHead(t *testing.T, h *harness) {
	const stall = 10 * time.Minute
	a := h.process()
	r1 := h.accept(a, queued("staging", "p1", sha("w", 1), "api"), true)
	h.gate(a, "staging", r1.Generation, "crashed", "api") // took the lease, then died
	h.accept(h.process(), queued("staging", "p2", sha("w", 2), "api"), true)
	sweep := func() []authority.StalledWork {
		t.Helper()
		var got []authority.StalledWork
		rep, err := h.process().Sweep(h.ctx, stall, 3, func(_ context.Context, w authority.StalledWork) error {
			got = append(got, w)
			return nil
		})
		if err != nil || len(rep.Failed) > 0 {
			t.Fatalf("sweep: %+v, %v", rep, err)
		}
		return got
	}
	h.clock.Advance(testTTL + h.skew + stall)
	if got := sweep(); len(got) != 1 || got[0].Generation != 1 {
		t.Fatalf("first sweep re-drove %+v; want the head, generation 1, only", got)
	}
	// The re-driven pass deploys the head; the next one's pass died before it was its turn.
	g := h.gate(h.process(), "staging", 1, "redriven-1", "api")
	h.complete(h.process(), g, authority.OutcomeSuccess, "redriven-1")
	if got := sweep(); len(got) != 0 {
		t.Fatalf("a sweep right after the head deployed re-drove %+v; the new head has not stalled yet", got)
	}
	h.clock.Advance(stall)
	if got := sweep(); len(got) != 1 || got[0].Generation != 2 || got[0].Scopes[0] != "api" {
		t.Fatalf("sweep after the new head stalled: %+v; want generation 2", got)
	}
}

// takeOver queues a commit for web, then lets the pass of a newer intent for api claim every
// pending scope: it takes over web's head. It returns that pass's generation.
func (h *harness) takeOver(a *authority.Authority, env string) int64 {
	h.t.Helper()
	h.accept(a, queued(env, "push-web", sha("w", 1), "web"), false)
	res := h.accept(a, queued(env, "push-api", sha("a", 1), "api"), false)
	claim, err := a.Claim(h.ctx, env, res.Generation, nil) // every pending scope
	if err != nil || !slices.Equal(claim.Scopes(), []string{"api", "web"}) {
		h.t.Fatalf("claim of every pending scope at %d: %+v, %v", res.Generation, claim, err)
	}
	return res.Generation
}

// A pass that took over a queue's head (it claimed every pending scope) deploys it, although a
// newer intent was queued behind that head since: the newer one waits behind the head, it does not
// supersede the pass that owns it. Otherwise nobody could deploy the head: its own pass no longer
// owns the scope, the newer one waits for it, and the sweep re-drives the owner.
func testTakenOverHead(t *testing.T, h *harness) {
	const env = "taken-over"
	a := h.process()
	owner := h.takeOver(a, env)
	newer := h.accept(a, queued(env, "push-web-2", sha("w", 2), "web"), true)

	b := h.process()
	if _, err := b.Gate(h.ctx, authority.GateRequest{Environment: env, Generation: 1, Scopes: []string{"web"}, Phase: "deploy", Holder: "run-1", LeaseTTL: testTTL}); !errors.Is(err, authority.ErrSuperseded) {
		t.Fatalf("the head's own pass, no longer its owner: %v; want superseded", err)
	}
	work, _, err := b.Stalled(h.ctx, 0, 3)
	if err != nil || len(work) != 1 || work[0].Generation != owner || !slices.Equal(work[0].Scopes, []string{"api", "web"}) {
		t.Fatalf("stalled work %+v, %v; want generation %d re-driven for api and web", work, err, owner)
	}
	// The re-driven pass claims again and deploys web's head, then the newer intent goes.
	h.claim(b, env, owner, "web")
	if held, err := h.tryDeploy(b, env, owner, fmt.Sprintf("run-%d", owner), "web"); err != nil || held != nil {
		t.Fatalf("the pass that owns web's head: held %v, %v; want it deployed", held, err)
	}
	if l := h.scope(env, "web").Live; l == nil || l.Sha != sha("w", 1) || l.Generation != owner {
		t.Fatalf("web live %+v; want %.7s deployed by generation %d", l, sha("w", 1), owner)
	}
	if held, err := h.tryDeploy(b, env, newer.Generation, "run-newer", "web"); err != nil || held != nil {
		t.Fatalf("the newer intent after the head: held %v, %v; want it deployed", held, err)
	}
	if e := h.env(env); e.Scopes["web"].Mailbox != nil || e.Scopes["web"].Live.Sha != sha("w", 2) {
		t.Fatalf("web: pending %v, live %+v; want %.7s live, nothing pending", e.Scopes["web"].Entries(), e.Scopes["web"].Live, sha("w", 2))
	}
}

// A pass that took over a queue's head and failed it on its final attempt may not deploy it when it
// runs again (a re-run of its workflow): the failure blocks until someone decides, whichever pass
// owned the head. Reporting the same final failure again changes nothing.
func testTakenOverHeadFailed(t *testing.T, h *harness) {
	const env = "taken-over-failed"
	a := h.process()
	owner := h.takeOver(a, env)
	g := h.gate(a, env, owner, "run-owner", "web")
	failure := authority.Completion{Environment: env, Generation: owner, Scopes: []string{"web"}, Holder: g.Holder, Tokens: g.Tokens,
		Outcome: authority.OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "exit status 1"}
	if res, err := a.Complete(h.ctx, failure); err != nil || res.Results["web"] != authority.ResultFailed {
		t.Fatalf("final failure: %+v, %v", res, err)
	}
	again := h.process()
	if _, err := again.Gate(h.ctx, authority.GateRequest{Environment: env, Generation: owner, Scopes: []string{"web"}, Phase: "deploy", Holder: "run-owner", LeaseTTL: testTTL}); !errors.Is(err, authority.ErrSuperseded) {
		t.Fatalf("the pass that failed web's head, run again: %v; want refused, its work there ended", err)
	}
	failure.Tokens = nil
	if res, err := again.Complete(h.ctx, failure); err != nil || res.Results["web"] != authority.ResultFailed {
		t.Fatalf("the final failure reported again: %+v, %v; want failed", res, err)
	}
	e := h.env(env)
	if m := e.Scopes["web"].Mailbox; m == nil || !m.Failed || m.Generation != 1 || e.Scopes["web"].Live != nil {
		t.Fatalf("web: head %+v, live %+v; want generation 1 failed and blocking, nothing deployed", m, e.Scopes["web"].Live)
	}
	if n := countEvents(e, authority.EventFailed, func(ev authority.Event) bool { return ev.Scope == "web" }); n != 1 {
		t.Fatalf("%d failed events for web; want 1", n)
	}
}

// A pass deploys the queue head it took over when the switch to latest supersedes that head by the
// intent behind it, which is older than the pass: its success records what it deployed, and the
// intent behind stays pending for its deploy, not ended as deployed by a deploy of another commit.
func testTakenOverHeadSwitched(t *testing.T, h *harness) {
	const env = "taken-over-switched"
	a := h.process()
	h.accept(a, queued(env, "push-web", sha("w", 1), "web"), false)
	behind := h.accept(a, queued(env, "push-web-2", sha("w", 2), "web"), false)
	owner := h.accept(a, queued(env, "push-api", sha("a", 1), "api"), false).Generation
	if claim, err := a.Claim(h.ctx, env, owner, nil); err != nil || !slices.Equal(claim.Scopes(), []string{"api", "web"}) {
		t.Fatalf("claim of every pending scope at %d: %+v, %v", owner, claim, err)
	}
	g := h.gate(a, env, owner, "run-owner", "web") // deploying w1, the head
	if _, err := h.process().SetPolicy(h.ctx, env, authority.PolicyLatest, "octocat"); err != nil {
		t.Fatal(err)
	}
	res := h.complete(a, g, authority.OutcomeSuccess, "run-owner")
	sc := h.scope(env, "web")
	if res.Results["web"] != authority.ResultDeployed || sc.Live == nil || sc.Live.Sha != sha("w", 1) || sc.Live.Generation != owner {
		t.Fatalf("result %s, live %+v; want %.7s live, deployed by generation %d", res.Results["web"], sc.Live, sha("w", 1), owner)
	}
	if m := sc.Mailbox; m == nil || m.Generation != behind.Generation || m.Sha != sha("w", 2) {
		t.Fatalf("web pending %+v; want generation %d (%.7s) still pending: nothing deployed it", m, behind.Generation, sha("w", 2))
	}
}

// A pass that took over a queue's heads deploys the first, then the next; a newer intent
// supersedes the second while it deploys: its success still records what it deployed, although
// live already has the pass's generation (its first deploy).
func testTakenOverSecondHead(t *testing.T, h *harness) {
	const env = "taken-over-second"
	a := h.process()
	h.accept(a, queued(env, "push-web", sha("w", 1), "web"), false)
	h.accept(a, queued(env, "push-web-2", sha("w", 2), "web"), false)
	owner := h.accept(a, queued(env, "push-api", sha("a", 1), "api"), false).Generation
	if claim, err := a.Claim(h.ctx, env, owner, nil); err != nil || !slices.Equal(claim.Scopes(), []string{"api", "web"}) {
		t.Fatalf("claim of every pending scope at %d: %+v, %v", owner, claim, err)
	}
	h.complete(a, h.gate(a, env, owner, "run-owner", "web"), authority.OutcomeSuccess, "run-owner") // w1, the first head
	g := h.gate(a, env, owner, "run-owner", "web")                                                  // w2, the next
	if _, err := a.SetPolicy(h.ctx, env, authority.PolicyLatest, "octocat"); err != nil {
		t.Fatal(err)
	}
	newer := h.accept(h.process(), push(env, "push-web-3", sha("w", 3), "web"), false)
	res := h.complete(a, g, authority.OutcomeSuccess, "run-owner")
	sc := h.scope(env, "web")
	if res.Results["web"] != authority.ResultDeployed || sc.Live == nil || sc.Live.Sha != sha("w", 2) || sc.Live.Generation != owner {
		t.Fatalf("result %s, live %+v; want %.7s live, deployed by generation %d", res.Results["web"], sc.Live, sha("w", 2), owner)
	}
	if m := sc.Mailbox; m == nil || m.Generation != newer.Generation {
		t.Fatalf("web pending %+v; want generation %d", m, newer.Generation)
	}
}
