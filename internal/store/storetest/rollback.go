package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Rollback: an older commit asked for explicitly jumps ahead of whatever is pending, deploys, and
// freezes the scope; newer intents are recorded but held at their deploy gate until unfreeze; a
// late delivery of an older push never undoes it.
func rollbackCases() []testCase {
	return []testCase{
		{"JumpsAheadAndFreezes", testRollbackFreezes},
		{"DefaultsToThePreviousLive", testRollbackDefault},
		{"RepeatedRequestOnce", testRollbackRepeat},
		{"HeadNotTakenOver", testRollbackHeadKept},
		{"UnfreezeLiftsOnlyTheFreezeItNames", testUnfreezeNamesTheFreeze},
		{"FailedIntentKeepsItsOutcome", testRollbackFailedHead},
		{"ToAPrefixOfACommitTheScopeRan", testRollbackPrefix},
	}
}

// pushedAt is a push to main with its repository.pushed_at, as the App records it.
func pushedAt(env, id, commit string, at time.Time, scopes ...string) authority.Intent {
	in := push(env, id, commit, scopes...)
	in.Order = authority.Order{PushedAt: at.Truncate(time.Second)}
	return in
}

// A live, B building, rollback to A: B is superseded and deploys nothing, the rollback deploys A
// at once, C pushed after it is recorded but held by the freeze (and not re-driven by the sweep), a
// late delivery of a push older than the rollback is out of order; unfreeze lets C go.
func testRollbackFreezes(t *testing.T, h *harness) {
	const env = "rb"
	a := h.process()
	h.accept(a, pushedAt(env, "push-a", sha("a", 1), h.clock.Now(), "api"), true)
	h.deploy(a, env, 1, "run-a", "run-a", "api")

	h.clock.Advance(time.Minute)
	lateB := pushedAt(env, "push-late", sha("x", 1), h.clock.Now(), "api") // delivered only after the rollback
	h.clock.Advance(time.Minute)
	b := h.process()
	h.accept(b, pushedAt(env, "push-b", sha("b", 1), h.clock.Now(), "api"), true)

	// B's pass took the lease and is deploying when the rollback comes.
	bGrant := h.gate(b, env, 2, "run-b", "api")
	h.clock.Advance(time.Minute)
	ops := h.process()
	res, err := ops.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", To: sha("a", 1), Actor: "oncall", Reason: "B breaks checkout", Request: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Generation != 3 {
		t.Fatalf("rollback accepted at generation %d, want 3 (the newest)", res.Generation)
	}
	// B's deploy does not finish first: its lease is gone at its next renewal, and what it
	// completes is not recorded as live.
	var lost *authority.LostError
	if err := b.Renew(h.ctx, bGrant, testTTL); !errors.As(err, &lost) {
		t.Fatalf("B's renewal after the rollback: %v; want its lease lost", err)
	}
	if _, err := b.Complete(h.ctx, authority.Completion{Environment: env, Generation: 2, Scopes: []string{"api"}, Holder: "run-b",
		Tokens: bGrant.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3}); err == nil {
		if live := h.env(env).Scopes["api"].Live; live.Sha == sha("b", 1) {
			t.Fatalf("B's completion after the rollback made B live")
		}
	}
	// A pass of the rollback's generation deploys at once, without claiming: nothing is ahead of it.
	if held, err := h.tryDeploy(ops, env, 3, "rollback-run", "api"); err != nil || held != nil {
		t.Fatalf("the rollback's deploy: held %v, %v; want it deployed", held, err)
	}
	if e := h.env(env); e.Scopes["api"].Live.Sha != sha("a", 1) || e.Scopes["api"].Freeze == nil {
		t.Fatalf("after the rollback: live %+v, freeze %+v; want A live and the scope frozen", e.Scopes["api"].Live, e.Scopes["api"].Freeze)
	}

	// A late delivery of a push from before the rollback never undoes it.
	if res := h.accept(h.process(), lateB, false); len(res.Accepted) != 0 || res.Stale["api"] == 0 {
		t.Fatalf("late older push: %+v; want it recorded as out of order", res)
	}
	if e := h.env(env); e.Scopes["api"].Mailbox != nil {
		t.Fatalf("pending after the late push: %+v; want nothing", e.Scopes["api"].Mailbox)
	}

	// C, pushed after the rollback: recorded, held at the gate, not re-driven.
	h.clock.Advance(time.Minute)
	c := h.process()
	if res := h.accept(c, pushedAt(env, "push-c", sha("c", 1), h.clock.Now(), "api"), true); res.Generation != 5 || len(res.Accepted) != 1 {
		t.Fatalf("C after the rollback: %+v; want it accepted at generation 5 (the late push took 4)", res)
	}
	held, err := h.tryDeploy(c, env, 5, "run-c", "api")
	if err != nil || held == nil || held.Frozen == nil || !strings.Contains(held.Error(), "held by a freeze") {
		t.Fatalf("C's deploy while frozen: held %v, %v; want held by the freeze", held, err)
	}
	h.clock.Advance(time.Hour)
	if work, _, err := c.Stalled(h.ctx, 10*time.Minute, 3); err != nil || len(work) != 0 {
		t.Fatalf("stalled work while frozen: %+v, %v; want none: nothing may deploy", work, err)
	}

	f, err := ops.Unfreeze(h.ctx, authority.UnfreezeRequest{Environment: env, Scope: "api", Freeze: res.Generation, Actor: "oncall", Reason: "fixed forward in C", Request: "u1"})
	if err != nil || f.Sha != sha("a", 1) {
		t.Fatalf("unfreeze: %+v, %v", f, err)
	}
	if held, err := h.tryDeploy(c, env, 5, "run-c", "api"); err != nil || held != nil {
		t.Fatalf("C after unfreeze: held %v, %v; want it deployed", held, err)
	}
	e := h.env(env)
	if e.Scopes["api"].Live.Sha != sha("c", 1) || e.Scopes["api"].Freeze != nil {
		t.Fatalf("after unfreeze: live %+v, freeze %+v; want C live, no freeze", e.Scopes["api"].Live, e.Scopes["api"].Freeze)
	}
	if _, err := ops.Unfreeze(h.ctx, authority.UnfreezeRequest{Environment: env, Scope: "api", Actor: "oncall", Reason: "again"}); !errors.Is(err, authority.ErrNotFrozen) {
		t.Fatalf("unfreeze of a scope no rollback holds: %v; want ErrNotFrozen", err)
	}
	if _, err := ops.Unfreeze(h.ctx, authority.UnfreezeRequest{Environment: env, Scope: "api", Actor: "oncall", Reason: "fixed", Request: "u1"}); !errors.Is(err, authority.ErrRepeated) {
		t.Fatalf("repeated unfreeze request: %v; want ErrRepeated", err)
	}
	for kind, n := range map[authority.EventKind]int{authority.EventRollback: 1, authority.EventUnfrozen: 1} {
		if got := len(eventsOf(e, kind)); got != n {
			t.Errorf("%d %s events, want %d", got, kind, n)
		}
	}
	if ev := eventsOf(e, authority.EventRollback); len(ev) == 1 && !strings.Contains(ev[0].Message, "by oncall: B breaks checkout") {
		t.Errorf("rollback event %q does not say who and why", ev[0].Message)
	}
}

// Without a commit, a rollback goes to what was live before; with nothing before, it says to name one.
func testRollbackDefault(t *testing.T, h *harness) {
	const env = "rb-default"
	a := h.process()
	h.accept(a, push(env, "push-a", sha("a", 2), "api"), true)
	h.deploy(a, env, 1, "run-a", "run-a", "api")
	_, err := a.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", Actor: "oncall", Reason: "r"})
	if !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), "--to SHA") {
		t.Fatalf("rollback with nothing before: %v; want bad input saying to give --to SHA", err)
	}
	h.accept(a, push(env, "push-b", sha("b", 2), "api"), true)
	h.deploy(a, env, 2, "run-b", "run-b", "api")
	res, err := a.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", Actor: "oncall", Reason: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if m := h.env(env).Scopes["api"].Mailbox; m == nil || m.Sha != sha("a", 2) || m.Generation != res.Generation || !m.Rollback {
		t.Fatalf("pending after the rollback: %+v; want A at generation %d", m, res.Generation)
	}
	// Once rolled back, what was live before is the commit rolled back from: no default then.
	if _, err := a.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", Actor: "oncall", Reason: "again"}); !errors.Is(err, authority.ErrInvalidInput) ||
		!strings.Contains(err.Error(), "already rolled back to") {
		t.Fatalf("a second rollback without a commit: %v; want bad input saying it is already rolled back", err)
	}
}

// A rollback request delivered twice (a comment re-delivered) rolls back once.
func testRollbackRepeat(t *testing.T, h *harness) {
	const env = "rb-repeat"
	a := h.process()
	h.accept(a, push(env, "push-a", sha("a", 3), "api"), true)
	h.deploy(a, env, 1, "run-a", "run-a", "api")
	r := authority.RollbackRequest{Environment: env, Scope: "api", To: sha("z", 3), Actor: "oncall", Reason: "r", Request: "delivery-1"}
	first, err := a.Rollback(h.ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	again, err := h.process().Rollback(h.ctx, r)
	if err != nil || !again.Duplicate || again.Generation != first.Generation {
		t.Fatalf("repeat: %+v, %v; want a duplicate of generation %d", again, err, first.Generation)
	}
	if e := h.env(env); e.Desired != first.Generation || len(eventsOf(e, authority.EventRollback)) != 1 {
		t.Fatalf("after the repeat: desired %d, %d rollback events; want %d and 1", e.Desired, len(eventsOf(e, authority.EventRollback)), first.Generation)
	}
}

// A newer pass claiming every pending scope (an intent for another scope) does not take over the
// rollback's head: the rollback's own pass still deploys it, and nothing deadlocks on the freeze.
func testRollbackHeadKept(t *testing.T, h *harness) {
	const env = "rb-takeover"
	a := h.process()
	h.accept(a, push(env, "push-a", sha("a", 4), "api", "web"), true)
	h.deploy(a, env, 1, "run-a", "run-a", "api", "web")
	res, err := a.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", To: sha("z", 4), Actor: "oncall", Reason: "r"})
	if err != nil {
		t.Fatal(err)
	}
	other := h.process()
	h.accept(other, push(env, "push-w", sha("w", 4), "web"), false)
	claim, err := other.Claim(h.ctx, env, 3, nil) // every pending scope
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claim.Claimed {
		if c.Scope == "api" {
			t.Fatalf("generation 3 took over the rollback's head: %+v", claim)
		}
	}
	if held, err := h.tryDeploy(h.process(), env, res.Generation, "rollback-run", "api"); err != nil || held != nil {
		t.Fatalf("the rollback's own pass: held %v, %v; want it deployed", held, err)
	}
}

// Rollback 1 deployed, then a second incident: rollback 2 froze the scope again. An unfreeze that
// names rollback 1's freeze ("incident 1 fixed", written before rollback 2), or none, is refused,
// names rollback 2's freeze, and changes nothing; naming rollback 2's lifts it, and a repeat of
// that request is a repeat whatever it names.
func testUnfreezeNamesTheFreeze(t *testing.T, h *harness) {
	const env = "rb-named"
	a := h.process()
	h.accept(a, push(env, "push-a", sha("a", 5), "api"), true)
	h.deploy(a, env, 1, "run-a", "run-a", "api")
	h.accept(a, push(env, "push-b", sha("b", 5), "api"), true)
	h.deploy(a, env, 2, "run-b", "run-b", "api")
	ops := h.process()
	first, err := ops.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", Actor: "oncall", Reason: "incident 1", Request: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if held, err := h.tryDeploy(ops, env, first.Generation, "rollback-1", "api"); err != nil || held != nil {
		t.Fatalf("rollback 1's deploy: held %v, %v; want it deployed", held, err)
	}
	h.clock.Advance(time.Minute)
	second, err := h.process().Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", To: sha("z", 5), Actor: "night-shift", Reason: "incident 2", Request: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	if second.Generation <= first.Generation {
		t.Fatalf("rollback 2 at generation %d, rollback 1 at %d; want it newer", second.Generation, first.Generation)
	}
	before := h.env(env)

	_, err = ops.Unfreeze(h.ctx, authority.UnfreezeRequest{Environment: env, Scope: "api", Freeze: first.Generation, Actor: "oncall", Reason: "incident 1 fixed", Request: "u1"})
	var mismatch *authority.FreezeMismatchError
	if !errors.As(err, &mismatch) || !errors.Is(err, authority.ErrFreezeMismatch) {
		t.Fatalf("unfreeze naming rollback 1's freeze: %v; want a FreezeMismatchError", err)
	}
	if mismatch.Named != first.Generation || mismatch.Current == nil || mismatch.Current.Generation != second.Generation || mismatch.Current.Sha != sha("z", 5) {
		t.Fatalf("the refusal: %+v; want it to name rollback 2's freeze (generation %d)", mismatch, second.Generation)
	}
	for _, want := range []string{fmt.Sprintf("freeze %d", second.Generation), shortSha(sha("z", 5)), "night-shift", "incident 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	// Naming no freeze is refused the same way: an unfreeze never lifts a freeze it does not name.
	_, err = ops.Unfreeze(h.ctx, authority.UnfreezeRequest{Environment: env, Scope: "api", Actor: "oncall", Reason: "incident 1 fixed", Request: "u1"})
	if !errors.As(err, &mismatch) || mismatch.Named != 0 || mismatch.Current == nil || mismatch.Current.Generation != second.Generation {
		t.Fatalf("unfreeze naming no freeze: %v; want a FreezeMismatchError naming rollback 2's freeze", err)
	}
	after := h.env(env)
	if f := after.Scopes["api"].Freeze; f == nil || f.Generation != second.Generation {
		t.Fatalf("after the refused unfreezes: freeze %+v; want rollback 2's, still", f)
	}
	if n := len(eventsOf(after, authority.EventUnfrozen)); n != 0 || after.Desired != before.Desired {
		t.Fatalf("the refused unfreezes recorded %d unfreeze events, desired %d -> %d; want nothing", n, before.Desired, after.Desired)
	}

	f, err := ops.Unfreeze(h.ctx, authority.UnfreezeRequest{Environment: env, Scope: "api", Freeze: second.Generation, Actor: "oncall", Reason: "incident 2 fixed", Request: "u2"})
	if err != nil || f.Generation != second.Generation {
		t.Fatalf("unfreeze naming rollback 2's freeze: %+v, %v; want it lifted", f, err)
	}
	if f := h.env(env).Scopes["api"].Freeze; f != nil {
		t.Fatalf("after the unfreeze: freeze %+v; want none", f)
	}
	if _, err := ops.Unfreeze(h.ctx, authority.UnfreezeRequest{Environment: env, Scope: "api", Freeze: first.Generation, Actor: "oncall", Reason: "again", Request: "u2"}); !errors.Is(err, authority.ErrRepeated) {
		t.Fatalf("a repeat of the unfreeze request: %v; want ErrRepeated", err)
	}
}

func shortSha(s string) string { return s[:7] }

// A rollback over a terminal failure that blocks the queue: the failed intent already has its
// outcome, so the rollback unblocks it without recording it as superseded too; what waited behind
// it is superseded, once.
func testRollbackFailedHead(t *testing.T, h *harness) {
	const env = "rb-failed"
	a := h.process()
	h.accept(a, queued(env, "push-a", sha("a", 5), "api"), true)
	h.deploy(a, env, 1, "run-a", "run-a", "api")
	h.accept(a, queued(env, "push-b", sha("b", 5), "api"), true)
	h.accept(a, queued(env, "push-c", sha("c", 5), "api"), false)
	g := h.gate(a, env, 2, "run-b", "api")
	res, err := a.Complete(h.ctx, authority.Completion{Environment: env, Generation: 2, Scopes: []string{"api"}, Holder: g.Holder, Tokens: g.Tokens,
		Outcome: authority.OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "exit status 1"})
	if err != nil || res.Results["api"] != authority.ResultFailed {
		t.Fatalf("final failure of generation 2: %+v, %v", res, err)
	}
	if _, err := h.process().Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", To: sha("a", 5), Actor: "oncall", Reason: "b is broken"}); err != nil {
		t.Fatal(err)
	}
	e := h.env(env)
	for gen, want := range map[int64][]authority.EventKind{2: {authority.EventFailed}, 3: {authority.EventSuperseded}} {
		var got []authority.EventKind
		for _, ev := range timelineOf(e) {
			if ev.Generation == gen && ev.Scope == "api" && (ev.Kind == authority.EventFailed || ev.Kind == authority.EventSuperseded || ev.Kind == authority.EventDeployed) {
				got = append(got, ev.Kind)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("generation %d ended as %v; want %v: every intent ends in exactly one outcome", gen, got, want)
		}
	}
}

// A rollback may name its commit by a prefix of its sha, resolved against what the scope ran: live
// now, live before, or deployed there long enough ago that only the timeline's records remember
// it. A prefix of several is refused naming them, one of none saying so, and a commit only
// accepted (never live) is none; a refusal writes nothing. ResolveCommit answers the same.
func testRollbackPrefix(t *testing.T, h *harness) {
	const env = "rb-prefix"
	x := "abcdef1" + strings.Repeat("1", 33) // deployed first: in the records only
	y := "abcdef1" + strings.Repeat("2", 33) // live before
	z := "1234567" + strings.Repeat("0", 33) // live
	w := "abcdef1" + strings.Repeat("3", 33) // accepted, never live
	a := h.process()
	gen := int64(0)
	deploy := func(commit string) {
		gen++
		h.accept(a, push(env, fmt.Sprintf("push-%d", gen), commit, "api"), true)
		h.deploy(a, env, gen, fmt.Sprintf("run-%d", gen), fmt.Sprintf("run-%d", gen), "api")
	}
	deploy(x)
	deployedX := h.doc(authority.EnvKey(env)).Env.EventSeq
	for i := 0; h.doc(authority.EnvKey(env)).Env.EventSeq-deployedX <= authority.StatusEvents; i++ { // more events than Status reads
		deploy(sha("f", i))
	}
	deploy(y)
	deploy(z)
	h.accept(a, push(env, "push-w", w, "api"), false)

	ops := h.process()
	for _, c := range []struct{ prefix, want string }{{"abcdef11", x}, {"abcdef12", y}, {"1234567", z}, {z, z}} {
		got, err := ops.ResolveCommit(h.ctx, env, "api", c.prefix)
		if err != nil || got.Sha != c.want || got.Ref != "refs/heads/main" && c.want != x {
			t.Errorf("ResolveCommit(%s) = %+v, %v; want %s", c.prefix, got, err, c.want)
		}
	}
	before := h.doc(authority.EnvKey(env)).Rev
	for _, c := range []struct{ prefix, says string }{
		{"abcdef1", "start of 2 commits that were live in " + env + "/api (" + y + ", " + x + ")"},
		{"abcdef13", "no commit with that prefix was live in " + env + "/api"},
		{"fedcba9", "no commit with that prefix was live in " + env + "/api"},
		{"abcdef", "at least its first 7 hex digits"},
		{"ABCDEF11", "at least its first 7 hex digits"},
	} {
		_, err := ops.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", To: c.prefix, Actor: "oncall", Reason: "r"})
		if !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("rollback to %s: %v; want bad input saying %q", c.prefix, err, c.says)
		}
		if _, err := ops.ResolveCommit(h.ctx, env, "api", c.prefix); !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ResolveCommit(%s): %v; want bad input saying %q", c.prefix, err, c.says)
		}
	}
	if after := h.doc(authority.EnvKey(env)).Rev; after != before {
		t.Fatalf("refused rollbacks wrote: revision %d, was %d", after, before)
	}

	res, err := ops.Rollback(h.ctx, authority.RollbackRequest{Environment: env, Scope: "api", To: "abcdef11", Actor: "oncall", Reason: "Z breaks checkout"})
	if err != nil {
		t.Fatal(err)
	}
	sc := h.env(env).Scopes["api"]
	if m := sc.Mailbox; m == nil || m.Sha != x || m.Ref != "refs/heads/main" || m.Generation != res.Generation || len(sc.Queue) != 0 || sc.Freeze == nil || sc.Freeze.Sha != x {
		t.Fatalf("after the rollback to abcdef11: pending %+v, freeze %+v; want %s at generation %d, frozen", m, sc.Freeze, x, res.Generation)
	}
}
