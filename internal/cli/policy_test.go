package cli

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// TestPolicyOfAnUnknownEnvironmentIsRefused: `latestwins policy` refuses an environment nothing
// was ever accepted for, as every other verb does, and writes nothing: not the environment, and
// not a store where there was none. A known one still gets its policy.
func TestPolicyOfAnUnknownEnvironmentIsRefused(t *testing.T) {
	h := newHarness(t)
	path := strings.TrimPrefix(h.store, "bolt://")
	o := h.must(ExitUsage, "policy", "nosuch", "queue")
	if !strings.Contains(o.stderr, "no store at "+h.store) {
		t.Errorf("stderr %q; want it to say there is no store", o.stderr)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused policy created the store: %v", err)
	}

	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a")
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	o = h.must(ExitUsage, "policy", "nosuch", "queue")
	if !strings.Contains(o.stderr, `invalid environment "nosuch": unknown environment: nothing was ever accepted for it; check the name`) || o.stdout != "" {
		t.Errorf("stdout %q, stderr %q; want the unknown environment named, and what to check", o.stdout, o.stderr)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Error("a refused policy wrote to the store")
	}
	a, done := h.authority()
	defer done()
	if envs, err := a.Environments(t.Context()); err != nil || len(envs) != 1 || envs[0] != "staging" {
		t.Fatalf("environments after the refusal: %v, %v; want only staging", envs, err)
	}

	o = h.must(ExitOK, "policy", "staging", "queue")
	if !strings.Contains(o.stdout, "staging now has policy queue") {
		t.Errorf("policy of a known environment: %q", o.stdout)
	}
	if st := h.status("staging"); st["policy"] != string(authority.PolicyQueue) {
		t.Errorf("status after the policy: %v", st["policy"])
	}
}
