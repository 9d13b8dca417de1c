package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

const approvalScope = "    scopes:\n      api:\n        repository: acme/api\n        branch: main\n"

func TestApprovalsParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		keys string
		want *authority.ApprovalRule
	}{
		{"count only", "    approvals: 1\n", &authority.ApprovalRule{Count: 1}},
		{"approvers and pusher", "    approvals: 2\n    approvers: [alice, \"@acme/sre\"]\n    pusher-may-approve: false\n",
			&authority.ApprovalRule{Count: 2, Approvers: []string{"alice", "@acme/sre"}, ExcludePusher: true}},
		{"keys in any order", "    pusher-may-approve: true\n    approvers:\n      - bob\n    approvals: 1\n",
			&authority.ApprovalRule{Count: 1, Approvers: []string{"bob"}}},
		{"none", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte("environments:\n  production:\n" + tt.keys + approvalScope))
			if err != nil {
				t.Fatal(err)
			}
			e := cfg.Environments[0]
			if diff := cmp.Diff(tt.want, e.Gates.Approvals); diff != "" {
				t.Errorf("approvals (-want +got):\n%s", diff)
			}
			// What intents carry: an empty rule when the file sets none, so the gate is removed.
			got := e.GatesOf().Approvals
			if tt.want == nil && (got == nil || got.Count != 0) {
				t.Errorf("GatesOf approvals %+v, want an empty rule", got)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("the parsed rule is refused by the domain: %v", err)
			}
		})
	}
}

func TestApprovalsParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		keys string
		want string
	}{
		{"zero", "    approvals: 0\n", `line 3: environment "production": approvals "0" must be how many people approve each commit, from 1 to 10 (leave the key out for none)`},
		{"too many", "    approvals: 11\n", `line 3: environment "production": approvals "11" must be how many people approve each commit, from 1 to 10`},
		{"a word", "    approvals: two\n", `line 3: environment "production": approvals "two" must be how many people approve each commit`},
		{"a quoted number", "    approvals: \"2\"\n", `line 3: environment "production": approvals "2" must be how many people approve each commit`},
		{"approvers not a list", "    approvals: 1\n    approvers: alice\n", `line 4: environment "production": approvers must be a list of GitHub logins and teams, e.g. [alice, "@acme/sre"]`},
		{"bad login", "    approvals: 1\n    approvers: [alice, bad_login]\n", `line 4: environment "production": approver "bad_login" is neither a GitHub login nor a team; name GitHub users by login (alice) and teams as @org/team-slug (@acme/sre)`},
		{"team without slug", "    approvals: 1\n    approvers: [\"@acme\"]\n", `line 4: environment "production": approver "@acme" is neither a GitHub login nor a team`},
		{"approver twice", "    approvals: 1\n    approvers: [alice, Alice]\n", `line 4: environment "production": approver "Alice" is named twice; name each approver once`},
		{"empty approvers", "    approvals: 1\n    approvers: []\n", `line 4: environment "production": approvers is empty`},
		{"approvers without approvals", "    approvers: [alice]\n", `line 2: environment "production": approvers and pusher-may-approve need approvals: N, how many people approve each commit (e.g. approvals: 1)`},
		{"pusher without approvals", "    pusher-may-approve: false\n", `line 2: environment "production": approvers and pusher-may-approve need approvals: N`},
		{"pusher not a bool", "    approvals: 1\n    pusher-may-approve: nope\n", `line 4: environment "production": pusher-may-approve must be true (the default: whoever pushed a commit may approve it) or false (their own approval does not count)`},
		{"more approvals than approvers", "    approvals: 3\n    approvers: [alice, bob]\n", `line 2: environment "production": approvals: 3 approvals can never come from the 2 approvers named: name more approvers (or a team), or require fewer`},
		{"misspelt key", "    approval: 1\n", `line 3: unknown key "approval" in environment "production"; allowed: policy, scopes, github-environment, allowed-overrides, requires, requires-ancestor, soak, approvals, approvers, pusher-may-approve, windows, break-glass, alert-after, alert-webhook, alert-issue`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte("environments:\n  production:\n" + tt.keys + approvalScope))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse: %v; want problems", err)
			}
			if !strings.HasPrefix(err.Error(), tt.want) && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("problems:\n%s\nwant one starting %q", err, tt.want)
			}
		})
	}
}
