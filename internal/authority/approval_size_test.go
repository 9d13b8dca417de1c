package authority

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// The approvals of one document are bounded together: approvals by the longest logins on every
// scope's head are refused once they would take more than maxApprovalBytes, so the worst-case
// document (TestWorstCaseDocumentFitsAnItem) stays inside DynamoDB's item size with them.
func TestApprovalsAreBoundedPerDocument(t *testing.T) {
	e := newEnv("production")
	e.Gates = &Gates{Approvals: &ApprovalRule{Count: MaxApprovals}}
	for i := range MaxScopes {
		e.scope(fmt.Sprintf("s%02d", i)).Mailbox = &Ref{Generation: int64(i + 1), Sha: testSha(i + 1), IntentID: fmt.Sprint(i)}
	}
	refused := false
	for i := 0; i < MaxScopes*maxRefApprovals && !refused; i++ {
		login := fmt.Sprintf("%02d%s", i%100, strings.Repeat("x", 34)) + fmt.Sprintf("%03d", i)
		// As the Authority does, a refused transition's document is not the one kept.
		next := e.clone()
		_, err := next.approveCommit(CommitApprovalRequest{Environment: "production", Sha: testSha(i%MaxScopes + 1), Login: login, Door: ApprovalDoorComment}, t0)
		var ie *InputError
		switch {
		case errors.As(err, &ie) && strings.Contains(ie.Fix, "bytes of approvals"):
			refused = true
		case err != nil:
			t.Fatalf("approval %d: %v", i, err)
		default:
			e = next
		}
	}
	if !refused {
		t.Fatal("approvals on every head were never refused")
	}
	if n := e.approvalBytes(); n > maxApprovalBytes || n < maxApprovalBytes-200 {
		t.Fatalf("the document holds %d bytes of approvals; want just under %d", n, maxApprovalBytes)
	}
}
