package cli

import "github.com/latestwins/latestwins/internal/authority"

// approvalsFlag reads --approvals: nil when not given.
func (c *cmdEnv) approvalsFlag() (*authority.ApprovalRule, error) { return nil, nil }
