package config

import "github.com/latestwins/latestwins/internal/authority"

// GatesOf is the environment's gates as intents carry them: an empty set (holds for nothing)
// when the file sets none, so that a gate removed from the file is removed from the environment
// too.
func (e *Environment) GatesOf() *authority.Gates {
	g := e.Gates
	if g.Soak == nil {
		g.Soak = &authority.Soak{}
	}
	if g.Approvals == nil {
		g.Approvals = &authority.ApprovalRule{}
	}
	if g.Windows == nil {
		g.Windows = &authority.Windows{}
	}
	return &g
}
