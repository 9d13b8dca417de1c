//go:build latestwins_mutants

package pass

// The tests below rebuild old behaviours in-process (mutant, mutant_on.go), so they build only with
// the latestwins_mutants tag: scripts/test runs them as go test -tags latestwins_mutants.

import (
	"slices"
	"testing"
)

// TestRunLeavesNoProcessBehindCatchesOldStarts runs the same command as the old ways of starting
// it, without the guard: each leaves the sleeper in its own session alive. (A guard that is not a
// subreaper is a mutant of the guard's process, which only a binary built with it can be: the
// process tests of cmd/latestwins show that one.)
func TestRunLeavesNoProcessBehindCatchesOldStarts(t *testing.T) {
	for _, m := range []string{mutantDirect, mutantPdeathsig} {
		t.Run(m, func(t *testing.T) {
			mutant = m
			t.Cleanup(func() { mutant = "" })
			if left := survivors(t); !slices.Contains(left, "own-session") {
				t.Fatalf("alive after Run returned: %v; want the sleeper in its own session, which only the guard kills", left)
			}
		})
	}
}

// TestSupervisorKillsBeforeTheLeaseCanEndCatchesTheOldRule runs the cases above against the old
// rule (deadline from the supervisor's start, grace uncapped): some must fail.
func TestSupervisorKillsBeforeTheLeaseCanEndCatchesTheOldRule(t *testing.T) {
	mutant = mutantOldStop
	t.Cleanup(func() { mutant = "" })
	failed, pastEnd := 0, 0
	for _, c := range killCases {
		term, kill := stopTimes(t, c.grace, t0.Add(-c.requested))
		if len(checkKillTimes(c.grace, c.requested, term, kill)) > 0 {
			failed++
		}
		if kill >= ttl30-c.requested {
			pastEnd++ // not a matter of the margin: the command could outlive the lease
		}
	}
	if failed == 0 || pastEnd == 0 {
		t.Fatalf("%d cases failed, %d with SIGKILL past the lease's end: the test cannot tell the old rule from the new one", failed, pastEnd)
	}
	t.Logf("under the old rule %d of %d cases fail, %d with SIGKILL at or past the lease's end", failed, len(killCases), pastEnd)
}
