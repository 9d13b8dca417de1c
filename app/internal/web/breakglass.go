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
	"github.com/latestwins/latestwins/internal/config"
)

// PermissionChecker is what a GitHubSignIn that can tell the signed-in user's permission level on
// a repository offers (internal/githubapp.OAuth does): whether it is at least level (write,
// maintain, admin). Without it nobody may break the glass on the page.
type PermissionChecker interface {
	HasPermission(ctx context.Context, token, owner, repo, level string) (bool, error)
}

// serveBreakGlass is the Break glass button of a commit held by a soak, approvals or a change
// window: it waives those gates for the commit the page showed (the form's sha), in the scope of
// the row, for the reason typed, as `/latestwins break-glass ENV SHA REASON`. The user needs the
// environment's break-glass permission (admin unless the file says maintain or write) on the
// scope's repository, as GitHub tells the user.
func (a *Page) serveBreakGlass(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pa := a.checkAction(w, r, "break-glass")
	if pa == nil {
		return
	}
	sha, reason := strings.ToLower(formValue(r, "sha")), strings.TrimSpace(formValue(r, "reason"))
	if !core.IsCommitSha(sha) || reason == "" {
		a.refuse(w, r, http.StatusBadRequest, "break-glass refused: the form names no commit or no reason (say why, and try again)", nil)
		return
	}
	pc, ok := a.signIn.github.(PermissionChecker)
	if !ok {
		a.refuse(w, r, http.StatusForbidden, "break-glass refused: your permission cannot be checked here", nil)
		return
	}
	allowed, err := pc.HasPermission(ctx, pa.sess.Token, pa.feed.repo.Owner, pa.feed.repo.Name, pa.breakGlass)
	if err != nil {
		a.refuse(w, r, http.StatusBadGateway, "break-glass failed: GitHub did not say what you may do on "+pa.feed.repo.String(), err)
		return
	}
	if !allowed {
		pa.log.InfoContext(ctx, "status page: break-glass refused, permission", "needs", pa.breakGlass)
		a.refuse(w, r, http.StatusForbidden, fmt.Sprintf("break-glass refused: %s needs %s permission on %s (break-glass: in %s)", pa.sess.Login, pa.breakGlass, pa.feed.repo, config.Path), nil)
		return
	}
	scopes, err := a.Auth.BreakGlass(ctx, authority.BreakGlassRequest{Environment: pa.env, Scopes: []string{pa.scope}, Sha: sha, Actor: pa.sess.Login, Reason: reason, Via: "page"})
	if errors.Is(err, authority.ErrInvalidInput) {
		a.refuse(w, r, http.StatusConflict, "break-glass refused: "+err.Error(), nil)
		return
	}
	if err != nil {
		a.refuse(w, r, http.StatusInternalServerError, "break-glass failed: the store did not answer", err)
		return
	}
	pa.log.WarnContext(ctx, "status page: break-glass", "sha", sha, "scopes", scopes)
	http.Redirect(w, r, "/#env-"+url.PathEscape(pa.env), http.StatusSeeOther)
}
