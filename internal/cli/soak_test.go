package cli

import (
	"strings"
	"testing"
)

// A soak from the command line: prod requires staging with --soak 1h, so a run of a commit that
// went live in staging just now ends held (a soak outlasts any wait), saying for how long; --soak none removes it, and the run
// deploys. Each change is on the timeline; a malformed --soak is bad input.
func TestSoakFromTheCommandLine(t *testing.T) {
	h := newHarness(t)
	x := "aaaa111000000000000000000000000000000000"
	h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", x, "--intent-id", "s-a", "--", "true")

	held := h.must(ExitHeld, "run", "--environment", "prod", "--scopes", "api", "--sha", x, "--intent-id", "p-a",
		"--requires", "staging", "--soak", "1h", "--wait", "0s", "--", "true")
	if !strings.Contains(held.stderr, "soaking in staging: ") || !strings.Contains(held.stderr, " of 1h; ends ") {
		t.Fatalf("a run of a commit live in staging just now said:\n%s", held.stderr)
	}
	// The status rows say what holds the head.
	if st := h.must(ExitOK, "status"); !strings.Contains(st.stdout, "soaking in staging: ") || !strings.Contains(st.stdout, " of 1h; ends ") {
		t.Errorf("status does not say prod's commit soaks:\n%s", st.stdout)
	}
	if hist := h.must(ExitOK, "history", "prod"); !strings.Contains(hist.stdout, "Gates changed from none to soak 1h") {
		t.Errorf("history does not record the soak:\n%s", hist.stdout)
	}

	// Per environment: only the environments prod requires.
	h.must(ExitUsage, "claim", "--environment", "prod", "--scopes", "api", "--sha", x, "--intent-id", "p-b", "--requires", "staging", "--soak", "staging=30m,qa=1h")
	for _, bad := range []string{"0", "-5m", "169h", "soon", "staging=", "=30m", "staging=30m,staging=1h", "staging=0s"} {
		o := h.must(ExitUsage, "claim", "--environment", "prod", "--scopes", "api", "--sha", x, "--intent-id", "p-bad", "--soak", bad)
		if !strings.Contains(o.stderr, "--soak") || !strings.Contains(o.stderr, "staging=30m,qa=1h") {
			t.Errorf("--soak %s said:\n%s", bad, o.stderr)
		}
	}
	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "api", "--sha", x, "--intent-id", "p-b", "--soak", "staging=2h")
	if hist := h.must(ExitOK, "history", "prod"); !strings.Contains(hist.stdout, "Gates changed from soak 1h to soak staging 2h") {
		t.Errorf("history does not record the soak per environment:\n%s", hist.stdout)
	}

	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", x, "--intent-id", "p-c", "--soak", "none", "--wait", "0s", "--", "true")
	if m := h.status("prod"); scopeField(m, "api", "live").(map[string]any)["sha"] != x {
		t.Fatalf("prod after --soak none: %v", m)
	}
	if hist := h.must(ExitOK, "history", "prod"); !strings.Contains(hist.stdout, "Gates changed from soak staging 2h to none") {
		t.Errorf("history does not record removing the soak:\n%s", hist.stdout)
	}
}
