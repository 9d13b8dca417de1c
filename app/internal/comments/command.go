package comments

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
)

// CommandName is a comment command's verb.
type CommandName string

// Comment commands.
const (
	CommandDeploy   CommandName = "deploy"
	CommandRedeploy CommandName = "redeploy"
	CommandStatus   CommandName = "status"
	CommandUnlock   CommandName = "unlock"
	CommandSkip     CommandName = "skip"
	CommandRetry    CommandName = "retry"
	CommandRollback CommandName = "rollback"
	CommandUnfreeze CommandName = "unfreeze"
	CommandPromote  CommandName = "promote"
	CommandApprove  CommandName = "approve"
	// CommandBreakGlass waives a pending commit's gates: /latestwins break-glass ENV SHA REASON.
	CommandBreakGlass CommandName = "break-glass"
	CommandHelp       CommandName = "help"
)

const commandPrefix = "/latestwins"

// Command is a parsed comment command.
type Command struct {
	Name   CommandName
	Scopes []string
	// Environment is set when a rollback, unfreeze or promote names ENV/SCOPE: an environment that
	// is not the pull request's preview (Scopes then holds the one scope); and for approve, the
	// environment the commit is approved in (Scopes empty).
	Environment string
	// Sha is the commit a rollback goes back to: 7 to 40 hexadecimal digits; empty: the one live
	// before the current one. For approve, the commit approved.
	Sha string
	// Reason is why break-glass waives the gates: the rest of the command's line.
	Reason string
	// Freeze is the freeze an unfreeze lifts, named by its rollback's generation; 0: none named
	// (the reply then names the current one, and nothing is unfrozen).
	Freeze int64
	// Problem is set when the comment is addressed to latestwins but is not a valid command: it says
	// what to fix, for the reply. Name and Scopes are then empty.
	Problem string
}

// Mutating reports whether the command changes state (and so needs write permission). Break-glass
// checks the permission its environment names instead (at least write).
func (c Command) Mutating() bool {
	switch c.Name {
	case CommandDeploy, CommandRedeploy, CommandUnlock, CommandSkip, CommandRetry, CommandRollback, CommandUnfreeze, CommandPromote, CommandApprove:
		return true
	}
	return false
}

// Usage is the reply to /latestwins help.
const Usage = "Commands: `/latestwins deploy [scope...]` (deploy this pull request's head, all scopes or the ones named), " +
	"`/latestwins redeploy SCOPE` (deploy SCOPE again at its current commit), `/latestwins status`, " +
	"`/latestwins unlock [SCOPE]` (free a held lease), " +
	"`/latestwins skip SCOPE` / `/latestwins retry SCOPE` (a terminal failure that blocks SCOPE's queue: give up on it, or try it again), " +
	"`/latestwins rollback SCOPE [SHA]` (deploy an older commit, default the one live before, ahead of everything pending, and freeze SCOPE; " +
	"SCOPE may be ENV/SCOPE for an environment this repository feeds, e.g. `production/api`), " +
	"`/latestwins unfreeze SCOPE FREEZE` (lift the freeze named FREEZE, its rollback's generation as the rollback's reply and the status give it, " +
	"and let the newest commit it held go), " +
	"`/latestwins promote SCOPE` (deploy the commit live in the environment a production-like one requires, e.g. staging's, there: " +
	"every environment with `requires` that this repository feeds, or the one named as ENV/SCOPE), " +
	"`/latestwins approve ENV SHA` (approve a commit waiting for approvals in ENV, e.g. `/latestwins approve production abc1234`; " +
	"also on an issue), " +
	"`/latestwins break-glass ENV SHA REASON` (waive a pending commit's soak time, approvals and change windows, for a reason the timeline keeps; " +
	"admin permission unless the environment's break-glass: says otherwise), " +
	"`/latestwins help`."

// ParseCommand reads a comment. It reports false when the comment is not addressed to latestwins:
// its first non-blank line must start with /latestwins. Only that line is read; anything after it
// is ignored, so a comment runs at most one command. Arguments must be valid scope names, so no
// text other than a scope name ever reaches a command.
func ParseCommand(body string) (Command, bool) {
	line := firstLine(body)
	rest, ok := strings.CutPrefix(line, commandPrefix)
	if !ok || (rest != "" && !isSpace(rest[0])) {
		return Command{}, false
	}
	args := strings.Fields(rest)
	if len(args) == 0 {
		return Command{Name: CommandHelp}, true
	}
	name, args := CommandName(args[0]), args[1:]
	var problem string
	switch name {
	case CommandDeploy:
		problem = checkScopes(args, 0, authority.MaxScopesSplit, "deploy [scope...]")
	case CommandRedeploy:
		problem = checkScopes(args, 1, 1, "redeploy SCOPE")
	case CommandUnlock:
		problem = checkScopes(args, 0, 1, "unlock [SCOPE]")
	case CommandSkip, CommandRetry:
		problem = checkScopes(args, 1, 1, string(name)+" SCOPE")
	case CommandRollback, CommandUnfreeze, CommandPromote:
		return parseTarget(name, args)
	case CommandApprove:
		return parseApprove(args)
	case CommandBreakGlass:
		return parseBreakGlass(args)
	case CommandStatus, CommandHelp:
		problem = checkScopes(args, 0, 0, string(name))
	default:
		return Command{Problem: fmt.Sprintf("unknown command %s; %s", core.Quote(string(name)), Usage)}, true
	}
	if problem != "" {
		return Command{Problem: problem}, true
	}
	if len(args) == 0 {
		args = nil
	}
	return Command{Name: name, Scopes: args}, true
}

// parseTarget reads the arguments of rollback (SCOPE or ENV/SCOPE, then an optional commit),
// unfreeze (SCOPE or ENV/SCOPE, then the freeze: without it, the reply names the current one) and
// promote (SCOPE or ENV/SCOPE).
func parseTarget(name CommandName, args []string) (Command, bool) {
	usage, most, takes := string(name)+" SCOPE", 1, "one scope (or ENV/SCOPE)"
	switch name {
	case CommandRollback:
		usage, most, takes = "rollback SCOPE [SHA]", 2, "one scope (or ENV/SCOPE) and, optionally, the commit to roll back to"
	case CommandUnfreeze:
		usage, most, takes = "unfreeze SCOPE FREEZE", 2, "one scope (or ENV/SCOPE) and the freeze to lift, named by its rollback's generation"
	}
	if len(args) < 1 || len(args) > most {
		return Command{Problem: fmt.Sprintf("`/latestwins %s` takes %s", usage, takes)}, true
	}
	cmd := Command{Name: name}
	target := args[0]
	if strings.Contains(target, "/") {
		env, scope, err := authority.SplitResource(target)
		var ie *authority.InputError
		if errors.As(err, &ie) {
			return Command{Problem: fmt.Sprintf("%s is not SCOPE or ENV/SCOPE: %s", core.Quote(target), ie.Fix)}, true
		}
		cmd.Environment, target = env, scope
	}
	if problem := checkScopes([]string{target}, 1, 1, usage); problem != "" {
		return Command{Problem: problem}, true
	}
	cmd.Scopes = []string{target}
	if len(args) == 2 && name == CommandUnfreeze {
		g, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil || g < 1 || args[1][0] == '+' {
			return Command{Problem: fmt.Sprintf("%s is not a freeze: name it by its rollback's generation, a whole number such as 5, as the rollback's reply and the status give it", core.Quote(args[1]))}, true
		}
		cmd.Freeze = g
		return cmd, true
	}
	if len(args) == 2 {
		if !core.IsCommitSha(args[1]) {
			return Command{Problem: fmt.Sprintf("%s is not a commit: give 7 to 40 hexadecimal digits of its sha", core.Quote(args[1]))}, true
		}
		cmd.Sha = strings.ToLower(args[1])
	}
	return cmd, true
}

func firstLine(body string) string {
	for line := range strings.Lines(body) {
		if t := strings.TrimSpace(line); t != "" {
			return t
		}
	}
	return ""
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' }

func checkScopes(args []string, lo, hi int, usage string) string {
	if len(args) < lo || len(args) > hi {
		switch {
		case hi == 0:
			return fmt.Sprintf("`/latestwins %s` takes no arguments", usage)
		case lo == hi:
			return fmt.Sprintf("`/latestwins %s` takes exactly %d scope", usage, lo)
		default:
			return fmt.Sprintf("`/latestwins %s` takes at most %d scope(s)", usage, hi)
		}
	}
	seen := map[string]bool{}
	for _, a := range args {
		var ie *authority.InputError
		if err := authority.ValidateScope(a); errors.As(err, &ie) {
			return fmt.Sprintf("%s is not a scope name: %s", core.Quote(a), ie.Fix)
		}
		if seen[a] {
			return fmt.Sprintf("scope %s is named twice; name each scope once", core.Quote(a))
		}
		seen[a] = true
	}
	return ""
}
