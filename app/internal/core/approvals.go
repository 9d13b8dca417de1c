package core

import (
	"context"
	"fmt"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
)

// TeamMembership asks GitHub whether user is an active member of the team slug of org.
type TeamMembership func(ctx context.Context, org, slug, user string) (bool, error)

// MayApprove checks, at a door of the approvals gate (a comment, the status page), that login is
// among the approvers of rule: any login when the rule names none, else a login named, or a member
// of a team named as GitHub says (member nil: it cannot be asked, so no team admits anyone). The
// door has checked the write permission already. When login may not approve, why is a sentence
// for the person.
func MayApprove(ctx context.Context, rule *authority.ApprovalRule, login string, member TeamMembership) (ok bool, why string, err error) {
	if rule == nil || len(rule.Approvers) == 0 {
		return true, "", nil
	}
	var teams []string
	for _, a := range rule.Approvers {
		if _, _, team := authority.SplitTeam(a); team {
			teams = append(teams, a)
		} else if strings.EqualFold(a, login) {
			return true, "", nil // named: GitHub need not be asked about teams
		}
	}
	for _, a := range teams {
		if member == nil {
			break
		}
		org, slug, _ := authority.SplitTeam(a)
		in, err := member(ctx, org, slug, login)
		if err != nil {
			return false, "", fmt.Errorf("membership of %s in %s: %w", login, a, err)
		}
		if in {
			return true, "", nil
		}
	}
	why = fmt.Sprintf("only %s may approve there", strings.Join(rule.Approvers, ", "))
	switch {
	case len(teams) > 0 && member == nil:
		why += "; team membership cannot be checked without the App's credentials"
	case len(teams) > 0:
		why += fmt.Sprintf("; GitHub says %s is in none of the teams named", login)
	}
	return false, why, nil
}
