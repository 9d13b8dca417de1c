package storetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Approvals: an environment with an approvals gate deploys a commit only once enough distinct
// people approved that commit there. The approvals are stored on the commit's pending entries, so
// that every process sees them, a repeat counts once, people approving at the same moment are all
// kept, and a commit that supersedes another needs its own. The recovery sweep leaves a head that
// waits for approval alone, and re-drives it once approved.
func approvalCases() []testCase {
	return []testCase{
		{"HeldUntilDistinctPeopleApproved", testApprovalsHeld},
		{"ConcurrentApprovalsAreAllKept", testApprovalsConcurrent},
		{"SupersededCommitDropsOut", testApprovalsSuperseded},
		{"SweepLeavesAWaitingHeadThenRedrivesIt", testApprovalsSweep},
	}
}

// approvalPush is a push to prod's api whose maker's configuration requires rule.
func approvalPush(id, commit string, rule *authority.ApprovalRule) authority.Intent {
	in := push("prod", id, commit, "api")
	in.Gates = &authority.Gates{Approvals: rule}
	return in
}

// approve records login's approval of commit in prod through a process of its own.
func (h *harness) approve(login, commit string) *authority.CommitApprovalResult {
	h.t.Helper()
	res, err := h.process().ApproveCommit(h.ctx, authority.CommitApprovalRequest{Environment: "prod", Sha: commit, Login: login, Door: authority.ApprovalDoorComment})
	if err != nil {
		h.t.Fatalf("approve %s by %s: %v", commit[:7], login, err)
	}
	return res
}

// wantApprovalWait checks that the deploy of gen in prod is refused for want of need more approvals.
func (h *harness) wantApprovalWait(gen int64, need int) {
	h.t.Helper()
	held, err := h.tryDeploy(h.process(), "prod", gen, "run", "api")
	if err != nil {
		h.t.Fatal(err)
	}
	if held == nil || held.Reason != authority.ReasonApproval || held.Approval == nil || held.Approval.Need != need {
		h.t.Fatalf("deploy of generation %d: held %+v; want it waiting for %d more approval(s)", gen, held, need)
	}
}

func testApprovalsHeld(t *testing.T, h *harness) {
	commit := sha("ap", 1)
	res := h.accept(h.process(), approvalPush("p-1", commit, &authority.ApprovalRule{Count: 2}), true)
	h.wantApprovalWait(res.Generation, 2)
	h.approve("alice", commit)
	h.approve("alice", commit) // a repeat, by another process: counted once
	h.wantApprovalWait(res.Generation, 1)
	stored := h.scope("prod", "api").Mailbox.Approvals
	if len(stored) != 1 || stored[0].Login != "alice" || stored[0].Door != authority.ApprovalDoorComment || !stored[0].At.Equal(h.clock.Now()) {
		t.Fatalf("stored approvals %+v; want alice's, by comment, at the clock's time to the nanosecond", stored)
	}
	h.approve("bob", commit)
	if held, err := h.tryDeploy(h.process(), "prod", res.Generation, "run", "api"); err != nil || held != nil {
		t.Fatalf("approved by two people: held %v, %v; want it deployed", held, err)
	}
	ev := eventsOf(h.env("prod"), authority.EventApprovedCommit)
	if len(ev) != 2 || !strings.Contains(ev[0].Message, "alice") || !strings.Contains(ev[1].Message, "bob") || ev[1].Sha != commit {
		t.Fatalf("approval events %+v; want alice's and bob's", ev)
	}
}

func testApprovalsConcurrent(t *testing.T, h *harness) {
	commit := sha("ap", 2)
	res := h.accept(h.process(), approvalPush("p-1", commit, &authority.ApprovalRule{Count: 3}), true)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, login := range []string{"alice", "bob", "carol"} {
		wg.Go(func() {
			_, err := h.process().ApproveCommit(h.ctx, authority.CommitApprovalRequest{Environment: "prod", Sha: commit, Login: login, Door: authority.ApprovalDoorPage})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := authority.ApprovalsOf(h.scope("prod", "api").Mailbox); len(got) != 3 {
		t.Fatalf("approvals kept %v; want all three", got)
	}
	if held, err := h.tryDeploy(h.process(), "prod", res.Generation, "run", "api"); err != nil || held != nil {
		t.Fatalf("approved by three people at once: held %v, %v", held, err)
	}
}

func testApprovalsSuperseded(t *testing.T, h *harness) {
	rule := &authority.ApprovalRule{Count: 1}
	older, newer := sha("ap", 3), sha("ap", 4)
	h.accept(h.process(), approvalPush("p-1", older, rule), true)
	h.approve("alice", older)
	h.clock.Advance(time.Minute) // pushed later: it has waited since the older one was accepted
	res := h.accept(h.process(), approvalPush("p-2", newer, rule), true)
	h.wantApprovalWait(res.Generation, 1)
	_, err := h.process().ApproveCommit(h.ctx, authority.CommitApprovalRequest{Environment: "prod", Sha: older, Login: "bob", Door: authority.ApprovalDoorCLI})
	var ie *authority.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "pending there: "+newer[:7]) {
		t.Fatalf("approving the superseded commit: %v; want an InputError naming the newer one", err)
	}
	h.approve("alice", newer)
	if held, err := h.tryDeploy(h.process(), "prod", res.Generation, "run", "api"); err != nil || held != nil {
		t.Fatalf("the newer commit, approved: held %v, %v", held, err)
	}
}

func testApprovalsSweep(t *testing.T, h *harness) {
	const stall = 10 * time.Minute
	commit := sha("ap", 5)
	res := h.accept(h.process(), approvalPush("p-1", commit, &authority.ApprovalRule{Count: 1}), true)
	h.wantApprovalWait(res.Generation, 1)
	var redriven []authority.StalledWork
	sweep := func() {
		t.Helper()
		rep, err := h.process().Sweep(h.ctx, stall, 3, func(_ context.Context, w authority.StalledWork) error {
			redriven = append(redriven, w)
			return nil
		})
		if err != nil || len(rep.Failed) > 0 {
			t.Fatalf("sweep: %+v, %v", rep, err)
		}
	}
	for range 3 {
		h.clock.Advance(stall + testTTL + h.skew)
		sweep()
	}
	if len(redriven) != 0 {
		t.Fatalf("the sweep re-drove %+v while it waits for approval", redriven)
	}
	h.approve("alice", commit)
	sweep()
	if len(redriven) != 1 || redriven[0].Generation != res.Generation || redriven[0].Attempt != 1 {
		t.Fatalf("re-driven once approved: %+v; want generation %d, attempt 1", redriven, res.Generation)
	}
}
