package app

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// approveForm reads the Approve form of production/api from the page.
func approveForm(t *testing.T, pg string) url.Values {
	t.Helper()
	return buttonForm(t, pg, "approve-production/api")
}

// The Approve button: next to a commit waiting for approvals, for users who can push to the
// scope's repository; it records the signed-in user's approval of the commit the page showed,
// once they are among the approvers (by login, or in a team as GitHub tells them), and the page
// then says who approved.
func TestApproveButton(t *testing.T) {
	t.Parallel()
	w := newSignInWorldOf(t, approvalConfig, "production")
	waitingForApproval(t, w.h, "octocat", &authority.ApprovalRule{Count: 2, Approvers: []string{"mona", "@acme/sre"}})
	w.gh.On("GET", "/orgs/acme/teams/sre/memberships/bob", http.StatusNotFound, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)
	active := githubtest.Example(t, "GET", "/orgs/{org}/teams/{team_slug}/memberships/{username}", http.StatusOK, "")
	active["state"] = "active"
	w.gh.On("GET", "/orgs/acme/teams/sre/memberships/carol", http.StatusOK, active)

	reader := w.signIn(t, "rita", map[string]map[string]bool{"Codertocat/Hello-World": readPerm})
	if pg := getPage(t, reader, w.url+"/"); strings.Contains(pg, `id="approve-production/api"`) || !strings.Contains(pg, "waiting for approval: 0 of 2") {
		t.Fatalf("a reader's page: an Approve button, or no word of the wait:\n%s", pg)
	}
	mona := w.signIn(t, "mona", map[string]map[string]bool{"Codertocat/Hello-World": pushPerm})
	pg := getPage(t, mona, w.url+"/")
	form := approveForm(t, pg)
	if form.Get("sha") != headSha || !strings.Contains(pg, "Approve "+headSha[:7]) {
		t.Fatalf("the Approve form approves %q, want the waiting commit %s", form.Get("sha"), headSha)
	}

	bob := w.signIn(t, "bob", map[string]map[string]bool{"Codertocat/Hello-World": pushPerm})
	bobForm := approveForm(t, getPage(t, bob, w.url+"/"))
	if code, body := postPage(t, bob, w.url+"/approve", bobForm); code != http.StatusForbidden ||
		!strings.Contains(body, "bob cannot approve in production: only mona, @acme/sre may approve there; GitHub says bob is in none of the teams named") {
		t.Errorf("bob, not an approver: %d %s; want 403 saying who may", code, body)
	}
	if code := post(t, reader, w.url+"/approve", form); code != http.StatusForbidden {
		t.Errorf("another session's form: %d, want 403", code)
	}
	stale := url.Values{}
	for k, v := range form {
		stale[k] = v
	}
	stale.Set("sha", olderSha)
	if code, body := postPage(t, mona, w.url+"/approve", stale); code != http.StatusConflict || !strings.Contains(body, "34c5c77 is not pending in production/api") {
		t.Errorf("approving a commit not pending: %d %s; want 409 saying what is", code, body)
	}
	if got := approvalsOf(t, w.h); len(got) != 0 {
		t.Fatalf("refused approvals were recorded: %v", got)
	}

	if code := post(t, mona, w.url+"/approve", form); code != http.StatusSeeOther {
		t.Fatalf("mona's Approve form: %d, want 303", code)
	}
	if pg := getPage(t, mona, w.url+"/"); !strings.Contains(pg, "waiting for approval: 1 of 2, approved by mona") {
		t.Errorf("the page after mona's approval:\n%s", pg)
	}
	carol := w.signIn(t, "carol", map[string]map[string]bool{"Codertocat/Hello-World": pushPerm})
	if code := post(t, carol, w.url+"/approve", approveForm(t, getPage(t, carol, w.url+"/"))); code != http.StatusSeeOther {
		t.Fatalf("carol's Approve form (a member of @acme/sre): %d, want 303", code)
	}
	if diff := cmp.Diff([]string{"mona", "carol"}, approvalsOf(t, w.h)); diff != "" {
		t.Errorf("approvals (-want +got):\n%s", diff)
	}
	env, err := w.h.auth.Status(context.Background(), "production")
	if err != nil {
		t.Fatal(err)
	}
	if a := env.Scopes["api"].Mailbox.Approvals; a[0].Door != authority.ApprovalDoorPage {
		t.Errorf("approval %+v; want it through the page", a[0])
	}
	pg = getPage(t, mona, w.url+"/")
	if strings.Contains(pg, `id="approve-production/api"`) || !strings.Contains(pg, "approved by mona, carol") {
		t.Errorf("the page once approved: an Approve button, or not who approved:\n%s", pg)
	}
}
