package app

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
)

// breakGlassConfig has a production environment built from the fixtures' repository that needs
// one approval, and whose break-glass needs the permission given.
func breakGlassConfig(permission string) string {
	line := ""
	if permission != "" {
		line = "    break-glass: " + permission + "\n"
	}
	return "environments:\n  production:\n    approvals: 1\n" + line + "    scopes:\n      api:\n        repository: Codertocat/Hello-World\n        branch: master\n        workflow: deploy.yml\n"
}

// /latestwins break-glass ENV SHA REASON, on GitHub's example issue_comment payload against the
// strict fake GitHub: the commenter needs the environment's break-glass permission (admin unless
// the file says otherwise); the gates of the commit are waived, audited with who and why.
func TestCommentBreakGlass(t *testing.T) {
	t.Parallel()
	const (
		react = "POST " + fixtureRepo + "/issues/comments/492700400/reactions"
		perm  = "GET " + fixtureRepo + "/collaborators/Codertocat/permission"
		reply = "POST " + fixtureRepo + "/issues/1/comments"
		body  = "/latestwins break-glass production ec26c3e incident 4711: checkout is down"
	)
	tests := []struct {
		name       string
		config     string // break-glass: in the file; "": left out (admin)
		body       string
		permission string
		outcome    core.Outcome
		calls      []string
		reply      string
		waived     bool
	}{
		{name: "an admin", permission: "admin", outcome: core.OutcomeBrokeGlass, calls: []string{react, perm, reply},
			reply: "Broke the glass for ec26c3e in production (api), as `\"Codertocat\"`", waived: true},
		{name: "a writer, where admin is needed", permission: "write", outcome: core.OutcomeRefused, calls: []string{react, perm, reply},
			reply: "cannot break the glass in production: it needs admin permission on Codertocat/Hello-World"},
		{name: "a maintainer, where the file says maintain", config: "maintain", permission: "maintain", outcome: core.OutcomeBrokeGlass,
			calls: []string{react, perm, reply}, reply: "Broke the glass for ec26c3e", waived: true},
		{name: "a reader, where the file says write", config: "write", permission: "read", outcome: core.OutcomeRefused,
			calls: []string{react, perm, reply}, reply: "it needs write permission"},
		{name: "a commit that is not pending", body: "/latestwins break-glass production 34c5c77 why", permission: "admin", outcome: core.OutcomeRefused,
			calls: []string{react, perm, reply}, reply: "Could not break the glass for 34c5c77 in production"},
		{name: "no reason", body: "/latestwins break-glass production ec26c3e", outcome: core.OutcomeReplied, calls: []string{react, reply},
			reply: "takes the environment, the pending commit and why its gates are waived"},
		{name: "an environment this repository does not feed", body: "/latestwins break-glass staging ec26c3e why", outcome: core.OutcomeNoScopes,
			calls: []string{react, reply}, reply: "is not an environment of .github/latestwins.yml that Codertocat/Hello-World feeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			h := newHarness(t, breakGlassConfig(tt.config), withGitHub(inst))
			waitingForApproval(t, h, "Codertocat", &authority.ApprovalRule{Count: 1})
			var replied func() string
			for _, c := range tt.calls {
				switch c {
				case react:
					stubReaction(t, gh)
				case perm:
					stubPermission(gh, "Codertocat", tt.permission)
				case reply:
					st := stubReply(t, gh)
					replied = func() string { return replyOf(t, st) }
				}
			}
			b := tt.body
			if b == "" {
				b = body
			}
			rec := h.post(t, "issue_comment", "d-break-glass", commentFixture(t, withBody(b)))
			if res := decodeResult(t, rec); res.Outcome != tt.outcome {
				t.Errorf("%d %s, want %s: %s", rec.Code, res.Outcome, tt.outcome, rec.Body)
			}
			var got []string
			for _, c := range calls(gh.Requests()) {
				got = append(got, c.Method+" "+c.Path)
			}
			if diff := cmp.Diff(tt.calls, got); diff != "" {
				t.Errorf("GitHub requests (-want +got):\n%s", diff)
			}
			if text := replied(); !strings.Contains(text, tt.reply) {
				t.Errorf("reply lacks %q:\n%s", tt.reply, text)
			}
			env, err := h.auth.Status(context.Background(), "production")
			if err != nil {
				t.Fatal(err)
			}
			bg := env.Scopes["api"].Mailbox.BreakGlass
			if (bg != nil) != tt.waived {
				t.Fatalf("break-glass on the pending commit: %+v; want it waived: %v", bg, tt.waived)
			}
			if tt.waived && (bg.Actor != "Codertocat" || bg.Via != "comment" || !strings.HasPrefix(bg.Reason, "incident 4711")) {
				t.Errorf("break-glass recorded as %+v; want who, the door and why", bg)
			}
		})
	}
}
