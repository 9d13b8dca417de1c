package intake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
)

// ZeroSha is the sha a push names for a branch that did not exist before it, or no longer does.
const ZeroSha = "0000000000000000000000000000000000000000"

// MaxListedCommits is the most commits a push payload lists; a push at the cap may have more, so
// its changed files are unknown.
const MaxListedCommits = 2048

// HandlePush accepts a pushed branch's head for the scopes the configuration builds from it, and
// dispatches their workflows.
func (a *Events) HandlePush(ctx context.Context, log *slog.Logger, d core.Delivery, res *core.Result) error {
	ev, ok := d.Payload.(*github.PushEvent)
	if !ok {
		return &core.MalformedError{Reason: fmt.Sprintf("push payload is a %T", d.Payload)}
	}
	repoName := ev.GetRepo().GetFullName()
	log = log.With("installation_id", ev.GetInstallation().GetID(), "repo", repoName)
	branch, isBranch := strings.CutPrefix(ev.GetRef(), "refs/heads/")
	switch {
	case !isBranch:
		res.Outcome, res.Message = core.OutcomeIgnored, fmt.Sprintf("%s is not a branch", ev.GetRef())
		return nil
	case ev.GetDeleted() || ev.GetAfter() == ZeroSha:
		res.Outcome, res.Message = core.OutcomeIgnored, fmt.Sprintf("branch %s was deleted", branch)
		return nil
	}
	repo, err := core.ParseRepo(repoName)
	if err != nil {
		return err
	}
	cfg, err := a.ConfigFor(ctx, log, ev.GetInstallation().GetID(), repo, ev.GetAfter())
	if err != nil {
		return err
	}
	changed := changedPaths(ev)
	sels := cfg.ScopesFor(repoName, branch, changed)
	in := authority.Intent{ID: d.ID, Sha: ev.GetAfter(), Ref: ev.GetRef(), Before: ev.GetBefore(),
		Source: "push " + repoName, Actor: ev.GetSender().GetLogin(), Order: a.boundedOrder(ctx, log, pushOrder(ev))}
	if in.Before == ZeroSha {
		in.Before = ""
	}
	var opts []authority.AcceptOption
	if a.Commits != nil {
		opts = append(opts, authority.WithComparer(core.Comparer{Commits: a.Commits, Installation: ev.GetInstallation().GetID(), Repo: repo, Log: log}))
	}
	if err := a.Accept(ctx, log, sels, in, changed, branch, ev.GetInstallation().GetID(), res, opts...); err != nil {
		return err
	}
	if res.Outcome == core.OutcomeNoScopes {
		res.Message = fmt.Sprintf("no scope is built from %s on %s", repoName, branch)
	}
	return nil
}

var _ authority.Comparer = (*core.PromotionCompare)(nil)

// pushOrder is what a push payload says about when it happened: repository.pushed_at, the head
// commit's timestamp, and whether it was forced. GitHub documents that deliveries can arrive out of
// order and that these are the way to order them.
func pushOrder(ev *github.PushEvent) authority.Order {
	var o authority.Order
	if t := ev.GetRepo().GetPushedAt(); !t.IsZero() {
		o.PushedAt = t.Time.UTC()
	}
	if t := ev.GetHeadCommit().GetTimestamp(); !t.IsZero() {
		o.CommittedAt = t.Time.UTC()
	}
	o.Forced = ev.GetForced()
	return o
}

// boundedOrder is o without the facts later than the App's clock by more than the allowance for
// clock skew (authority.MaxOrderSkew). The Authority refuses such a fact, but a push GitHub signed
// must not be lost for a skewed clock: the fact is left out and the push is ordered by the others,
// or as it arrives, with a warning.
func (a *Events) boundedOrder(ctx context.Context, log *slog.Logger, o authority.Order) authority.Order {
	now := a.Auth.Now()
	o, dropped := o.Bounded(now)
	for _, e := range dropped {
		log.WarnContext(ctx, "push ordering fact later than the clock: left out, the push is ordered without it",
			"field", e.Field, "value", e.Value, "now", now.UTC().Format(time.RFC3339), "allowance", authority.MaxOrderSkew.String())
	}
	return o
}

// changedPaths lists the files a push changed, or nil when they are not known: a push at GitHub's
// cap of listed commits may have more; a forced push replaced commits that its list does not show
// (what it changed against the branch's previous head is not the sum of the new commits); a push
// that lists no files only moved the branch. Unknown changes select every scope of the branch and
// make the commit a barrier wherever a scope has barrier-paths: the safe side both times.
func changedPaths(ev *github.PushEvent) []string {
	commits := ev.Commits
	if ev.GetForced() || len(commits) == 0 || len(commits) >= MaxListedCommits {
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

// HandlePullRequest accepts a pull request's head for its preview environments, and withdraws
// their work and releases their leases when it closes.
func (a *Events) HandlePullRequest(ctx context.Context, log *slog.Logger, d core.Delivery, res *core.Result) error {
	ev, ok := d.Payload.(*github.PullRequestEvent)
	if !ok {
		return &core.MalformedError{Reason: fmt.Sprintf("pull_request payload is a %T", d.Payload)}
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
		res.Outcome, res.Status = core.OutcomeIgnored, http.StatusAccepted
		res.Message = fmt.Sprintf("pull_request %s does not change previews", action)
		return nil
	}
	repo, err := core.ParseRepo(repoName)
	if err != nil {
		return err
	}
	if number <= 0 {
		return &core.MalformedError{Reason: "pull_request payload has no number"}
	}
	head := pr.GetHead().GetSHA()
	cfg, err := a.ConfigFor(ctx, log, ev.GetInstallation().GetID(), repo, pr.GetBase().GetSHA())
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
	// A fork's branch cannot be dispatched in the base repository (a branch of the same name there is
	// another branch), and running its code with the App's deploy rights would be unsafe: a fork's
	// preview is recorded under the pull request's own ref, with no origin, and left to a maintainer.
	dispatchRef := pr.GetHead().GetRef()
	if !strings.EqualFold(pr.GetHead().GetRepo().GetFullName(), repoName) {
		dispatchRef = ""
		in.Ref = fmt.Sprintf("refs/pull/%d/head", number)
		log.InfoContext(ctx, "pull request from another repository: preview recorded, not dispatched", "head_repo", pr.GetHead().GetRepo().GetFullName())
	}
	// A pull request's changed files are not in its payload: unknown, so its head is a barrier
	// wherever a preview scope has barrier-paths.
	if err := a.Accept(ctx, log, sels, in, nil, dispatchRef, ev.GetInstallation().GetID(), res); err != nil {
		return err
	}
	if res.Outcome == core.OutcomeNoScopes {
		res.Message = fmt.Sprintf("no preview environment is built from %s for pull requests into %s", repoName, pr.GetBase().GetRef())
	}
	return nil
}

// releasePreviews withdraws a closed pull request's pending preview work and frees its leases,
// recording why: observed moves past the withdrawn generations, and the recovery sweep never
// re-drives a preview whose pull request is gone. A re-delivery finds nothing left to withdraw.
func (a *Events) releasePreviews(ctx context.Context, log *slog.Logger, sels []config.Selection, number int, actor string, merged bool, res *core.Result) error {
	reason := fmt.Sprintf("pull request #%d closed", number)
	if merged {
		reason = fmt.Sprintf("pull request #%d merged", number)
	}
	res.Outcome, res.Message = core.OutcomeReleased, reason
	for _, sel := range sels {
		scopes := sel.ScopeNames()
		held, err := a.heldLeases(ctx, sel.Environment, scopes)
		if err != nil {
			return err
		}
		withdrawn, err := a.Auth.Withdraw(ctx, sel.Environment, scopes, reason, actor)
		if err != nil {
			return fmt.Errorf("withdraw the previews of %s: %w", sel.Environment, err)
		}
		for _, s := range withdrawn {
			res.Withdrawn = append(res.Withdrawn, sel.Environment+"/"+s)
		}
		res.Released = append(res.Released, held...)
		log.InfoContext(ctx, "preview withdrawn", "environment", sel.Environment, "withdrawn", withdrawn, "released", held)
	}
	return nil
}

// heldLeases lists the ENV/SCOPE leases of scopes that someone holds, for the record of what a
// withdrawal freed.
func (a *Events) heldLeases(ctx context.Context, envName string, scopes []string) ([]string, error) {
	env, err := a.Auth.Status(ctx, envName)
	if errors.Is(err, authority.ErrInvalidInput) {
		return nil, nil // nothing accepted yet
	}
	if err != nil {
		return nil, err
	}
	var held []string
	for _, s := range scopes {
		if sc := env.Scopes[s]; sc != nil && sc.Lease.Holder != "" {
			held = append(held, envName+"/"+s)
		}
	}
	return held, nil
}

// HandleInstallation records an installation's change in the log: bookkeeping only.
func (a *Events) HandleInstallation(ctx context.Context, log *slog.Logger, d core.Delivery, res *core.Result) error {
	res.Outcome = core.OutcomeRecorded
	ev, ok := d.Payload.(*github.InstallationEvent)
	if !ok {
		return nil
	}
	var repos []string
	for _, r := range ev.Repositories {
		repos = append(repos, r.GetFullName())
	}
	log.InfoContext(ctx, "installation", "installation_id", ev.GetInstallation().GetID(), "action", ev.GetAction(),
		"account", ev.GetInstallation().GetAccount().GetLogin(), "repositories", repos)
	res.Message = fmt.Sprintf("installation %d %s", ev.GetInstallation().GetID(), ev.GetAction())
	return nil
}
