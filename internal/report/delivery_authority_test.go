package report

import (
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// The rollup reads what the Authority really records: its retry and final failure words, and,
// through the state, the commit time of the commit that is live.
func TestReadRollupFromTheAuthority(t *testing.T) {
	ctx := t.Context()
	start := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	clock := storetest.NewClock(start)
	auth := authority.New(memory.New(), authority.WithClock(clock))
	sha1, sha2 := strings.Repeat("1", 40), strings.Repeat("2", 40)
	pass := func(id, sha string, committed time.Time, outcomes ...authority.Outcome) {
		t.Helper()
		acc, err := auth.Accept(ctx, authority.Intent{ID: id, Environment: "staging", Scopes: []string{"api"}, Sha: sha,
			Ref: "refs/heads/main", Source: "push", Actor: "octocat", Order: authority.Order{CommittedAt: committed}}, true)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range outcomes {
			clock.Advance(10 * time.Minute)
			g, err := auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: acc.Generation, Scopes: []string{"api"},
				Phase: "deploy", Holder: id, LeaseTTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: acc.Generation, Scopes: []string{"api"},
				Holder: id, Tokens: g.Tokens, Outcome: o, Attempt: i + 1, MaxAttempts: 2, Run: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 1: fails, fails again on its final attempt (at 09:20). 2: deploys at 10:10.
	pass("run-1", sha1, time.Time{}, authority.OutcomeFailure, authority.OutcomeFailure)
	clock.Advance(40 * time.Minute)
	pass("run-2", sha2, start.Add(30*time.Minute), authority.OutcomeSuccess)
	now := clock.Now()
	state, err := auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	r, err := ReadRollup(ctx, auth, "staging", state)
	if err != nil {
		t.Fatal(err)
	}
	f := r.Report(start, now).Scopes[0]
	// Accepted 09:00 and 10:00, both live at 10:10: 70m and 10m; 2's commit 09:30, 40m before.
	if f.Deploys != 1 || f.Commits != 2 || f.Failures != 1 || f.ChangeFailureRate != 1 {
		t.Errorf("figures %+v; want 1 deploy of 2 commits, 1 terminal failure (not 2: the first attempt retries)", f)
	}
	if f.LeadFromAccept.Count != 2 || f.LeadFromAccept.MeanSeconds != (40*time.Minute).Seconds() {
		t.Errorf("lead from acceptance %+v; want 70m and 10m", f.LeadFromAccept)
	}
	if f.LeadFromCommit.Count != 1 || f.LeadFromCommit.MeanSeconds != (40*time.Minute).Seconds() {
		t.Errorf("lead from the commit %+v; want 40m, of the one commit whose time is known", f.LeadFromCommit)
	}
	if f.Restore.Count != 1 || f.Restore.MeanSeconds != (50*time.Minute).Seconds() {
		t.Errorf("restore %+v; want the final failure at 09:20 to the deploy at 10:10, 50m", f.Restore)
	}
	if f.BehindSeconds != (70 * time.Minute).Seconds() {
		t.Errorf("behind %vs; want 09:00 to 10:10", f.BehindSeconds)
	}
}
