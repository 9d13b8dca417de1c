package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// approvalConfig has a production environment built from the fixtures' repository that needs one
// approval.
const approvalConfig = `environments:
  production:
    approvals: 1
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
`

// waitingForApproval accepts headSha for production's api, pushed by pusher, under rule.
func waitingForApproval(t *testing.T, h *harness, pusher string, rule *authority.ApprovalRule) {
	t.Helper()
	if _, err := h.auth.Accept(context.Background(), authority.Intent{ID: "push-1", Environment: "production", Scopes: []string{"api"}, Sha: headSha,
		Ref: "refs/heads/master", Source: "push", Actor: pusher, Gates: &authority.Gates{Approvals: rule}}, false); err != nil {
		t.Fatal(err)
	}
}

// approvalsOf is who approved what is pending in production's api.
func approvalsOf(t *testing.T, h *harness) []string {
	t.Helper()
	env, err := h.auth.Status(context.Background(), "production")
	if err != nil {
		t.Fatal(err)
	}
	return authority.ApprovalsOf(env.Scopes["api"].Mailbox)
}

// /latestwins approve ENV SHA, on GitHub's example issue_comment payload against the strict fake
// GitHub: the commenter needs write permission, and to be among the approvers when the
// environment names them (a team's membership asked of GitHub); it works on an issue too.
func TestCommentApprove(t *testing.T) {
	t.Parallel()
	const (
		react  = "POST " + fixtureRepo + "/issues/comments/492700400/reactions"
		perm   = "GET " + fixtureRepo + "/collaborators/Codertocat/permission"
		team   = "GET /orgs/acme/teams/sre/memberships/Codertocat"
		reply  = "POST " + fixtureRepo + "/issues/1/comments"
		body   = "/latestwins approve production ec26c3e"
		approv = "production/api: approved ec26c3e (generation 1) as `\"Codertocat\"`; 1 of 1 approvals: it deploys at its next try"
	)
	member := func(t *testing.T, gh *githubtest.Server, state string) {
		if state == "" {
			gh.On("GET", "/orgs/acme/teams/sre/memberships/Codertocat", http.StatusNotFound, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)
			return
		}
		m := githubtest.Example(t, "GET", "/orgs/{org}/teams/{team_slug}/memberships/{username}", http.StatusOK, "")
		m["state"] = state
		gh.On("GET", "/orgs/acme/teams/sre/memberships/Codertocat", http.StatusOK, m)
	}
	tests := []struct {
		name       string
		body       string
		onIssue    bool
		rule       *authority.ApprovalRule
		permission string
		team       string // the team membership's state; "": not a member
		outcome    core.Outcome
		calls      []string
		reply      []string
		approvers  []string // who approved the pending commit afterwards
	}{
		{name: "a collaborator approves", rule: &authority.ApprovalRule{Count: 1}, permission: "write", outcome: core.OutcomeApproved,
			calls: []string{react, perm, reply}, reply: []string{approv}, approvers: []string{"Codertocat"}},
		{name: "on an issue", onIssue: true, rule: &authority.ApprovalRule{Count: 1}, permission: "admin", outcome: core.OutcomeApproved,
			calls: []string{react, perm, reply}, reply: []string{approv}, approvers: []string{"Codertocat"}},
		{name: "a commenter without write permission", rule: &authority.ApprovalRule{Count: 1}, permission: "read", outcome: core.OutcomeRefused,
			calls: []string{react, perm, reply}, reply: []string{"`\"Codertocat\"` cannot run `/latestwins approve`: it needs write permission on Codertocat/Hello-World."}},
		{name: "a commenter not among the approvers", rule: &authority.ApprovalRule{Count: 1, Approvers: []string{"alice", "@acme/sre"}}, permission: "write",
			outcome: core.OutcomeRefused, calls: []string{react, perm, team, reply},
			reply: []string{"`\"Codertocat\"` cannot approve in production: only alice, @acme/sre may approve there; GitHub says Codertocat is in none of the teams named."}},
		{name: "an invitation to the team is not membership", rule: &authority.ApprovalRule{Count: 1, Approvers: []string{"@acme/sre"}}, permission: "write", team: "pending",
			outcome: core.OutcomeRefused, calls: []string{react, perm, team, reply}, reply: []string{"cannot approve in production: only @acme/sre may approve there"}},
		{name: "a member of an approving team", rule: &authority.ApprovalRule{Count: 1, Approvers: []string{"alice", "@acme/sre"}}, permission: "write", team: "active",
			outcome: core.OutcomeApproved, calls: []string{react, perm, team, reply}, reply: []string{approv}, approvers: []string{"Codertocat"}},
		{name: "an approver by login is not asked about teams", rule: &authority.ApprovalRule{Count: 1, Approvers: []string{"@acme/sre", "codertocat"}}, permission: "write",
			outcome: core.OutcomeApproved, calls: []string{react, perm, reply}, reply: []string{approv}, approvers: []string{"Codertocat"}},
		{name: "the pusher's own approval", rule: &authority.ApprovalRule{Count: 1, ExcludePusher: true}, permission: "write", outcome: core.OutcomeApproved,
			calls: []string{react, perm, reply}, reply: []string{"recorded the approval of ec26c3e (generation 1) by `\"Codertocat\"`, who pushed it: the pusher's own approval does not count here; 0 of 1 approvals: 1 more needed."},
			approvers: []string{"Codertocat"}},
		{name: "a commit that is not pending", body: "/latestwins approve production 34c5c77", rule: &authority.ApprovalRule{Count: 1}, permission: "write",
			outcome: core.OutcomeApproved, calls: []string{react, perm, reply},
			reply: []string{"Could not approve 34c5c77 in production: approve 34c5c77 in production: invalid sha \"34c5c77\": 34c5c77 is not pending in production; pending there: ec26c3e in api (generation 1)"}},
		{name: "an environment this repository does not feed", body: "/latestwins approve staging ec26c3e", rule: &authority.ApprovalRule{Count: 1}, permission: "write",
			outcome: core.OutcomeNoScopes, calls: []string{react, perm, reply}, reply: []string{"`\"staging\"` is not an environment of .github/latestwins.yml that Codertocat/Hello-World feeds"}},
		{name: "no commit", body: "/latestwins approve production", outcome: core.OutcomeReplied, calls: []string{react, reply},
			reply: []string{"`/latestwins approve ENV SHA` takes the environment and the commit to approve"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			h := newHarness(t, approvalConfig, withGitHub(inst))
			if tt.rule != nil {
				waitingForApproval(t, h, "Codertocat", tt.rule)
			}
			var replied func() string
			for _, c := range tt.calls {
				switch c {
				case react:
					stubReaction(t, gh)
				case perm:
					stubPermission(gh, "Codertocat", tt.permission)
				case team:
					member(t, gh, tt.team)
				case reply:
					st := stubReply(t, gh)
					replied = func() string { return replyOf(t, st) }
				}
			}
			b := tt.body
			if b == "" {
				b = body
			}
			payload := commentFixture(t, func(m map[string]any) {
				withBody(b)(m)
				if tt.onIssue {
					delete(m["issue"].(map[string]any), "pull_request")
				}
			})
			rec := h.post(t, "issue_comment", "d-approve", payload)
			res := decodeResult(t, rec)
			if res.Outcome != tt.outcome {
				t.Errorf("%d %s, want %s: %s", rec.Code, res.Outcome, tt.outcome, rec.Body)
			}
			var got []string
			for _, c := range calls(gh.Requests()) {
				got = append(got, c.Method+" "+c.Path)
			}
			if diff := cmp.Diff(tt.calls, got); diff != "" {
				t.Errorf("GitHub requests (-want +got):\n%s", diff)
			}
			text := replied()
			for _, want := range tt.reply {
				if !strings.Contains(text, want) {
					t.Errorf("reply lacks %q:\n%s", want, text)
				}
			}
			if tt.rule != nil {
				if diff := cmp.Diff(tt.approvers, approvalsOf(t, h)); diff != "" {
					t.Errorf("approvals recorded (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// The App's /v1 API, a workflow's token, has no way to approve: every path a route could take to
// an approval is refused, and nothing is recorded.
func TestAPICannotApprove(t *testing.T) {
	t.Parallel()
	h := newHarness(t, approvalConfig)
	waitingForApproval(t, h, "pusher", &authority.ApprovalRule{Count: 1})
	for _, path := range []string{"/v1/approve", "/v1/approvals", "/v1/environments/production/approve"} {
		b, _ := json.Marshal(map[string]any{"environment": "production", "sha": headSha, "actor": "alice"})
		req, err := http.NewRequest(http.MethodPost, path, strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		rec := h.do(req)
		if rec.Code < 400 {
			t.Errorf("POST %s: %d %s; want a refusal", path, rec.Code, rec.Body)
		}
	}
	if got := approvalsOf(t, h); len(got) != 0 {
		t.Errorf("approvals recorded through the API: %v", got)
	}
}
