package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestMigratePerScope: migrate --per-scope moves every environment of a bolt file to the
// per-scope layout and makes it the layout of new ones; the cap of 64 scopes that the single
// document refused past (naming the command) is gone; a repeat moves nothing.
func TestMigratePerScope(t *testing.T) {
	h := newHarness(t)
	scopes := func(n int) string {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprintf("svc-%03d", i)
		}
		return strings.Join(names, ",")
	}
	h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("a", 40), "--", "true")
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("b", 40))
	o := h.must(ExitUsage, "claim", "--environment", "staging", "--scopes", scopes(70), "--sha", strings.Repeat("c", 40))
	if !strings.Contains(o.stderr, "latestwins migrate --per-scope staging") {
		t.Errorf("a 65th scope in a single document said %q; want it to name the command that lifts the cap", o.stderr)
	}
	h.must(ExitUsage, "migrate", "--per-scope", "--from", h.store, "--to", "memory://")
	o = h.must(ExitOK, "migrate", "--per-scope")
	for _, want := range []string{"staging: moved to the per-scope layout: 1 scopes, generation 2", "new environments use the per-scope layout"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("migrate --per-scope said %q; want %q in it", o.stdout, want)
		}
	}
	if o := h.must(ExitOK, "migrate", "--per-scope"); !strings.Contains(o.stdout, "staging: in the per-scope layout already") {
		t.Errorf("a repeated migrate --per-scope said %q; want it to say it moved nothing", o.stdout)
	}
	st := h.status("staging")
	live, _ := scopeField(st, "api", "live").(map[string]any)
	if st["desired_generation"] != float64(2) || live["sha"] != strings.Repeat("a", 40) {
		t.Errorf("staging after the move: %v; want generation 2 with a live", st)
	}
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", scopes(70), "--sha", strings.Repeat("c", 40))
	h.must(ExitOK, "claim", "--environment", "production", "--scopes", scopes(300), "--sha", strings.Repeat("d", 40))
	if got := h.status("production")["desired_generation"]; got != float64(1) {
		t.Errorf("a new environment of 300 scopes: desired %v; want 1", got)
	}
	if o := h.must(ExitOK, "migrate", "--per-scope", "--json", "production"); !strings.Contains(o.stdout, `"already": true`) {
		t.Errorf("migrate --per-scope of a new environment said %q; want it created in the per-scope layout", o.stdout)
	}
}

// TestMigratePerScopeOfANewStore: a store where nothing was recorded yet can be set to the
// per-scope layout before its first environment (the move of every environment creates it, as
// migrate does), and its first environment is then created in that layout; a move of a named
// environment still needs the store to exist.
func TestMigratePerScopeOfANewStore(t *testing.T) {
	h := newHarness(t)
	path := strings.TrimPrefix(h.store, "bolt://")
	if o := h.must(ExitUsage, "migrate", "--per-scope", "staging"); !strings.Contains(o.stderr, "no store at "+h.store) {
		t.Errorf("a move of a named environment in no store said %q; want it to say there is no store", o.stderr)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused move created the store: %v", err)
	}
	if o := h.must(ExitOK, "migrate", "--per-scope"); !strings.Contains(o.stdout, "new environments use the per-scope layout") {
		t.Errorf("migrate --per-scope of a new store said %q; want it to say new environments use the per-scope layout", o.stdout)
	}
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("a", 40))
	if o := h.must(ExitOK, "migrate", "--per-scope", "--json", "staging"); !strings.Contains(o.stdout, `"already": true`) {
		t.Errorf("the first environment of a store set to the per-scope layout: migrate said %q; want it in that layout already", o.stdout)
	}
}
