package cli

import (
	"strings"
	"testing"
)

// A commit is given in full: an uppercase sha (as `tr a-f A-F` prints it) is the same commit and is
// stored lowercase; an abbreviated one, from a flag or its variable, is bad input said in one line
// that names where it came from and what to give, and nothing is written.
func TestShaIsGivenInFull(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "api", "--sha", strings.ToUpper(shaA), "--intent-id", "a")
	if m := scopeField(h.status("prod"), "api", "pending").(map[string]any); m["sha"] != shaA {
		t.Fatalf("an uppercase sha was stored as %v; want %s", m["sha"], shaA)
	}
	// The same commit in lowercase is the same intent's: a repeat, not a second commit.
	if o := h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "api", "--sha", shaA, "--intent-id", "a", "-q"); o.stdout != "1\n" {
		t.Fatalf("the lowercase repeat of an uppercase claim printed %q; want generation 1", o.stdout)
	}

	fix := "give the full commit sha, 40 hex digits (64 in a SHA-256 repository), e.g. from `git rev-parse HEAD` or ${{ github.sha }}"
	for _, tc := range []struct {
		name string
		vars map[string]string
		args []string
		say  string
	}{
		{"abbreviated flag", nil, []string{"claim", "--sha", "aaaa111"}, `latestwins claim: invalid --sha "aaaa111": ` + fix},
		{"abbreviated variable", map[string]string{"LATESTWINS_SHA": "AAAA111"}, []string{"run"}, `latestwins run: invalid LATESTWINS_SHA "AAAA111": ` + fix},
		{"a ref, not a sha", nil, []string{"claim", "--sha", "HEAD"}, `latestwins claim: invalid --sha "HEAD": ` + fix},
		{"abbreviated parent", nil, []string{"claim", "--sha", shaB, "--before", "aaaa111"}, `latestwins claim: invalid --before "aaaa111": give the full sha`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.vars = tc.vars
			defer func() { h.vars = map[string]string{} }()
			args := append(tc.args, "--environment", "prod", "--scopes", "api", "--intent-id", "b")
			if tc.args[0] == "run" {
				args = append(args, "--", "true")
			}
			o := h.must(ExitUsage, args...)
			if !strings.HasPrefix(o.stderr, tc.say) || strings.Count(o.stderr, "\n") != 1 {
				t.Errorf("stderr %q; want one line starting %q", o.stderr, tc.say)
			}
		})
	}
	if m := h.status("prod"); m["desired_generation"].(float64) != 1 {
		t.Errorf("refused shas wrote: desired generation %v, want 1", m["desired_generation"])
	}
}

// rollback --to takes a prefix of a commit that was live in the scope (any case), and refuses one
// that names several, naming them, or none, saying so; a full sha may name any commit.
func TestRollbackToAPrefix(t *testing.T) {
	h := newHarness(t)
	x := "abcdef1" + strings.Repeat("1", 33)
	y := "abcdef1" + strings.Repeat("2", 33)
	for i, sha := range []string{x, y, shaC} {
		h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", sha, "--ref", "refs/heads/main", "--intent-id", string(rune('a'+i)), "--", "true")
	}
	for _, tc := range []struct{ to, say string }{
		{"abcdef1", "latestwins rollback: roll back prod/api: invalid sha \"abcdef1\": it is the start of 2 commits that were live in prod/api (" + y + ", " + x + "): give more of it"},
		{"fedcba9", "no commit with that prefix was live in prod/api"},
		{"abc", `latestwins rollback: invalid --to "abc": give the commit's full sha, or at least its first 7 hex digits`},
		{"HEAD~1", `latestwins rollback: invalid --to "HEAD~1"`},
	} {
		o := h.must(ExitUsage, "rollback", "prod/api", "--to", tc.to, "--reason", "c breaks checkout")
		if !strings.Contains(o.stderr, tc.say) || strings.Count(o.stderr, "\n") != 1 {
			t.Errorf("rollback --to %s said %q; want one line saying %q", tc.to, o.stderr, tc.say)
		}
	}
	if scopeField(h.status("prod"), "api", "freeze") != nil {
		t.Fatal("a refused rollback froze the scope")
	}
	o := h.must(ExitOK, "rollback", "prod/api", "--to", "ABCDEF11", "--reason", "c breaks checkout")
	if !strings.Contains(o.stdout, "rolled prod/api back to abcdef1 at generation 4") {
		t.Fatalf("rollback --to ABCDEF11 said:\n%s", o.stdout)
	}
	seen, _ := h.commitsSeen(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--generation", "4")
	if want := "sha=" + x + " ref=refs/heads/main shas=api=" + x; seen != want {
		t.Errorf("the rollback's command saw %q, want %q", seen, want)
	}
}
