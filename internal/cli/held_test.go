package cli

import (
	"strings"
	"testing"
)

// A run held by approvals ends at once with the held exit code, however long its --wait, and says
// what it waits for; break-glass lets the commit through, audited; bad input changes nothing.
func TestHeldRunEndsAndBreakGlassLetsItThrough(t *testing.T) {
	h := newHarness(t)
	const c = "cccc333000000000000000000000000000000000"
	held := h.must(ExitHeld, "run", "--environment", "prod", "--scopes", "api", "--sha", c, "--intent-id", "c", "--approvals", "1", "--wait", "10m", "--", "true")
	if !strings.Contains(held.stderr, "held: prod/api: waiting for approval") || !strings.Contains(held.stderr, "the recovery sweep") {
		t.Fatalf("a run held for approval said:\n%s", held.stderr)
	}
	h.must(ExitUsage, "break-glass", "prod", "--sha", c)                                        // no reason
	h.must(ExitUsage, "break-glass", "prod", "--reason", "incident 4711")                       // no sha
	h.must(ExitUsage, "break-glass", "prod", "--sha", strings.Repeat("d", 40), "--reason", "x") // not pending
	o := h.must(ExitOK, "break-glass", "prod", "--sha", c, "--reason", "incident 4711", "--actor", "oncall")
	if !strings.Contains(o.stdout, "broke the glass for cccc333 in prod (api)") {
		t.Fatalf("break-glass said:\n%s", o.stdout)
	}
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", c, "--intent-id", "c", "--", "true")
	if m := h.status("prod"); scopeField(m, "api", "live").(map[string]any)["sha"] != c {
		t.Fatalf("after break-glass: %v", m)
	}
	if hist := h.must(ExitOK, "history", "prod"); !strings.Contains(hist.stdout, "Break-glass by oncall (cli)") {
		t.Fatalf("history does not show the break-glass:\n%s", hist.stdout)
	}
}

// TestGatesVerbSetsAndRemovesGates: latestwins gates sets the gates the flags give, keeps the
// others, removes one given none, and refuses bad input with what to fix.
func TestGatesVerbSetsAndRemovesGates(t *testing.T) {
	h := newHarness(t)
	if o := h.must(ExitOK, "gates", "prod", "--approvals", "1", "--windows", "tz=Europe/Berlin; allow=0 9 * * 1-4 for 8h"); !strings.Contains(o.stdout, "prod: approvals 1") || !strings.Contains(o.stdout, "windows tz=Europe/Berlin") {
		t.Fatalf("gates said:\n%s", o.stdout)
	}
	if o := h.must(ExitOK, "gates", "prod", "--windows", "none"); strings.Contains(o.stdout, "windows") || !strings.Contains(o.stdout, "approvals 1") {
		t.Fatalf("after removing the windows, gates said:\n%s", o.stdout)
	}
	h.must(ExitUsage, "gates", "prod", "--windows", "tz=Nowhere/Else; allow=0 9 * * * for 8h")
	h.must(ExitUsage, "gates", "prod", "--approvals", "11")
	h.must(ExitUsage, "gates")
	if o := h.must(ExitOK, "gates", "prod"); !strings.Contains(o.stdout, "prod: approvals 1") {
		t.Fatalf("gates without flags said:\n%s", o.stdout)
	}
	if hist := h.must(ExitOK, "history", "prod"); !strings.Contains(hist.stdout, "Gates changed") {
		t.Fatalf("history does not show the change:\n%s", hist.stdout)
	}
}

// TestStatusSaysWhatTheGatesHold: status ENV reads the environments ENV requires, so its rows say
// that a commit soaks there, as the gate does.
func TestStatusSaysWhatTheGatesHold(t *testing.T) {
	h := newHarness(t)
	const c = "cccc333000000000000000000000000000000000"
	h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", c, "--intent-id", "s", "--", "true")
	h.must(ExitHeld, "run", "--environment", "prod", "--scopes", "api", "--sha", c, "--intent-id", "p", "--requires", "staging", "--soak", "30m", "--", "true")
	if o := h.must(ExitOK, "status", "prod"); !strings.Contains(o.stdout, "soaking in staging") {
		t.Fatalf("status of a commit soaking in staging:\n%s\n%s", o.stdout, o.stderr)
	}
}
