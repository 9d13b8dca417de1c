package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// Promotion from the command line: prod requires staging (--requires on run), so a run of a
// commit staging does not have waits and gives up with the locked exit code, saying why; status
// without an environment shows what is live where and the wait; promote asks for staging's commit
// in prod, whose run then deploys it.
func TestPromoteFromTheCommandLine(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "s-a", "--", "true")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "p-a", "--requires", "staging", "--", "true")
	h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "s-b", "--", "true")

	held := h.must(ExitLocked, "run", "--environment", "prod", "--scopes", "api", "--sha", "cccc333000000000000000000000000000000000", "--intent-id", "p-c", "--wait", "0s", "--", "true")
	if !strings.Contains(held.stderr, "waiting for staging: cccc333 is not live there yet (bbbb222 is)") {
		t.Fatalf("a run of a commit staging does not have said:\n%s", held.stderr)
	}
	st := h.must(ExitOK, "status")
	for _, want := range []string{
		"api    prod         aaaa111",
		"1 (newest cccc333, accepted",
		"waiting for staging: cccc333 is not live there yet (bbbb222 is)",
		"api    staging      bbbb222",
	} {
		if !strings.Contains(st.stdout, want) {
			t.Errorf("status without an environment does not say %q:\n%s", want, st.stdout)
		}
	}
	var o struct {
		Environments []string `json:"environments"`
		Scopes       []struct {
			Places []struct {
				Environment string `json:"environment"`
				Behind      int    `json:"behind"`
				Waiting     string `json:"waiting"`
			} `json:"places"`
		} `json:"scopes"`
	}
	if err := json.Unmarshal([]byte(h.must(ExitOK, "status", "--json").stdout), &o); err != nil {
		t.Fatal(err)
	}
	if len(o.Scopes) != 1 || len(o.Scopes[0].Places) != 2 || o.Scopes[0].Places[0].Behind != 1 || o.Scopes[0].Places[0].Waiting == "" {
		t.Fatalf("status --json: %+v", o)
	}

	h.must(ExitUsage, "promote", "prod/api")                      // no --from
	h.must(ExitUsage, "promote", "prod/api", "--from", "nowhere") // nothing live there
	h.must(ExitUsage, "promote", "prod/api", "--from", "prod")    // itself
	p := h.must(ExitOK, "promote", "prod/api", "--from", "staging", "--actor", "release-manager")
	if !strings.Contains(p.stdout, "promoted bbbb222 (live in staging/api) to prod at generation 3") || !strings.Contains(p.stdout, "--generation 3") {
		t.Fatalf("promote said:\n%s", p.stdout)
	}
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "3", "--", "true")
	if m := h.status("prod"); scopeField(m, "api", "live").(map[string]any)["sha"] != "bbbb222000000000000000000000000000000000" {
		t.Fatalf("prod after the promotion's run: %v", m)
	}
	hist := h.must(ExitOK, "history", "prod")
	if !strings.Contains(hist.stdout, "Promotion requirement changed from none to staging") {
		t.Errorf("history does not record the requirement:\n%s", hist.stdout)
	}

	// --requires none drops the requirement; --requires-ancestor alone is a mistake.
	h.must(ExitUsage, "claim", "--environment", "prod", "--scopes", "api", "--sha", "dddd444000000000000000000000000000000000", "--intent-id", "p-d", "--requires-ancestor")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", "dddd444000000000000000000000000000000000", "--intent-id", "p-d", "--requires", "none", "--", "true")
	if hist := h.must(ExitOK, "history", "prod"); !strings.Contains(hist.stdout, "Promotion requirement changed from staging to none") {
		t.Errorf("history does not record dropping the requirement:\n%s", hist.stdout)
	}
}
