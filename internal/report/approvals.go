package report

import (
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// approvalWait is what the head of the scope of v waits for at the approvals gate, nil and ""
// when nothing: the deploy gate's decision for it (authority.Hold), worded with who approved.
func approvalWait(v authority.View, now time.Time) (*authority.ApprovalWait, string) {
	if v.State == nil || v.State.Mailbox == nil || v.State.Mailbox.Failed {
		return nil, ""
	}
	if d := authority.Hold(v, v.State.Mailbox.Generation, now, 0); d.Reason == authority.ReasonApproval {
		return d.Approval, d.Text()
	}
	return nil, ""
}
