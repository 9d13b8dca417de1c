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

// parseApprove reads the arguments of approve: the environment, then the commit (7 to 40
// hexadecimal digits).
func parseApprove(args []string) (Command, bool) {
	if len(args) != 2 {
		return Command{Problem: "`/latestwins approve ENV SHA` takes the environment and the commit to approve, e.g. `/latestwins approve production abc1234`"}, true
	}
	if problem := checkEnvAndCommit(args[0], args[1]); problem != "" {
		return Command{Problem: problem}, true
	}
	return Command{Name: CommandApprove, Environment: args[0], Sha: strings.ToLower(args[1])}, true
}

// checkEnvAndCommit checks the environment and the commit a command names (approve, break-glass):
// what to fix, or "".
func checkEnvAndCommit(env, sha string) string {
	var ie *authority.InputError
	if err := authority.ValidateEnvironment(env); errors.As(err, &ie) {
		return fmt.Sprintf("%s is not an environment name: %s", core.Quote(env), ie.Fix)
	}
	if !core.IsCommitSha(sha) {
		return fmt.Sprintf("%s is not a commit: give 7 to 40 hexadecimal digits of its sha", core.Quote(sha))
	}
	return ""
}

// commandApprove records the commenter's approval of a commit waiting in the environment named,
// in every scope where it is pending. The commenter has write permission on the repository
// (runCommand checked it), the repository feeds the environment, and, when the environment names
// its approvers, the commenter is one of them or in one of their teams, as GitHub says.
func (a *Commands) commandApprove(ctx context.Context, run *commentRun) error {
	run.res.Outcome = core.OutcomeApproved
	env := run.cmd.Environment
	cfg, err := a.ConfigFor(ctx, run.log, run.at.Installation, run.at.Repo, "")
	if err != nil {
		return err
	}
	if !feeds(cfg, env, run.at.Repo) {
		run.res.Outcome = core.OutcomeNoScopes
		fmt.Fprintf(&run.reply, "%s is not an environment of %s that %s feeds, so a comment here cannot approve there.", core.Quote(env), config.Path, run.at.Repo)
		return nil
	}
	doc, err := a.Auth.Status(ctx, env)
	if errors.Is(err, authority.ErrInvalidInput) {
		fmt.Fprintf(&run.reply, "Nothing was accepted in %s yet: nothing waits for approval there.", env)
		return nil
	}
	if err != nil {
		return err
	}
	var rule *authority.ApprovalRule
	if doc.Gates != nil {
		rule = doc.Gates.Approvals
	}
	var member core.TeamMembership
	if tc, ok := a.convo.(TeamChecker); ok {
		member = func(ctx context.Context, org, slug, user string) (bool, error) {
			return tc.TeamMember(ctx, run.at, org, slug, user)
		}
	}
	ok, why, err := core.MayApprove(ctx, rule, run.actor, member)
	if err != nil {
		return err
	}
	if !ok {
		run.res.Outcome = core.OutcomeRefused
		run.log.InfoContext(ctx, "approval refused: not an approver", "environment", env)
		fmt.Fprintf(&run.reply, "%s cannot approve in %s: %s.", core.Quote(run.actor), env, why)
		return nil
	}
	res, err := a.Auth.ApproveCommit(ctx, authority.CommitApprovalRequest{Environment: env, Sha: run.cmd.Sha, Login: run.actor, Door: authority.ApprovalDoorComment})
	if errors.Is(err, authority.ErrInvalidInput) {
		// Not pending there, say: the reply says what is.
		fmt.Fprintf(&run.reply, "Could not approve %s in %s: %v", report.ShortSha(run.cmd.Sha), env, err)
		return nil
	}
	if err != nil {
		return err
	}
	for _, s := range res.Scopes {
		run.log.InfoContext(ctx, "commit approved", "resource", env+"/"+s.Scope, "generation", s.Generation, "sha", s.Sha, "repeat", s.Repeat, "need", s.Need)
		run.reply.WriteString(ApprovalReply(env, run.actor, s) + "\n")
	}
	return nil
}

// ApprovalReply says what an approval did in one scope, for a person.
func ApprovalReply(env, login string, s authority.ScopeApproval) string {
	resource := env + "/" + s.Scope
	var b strings.Builder
	switch {
	case s.Repeat:
		fmt.Fprintf(&b, "%s: %s had approved %s (generation %d) already; nothing changed", resource, core.Quote(login), report.ShortSha(s.Sha), s.Generation)
	case s.Pusher:
		fmt.Fprintf(&b, "%s: recorded the approval of %s (generation %d) by %s, who pushed it: the pusher's own approval does not count here", resource, report.ShortSha(s.Sha), s.Generation, core.Quote(login))
	default:
		fmt.Fprintf(&b, "%s: approved %s (generation %d) as %s", resource, report.ShortSha(s.Sha), s.Generation, core.Quote(login))
	}
	fmt.Fprintf(&b, "; %d of %d approvals", s.Count-s.Need, s.Count)
	if s.Need == 0 {
		b.WriteString(": it deploys at its next try (or when the recovery sweep starts it again).")
	} else {
		fmt.Fprintf(&b, ": %d more needed.", s.Need)
	}
	return b.String()
}

// feeds reports whether repo builds a scope of the environment named env in cfg.
func feeds(cfg *config.Config, env string, repo core.RepoRef) bool {
	e, ok := cfg.Environment(env)
	if !ok {
		return false
	}
	for _, s := range e.Scopes {
		if s.FedBy(repo.String()) {
			return true
		}
	}
	return false
}
