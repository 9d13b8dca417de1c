package authority

import "time"

// ApprovalRule is how many people must approve a commit in an environment before it deploys there.
type ApprovalRule struct {
	Count int `json:"count,omitempty"`
}

func (r *ApprovalRule) validate() error { return nil }

func (r *ApprovalRule) normal() *ApprovalRule {
	if r == nil || r.Count <= 0 {
		return nil
	}
	c := *r
	return &c
}

func (r *ApprovalRule) String() string { return "" }

// ApprovalWait is what a commit waits for: approvals by people (ReasonApproval).
type ApprovalWait struct {
	Sha  string `json:"sha"`
	Need int    `json:"need"`
}

func (w *ApprovalWait) text() string { return "waiting for approval" }

// approvalWait says whether the pass of ref waits for approvals; nil: it may go.
func approvalWait(v View, ref *Ref) *ApprovalWait { return nil }

// approvalRetry is how soon a pass waiting for approvals is told to ask again: people approve in
// minutes, not seconds.
const approvalRetry = 30 * time.Second
