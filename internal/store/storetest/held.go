package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Holds that last, and break-glass: a pass held by a soak, approvals or a change window is told so
// with a lasting reason and leaves the scope idle, so that the recovery sweep leaves it alone while
// the gate holds it and starts it on its first round after the gate lets it go; break-glass waives
// those gates for one pending commit, audited, and nothing else.
func heldCases() []testCase {
	return []testCase{
		{"HeldPassIsStartedAgainOnceItMayGo", testHeldStartedAgain},
		{"BreakGlassWaivesTheGatesOnly", testBreakGlassWaivesGatesOnly},
		{"BreakGlassBelongsToOneCommit", testBreakGlassOneCommit},
		{"BreakGlassRefusesWhatItCannotDo", testBreakGlassRefusals},
	}
}

// oneApproval is the gates of an environment whose commits need one person's approval.
var oneApproval = &authority.Gates{Approvals: &authority.ApprovalRule{Count: 1}}

func gatedPush(env, id, commit string, g *authority.Gates, scopes ...string) authority.Intent {
	in := push(env, id, commit, scopes...)
	in.Gates = g
	return in
}

// sweepOnce runs one sweep and returns the generations it re-drove.
func (h *harness) sweepOnce(a *authority.Authority, stall time.Duration) []int64 {
	h.t.Helper()
	var gens []int64
	rep, err := a.Sweep(h.ctx, stall, 3, func(_ context.Context, w authority.StalledWork) error {
		gens = append(gens, w.Generation)
		return nil
	})
	if err != nil || len(rep.Failed) > 0 {
		h.t.Fatalf("sweep: %v, %v", err, rep)
	}
	return gens
}

func testHeldStartedAgain(t *testing.T, h *harness) {
	const stall = 10 * time.Minute
	c := sha("c", 1)
	a := h.process()
	res := h.accept(a, gatedPush("prod", "p-c", c, oneApproval, "api"), true)
	held, err := h.tryDeploy(a, "prod", res.Generation, "run-c", "api")
	if err != nil {
		t.Fatal(err)
	}
	if held == nil || held.Why() != authority.ReasonApproval || !held.Why().Lasting() || !held.Until.IsZero() {
		t.Fatalf("deploy gate of an unapproved commit: %+v; want a lasting hold for approval, with no end of its own", held)
	}
	// It waits for someone: the sweep leaves it alone.
	if gens := h.sweepOnce(h.process(), stall); len(gens) != 0 {
		t.Fatalf("the sweep re-drove %v while the commit waits for approval; want it left alone", gens)
	}
	if m := h.scope("prod", "api").Mailbox; m == nil || m.Attempt != 0 {
		t.Fatalf("after a sweep of a held head: mailbox %+v; want it pending with no attempt used", m)
	}
	h.clock.Advance(time.Minute)
	if _, err := a.BreakGlass(h.ctx, authority.BreakGlassRequest{Environment: "prod", Sha: c, Actor: "oncall", Reason: "incident 4711"}); err != nil {
		t.Fatal(err)
	}
	// The held pass ended and nobody moves the scope: the first sweep after the gate lets the commit
	// go starts it, a minute after it was claimed, without waiting out a stall period.
	if gens := h.sweepOnce(h.process(), stall); len(gens) != 1 || gens[0] != res.Generation {
		t.Fatalf("first sweep after the gate let the commit go re-drove %v; want generation %d", gens, res.Generation)
	}
	if held, err := h.tryDeploy(h.process(), "prod", res.Generation, "run-c-2", "api"); err != nil || held != nil {
		t.Fatalf("the re-driven pass: held %v, error %v; want it deployed", held, err)
	}
}

func testBreakGlassWaivesGatesOnly(t *testing.T, h *harness) {
	c := sha("c", 2)
	a := h.process()
	in := gatedPush("prod", "p-c", c, oneApproval, "api")
	in.Requires = requiresStaging
	res := h.accept(a, in, true)
	if _, err := a.BreakGlass(h.ctx, authority.BreakGlassRequest{Environment: "prod", Sha: c, Actor: "oncall", Reason: "incident 4711", Via: "cli"}); err != nil {
		t.Fatal(err)
	}
	// Promotion still holds: the commit is not live in staging.
	h.wantPromotionWait(a, res.Generation, c, "")
	h.live(h.process(), "staging", "s-c", c, "api")
	if held, err := h.tryDeploy(a, "prod", res.Generation, "run-c", "api"); err != nil || held != nil {
		t.Fatalf("after break-glass and the commit live in staging: held %v, error %v; want it deployed without the approval", held, err)
	}
	var found []authority.Event
	for _, ev := range h.history("prod") {
		if ev.Kind == authority.EventBreakGlass {
			found = append(found, ev)
		}
	}
	if len(found) != 1 || !strings.Contains(found[0].Message, "oncall") || !strings.Contains(found[0].Message, "incident 4711") || found[0].Sha != c {
		t.Fatalf("break-glass in the timeline: %+v; want one event with who and why", found)
	}
}

func testBreakGlassOneCommit(t *testing.T, h *harness) {
	b, c := sha("b", 3), sha("c", 3)
	a := h.process()
	h.accept(a, gatedPush("prod", "p-b", b, oneApproval, "api"), true)
	bg := authority.BreakGlassRequest{Environment: "prod", Sha: b, Actor: "oncall", Reason: "incident 4711"}
	if _, err := a.BreakGlass(h.ctx, bg); err != nil {
		t.Fatal(err)
	}
	if _, err := a.BreakGlass(h.ctx, bg); err != nil {
		t.Fatalf("break-glass again: %v; want nothing to change", err)
	}
	n := 0
	for _, ev := range h.history("prod") {
		if ev.Kind == authority.EventBreakGlass {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d break-glass events after asking twice; want 1", n)
	}
	// A newer commit supersedes it (break-glass never waives supersession) and waits for its own
	// approval.
	res := h.accept(a, gatedPush("prod", "p-c", c, oneApproval, "api"), true)
	held, err := h.tryDeploy(a, "prod", res.Generation, "run-c", "api")
	if err != nil {
		t.Fatal(err)
	}
	if held == nil || held.Why() != authority.ReasonApproval {
		t.Fatalf("the newer commit's deploy gate: %+v; want it held for its own approval", held)
	}
	if _, err := a.BreakGlass(h.ctx, bg); !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), "not pending") {
		t.Fatalf("break-glass for the superseded commit: %v; want it refused as not pending", err)
	}
}

func testBreakGlassRefusals(t *testing.T, h *harness) {
	c := sha("c", 4)
	a := h.process()
	h.accept(a, push("staging", "s-c", c, "api"), true)
	h.accept(a, gatedPush("prod", "p-c", c, oneApproval, "api"), true)
	for _, bad := range []struct {
		name string
		req  authority.BreakGlassRequest
		want string
	}{
		{"no gates", authority.BreakGlassRequest{Environment: "staging", Sha: c, Actor: "oncall", Reason: "r"}, "nothing to waive"},
		{"no reason", authority.BreakGlassRequest{Environment: "prod", Sha: c, Actor: "oncall", Reason: "  "}, "say why"},
		{"no actor", authority.BreakGlassRequest{Environment: "prod", Sha: c, Reason: "r"}, "who breaks the glass"},
		{"not pending", authority.BreakGlassRequest{Environment: "prod", Sha: sha("d", 4), Actor: "oncall", Reason: "r"}, "not pending"},
		{"unknown environment", authority.BreakGlassRequest{Environment: "nowhere", Sha: c, Actor: "oncall", Reason: "r"}, "unknown environment"},
	} {
		if _, err := a.BreakGlass(h.ctx, bad.req); !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v; want bad input saying %q", bad.name, err, bad.want)
		}
	}
}
