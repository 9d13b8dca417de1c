package comments

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/report"
)

// PermissionChecker is what a Conversation that can ask GitHub for a commenter's permission level
// offers: whether user has at least level (write, maintain, admin) on the comment's repository.
// Without it nobody may break the glass by comment.
type PermissionChecker interface {
	HasPermission(ctx context.Context, at core.CommentRef, user, level string) (bool, error)
}

// parseBreakGlass reads the arguments of break-glass: the environment, the commit (7 to 40
// hexadecimal digits) and the reason, the rest of the line.
func parseBreakGlass(args []string) (Command, bool) {
	if len(args) < 3 {
		return Command{Problem: "`/latestwins break-glass ENV SHA REASON` takes the environment, the pending commit and why its gates are waived, e.g. `/latestwins break-glass production abc1234 incident 4711`"}, true
	}
	if problem := checkEnvAndCommit(args[0], args[1]); problem != "" {
		return Command{Problem: problem}, true
	}
	return Command{Name: CommandBreakGlass, Environment: args[0], Sha: strings.ToLower(args[1]), Reason: strings.Join(args[2:], " ")}, true
}

// commandBreakGlass waives the soak time, approvals and change windows of a commit pending in the
// environment named, for the reason given, once the commenter's permission on the repository is at
// least the environment's break-glass: (admin unless the file says maintain or write) and the
// repository feeds the environment. Supersession, leases, freezes and promotion still hold.
func (a *Commands) commandBreakGlass(ctx context.Context, run *commentRun) error {
	run.res.Outcome = core.OutcomeRefused
	env := run.cmd.Environment
	cfg, err := a.ConfigFor(ctx, run.log, run.at.Installation, run.at.Repo, "")
	if err != nil {
		return err
	}
	e, ok := cfg.Environment(env)
	if !ok || !feeds(cfg, env, run.at.Repo) {
		run.res.Outcome = core.OutcomeNoScopes
		fmt.Fprintf(&run.reply, "%s is not an environment of %s that %s feeds, so a comment here cannot break the glass there.", core.Quote(env), config.Path, run.at.Repo)
		return nil
	}
	level := e.BreakGlassPermission()
	pc, ok := a.convo.(PermissionChecker)
	if !ok {
		fmt.Fprintf(&run.reply, "`/latestwins break-glass` needs %s permission, which cannot be checked here.", level)
		return nil
	}
	allowed, err := pc.HasPermission(ctx, run.at, run.actor, level)
	if err != nil {
		return fmt.Errorf("permission of %s on %s: %w", run.actor, run.at.Repo, err)
	}
	if !allowed {
		run.log.InfoContext(ctx, "break-glass refused: permission", "environment", env, "needs", level)
		fmt.Fprintf(&run.reply, "%s cannot break the glass in %s: it needs %s permission on %s (break-glass: in %s).", core.Quote(run.actor), env, level, run.at.Repo, config.Path)
		return nil
	}
	scopes, err := a.Auth.BreakGlass(ctx, authority.BreakGlassRequest{Environment: env, Sha: run.cmd.Sha, Actor: run.actor, Reason: run.cmd.Reason, Via: "comment"})
	if errors.Is(err, authority.ErrInvalidInput) {
		fmt.Fprintf(&run.reply, "Could not break the glass for %s in %s: %v", report.ShortSha(run.cmd.Sha), env, err)
		return nil
	}
	if err != nil {
		return err
	}
	run.res.Outcome = core.OutcomeBrokeGlass
	run.log.WarnContext(ctx, "break-glass", "environment", env, "sha", run.cmd.Sha, "scopes", scopes)
	fmt.Fprintf(&run.reply, "Broke the glass for %s in %s (%s), as %s: its soak time, approvals and change windows are waived; supersession, leases, freezes and promotion still hold. It deploys at its next try (or when the recovery sweep starts it again).",
		report.ShortSha(run.cmd.Sha), env, strings.Join(scopes, ", "), core.Quote(run.actor))
	return nil
}
