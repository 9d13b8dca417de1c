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
