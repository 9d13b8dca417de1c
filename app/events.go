package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
)

const zeroSha = "0000000000000000000000000000000000000000"

// maxListedCommits is the most commits a push payload lists; a push at the cap may have more, so
// its changed files are unknown.
const maxListedCommits = 2048

func (a *App) handlePush(ctx context.Context, log *slog.Logger, d Delivery, res *Result) error {
	ev, ok := d.Payload.(*github.PushEvent)
	if !ok {
		return &MalformedError{Reason: fmt.Sprintf("push payload is a %T", d.Payload)}
	}
	repoName := ev.GetRepo().GetFullName()
	log = log.With("installation_id", ev.GetInstallation().GetID(), "repo", repoName)
	branch, isBranch := strings.CutPrefix(ev.GetRef(), "refs/heads/")
	switch {
	case !isBranch:
		res.Outcome, res.Message = OutcomeIgnored, fmt.Sprintf("%s is not a branch", ev.GetRef())
		return nil
	case ev.GetDeleted() || ev.GetAfter() == zeroSha:
		res.Outcome, res.Message = OutcomeIgnored, fmt.Sprintf("branch %s was deleted", branch)
		return nil
	}
	repo, err := ParseRepo(repoName)
	if err != nil {
		return err
	}
	cfg, err := a.configFor(ctx, log, ev.GetInstallation().GetID(), repo, ev.GetAfter())
	if err != nil {
		return err
	}
	sels := cfg.ScopesFor(repoName, branch, changedPaths(ev.Commits))
	in := authority.Intent{ID: d.ID, Sha: ev.GetAfter(), Ref: ev.GetRef(), Before: ev.GetBefore(),
		Source: "push " + repoName, Actor: ev.GetSender().GetLogin()}
	if in.Before == zeroSha {
		in.Before = ""
	}
	if err := a.accept(ctx, log, sels, in, branch, ev.GetInstallation().GetID(), res); err != nil {
		return err
	}
	if res.Outcome == OutcomeNoScopes {
		res.Message = fmt.Sprintf("no scope is built from %s on %s", repoName, branch)
	}
	return nil
}

// changedPaths lists the files a push changed, or nil when they are not known.
func changedPaths(commits []*github.HeadCommit) []string {
	if len(commits) == 0 || len(commits) >= maxListedCommits {
		return nil
	}
	var out []string
	for _, c := range commits {
		out = append(out, c.Added...)
		out = append(out, c.Modified...)
		out = append(out, c.Removed...)
	}
	return out
}

func (a *App) handlePullRequest(ctx context.Context, log *slog.Logger, d Delivery, res *Result) error {
	ev, ok := d.Payload.(*github.PullRequestEvent)
	if !ok {
		return &MalformedError{Reason: fmt.Sprintf("pull_request payload is a %T", d.Payload)}
	}
	pr := ev.GetPullRequest()
	repoName := ev.GetRepo().GetFullName()
	number := ev.GetNumber()
	if number == 0 {
		number = pr.GetNumber()
	}
	log = log.With("installation_id", ev.GetInstallation().GetID(), "repo", repoName, "pull_request", number, "action", ev.GetAction())
	action := ev.GetAction()
	if action != "opened" && action != "synchronize" && action != "reopened" && action != "closed" {
		res.Outcome, res.Status = OutcomeIgnored, http.StatusAccepted
		res.Message = fmt.Sprintf("pull_request %s does not change previews", action)
		return nil
	}
	repo, err := ParseRepo(repoName)
	if err != nil {
		return err
	}
	if number <= 0 {
		return &MalformedError{Reason: "pull_request payload has no number"}
	}
	head := pr.GetHead().GetSHA()
	cfg, err := a.configFor(ctx, log, ev.GetInstallation().GetID(), repo, pr.GetBase().GetSHA())
	if err != nil {
		return err
	}
	sels := cfg.PreviewsFor(repoName, pr.GetBase().GetRef(), number, nil)
	if action == "closed" {
		return a.releasePreviews(ctx, log, sels, number, ev.GetSender().GetLogin(), pr.GetMerged(), res)
	}
	in := authority.Intent{ID: d.ID, Sha: head, Ref: "refs/heads/" + pr.GetHead().GetRef(),
		Source: fmt.Sprintf("pull_request %s #%d", repoName, number), Actor: ev.GetSender().GetLogin()}
	if action == "synchronize" {
		in.Before = ev.GetBefore()
	}
	// A fork's branch cannot be dispatched in the base repository, and running its code with the
	// App's deploy rights would be unsafe: a fork's preview is recorded, and left to a maintainer.
	dispatchRef := pr.GetHead().GetRef()
	if !strings.EqualFold(pr.GetHead().GetRepo().GetFullName(), repoName) {
		dispatchRef = ""
		log.InfoContext(ctx, "pull request from another repository: preview recorded, not dispatched", "head_repo", pr.GetHead().GetRepo().GetFullName())
	}
	if err := a.accept(ctx, log, sels, in, dispatchRef, ev.GetInstallation().GetID(), res); err != nil {
		return err
	}
	if res.Outcome == OutcomeNoScopes {
		res.Message = fmt.Sprintf("no preview environment is built from %s for pull requests into %s", repoName, pr.GetBase().GetRef())
	}
	return nil
}

// releasePreviews frees the leases of a closed pull request's preview environments, recording why.
func (a *App) releasePreviews(ctx context.Context, log *slog.Logger, sels []config.Selection, number int, actor string, merged bool, res *Result) error {
	reason := fmt.Sprintf("pull request #%d closed", number)
	if merged {
		reason = fmt.Sprintf("pull request #%d merged", number)
	}
	res.Outcome, res.Message = OutcomeReleased, reason
	for _, sel := range sels {
		for _, s := range sel.ScopeNames() {
			resource := sel.Environment + "/" + s
			prev, err := a.auth.Unlock(ctx, resource, reason, actor)
			if errors.Is(err, authority.ErrNotFound) {
				continue // not locked, or never deployed
			}
			if err != nil {
				return fmt.Errorf("release %s: %w", resource, err)
			}
			log.InfoContext(ctx, "preview lease released", "resource", resource, "holder", prev.Holder, "token", prev.Token)
			res.Released = append(res.Released, resource)
		}
	}
	return nil
}

func (a *App) handleInstallation(ctx context.Context, log *slog.Logger, d Delivery, res *Result) {
	res.Outcome = OutcomeRecorded
	ev, ok := d.Payload.(*github.InstallationEvent)
	if !ok {
		return
	}
	var repos []string
	for _, r := range ev.Repositories {
		repos = append(repos, r.GetFullName())
	}
	log.InfoContext(ctx, "installation", "installation_id", ev.GetInstallation().GetID(), "action", ev.GetAction(),
		"account", ev.GetInstallation().GetAccount().GetLogin(), "repositories", repos)
	res.Message = fmt.Sprintf("installation %d %s", ev.GetInstallation().GetID(), ev.GetAction())
}
