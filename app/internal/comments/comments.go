// Package comments is the App's ChatOps door: the /latestwins command parser (pure, ParseCommand)
// and the handler of issue_comment deliveries that runs each command and answers it.
package comments

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/report"
)

// Commands runs the /latestwins commands written in pull request comments.
type Commands struct {
	*core.App
	convo Conversation
}

// New is the comment commands of app, answered through convo; nil convo logs the replies and
// refuses mutating commands, whose permission cannot be checked (no App credentials).
func New(app *core.App, convo Conversation) *Commands { return &Commands{App: app, convo: convo} }

// commentRun is one comment command on its way through the App.
type commentRun struct {
	d      core.Delivery
	at     core.CommentRef
	actor  string
	cmd    Command
	log    *slog.Logger
	res    *core.Result
	reply  strings.Builder
	number int
}

// HandleIssueComment runs a /latestwins command written in a new comment on a pull request. Edited
// comments, comments on issues and comments by bots (the App's own among them) are ignored. Every
// command gets an eyes reaction and a reply; mutating ones need write permission.
func (a *Commands) HandleIssueComment(ctx context.Context, log *slog.Logger, d core.Delivery, res *core.Result) error {
	ev, ok := d.Payload.(*github.IssueCommentEvent)
	if !ok {
		return &core.MalformedError{Reason: fmt.Sprintf("issue_comment payload is a %T", d.Payload)}
	}
	user := ev.GetComment().GetUser()
	ignore := func(msg string) error {
		res.Outcome, res.Status, res.Message = core.OutcomeIgnored, http.StatusAccepted, msg
		return nil
	}
	switch {
	case ev.GetAction() != "created":
		return ignore(fmt.Sprintf("issue_comment %s: only new comments run commands", ev.GetAction()))
	case user.GetType() == "Bot" || strings.HasSuffix(user.GetLogin(), "[bot]"):
		return ignore("a comment by a bot: bots do not run commands")
	}
	cmd, addressed := ParseCommand(ev.GetComment().GetBody())
	switch {
	case !ev.GetIssue().IsPullRequest() && !(addressed && (cmd.Name == CommandApprove || cmd.Name == CommandBreakGlass)):
		// An approval or a break-glass names its environment and commit, so it may come from an
		// issue too.
		return ignore("a comment on an issue: commands other than approve run on pull requests only")
	case !addressed:
		return ignore("not a /latestwins command")
	}
	repo, err := core.ParseRepo(ev.GetRepo().GetFullName())
	if err != nil {
		return err
	}
	run := &commentRun{d: d, actor: user.GetLogin(), cmd: cmd, res: res, number: ev.GetIssue().GetNumber(),
		at: core.CommentRef{Installation: ev.GetInstallation().GetID(), Repo: repo, Number: ev.GetIssue().GetNumber(), CommentID: ev.GetComment().GetID()}}
	if run.number <= 0 || run.at.CommentID <= 0 {
		return &core.MalformedError{Reason: "issue_comment payload has no issue number or comment id"}
	}
	run.log = log.With("installation_id", run.at.Installation, "repo", repo.String(), "pull_request", run.number,
		"comment_id", run.at.CommentID, "actor", run.actor, "command", string(cmd.Name))
	res.Command = string(cmd.Name)
	if a.convo != nil {
		if err := a.convo.React(ctx, run.at, core.ReactionEyes); err != nil {
			run.log.WarnContext(ctx, "react to command", "err", err) // the reply still says what happened
		}
	}
	cmdErr := a.runCommand(ctx, run)
	if res.Outcome == core.OutcomeDuplicate {
		return cmdErr // the first delivery answered
	}
	if cmdErr != nil {
		if !errors.Is(cmdErr, authority.ErrInvalidInput) {
			return cmdErr // worth a re-delivery; nothing is said yet
		}
		run.reply.Reset()
		fmt.Fprintf(&run.reply, "Could not run `/latestwins %s`: %s", cmd.Name, cmdErr)
	}
	res.Reply = run.reply.String()
	if err := a.answer(ctx, run); err != nil {
		return errors.Join(cmdErr, err)
	}
	return cmdErr
}

// answer posts the reply, or logs it when there is no Conversation.
func (a *Commands) answer(ctx context.Context, run *commentRun) error {
	if a.convo == nil {
		run.log.InfoContext(ctx, "reply skipped: no App credentials, not publishing to GitHub", "reply", run.res.Reply)
		return nil
	}
	if err := a.convo.Reply(ctx, run.at, run.res.Reply); err != nil {
		return fmt.Errorf("reply to comment %d on %s#%d: %w", run.at.CommentID, run.at.Repo, run.number, err)
	}
	return nil
}

func (a *Commands) runCommand(ctx context.Context, run *commentRun) error {
	res, cmd := run.res, run.cmd
	res.Outcome = core.OutcomeReplied
	switch {
	case cmd.Problem != "":
		run.reply.WriteString(cmd.Problem)
		return nil
	case cmd.Name == CommandHelp:
		run.reply.WriteString(Usage)
		return nil
	}
	if cmd.Mutating() {
		allowed, err := a.canWrite(ctx, run)
		if err != nil {
			return err
		}
		if !allowed {
			return nil
		}
	}
	if cmd.Name == CommandApprove {
		return a.commandApprove(ctx, run)
	}
	if cmd.Name == CommandBreakGlass {
		return a.commandBreakGlass(ctx, run)
	}
	read := a.ConfigFor
	if cmd.Name == CommandRollback || cmd.Name == CommandUnfreeze {
		read = func(ctx context.Context, log *slog.Logger, installation int64, repo core.RepoRef, _ string) (*config.Config, error) {
			return a.IncidentConfig(ctx, log, installation, repo)
		}
	}
	cfg, err := read(ctx, run.log, run.at.Installation, run.at.Repo, "")
	if err != nil {
		return err
	}
	var sels []config.Selection
	var problem string
	switch {
	case cmd.Environment != "":
		sels, problem = core.NamedScope(cfg, run.at.Repo, cmd.Environment, cmd.Scopes[0])
	case cmd.Name == CommandPromote:
		sels, problem = promotionScopes(cfg, run.at.Repo, cmd.Scopes[0])
	default:
		sels, problem = previewScopes(cfg, run.at.Repo, run.number, cmd.Scopes)
	}
	if problem != "" {
		res.Outcome = core.OutcomeNoScopes
		run.reply.WriteString(problem)
		return nil
	}
	switch cmd.Name {
	case CommandStatus:
		return a.commandStatus(ctx, run, sels)
	case CommandUnlock:
		return a.commandUnlock(ctx, run, sels)
	case CommandDeploy:
		return a.commandDeploy(ctx, run, sels)
	case CommandRedeploy:
		return a.commandRedeploy(ctx, run, sels)
	case CommandSkip:
		return a.commandDecide(ctx, run, sels, authority.DecideSkip)
	case CommandRetry:
		return a.commandDecide(ctx, run, sels, authority.DecideRetry)
	case CommandRollback:
		return a.commandRollback(ctx, run, sels, cfg)
	case CommandUnfreeze:
		return a.commandUnfreeze(ctx, run, sels)
	case CommandPromote:
		return a.commandPromote(ctx, run, sels, cfg)
	}
	return fmt.Errorf("command %q has no handler", cmd.Name)
}

// canWrite checks the commenter's permission, and says so in the reply when it is not enough.
func (a *Commands) canWrite(ctx context.Context, run *commentRun) (bool, error) {
	if a.convo == nil {
		run.res.Outcome = core.OutcomeRefused
		fmt.Fprintf(&run.reply, "`/latestwins %s` needs write permission, which cannot be checked: this latestwins runs without App credentials.", run.cmd.Name)
		return false, nil
	}
	ok, err := a.convo.CanWrite(ctx, run.at, run.actor)
	if err != nil {
		return false, fmt.Errorf("permission of %s on %s: %w", run.actor, run.at.Repo, err)
	}
	if !ok {
		run.res.Outcome = core.OutcomeRefused
		run.log.InfoContext(ctx, "command refused: no write permission")
		fmt.Fprintf(&run.reply, "%s cannot run `/latestwins %s`: it needs write permission on %s. `/latestwins status` and `/latestwins help` are open to everyone.",
			core.Quote(run.actor), run.cmd.Name, run.at.Repo)
	}
	return ok, nil
}

// previewScopes selects the pull request's preview environments and, in each, the scopes built from
// repo: all of them, or the ones named. A problem is a reply for the commenter.
func previewScopes(cfg *config.Config, repo core.RepoRef, number int, named []string) ([]config.Selection, string) {
	var sels []config.Selection
	known := map[string]bool{}
	for i := range cfg.Environments {
		e := &cfg.Environments[i]
		if !e.Preview() {
			continue
		}
		sel := config.Selection{Environment: e.For(number), Policy: e.Policy}
		for _, s := range e.Scopes {
			if !s.FedBy(repo.String()) {
				continue
			}
			known[s.Name] = true
			if len(named) == 0 || slices.Contains(named, s.Name) {
				sel.Scopes = append(sel.Scopes, s)
			}
		}
		if len(sel.Scopes) > 0 {
			sels = append(sels, sel)
		}
	}
	if len(known) == 0 {
		return nil, fmt.Sprintf("No preview environment in %s is built from %s, so this pull request has nothing to deploy or show. "+
			"Add a `preview/pr-{number}` environment with a scope of this repository (docs/config.md).", config.Path, repo)
	}
	for _, n := range named {
		if !known[n] {
			return nil, fmt.Sprintf("%s is not a preview scope of %s; the scopes are: %s.", core.Quote(n), repo, strings.Join(slices.Sorted(maps.Keys(known)), ", "))
		}
	}
	return sels, ""
}

func (a *Commands) commandStatus(ctx context.Context, run *commentRun, sels []config.Selection) error {
	for i, sel := range sels {
		if i > 0 {
			run.reply.WriteString("\n")
		}
		fmt.Fprintf(&run.reply, "**%s**", sel.Environment)
		env, err := a.Auth.Status(ctx, sel.Environment)
		if errors.Is(err, authority.ErrInvalidInput) {
			run.reply.WriteString(": nothing accepted yet.\n")
			continue
		}
		if err != nil {
			return err
		}
		required, err := a.RequiredOf(ctx, env, nil)
		if err != nil {
			return err
		}
		st := report.NewStatusWith(env, a.Now(), required)
		fmt.Fprintf(&run.reply, " %d/%d %s (observed/desired generation)", st.Observed, st.Desired, st.State())
		if p := st.PolicyNote(); p != "" {
			fmt.Fprintf(&run.reply, ", policy **%s**", p)
		}
		run.reply.WriteString("\n\n")
		// The reply is read by whoever reads the pull request: what is live in an environment the
		// repository does not feed is not said.
		fed := report.Viewer(func(name string) bool {
			return slices.ContainsFunc(sels, func(s config.Selection) bool { return s.Environment == name })
		})
		if err := report.StatusMarkdownFor(&run.reply, env, a.Now(), required, fed); err != nil {
			return fmt.Errorf("render status of %s: %w", sel.Environment, err)
		}
	}
	return nil
}

func (a *Commands) commandUnlock(ctx context.Context, run *commentRun, sels []config.Selection) error {
	run.res.Outcome = core.OutcomeUnlocked
	// Each unlock is done once per delivery (the id is kept for the retention), so that a
	// re-delivered comment does not free whatever newer pass holds the lease by then.
	reason := fmt.Sprintf("/latestwins unlock on %s#%d (delivery %s)", run.at.Repo, run.number, run.d.ID)
	var free []string
	for _, sel := range sels {
		for _, s := range sel.ScopeNames() {
			resource := sel.Environment + "/" + s
			prev, err := a.Auth.Unlock(ctx, resource, reason, run.actor, authority.UnlockOnce(run.d.ID))
			if errors.Is(err, authority.ErrRepeated) {
				fmt.Fprintf(&run.reply, "%s: this command was carried out before (delivery %s); nothing more to unlock.\n", resource, run.d.ID)
				continue
			}
			// Not locked, or nothing was ever accepted there (the lease does not exist yet).
			if errors.Is(err, authority.ErrNotFound) || errors.Is(err, authority.ErrInvalidInput) {
				free = append(free, resource)
				continue
			}
			if err != nil {
				return fmt.Errorf("unlock %s: %w", resource, err)
			}
			run.res.Released = append(run.res.Released, resource)
			run.log.InfoContext(ctx, "lease unlocked", "resource", resource, "holder", prev.Holder, "token", prev.Token)
			fmt.Fprintf(&run.reply, "Unlocked %s (was held by %s for %s, token %d).\n", resource, core.Quote(prev.Holder), prev.Purpose, prev.Token)
		}
	}
	if len(free) > 0 {
		fmt.Fprintf(&run.reply, "Not locked: %s.\n", strings.Join(free, ", "))
	}
	return nil
}

// commandDecide carries out a decision about the terminal failure that blocks the named scope of
// each preview environment (a queue's head, or a barrier): skip it, or retry it. The delivery id
// goes with the decision, so that a re-delivered comment does not skip the next failure too.
func (a *Commands) commandDecide(ctx context.Context, run *commentRun, sels []config.Selection, action authority.DecisionAction) error {
	run.res.Outcome = core.OutcomeDecided
	scope := run.cmd.Scopes[0]
	reason := fmt.Sprintf("/latestwins %s on %s#%d (delivery %s)", action, run.at.Repo, run.number, run.d.ID)
	for _, sel := range sels {
		resource := sel.Environment + "/" + scope
		failed, err := a.Auth.Decide(ctx, authority.Decision{Environment: sel.Environment, Scope: scope, Action: action,
			Reason: reason, Actor: run.actor, Request: run.d.ID})
		switch {
		case errors.Is(err, authority.ErrRepeated):
			fmt.Fprintf(&run.reply, "%s: this command was carried out before (delivery %s); nothing more to %s.\n", resource, run.d.ID, action)
		case errors.Is(err, authority.ErrNotBlocked):
			fmt.Fprintf(&run.reply, "%s is not blocked by a failure; nothing to %s. A failure blocks only the head of a queue or a barrier (`/latestwins status` shows it).\n", resource, action)
		case errors.Is(err, authority.ErrInvalidInput):
			// Nothing was ever accepted in the environment, or in the scope: nothing can block it.
			fmt.Fprintf(&run.reply, "%s is not blocked by a failure: nothing was accepted there yet.\n", resource)
		case err != nil:
			return fmt.Errorf("%s %s: %w", action, resource, err)
		case action == authority.DecideSkip:
			run.log.InfoContext(ctx, "blocking failure skipped", "resource", resource, "generation", failed.Generation, "sha", failed.Sha)
			fmt.Fprintf(&run.reply, "Skipped %s (generation %d) in %s: it stays failed, and the next waiting commit goes.\n", report.ShortSha(failed.Sha), failed.Generation, resource)
			a.StartHeld(ctx, run.log, sel.Environment, scope)
		default:
			run.log.InfoContext(ctx, "blocking failure to be retried", "resource", resource, "generation", failed.Generation, "sha", failed.Sha)
			fmt.Fprintf(&run.reply, "%s (generation %d) in %s will be retried from its first attempt: its workflow is started again now "+
				"(or by the recovery sweep, for work the App did not start; or re-run the workflow).\n",
				report.ShortSha(failed.Sha), failed.Generation, resource)
			a.StartHeld(ctx, run.log, sel.Environment, scope)
		}
	}
	return nil
}

// commandDeploy accepts the pull request's head, as the store knows it from the pull request's
// webhooks, for the selected scopes of each preview environment.
func (a *Commands) commandDeploy(ctx context.Context, run *commentRun, sels []config.Selection) error {
	for _, sel := range sels {
		head, err := a.knownHead(ctx, sel)
		if err != nil {
			return err
		}
		if head == nil {
			fmt.Fprintf(&run.reply, "%s: no commit of this pull request is known yet; push to it (or close and reopen it) so that latestwins sees its head.\n", sel.Environment)
			continue
		}
		in := authority.Intent{ID: run.d.ID, Sha: head.Sha, Ref: head.Ref,
			Source: fmt.Sprintf("comment %s#%d", run.at.Repo, run.number), Actor: run.actor}
		if err := a.acceptOne(ctx, run, sel, in); err != nil {
			return err
		}
	}
	return nil
}

// commandRedeploy deploys one scope again at its live commit (spec guarantee 9: only that scope).
func (a *Commands) commandRedeploy(ctx context.Context, run *commentRun, sels []config.Selection) error {
	scope := run.cmd.Scopes[0]
	for _, sel := range sels {
		in, err := a.RedeployIntent(ctx, sel.Environment, scope, authority.Intent{ID: run.d.ID,
			Source: fmt.Sprintf("redeploy comment %s#%d", run.at.Repo, run.number), Actor: run.actor})
		if errors.Is(err, core.ErrNothingLive) {
			fmt.Fprintf(&run.reply, "%s: %s has nothing live to redeploy; use `/latestwins deploy %s`.\n", sel.Environment, scope, scope)
			continue
		}
		if err != nil {
			return err
		}
		if err := a.acceptOne(ctx, run, sel, in); err != nil {
			return err
		}
	}
	return nil
}

// acceptOne accepts in for one selection, dispatching on the intent's branch, and says what happened.
// An intent whose ref is not a branch of the repository (a fork's pull request, refs/pull/N/head) is
// accepted but neither dispatched nor given an origin for the recovery sweep.
func (a *Commands) acceptOne(ctx context.Context, run *commentRun, sel config.Selection, in authority.Intent) error {
	res := run.res
	sub, isBranch, err := a.AcceptSelection(ctx, run.log, sel, in, run.at.Installation)
	res.Intents = append(res.Intents, sub.Intents...)
	res.Dispatched = append(res.Dispatched, sub.Dispatched...)
	res.Refused = append(res.Refused, sub.Refused...)
	switch {
	case sub.Outcome == core.OutcomeQueueFull || res.Outcome == core.OutcomeQueueFull:
		res.Outcome, res.Status = core.OutcomeQueueFull, http.StatusTooManyRequests
	case sub.Outcome == core.OutcomeAccepted:
		res.Outcome = core.OutcomeAccepted
	case sub.Outcome == core.OutcomeDuplicate && res.Outcome != core.OutcomeAccepted:
		res.Outcome = core.OutcomeDuplicate
	}
	for _, r := range sub.Refused {
		fmt.Fprintf(&run.reply, "%s: not accepted, the queue is full: %s.\n", r.Environment, r.Message)
	}
	for _, ii := range sub.Intents {
		if len(ii.Accepted) > 0 {
			fmt.Fprintf(&run.reply, "%s: accepted %s at generation %d for %s.\n", ii.Environment, report.ShortSha(in.Sha), ii.Generation, strings.Join(ii.Accepted, ", "))
		}
		for _, s := range slices.Sorted(maps.Keys(ii.Ahead)) {
			fmt.Fprintf(&run.reply, "%s/%s: queued: %d ahead of this commit; it deploys once they have their outcome.\n", ii.Environment, s, ii.Ahead[s])
		}
		if len(ii.Barrier) > 0 {
			fmt.Fprintf(&run.reply, "%s: %s is a barrier in %s: nothing newer supersedes it there.\n", ii.Environment, report.ShortSha(in.Sha), strings.Join(ii.Barrier, ", "))
		}
		for s, by := range ii.Stale {
			fmt.Fprintf(&run.reply, "%s: %s already has %s pending or live (generation %d); nothing new to deploy.\n", ii.Environment, s, report.ShortSha(in.Sha), by)
		}
	}
	if err != nil {
		return err
	}
	for _, dr := range sub.Dispatched {
		fmt.Fprintf(&run.reply, "Dispatched %s on %s in %s (scopes %s).\n", dr.Workflow, dr.Ref, dr.Repo, dr.Inputs["scopes"])
	}
	if accepted := generationOf(sub.Intents); !isBranch && accepted > 0 {
		fmt.Fprintf(&run.reply, "%s: %s is not a branch of %s (a pull request from a fork): latestwins does not dispatch fork previews. "+
			"A maintainer runs the preview workflow for it (workflow_dispatch with environment %s and generation %d).\n",
			sel.Environment, in.Ref, run.at.Repo, sel.Environment, accepted)
	}
	return nil
}

// generationOf is the generation at which the intents accepted scopes, 0 when they accepted none.
func generationOf(intents []core.IntentInfo) int64 {
	var g int64
	for _, ii := range intents {
		if len(ii.Accepted) > 0 {
			g = max(g, ii.Generation)
		}
	}
	return g
}

// knownHead is the newest commit the store holds for the selection's scopes: pending, else live.
func (a *Commands) knownHead(ctx context.Context, sel config.Selection) (*authority.Ref, error) {
	env, err := a.Auth.Status(ctx, sel.Environment)
	if errors.Is(err, authority.ErrInvalidInput) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var best *authority.Ref
	for _, s := range sel.ScopeNames() {
		sc := env.Scopes[s]
		if sc == nil {
			continue
		}
		cand := sc.Mailbox
		if cand == nil && sc.Live != nil {
			cand = &authority.Ref{Sha: sc.Live.Sha, Ref: sc.Live.Ref, Generation: sc.Live.Generation}
		}
		if cand != nil && (best == nil || cand.Generation > best.Generation) {
			best = cand
		}
	}
	return best, nil
}

// commandRollback rolls the named scope back in each selected environment (the pull request's
// previews, or the one environment named): the older commit goes ahead of everything pending, the
// scope is frozen, and its workflow is dispatched at once. The delivery id goes with the request,
// so a re-delivered comment rolls back once.
func (a *Commands) commandRollback(ctx context.Context, run *commentRun, sels []config.Selection, cfg *config.Config) error {
	run.res.Outcome = core.OutcomeRolledBack
	reason := fmt.Sprintf("/latestwins rollback on %s#%d (delivery %s)", run.at.Repo, run.number, run.d.ID)
	source := fmt.Sprintf("rollback comment %s#%d", run.at.Repo, run.number)
	for _, sel := range sels {
		t := core.Target{Sel: sel, Installation: run.at.Installation}
		if e, ok := cfg.Environment(sel.Environment); ok && !e.Preview() {
			t.Branch = sel.Scopes[0].Branch
		}
		done, err := a.Rollback(ctx, run.log, t, run.cmd.Sha, run.actor, reason, run.d.ID, source)
		if done == nil {
			if errors.Is(err, authority.ErrInvalidInput) {
				fmt.Fprintf(&run.reply, "Could not roll back %s: %v\n", t.Resource(), err)
				continue
			}
			return err
		}
		run.res.Intents = append(run.res.Intents, core.IntentInfo{Environment: sel.Environment, Generation: done.Generation,
			Duplicate: done.Duplicate, Accepted: []string{t.Scope().Name}})
		run.res.Dispatched = append(run.res.Dispatched, done.Dispatched...)
		if done.Duplicate {
			fmt.Fprintf(&run.reply, "%s: this command was carried out before (delivery %s): the rollback is generation %d.\n", t.Resource(), run.d.ID, done.Generation)
			continue
		}
		fmt.Fprintf(&run.reply, "Rolled %s back to %s at generation %d, ahead of everything pending. %s is frozen (freeze %d): newer commits are recorded and wait until `/latestwins unfreeze %s %d`.\n",
			t.Resource(), report.ShortSha(done.Sha), done.Generation, t.Resource(), done.Generation, unfreezeArg(run.cmd, t), done.Generation)
		for _, dr := range done.Dispatched {
			fmt.Fprintf(&run.reply, "Dispatched %s on %s in %s (scopes %s, generation %s).\n", dr.Workflow, dr.Ref, dr.Repo, dr.Inputs["scopes"], dr.Inputs["generation"])
		}
		if done.NotBranch != "" {
			fmt.Fprintf(&run.reply, "%s: %s is not a branch of %s: nothing was dispatched; run the scope's workflow with environment %s and generation %d.\n",
				t.Resource(), done.NotBranch, run.at.Repo, sel.Environment, done.Generation)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// unfreezeArg is the argument of the unfreeze command that lifts the freeze t is given.
func unfreezeArg(cmd Command, t core.Target) string {
	if cmd.Environment != "" {
		return t.Resource()
	}
	return t.Scope().Name
}

// commandUnfreeze lifts, in each selected environment, the freeze of the named scope that the
// command names: the commit held meanwhile goes next, its workflow started at once (core.StartHeld).
// Another freeze (a newer rollback's), or none named, is refused with a reply that names the
// current freeze and the command that lifts it.
func (a *Commands) commandUnfreeze(ctx context.Context, run *commentRun, sels []config.Selection) error {
	run.res.Outcome = core.OutcomeUnfrozen
	scope := run.cmd.Scopes[0]
	reason := fmt.Sprintf("/latestwins unfreeze on %s#%d (delivery %s)", run.at.Repo, run.number, run.d.ID)
	for _, sel := range sels {
		resource := sel.Environment + "/" + scope
		f, err := a.Auth.Unfreeze(ctx, authority.UnfreezeRequest{Environment: sel.Environment, Scope: scope, Freeze: run.cmd.Freeze,
			Actor: run.actor, Reason: reason, Request: run.d.ID})
		var mismatch *authority.FreezeMismatchError
		switch {
		case errors.As(err, &mismatch) && mismatch.Current != nil:
			run.log.InfoContext(ctx, "unfreeze refused: not the current freeze", "resource", resource, "named", mismatch.Named, "current", mismatch.Current.Generation)
			cur := mismatch.Current
			if mismatch.Named != 0 {
				fmt.Fprintf(&run.reply, "%s: freeze %d is not the current freeze (%s). ", resource, mismatch.Named, mismatch.Why())
			}
			arg := scope
			if run.cmd.Environment != "" {
				arg = resource
			}
			fmt.Fprintf(&run.reply, "%s is frozen by freeze %d: the rollback to %s by %s (%s). Nothing was unfrozen. To lift freeze %d, comment `/latestwins unfreeze %s %d`.\n",
				resource, cur.Generation, report.ShortSha(cur.Sha), core.Quote(cur.Actor), core.Quote(cur.Reason), cur.Generation, arg, cur.Generation)
		case errors.Is(err, authority.ErrRepeated):
			fmt.Fprintf(&run.reply, "%s: this command was carried out before (delivery %s); nothing more to unfreeze.\n", resource, run.d.ID)
		case errors.Is(err, authority.ErrNotFrozen):
			fmt.Fprintf(&run.reply, "%s is not frozen; nothing to unfreeze.\n", resource)
		case errors.Is(err, authority.ErrInvalidInput):
			fmt.Fprintf(&run.reply, "%s is not frozen: nothing was accepted there yet.\n", resource)
		case err != nil:
			return fmt.Errorf("unfreeze %s: %w", resource, err)
		default:
			run.log.InfoContext(ctx, "scope unfrozen", "resource", resource, "generation", f.Generation, "sha", f.Sha)
			fmt.Fprintf(&run.reply, "Unfroze %s: lifted the freeze of the rollback to %s by %s (freeze %d). The commit held meanwhile, if any, goes next: "+
				"its workflow is started now (or by the recovery sweep, for work the App did not start).\n", resource, report.ShortSha(f.Sha), core.Quote(f.Actor), f.Generation)
			a.StartHeld(ctx, run.log, sel.Environment, scope)
		}
	}
	return nil
}

// commandPromote asks, in each selected environment (those with requires that the repository
// feeds the scope of, or the one named), for the commit live in the scope of the first environment
// it requires, and dispatches the scope's workflow for the new generation. The delivery id goes
// with the request, so a re-delivered comment promotes once.
func (a *Commands) commandPromote(ctx context.Context, run *commentRun, sels []config.Selection, cfg *config.Config) error {
	run.res.Outcome = core.OutcomePromoted
	source := fmt.Sprintf("promote comment %s#%d", run.at.Repo, run.number)
	for _, sel := range sels {
		e, ok := cfg.Environment(sel.Environment)
		if !ok {
			return fmt.Errorf("environment %s vanished from the configuration", sel.Environment)
		}
		t := core.PromoteTarget(e, sel, run.at.Installation)
		from, problem := core.PromoteFrom(e, "")
		if problem != "" {
			run.reply.WriteString(problem + "\n")
			continue
		}
		done, err := a.Promote(ctx, run.log, t, from, run.actor, run.d.ID, source)
		if done == nil {
			if errors.Is(err, authority.ErrInvalidInput) {
				fmt.Fprintf(&run.reply, "Could not promote %s from %s: %v\n", t.Resource(), from, err)
				continue
			}
			return err
		}
		run.res.Intents = append(run.res.Intents, core.IntentInfo{Environment: sel.Environment, Generation: done.Generation,
			Duplicate: done.Duplicate, Accepted: []string{t.Scope().Name}})
		run.res.Dispatched = append(run.res.Dispatched, done.Dispatched...)
		if done.Duplicate {
			fmt.Fprintf(&run.reply, "%s: this command was carried out before (delivery %s): the promotion is generation %d.\n", t.Resource(), run.d.ID, done.Generation)
			continue
		}
		fmt.Fprintf(&run.reply, "Promoted %s, live in %s/%s, to %s at generation %d.\n", report.ShortSha(done.Sha), from, t.Scope().Name, t.Resource(), done.Generation)
		for _, dr := range done.Dispatched {
			fmt.Fprintf(&run.reply, "Dispatched %s on %s in %s (scopes %s, generation %s).\n", dr.Workflow, dr.Ref, dr.Repo, dr.Inputs["scopes"], dr.Inputs["generation"])
		}
		if done.NoBranch {
			fmt.Fprintf(&run.reply, "%s: the scope has no branch in %s: nothing was dispatched; run its workflow with environment %s and generation %d.\n",
				t.Resource(), config.Path, sel.Environment, done.Generation)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// promotionScopes selects, for /latestwins promote SCOPE, every environment that requires another
// and has SCOPE built from repo in the configuration. A problem is a reply for the commenter.
func promotionScopes(cfg *config.Config, repo core.RepoRef, scope string) ([]config.Selection, string) {
	var sels []config.Selection
	for i := range cfg.Environments {
		e := &cfg.Environments[i]
		if e.Preview() || len(e.Requires) == 0 {
			continue
		}
		for _, s := range e.Scopes {
			if s.Name == scope && s.FedBy(repo.String()) {
				sels = append(sels, config.Selection{Environment: e.Name, Policy: e.Policy, Requires: e.Requirements(), Scopes: []config.Scope{s}})
			}
		}
	}
	if len(sels) == 0 {
		return nil, fmt.Sprintf("No environment of %s that requires another builds %s from %s, so there is nothing to promote (name one as ENV/%s, or add requires: to an environment).",
			config.Path, core.Quote(scope), repo, scope)
	}
	return sels, ""
}

// Conversation answers comment commands.
type Conversation interface {
	// React adds a reaction (eyes, +1, confused, ...) to the comment.
	React(ctx context.Context, at core.CommentRef, content string) error
	// Reply comments on the pull request.
	Reply(ctx context.Context, at core.CommentRef, body string) error
	// CanWrite reports whether user has at least write permission on the repository.
	CanWrite(ctx context.Context, at core.CommentRef, user string) (bool, error)
}

// TeamChecker is what a Conversation that can ask GitHub about teams offers: whether user is an
// active member of the team slug of org. Without it, no team among an environment's approvers
// admits anyone.
type TeamChecker interface {
	TeamMember(ctx context.Context, at core.CommentRef, org, slug, user string) (bool, error)
}
