package config

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/latestwins/latestwins/internal/authority"
)

// approvals reads an environment's approvals:, approvers: and pusher-may-approve: (see
// docs/config.md) into e.Gates.Approvals; checkApprovals checks them together once the whole
// environment is read.
func (p *parser) approvals(e *Environment, k, v *yaml.Node) {
	if e.Gates.Approvals == nil {
		e.Gates.Approvals = &authority.ApprovalRule{}
	}
	r := e.Gates.Approvals
	switch k.Value {
	case "approvals":
		s, ok := p.scalar(k, v)
		if !ok {
			return
		}
		n, err := strconv.Atoi(s)
		if err != nil || v.Tag != "!!int" || n < 1 || n > authority.MaxApprovals {
			p.addf(v, "environment %q: approvals %q must be how many people approve each commit, from 1 to %d (leave the key out for none)", e.Name, s, authority.MaxApprovals)
			return
		}
		r.Count = n
	case "approvers":
		r.Approvers = p.approvers(e.Name, v)
	case "pusher-may-approve":
		if v.Kind != yaml.ScalarNode || v.Tag != "!!bool" {
			p.addf(v, "environment %q: pusher-may-approve must be true (the default: whoever pushed a commit may approve it) or false (their own approval does not count)", e.Name)
			return
		}
		r.ExcludePusher = strings.EqualFold(v.Value, "false")
	}
}

// approvers reads the list of who may approve: GitHub logins and teams (@org/team-slug).
func (p *parser) approvers(env string, v *yaml.Node) []string {
	if v.Kind != yaml.SequenceNode {
		p.addf(v, "environment %q: approvers must be a list of GitHub logins and teams, e.g. [alice, \"@acme/sre\"]", env)
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode || item.Tag != "!!str" {
			p.addf(item, "environment %q: each approver must be a GitHub login or a team, @org/team-slug (quote a team: \"@acme/sre\")", env)
			continue
		}
		a := strings.TrimSpace(item.Value)
		if _, _, team := authority.SplitTeam(a); !team && !authority.ValidLogin(a) {
			p.addf(item, "environment %q: approver %q is neither a GitHub login nor a team; %s", env, a, authority.ApproverFix)
			continue
		}
		if seen[strings.ToLower(a)] {
			p.addf(item, "environment %q: approver %q is named twice; name each approver once", env, a)
			continue
		}
		seen[strings.ToLower(a)] = true
		out = append(out, a)
	}
	if len(out) == 0 && len(v.Content) == 0 {
		p.addf(v, "environment %q: approvers is empty; name who may approve, or leave the key out for anyone with write permission", env)
	}
	return out
}

// checkApprovals checks the environment's approval keys together: approvers and
// pusher-may-approve need approvals:, and the approvers named must be able to give that many.
func (p *parser) checkApprovals(e *Environment, key *yaml.Node) {
	r := e.Gates.Approvals
	if r == nil {
		return
	}
	switch {
	case r.Count == 0 && (len(r.Approvers) > 0 || r.ExcludePusher):
		p.addf(key, "environment %q: approvers and pusher-may-approve need approvals: N, how many people approve each commit (e.g. approvals: 1)", e.Name)
	case r.Count > 0:
		if err := r.Validate(); err != nil {
			p.addf(key, "environment %q: %s", e.Name, ruleProblem(err))
		}
	}
	if r.Count == 0 {
		// Nothing holds: the environment has no approvals gate.
		e.Gates.Approvals = nil
	}
}

// ruleProblem words a rule's refusal for the file.
func ruleProblem(err error) string {
	if ie, ok := err.(*authority.InputError); ok {
		return fmt.Sprintf("%s: %s", ie.Field, ie.Fix)
	}
	return err.Error()
}
