package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// approvalsFlags registers the approvals gate's flags of an intent: --approvals, --approvers and
// --pusher-may-approve. Their values are read back from the flag set (approvalsFlag).
func (c *cmdEnv) approvalsFlags() {
	c.str(new(string), "approvals", "", fmt.Sprintf("how many people must approve each commit here before it deploys (latestwins approve), 1 to %d; 0: none; a change is recorded (default: keep the stored rule)", authority.MaxApprovals))
	c.str(new(string), "approvers", "", "with --approvals: comma-separated GitHub logins and teams (@org/team) who may approve (default: anyone with write permission)")
	c.str(new(string), "pusher-may-approve", "", "with --approvals: false: the pusher's own approval does not count (default true)")
}

// flagValue is the value of a string flag of the current flag set; "" when it is not registered.
func (c *cmdEnv) flagValue(name string) string {
	if c.fs == nil {
		return ""
	}
	if f := c.fs.Lookup(name); f != nil {
		return strings.TrimSpace(f.Value.String())
	}
	return ""
}

// approvalsFlag reads --approvals: nil when not given, an empty rule (the gate removed) for 0 or
// none.
func (c *cmdEnv) approvalsFlag() (*authority.ApprovalRule, error) {
	raw, approvers, pusher := c.flagValue("approvals"), c.flagValue("approvers"), c.flagValue("pusher-may-approve")
	if raw == "" {
		switch {
		case approvers != "":
			return nil, c.badSetting("approvers", approvers, "give --approvals N with it: how many of them must approve")
		case pusher != "":
			return nil, c.badSetting("pusher-may-approve", pusher, "give --approvals N with it: how many people must approve")
		}
		return nil, nil
	}
	if raw == "0" || raw == "none" {
		if approvers != "" || pusher != "" {
			return nil, c.badSetting("approvals", raw, "--approvals 0 removes the gate: give no --approvers or --pusher-may-approve with it")
		}
		return &authority.ApprovalRule{}, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > authority.MaxApprovals {
		return nil, c.badSetting("approvals", raw, fmt.Sprintf("give how many people must approve each commit, 1 to %d, or 0 for none", authority.MaxApprovals))
	}
	r := &authority.ApprovalRule{Count: n, Approvers: splitList(approvers)}
	switch strings.ToLower(pusher) {
	case "", "true":
	case "false":
		r.ExcludePusher = true
	default:
		return nil, c.badSetting("pusher-may-approve", pusher, "give true (the pusher's own approval counts) or false")
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// runApprove records an operator's approval of a commit pending in an environment, with the
// store's credentials: approve ENV --sha SHA [--scopes a,b] --actor NAME. Through the App, people
// approve with a comment or on the status page; its API takes no approval from a token.
func runApprove(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("approve")
	c.interspersed = true
	c.str(&c.s.sha, "sha", "", fmt.Sprintf("the commit to approve: its full sha, or at least %d hex digits of one pending in the environment (required)", authority.MinShaPrefix))
	c.str(&c.s.scopes, "scopes", "", "comma-separated scopes to approve it in (default: every scope where it is pending)")
	c.str(&c.s.actor, "actor", "", "the GitHub login of the person who approves (required: an approval is a person's)")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.positional) != 1 {
		return usageErrorf("name the environment: latestwins approve ENV --sha SHA --actor NAME")
	}
	if c.env("api") != "" {
		return &exitError{code: ExitUsage, msg: fmt.Sprintf("%s is set, but the App's API takes no approvals: approvals come from people, not workflow tokens. "+
			"Comment `/latestwins approve %s SHA`, use the Approve button of the status page, or run latestwins approve with the store's credentials (--store) and no %s",
			envName("api"), c.positional[0], envName("api"))}
	}
	env := c.positional[0]
	if err := authority.ValidateEnvironment(env); err != nil {
		return err
	}
	sha := authority.CanonicalSha(c.s.sha)
	if sha == "" {
		return c.badSetting("sha", "", "name the commit to approve (--sha abc1234), as status shows it waiting for approval")
	}
	if c.s.actor = strings.TrimSpace(c.s.actor); c.s.actor == "" {
		return c.badSetting("actor", "", "say who approves (--actor LOGIN): an approval is a person's, counted once per person")
	}
	if err := c.checkScopes(); err != nil {
		return err
	}
	c.mode = storeMustExist
	if err := c.open(ctx); err != nil {
		return err
	}
	defer c.done()
	res, err := c.auth.ApproveCommit(ctx, authority.CommitApprovalRequest{Environment: env, Sha: sha, Scopes: splitList(c.s.scopes),
		Login: c.s.actor, Door: authority.ApprovalDoorCLI})
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(res)
	}
	for _, s := range res.Scopes {
		c.printf("%s\n", report.Escape(approvalLine(env, c.s.actor, s)))
	}
	return nil
}

// approvalLine says what an approval did in one scope.
func approvalLine(env, login string, s authority.ScopeApproval) string {
	resource := env + "/" + s.Scope
	var b strings.Builder
	switch {
	case s.Repeat:
		fmt.Fprintf(&b, "%s: %s had approved %s (generation %d) already; nothing changed", resource, login, report.ShortSha(s.Sha), s.Generation)
	case s.Pusher:
		fmt.Fprintf(&b, "%s: recorded %s's approval of %s (generation %d), but %s pushed it, and the pusher's own approval does not count here", resource, login, report.ShortSha(s.Sha), s.Generation, login)
	default:
		fmt.Fprintf(&b, "%s: %s approved %s (generation %d)", resource, login, report.ShortSha(s.Sha), s.Generation)
	}
	fmt.Fprintf(&b, "; %d of %d approvals", s.Count-s.Need, s.Count)
	if len(s.By) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(s.By, ", "))
	}
	if s.Need == 0 {
		b.WriteString(": it may deploy")
	} else {
		fmt.Fprintf(&b, ": %d more needed", s.Need)
	}
	return b.String()
}
