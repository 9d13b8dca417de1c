package cli

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/testutil"
)

// TestGitStore: the commands work on a store on git refs named by its URL, and a malformed one is
// bad configuration.
func TestGitStore(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		testutil.MissingTool(t, "git is not on the PATH: a git+file:// store runs git's receive-pack")
	}
	h := newHarness(t)
	repo := filepath.Join(h.dir, "state.git")
	if out, err := exec.Command("git", "init", "--bare", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	h.store = "git+file://" + repo
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("a", 40))
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", strings.Repeat("b", 40))
	if got := h.status("staging")["desired_generation"]; got != float64(2) {
		t.Fatalf("desired = %v, want 2", got)
	}
	for _, bad := range []string{"git+file://relative/state.git", "git+ssh://host/x.git", "git+https://user:pw@host/x.git",
		"github://octo-org", "github://octo-org/state/x", "github://octo-org/state"} {
		h.store = bad
		if o := h.run(t.Context(), "status", "staging"); o.code != ExitUsage {
			t.Errorf("store %s: exit %d, want %d; stderr %q", bad, o.code, ExitUsage, o.stderr)
		}
	}
	// github:// without a token says what to set.
	h.store = "github://octo-org/state"
	if o := h.run(t.Context(), "status", "staging"); !strings.Contains(o.stderr, "LATESTWINS_GIT_TOKEN") || !strings.Contains(o.stderr, "GITHUB_TOKEN") {
		t.Errorf("github:// without a token: stderr %q does not say to set LATESTWINS_GIT_TOKEN or GITHUB_TOKEN", o.stderr)
	}
}
