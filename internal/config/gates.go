package config

import (
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/latestwins/latestwins/internal/authority"
)

// BreakGlassPermissions are the repository permissions break-glass: may name, least first.
var BreakGlassPermissions = []string{"write", "maintain", "admin"}

// breakGlass reads an environment's break-glass: the permission a commenter needs to waive its
// gates; "" when the file leaves it out (admin).
func (p *parser) breakGlass(env string, k, v *yaml.Node) string {
	s, ok := p.scalar(k, v)
	if !ok {
		return ""
	}
	if !slices.Contains(BreakGlassPermissions, s) {
		p.addf(v, "environment %q: break-glass %q is not a permission; use admin (the default), maintain or write: who may waive the gates with /latestwins break-glass", env, s)
		return ""
	}
	return s
}

// BreakGlassPermission is the permission a commenter needs to break the glass in the environment.
func (e *Environment) BreakGlassPermission() string {
	if e.BreakGlass == "" {
		return "admin"
	}
	return e.BreakGlass
}

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
