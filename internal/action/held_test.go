package action

import (
	"context"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// TestHeldEndsTheStepWithoutFailing: a run held by approvals (a lasting hold) ends the step at
// once, however long its wait, with outcome held and a notice, and without failing the job; the
// summary says the commit stays pending and how it goes on.
func TestHeldEndsTheStepWithoutFailing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	st, closeStore, err := openBolt(context.Background(), w.store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := authority.New(st).SetGates(context.Background(), "e", authority.Gates{Approvals: &authority.ApprovalRule{Count: 1}}, "admin"); err != nil {
		t.Fatal(err)
	}
	if err := closeStore(); err != nil {
		t.Fatal(err)
	}
	r := w.job("deploy", "401", "push", pushEvent, nil).step(map[string]string{"environment": "e", "scopes": "api", "run": "true", "wait": "30m"})
	if r.err != nil || r.outputs["outcome"] != "held" {
		t.Fatalf("err %v outputs %v\n%s", r.err, r.outputs, r.log)
	}
	if !strings.Contains(r.log, "::notice::held: e/api: waiting for approval: 0 of 1") || strings.Contains(r.log, "::error") || strings.Contains(r.log, "::warning::gave up") {
		t.Errorf("want one notice saying what it waits for, and no error:\n%s", r.log)
	}
	if !strings.Contains(r.summary, "The commit stays pending; the recovery sweep starts its work again once it may go") {
		t.Errorf("the summary does not say how the work goes on:\n%s", r.summary)
	}
}
