package cli

import (
	"strings"
	"testing"
)

// Change windows from the command line: --windows on run sets prod's windows, a commit outside
// them that does not open within --wait ends held (exit 10) saying why and stays pending, the change is in the history,
// --windows none removes them, and a bad value says what to fix.
func TestWindowsFromTheCommandLine(t *testing.T) {
	h := newHarness(t)
	// A deny period every day, all day: whenever the test runs, the window is closed.
	closed := "tz=UTC; deny=0 0 * * * for 24h"
	held := h.must(ExitHeld, "run", "--environment", "prod", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000",
		"--intent-id", "p-a", "--windows", closed, "--wait", "0s", "--", "true")
	if !strings.Contains(held.stderr, "held: prod/api: in a deny window until") || !strings.Contains(held.stderr, "00:00 UTC; the change window does not open in the next 400 days") {
		t.Fatalf("a run outside the change window said:\n%s", held.stderr)
	}
	// The status rows say what holds the head.
	if st := h.must(ExitOK, "status"); !strings.Contains(st.stdout, "in a deny window until") {
		t.Errorf("status does not say the commit waits for the change window:\n%s", st.stdout)
	}
	// The timeline records the change and the refusal, in the gate's words.
	hist := h.must(ExitOK, "history", "prod")
	for _, want := range []string{"Gates changed from none to windows " + closed, "in a deny window until"} {
		if !strings.Contains(hist.stdout, want) {
			t.Errorf("history does not say %q:\n%s", want, hist.stdout)
		}
	}
	// A run that does not give --windows keeps them.
	h.must(ExitHeld, "run", "--environment", "prod", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000",
		"--intent-id", "p-b", "--wait", "0s", "--", "true")
	// An allow period of every minute lets it go at once.
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000",
		"--intent-id", "p-b2", "--windows", "allow=* * * * * for 1m", "--", "true")
	// none removes the windows, and the commit they held deploys.
	h.must(ExitHeld, "run", "--environment", "staging", "--scopes", "api", "--sha", "cccc333000000000000000000000000000000000",
		"--intent-id", "s-c", "--windows", closed, "--wait", "0s", "--", "true")
	h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "cccc333000000000000000000000000000000000",
		"--intent-id", "s-c2", "--windows", "none", "--", "true")
	if hist := h.must(ExitOK, "history", "staging"); !strings.Contains(hist.stdout, "to none") {
		t.Errorf("history does not record the windows removed:\n%s", hist.stdout)
	}

	for value, want := range map[string]string{
		"tz=Europe/Berln; allow=0 9 * * 1-4 for 8h": `invalid --windows "tz=Europe/Berln; allow=0 9 * * 1-4 for 8h": timezone: not a known time zone`,
		"allow=0 9 * * 1-4":                         "give the period's start and how long it lasts, e.g. allow=0 9 * * 1-4 for 8h",
		"deny=0 0 24 12 * for 3d":                   "the duration after for is not one; write it as Go does, e.g. 8h or 72h",
		"allow=0 9 * * for 8h":                      "allow[0] start: not a cron expression",
		"deny=0 0 24 12 * for 800h":                 "deny[0] duration: give how long the period lasts, from 1m to 744h",
		"weekdays":                                  "each part is key=value",
	} {
		o := h.must(ExitUsage, "claim", "--environment", "prod", "--scopes", "api", "--sha", "eeee555000000000000000000000000000000000",
			"--intent-id", "p-e", "--windows", value)
		if !strings.Contains(o.stderr, want) {
			t.Errorf("--windows %q said:\n%s\nwant %q", value, o.stderr, want)
		}
	}
	// The variable reads as the flag does, and is named when it is wrong.
	h.vars["LATESTWINS_WINDOWS"] = "deny=never"
	if o := h.must(ExitUsage, "claim", "--environment", "prod", "--scopes", "api", "--sha", "eeee555000000000000000000000000000000000", "--intent-id", "p-f"); !strings.Contains(o.stderr, "invalid LATESTWINS_WINDOWS") {
		t.Errorf("a bad LATESTWINS_WINDOWS said:\n%s", o.stderr)
	}
}
