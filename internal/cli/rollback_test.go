package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// A rollback from the command line: the older commit is accepted ahead of what is pending and the
// scope frozen; its pass deploys with --generation; a newer commit's run waits, held by the
// freeze, and gives up with the locked exit code; unfreeze lets it go. Bad input changes nothing.
func TestRollbackFreezesUntilUnfreeze(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a", "--", "true")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "b", "--", "true")

	h.must(ExitUsage, "rollback", "prod/api")                                       // no reason
	h.must(ExitUsage, "rollback", "prod/api", "--reason", "x", "--to", "not a sha") // a sha with spaces
	h.must(ExitUsage, "rollback", "prod/nope", "--reason", "x")                     // unknown scope
	if m := h.status("prod"); scopeField(m, "api", "freeze") != nil {
		t.Fatalf("bad rollbacks froze the scope: %v", m)
	}

	o := h.must(ExitOK, "rollback", "prod/api", "--reason", "bbbb222 breaks checkout", "--actor", "oncall", "--request", "r1")
	if !strings.Contains(o.stdout, "rolled prod/api back to aaaa111 at generation 3") || !strings.Contains(o.stdout, "--generation 3") ||
		!strings.Contains(o.stdout, "prod/api is frozen (freeze 3)") || !strings.Contains(o.stdout, "latestwins unfreeze prod/api --freeze 3 --reason TEXT") {
		t.Fatalf("rollback said:\n%s", o.stdout)
	}
	if again := h.must(ExitOK, "rollback", "prod/api", "--reason", "again", "--request", "r1"); !strings.Contains(again.stdout, "already answered") {
		t.Fatalf("a repeated request said:\n%s", again.stdout)
	}
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "3", "--", "true")
	if m := h.status("prod"); scopeField(m, "api", "live").(map[string]any)["sha"] != "aaaa111000000000000000000000000000000000" {
		t.Fatalf("after the rollback's run: %v", m)
	}

	held := h.must(ExitLocked, "run", "--environment", "prod", "--scopes", "api", "--sha", "cccc333000000000000000000000000000000000", "--intent-id", "c", "--wait", "0s", "--", "true")
	if !strings.Contains(held.stderr, "held by a freeze: rolled back to aaaa111 by oncall") || !strings.Contains(held.stderr, "latestwins unfreeze prod/api --freeze 3") {
		t.Fatalf("a run while frozen said:\n%s", held.stderr)
	}
	if o := h.must(ExitOK, "unfreeze", "prod/api", "--freeze", "3", "--reason", "fixed forward"); !strings.Contains(o.stdout, "unfroze prod/api: lifted freeze 3") {
		t.Fatalf("unfreeze said:\n%s", o.stdout)
	}
	if o := h.must(ExitOK, "unfreeze", "prod/api", "--freeze", "3", "--reason", "again"); !strings.Contains(o.stdout, "is not frozen") {
		t.Fatalf("a second unfreeze said:\n%s", o.stdout)
	}
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", "cccc333000000000000000000000000000000000", "--intent-id", "c", "--", "true")
	m := h.status("prod")
	if scopeField(m, "api", "live").(map[string]any)["sha"] != "cccc333000000000000000000000000000000000" || scopeField(m, "api", "freeze") != nil {
		t.Fatalf("after unfreeze: %v", m)
	}
	hist := h.must(ExitOK, "history", "prod")
	for _, want := range []string{"Rollback to aaaa111 (generation 3) by oncall: bbbb222 breaks checkout", "Unfrozen by"} {
		if !strings.Contains(hist.stdout, want) {
			t.Errorf("history does not say %q:\n%s", want, hist.stdout)
		}
	}
}

// Rollback 1 deployed, then rollback 2 froze prod/api again: an unfreeze naming rollback 1's freeze
// ("incident 1 fixed", written before rollback 2), or none, is refused with the bad-input exit
// code, says which freeze is current and the command that lifts it, and lifts nothing; naming
// rollback 2's freeze lifts it.
func TestUnfreezeNamesTheFreeze(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a", "--", "true")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "b", "--", "true")
	h.must(ExitOK, "rollback", "prod/api", "--reason", "incident 1", "--actor", "oncall")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "3", "--", "true")
	if o := h.must(ExitOK, "rollback", "prod/api", "--to", "bbbb222000000000000000000000000000000000", "--reason", "incident 2", "--actor", "night-shift"); !strings.Contains(o.stdout, "prod/api is frozen (freeze 4)") {
		t.Fatalf("rollback 2 said:\n%s", o.stdout)
	}

	o := h.must(ExitUsage, "unfreeze", "prod/api", "--freeze", "3", "--reason", "incident 1 fixed")
	for _, want := range []string{"freeze 3 is not the current freeze of prod/api (a newer rollback has frozen the scope since): it is frozen by freeze 4 (the rollback to bbbb222 by night-shift: incident 2)",
		"nothing was unfrozen", "latestwins unfreeze prod/api --freeze 4 --reason TEXT"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("unfreeze naming rollback 1's freeze did not say %q:\n%s", want, o.stderr)
		}
	}
	o = h.must(ExitUsage, "unfreeze", "prod/api", "--reason", "incident 1 fixed")
	for _, want := range []string{"prod/api is frozen by freeze 4 (the rollback to bbbb222 by night-shift: incident 2)", "nothing was unfrozen: name the freeze to lift (--freeze)",
		"latestwins unfreeze prod/api --freeze 4 --reason TEXT"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("unfreeze naming no freeze did not say %q:\n%s", want, o.stderr)
		}
	}
	if f, _ := scopeField(h.status("prod"), "api", "freeze").(map[string]any); f == nil || f["generation"] != float64(4) {
		t.Fatalf("after the refused unfreezes: freeze %v; want rollback 2's, still", f)
	}
	if st := h.must(ExitOK, "status", "prod"); !strings.Contains(st.stdout, "until unfreeze (freeze 4)") {
		t.Errorf("status does not name the freeze:\n%s", st.stdout)
	}
	if o := h.must(ExitOK, "unfreeze", "prod/api", "--freeze", "4", "--reason", "incident 2 fixed"); !strings.Contains(o.stdout, "lifted freeze 4") {
		t.Fatalf("unfreeze naming rollback 2's freeze said:\n%s", o.stdout)
	}
	if f := scopeField(h.status("prod"), "api", "freeze"); f != nil {
		t.Fatalf("after the unfreeze: freeze %v; want none", f)
	}
}

// A generation accepted elsewhere (the App accepting a push) deploys with run --generation: the
// pass claims it first; an older one, superseded meanwhile, deploys nothing.
func TestRunClaimsAGenerationAcceptedElsewhere(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "seed")
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "1", "--", "true")
	a, done := h.authority()
	for i, sha := range []string{"bbbb222000000000000000000000000000000000", "cccc333000000000000000000000000000000000"} {
		if _, err := a.Accept(context.Background(), authority.Intent{ID: "push-" + sha, Environment: "prod", Scopes: []string{"api"}, Sha: sha,
			Ref: "refs/heads/main", Source: "push"}, false); err != nil {
			t.Fatalf("accept %d: %v", i, err)
		}
	}
	done()
	if o := h.must(ExitSuperseded, "run", "--environment", "prod", "--scopes", "api", "--generation", "2", "--", "true"); !strings.Contains(o.stderr, "superseded by generation 3") {
		t.Fatalf("run of the superseded generation said:\n%s", o.stderr)
	}
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "3", "--", "true")
	if m := h.status("prod"); scopeField(m, "api", "live").(map[string]any)["sha"] != "cccc333000000000000000000000000000000000" {
		t.Fatalf("after run --generation 3: %v", m)
	}
}
