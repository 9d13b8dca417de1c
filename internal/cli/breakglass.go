package cli

import (
	"context"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// runBreakGlass waives the soak time, approvals and change windows of a pending commit, for a
// reason that goes into the timeline: an operator's action with store credentials. Supersession,
// leases, freezes, queues and promotion still hold.
func runBreakGlass(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("break-glass")
	c.interspersed = true
	c.str(&c.s.sha, "sha", "", "the pending commit to let through (required)")
	c.str(&c.s.scopes, "scopes", "", "comma-separated scopes (default: every scope where the commit is pending)")
	c.str(&c.s.reason, "reason", "", "why the gates are waived, for the timeline (required)")
	c.str(&c.s.actor, "actor", "", "who breaks the glass (default $GITHUB_ACTOR or $USER)")
	c.apiFlags()
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.positional) != 1 {
		return usageErrorf("name one environment: latestwins break-glass ENV --sha SHA --reason TEXT")
	}
	env := c.positional[0]
	if err := authority.ValidateEnvironment(env); err != nil {
		return err
	}
	if c.s.api != "" {
		return usageErrorf("break-glass through the App is a comment (/latestwins break-glass %s SHA REASON) or the button on its signed-in page, by someone with the permission the App's file configures; on the command line it takes the store's credentials (--store)", env)
	}
	if c.s.sha == "" {
		return c.badSetting("sha", "", "give the pending commit to let through (latestwins status "+env+" shows what waits)")
	}
	if c.s.reason = strings.TrimSpace(c.s.reason); c.s.reason == "" {
		return c.badSetting("reason", "", "say why, e.g. --reason \"incident 4711: the fix cannot wait for the window\"; it goes in the timeline")
	}
	c.defaultActor()
	if err := c.checkScopes(); err != nil {
		return err
	}
	c.mode = storeMustExist
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	scopes, err := c.auth.BreakGlass(ctx, authority.BreakGlassRequest{Environment: env, Scopes: splitList(c.s.scopes), Sha: c.s.sha,
		Actor: c.s.actor, Reason: c.s.reason, Via: "cli"})
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"environment": env, "sha": c.s.sha, "scopes": scopes, "actor": c.s.actor, "reason": c.s.reason})
	}
	c.printf("broke the glass for %s in %s (%s): soak, approvals and change windows waived; supersession, leases, freezes and promotion still hold\n",
		report.ShortSha(c.s.sha), env, strings.Join(scopes, ", "))
	return nil
}
