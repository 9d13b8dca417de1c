package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// TeamChecker is what a GitHubSignIn that can ask GitHub about teams with the user's token offers
// (internal/githubapp.OAuth does): whether user is an active member of the team slug of org.
// Without it, no team among an environment's approvers admits anyone on the page.
type TeamChecker interface {
	TeamMember(ctx context.Context, token, org, slug, user string) (bool, error)
}

// serveApprove is the Approve button of a commit waiting for approvals: the signed-in user's
// approval of the commit the page showed (the form's sha), in the scope of the row, as with
// `/latestwins approve ENV SHA`. The user needs write permission on the scope's repository
// (checkAction) and, when the environment names its approvers, to be one of them or in one of
// their teams, as GitHub tells the user.
func (a *Page) serveApprove(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pa := a.checkAction(w, r, "approve")
	if pa == nil {
		return
	}
	sha := strings.ToLower(formValue(r, "sha"))
	if !core.IsCommitSha(sha) {
		a.refuse(w, r, http.StatusBadRequest, "approve refused: the form does not name the commit it approves (reload the page and try again)", nil)
		return
	}
	doc, err := a.Auth.Status(ctx, pa.env)
	if err != nil {
		a.refuse(w, r, http.StatusConflict, "approve refused: "+err.Error(), nil)
		return
	}
	var rule *authority.ApprovalRule
	if doc.Gates != nil {
		rule = doc.Gates.Approvals
	}
	var member core.TeamMembership
	if tc, ok := a.signIn.github.(TeamChecker); ok {
		member = func(ctx context.Context, org, slug, user string) (bool, error) {
			return tc.TeamMember(ctx, pa.sess.Token, org, slug, user)
		}
	}
	ok, why, err := core.MayApprove(ctx, rule, pa.sess.Login, member)
	if err != nil {
		a.refuse(w, r, http.StatusBadGateway, "approve failed: GitHub did not say whether you are in the approvers' teams", err)
		return
	}
	if !ok {
		pa.log.InfoContext(ctx, "status page: approval refused, not an approver")
		a.refuse(w, r, http.StatusForbidden, fmt.Sprintf("approve refused: %s cannot approve in %s: %s", pa.sess.Login, pa.env, why), nil)
		return
	}
	res, err := a.Auth.ApproveCommit(ctx, authority.CommitApprovalRequest{Environment: pa.env, Sha: sha, Scopes: []string{pa.scope},
		Login: pa.sess.Login, Door: authority.ApprovalDoorPage})
	if errors.Is(err, authority.ErrInvalidInput) {
		a.refuse(w, r, http.StatusConflict, "approve refused: "+err.Error(), nil)
		return
	}
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, "approve failed: the store did not answer", err)
		return
	}
	for _, s := range res.Scopes {
		pa.log.InfoContext(ctx, "status page: approve", "sha", report.ShortSha(s.Sha), "generation", s.Generation, "repeat", s.Repeat, "need", s.Need)
	}
	http.Redirect(w, r, "/#env-"+url.PathEscape(pa.env), http.StatusSeeOther)
}
