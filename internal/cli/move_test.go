package cli

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/testutil"
)

// TestMigrateMovesState: migrate --from --to moves every environment of a bolt file into a git
// repository; the file then refuses the commands with where the state went, the repository goes
// on where the file stopped, a repeat moves nothing, and half the flags are bad usage.
func TestMigrateMovesState(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testutil.MissingTool(t, "git is not on the PATH: a git+file:// store runs git's receive-pack")
	}
	h := newHarness(t)
	from := h.store
	repo := filepath.Join(h.dir, "state.git")
	if out, err := exec.Command("git", "init", "--bare", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	to := "git+file://" + repo
	h.must(ExitOK, "run", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("a", 40), "--", "true")
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("b", 40))
	h.must(ExitOK, "claim", "--environment", "production", "--scopes", "web", "--sha", strings.Repeat("c", 40))

	h.must(ExitUsage, "migrate", "--from", from)
	// One environment first, by name: the other goes on where it is, and the overview still shows it.
	o := h.must(ExitOK, "migrate", "--from", from, "--to", to, "staging")
	if !strings.Contains(o.stdout, "staging: moved to "+to+": generation 2, 1 scopes") || strings.Contains(o.stdout, "production") {
		t.Errorf("migrate staging said %q; want staging moved, alone", o.stdout)
	}
	if o := h.must(ExitOK, "status"); !strings.Contains(o.stdout, "production") {
		t.Errorf("the overview of the old store with staging moved: %q; want production in it", o.stdout)
	}
	o = h.must(ExitOK, "migrate", "--from", from, "--to", to)
	for _, want := range []string{"production: moved to " + to, "staging: already moved to " + to} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("migrate said %q; want %q in it", o.stdout, want)
		}
	}
	h.must(ExitUsage, "history", "staging")
	if o := h.must(ExitUsage, "status"); !strings.Contains(o.stderr, "every environment of this store was moved") {
		t.Errorf("the overview of a store whose every environment moved said %q; want it to say so", o.stderr)
	}
	o = h.must(ExitUsage, "status", "staging")
	if !strings.Contains(o.stderr, "moved to "+to) {
		t.Errorf("status on the old store said %q; want where the state went", o.stderr)
	}
	h.must(ExitUsage, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("d", 40))

	h.store = to
	st := h.status("staging")
	live, _ := scopeField(st, "api", "live").(map[string]any)
	if st["desired_generation"] != float64(2) || live["sha"] != strings.Repeat("a", 40) {
		t.Errorf("staging in the repository: %v; want generation 2 with a live", st)
	}
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("d", 40))
	if got := h.status("staging")["desired_generation"]; got != float64(3) {
		t.Errorf("desired after a claim in the repository: %v, want 3", got)
	}
	o = h.must(ExitOK, "migrate", "--from", from, "--to", to)
	if !strings.Contains(o.stdout, "staging: already moved") {
		t.Errorf("a repeated migrate said %q; want it to say the state moved already", o.stdout)
	}
}

// deniedError is a store's refusal of the credentials, as the git store's AccessError marks it.
type deniedError struct{}

func (deniedError) Error() string      { return "the server refused the token" }
func (deniedError) AccessDenied() bool { return true }

// TestExitCodeOfARefusedToken: a store that refuses the token or the repository is configuration
// to fix (exit 2), not an error a re-run cures.
func TestExitCodeOfARefusedToken(t *testing.T) {
	if got := ExitCode(fmt.Errorf("open store: %w", deniedError{})); got != ExitUsage {
		t.Errorf("exit %d for a refused token, want %d", got, ExitUsage)
	}
}
