package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// TestOrderFromTheFutureIsBadInput: claim --pushed-at 4102444800 (2100) would make every later
// push of the branch older, so none would ever deploy. It is bad input (exit 2) that names the
// flag, the time and the allowance, and it writes nothing: neither the store nor the state file. A
// real claim after it is no arrival out of order. The same time read from a push event's payload
// is refused the same way, saying where it came from.
func TestOrderFromTheFutureIsBadInput(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	state := filepath.Join(h.dir, "state.json")
	claim := func(code int, id string, c byte, pushedAt string) outcome {
		t.Helper()
		return h.must(code, "claim", "--environment", "staging", "--scopes", "api", "--ref", "refs/heads/main",
			"--sha", strings.Repeat(string(c), 40), "--intent-id", id, "--pushed-at", pushedAt, "--state", state)
	}
	o := claim(ExitUsage, "pinning", 'f', "4102444800")
	for _, want := range []string{"--pushed-at", "2100-01-01T00:00:00Z", authority.MaxOrderSkew.String() + " allowed for clock skew"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("refusal %q does not say %q", o.stderr, want)
		}
	}
	if o := h.run(t.Context(), "status", "staging"); o.code != ExitUsage {
		t.Fatalf("status after the refused claim: exit %d\n%s%s; want nothing accepted in staging", o.code, o.stdout, o.stderr)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("the refused claim wrote its state file: %v", err)
	}

	o = claim(ExitOK, "real", 'a', fmt.Sprint(time.Now().Add(-time.Minute).Unix()))
	if strings.Contains(o.stdout, "out of order") || !strings.Contains(o.stdout, "claimed api") {
		t.Fatalf("a real claim after the refused one: %q; want it claimed", o.stdout)
	}

	ev := filepath.Join(h.dir, "event.json")
	sha := strings.Repeat("e", 40)
	body := fmt.Sprintf(`{"after":%q,"before":%q,"ref":"refs/heads/main","repository":{"pushed_at":4102444800},"head_commit":{"timestamp":"2026-11-30T11:00:00Z"}}`,
		sha, strings.Repeat("a", 40))
	if err := os.WriteFile(ev, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	h.vars = map[string]string{"GITHUB_RUN_ID": "7", "GITHUB_REPOSITORY": "acme/api", "GITHUB_SHA": sha, "GITHUB_REF": "refs/heads/main",
		"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": ev, "GITHUB_RUN_ATTEMPT": "1"}
	o = h.run(t.Context(), "claim", "--environment", "staging", "--scopes", "api")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "repository.pushed_at of the push event") || !strings.Contains(o.stderr, "correct the clock") {
		t.Fatalf("a push event from the future: exit %d\n%s%s; want bad input saying it came from the event", o.code, o.stdout, o.stderr)
	}
}
