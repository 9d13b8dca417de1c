package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/report"
)

// TestReportCommand: report prints the environment's delivery figures, as a table or as JSON,
// and refuses a bad --since and an environment nothing was accepted for with what to fix.
func TestReportCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for _, sha := range []string{"aaaa111000000000000000000000000000000000", "bbbb222000000000000000000000000000000000"} {
		h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", sha, "--intent-id", sha[:4],
			"--committed-at", "2026-01-02T03:04:05Z", "--", "true")
	}
	h.must(ExitFailed, "run", "--environment", "staging", "--scopes", "web", "--sha", "cccc333000000000000000000000000000000000",
		"--intent-id", "c", "--max-attempts", "1", "--", "false")

	var d report.Delivery
	o := h.must(ExitOK, "report", "staging", "--since", "7d", "--json")
	if err := json.Unmarshal([]byte(o.stdout), &d); err != nil {
		t.Fatalf("report --json is not JSON: %v\n%s", err, o.stdout)
	}
	if d.Environment != "staging" || d.Days != 7 || d.Total.Deploys != 2 || d.Total.Commits != 2 || d.Total.Failures != 1 || d.Total.ChangeFailureRate != 0.5 {
		t.Errorf("report --json: %+v; want 7 days, 2 deploys of 2 commits, 1 terminal failure (rate 0.5)", d.Total)
	}
	if d.Total.LeadFromAccept.Count != 2 || len(d.Scopes) != 2 || len(d.Total.Daily) != 7 {
		t.Errorf("report --json: %d lead times, %d scopes, %d days; want 2, 2 (api, web), 7", d.Total.LeadFromAccept.Count, len(d.Scopes), len(d.Total.Daily))
	}

	text := h.must(ExitOK, "report", "staging").stdout
	for _, want := range []string{"staging  delivery over 30 day(s)", "(all)  2", "50% (1 failed, 0 rolled back)", "from the commit's own time"} {
		if !strings.Contains(text, want) {
			t.Errorf("report's table lacks %q:\n%s", want, text)
		}
	}

	for _, bad := range []string{"0d", "yesterday", "400d", "1h", "-3d"} {
		o := h.must(ExitUsage, "report", "staging", "--since", bad)
		if !strings.Contains(o.stderr, "--since") || !strings.Contains(o.stderr, "in days (30d)") {
			t.Errorf("report --since %s: %q; want it to say how to give --since", bad, o.stderr)
		}
	}
	o = h.must(ExitUsage, "report", "prod")
	if !strings.Contains(o.stderr, "unknown environment") {
		t.Errorf("report of an environment never used: %q", o.stderr)
	}
	o = h.must(ExitUsage, "report")
	if !strings.Contains(o.stderr, "environment") {
		t.Errorf("report without an environment: %q", o.stderr)
	}
}

// TestReportThroughAPI: with --api the App computes the report; it counts what the passes did
// through the same API, and a bad --since is refused before any request.
func TestReportThroughAPI(t *testing.T) {
	t.Parallel()
	w := newAPIWorld(t)
	must := func(code int, args ...string) outcome {
		t.Helper()
		o := w.run(nil, args...)
		if o.code != code {
			t.Fatalf("%v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, o.code, code, o.stdout, o.stderr)
		}
		return o
	}
	must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a", "--", "true")
	must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "b", "--", "true")
	var d report.Delivery
	o := must(ExitOK, "report", "staging", "--since", "2d", "--json")
	if err := json.Unmarshal([]byte(o.stdout), &d); err != nil || d.Days != 2 || d.Total.Deploys != 2 || d.Total.Commits != 2 {
		t.Errorf("report --api --json: %v %+v; want 2 days, 2 deploys of 2 commits", err, d)
	}
	if o := must(ExitOK, "report", "staging"); !strings.Contains(o.stdout, "staging  delivery over 30 day(s)") {
		t.Errorf("report --api:\n%s", o.stdout)
	}
	must(ExitUsage, "report", "staging", "--since", "a while")
}
