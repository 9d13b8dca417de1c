package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Change windows: an environment's deploy gate holds commits outside its allowed periods (and
// inside its deny ones) with ReasonWindow, saying when the window opens and asking the pass to
// retry then. Commits keep coalescing meanwhile, and when the window opens what goes is what the
// policy says: the newest under latest, the head and then the rest in order under queue. A
// rollback is never held.
func windowCases() []testCase {
	return []testCase{
		{"NewestGoesWhenTheWindowOpens", testWindowLatest},
		{"QueueHeadGoesFirstWhenTheWindowOpens", testWindowQueue},
		{"SweepLeavesAHeldHeadThenRedrivesIt", testWindowSweep},
		{"RollbackIsNotHeld", testWindowRollback},
	}
}

// workdays: Monday to Thursday from 09:00 for 8h in Berlin. The suite's clock starts on Sunday
// 1 March 2026 at 13:00 in Berlin, so the window opens on Monday at 09:00 (08:00 UTC).
var (
	workdays     = &authority.Windows{Timezone: "Europe/Berlin", Allow: []authority.WindowPeriod{{Start: "0 9 * * 1-4", Duration: 8 * time.Hour}}}
	workdaysOpen = time.Date(2026, time.March, 2, 8, 0, 0, 0, time.UTC)
)

const workdaysClosed = "outside the change window; opens Mon 09:00 Europe/Berlin"

// windowed is a push to env whose maker's configuration gives it the windows w.
func windowed(env, id, commit string, w *authority.Windows) authority.Intent {
	in := push(env, id, commit, "api")
	in.Gates = &authority.Gates{Windows: w}
	return in
}

// wantWindowWait checks that the deploy of the pass at gen in env is held by the change window,
// retryably, until it opens, with the words the check run and comments show.
func (h *harness) wantWindowWait(a *authority.Authority, env string, gen int64) {
	h.t.Helper()
	held, err := h.tryDeploy(a, env, gen, fmt.Sprintf("run-%d", gen), "api")
	if err != nil {
		h.t.Fatal(err)
	}
	if held == nil {
		h.t.Fatalf("%s deployed generation %d outside its change window", env, gen)
	}
	if held.Reason != authority.ReasonWindow || held.Window == nil || !held.Window.Opens.Equal(workdaysOpen) ||
		authority.WaitText(held) != workdaysClosed || !strings.Contains(held.Error(), workdaysClosed) ||
		held.RetryAfter != ceilSeconds(workdaysOpen.Sub(h.clock.Now())) || !errors.Is(held, authority.ErrLeaseHeld) {
		h.t.Fatalf("%s's deploy gate for generation %d: %v (reason %s, window %+v, retry after %s); want a refusal saying %q until %s",
			env, gen, held, held.Reason, held.Window, held.RetryAfter, workdaysClosed, workdaysOpen)
	}
}

// Three commits arrive while the window is closed, each pass in a process of its own: the gate
// holds each with ReasonWindow, the mailbox keeps only the newest, and when the clock reaches the
// opening only the newest deploys.
func testWindowLatest(t *testing.T, h *harness) {
	var passes []*authority.Authority
	var gens []int64
	for i := range 3 {
		a := h.process()
		res := h.accept(a, windowed("prod", fmt.Sprintf("p-%d", i), sha("w", i), workdays), true)
		h.wantWindowWait(a, "prod", res.Generation)
		passes, gens = append(passes, a), append(gens, res.Generation)
		h.clock.Advance(time.Hour)
	}
	if w := h.env("prod").Gates; w == nil || w.Windows.Spec() != workdays.Spec() {
		t.Fatalf("prod's stored gates %v; want the windows %s", w, workdays.Spec())
	}
	if sc := h.scope("prod", "api"); sc.Mailbox == nil || sc.Mailbox.Sha != sha("w", 2) || len(sc.Queue) != 0 || sc.Live != nil {
		t.Fatalf("prod while the window is closed: pending %+v, queue %d, live %+v; want only the newest pending", sc.Mailbox, len(sc.Queue), sc.Live)
	}

	// The window opens: the older passes stop, superseded, and the newest deploys.
	h.clock.Advance(workdaysOpen.Sub(h.clock.Now()))
	for i := range 2 {
		_, err := passes[i].Gate(h.ctx, authority.GateRequest{Environment: "prod", Generation: gens[i], Scopes: []string{"api"}, Phase: "deploy", Holder: "run", LeaseTTL: testTTL})
		wantSuperseded(t, err, "api", gens[i], gens[2], sha("w", 2))
	}
	if held, err := h.tryDeploy(passes[2], "prod", gens[2], "run-newest", "api"); held != nil || err != nil {
		t.Fatalf("the newest commit once the window opened: held %v, %v; want it deployed", held, err)
	}
	if l := h.scope("prod", "api").Live; l == nil || l.Sha != sha("w", 2) || l.Generation != gens[2] {
		t.Fatalf("prod live %+v; want the newest commit", l)
	}
}

// Under policy queue the head is held by the window and the others wait behind it; when the
// window opens they deploy in order, the head first.
func testWindowQueue(t *testing.T, h *harness) {
	var passes []*authority.Authority
	var gens []int64
	for i := range 3 {
		a := h.process()
		in := windowed("prod", fmt.Sprintf("q-%d", i), sha("q", i), workdays)
		in.Policy = authority.PolicyQueue
		res := h.accept(a, in, true)
		passes, gens = append(passes, a), append(gens, res.Generation)
	}
	h.wantWindowWait(passes[0], "prod", gens[0])
	for i := 1; i < 3; i++ {
		held, err := h.tryDeploy(passes[i], "prod", gens[i], "run", "api")
		if err != nil || held == nil || held.Reason != authority.ReasonQueued || held.Ahead != i {
			t.Fatalf("generation %d behind the held head: %v, %v; want it queued with %d ahead", gens[i], held, err, i)
		}
	}

	h.clock.Advance(workdaysOpen.Sub(h.clock.Now()))
	// The last asks first, and still waits its turn; then each deploys in order.
	if held, err := h.tryDeploy(passes[2], "prod", gens[2], "run", "api"); err != nil || held == nil || held.Reason != authority.ReasonQueued {
		t.Fatalf("the last of the queue once the window opened: %v, %v; want it still queued", held, err)
	}
	for i := range 3 {
		if held, err := h.tryDeploy(passes[i], "prod", gens[i], fmt.Sprintf("run-%d", i), "api"); held != nil || err != nil {
			t.Fatalf("generation %d once the window opened: held %v, %v; want it deployed in its turn", gens[i], held, err)
		}
		if l := h.scope("prod", "api").Live; l == nil || l.Sha != sha("q", i) {
			t.Fatalf("prod live %+v after generation %d; want %s", l, gens[i], sha("q", i)[:7])
		}
		h.clock.Advance(time.Minute)
	}
}

// The recovery sweep leaves a head the window holds alone, using none of its attempts, and
// re-drives it once the window opens, so nobody has to push again.
func testWindowSweep(t *testing.T, h *harness) {
	const stall = 10 * time.Minute
	a := h.process()
	res := h.accept(a, windowed("prod", "p-x", sha("x", 8), workdays), true)
	h.wantWindowWait(a, "prod", res.Generation)
	h.clock.Advance(stall + testTTL + h.skew) // the pass gave up waiting

	var redriven []authority.StalledWork
	sweep := func() {
		t.Helper()
		rep, err := h.process().Sweep(h.ctx, stall, 3, func(_ context.Context, w authority.StalledWork) error {
			redriven = append(redriven, w)
			return nil
		})
		if err != nil || len(rep.Failed) > 0 {
			t.Fatalf("sweep: %+v, %v", rep, err)
		}
	}
	for range 4 { // more rounds than attempts: waiting uses none
		sweep()
		h.clock.Advance(stall)
	}
	if len(redriven) != 0 {
		t.Fatalf("the sweep re-drove %+v while the window is closed; want the held head left alone", redriven)
	}
	if m := h.scope("prod", "api").Mailbox; m == nil || m.Attempt != 0 || m.Failed {
		t.Fatalf("prod's head after sweeps while the window is closed: %+v; want it pending with no attempt used", m)
	}

	h.clock.Advance(workdaysOpen.Sub(h.clock.Now()))
	sweep()
	if len(redriven) != 1 || redriven[0].Environment != "prod" || redriven[0].Generation != res.Generation {
		t.Fatalf("re-driven once the window opened: %+v; want prod generation %d", redriven, res.Generation)
	}
	if held, err := h.tryDeploy(h.process(), "prod", res.Generation, "redriven", "api"); err != nil || held != nil {
		t.Fatalf("the re-driven pass: held %v, %v; want it deployed", held, err)
	}
}

// A rollback is the way back from a bad deploy: the window does not hold it.
func testWindowRollback(t *testing.T, h *harness) {
	a := h.process()
	h.live(a, "prod", "p-x", sha("x", 7), "api")
	res := h.accept(a, windowed("prod", "p-y", sha("y", 7), workdays), true)
	h.wantWindowWait(a, "prod", res.Generation)
	rb, err := a.Rollback(h.ctx, authority.RollbackRequest{Environment: "prod", Scope: "api", To: sha("x", 7), Actor: "oncall", Reason: "y breaks checkout"})
	if err != nil {
		t.Fatal(err)
	}
	if held, err := h.tryDeploy(a, "prod", rb.Generation, "rollback", "api"); err != nil || held != nil {
		t.Fatalf("the rollback's deploy outside the change window: held %v, %v; want it deployed at once", held, err)
	}
	if l := h.scope("prod", "api").Live; l == nil || l.Sha != sha("x", 7) {
		t.Fatalf("prod live %+v; want the commit rolled back to", l)
	}
}
