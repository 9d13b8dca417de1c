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
	if c.s.actor = strings.TrimSpace(c.s.actor); c.s.actor == "" {
		c.s.actor = firstNonEmpty(c.io.Getenv("GITHUB_ACTOR"), c.io.Getenv("USER"))
	}
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

// runGates sets an environment's gates on a store, where no trusted file is read: the soak time,
// approvals and change windows the flags give (a flag left out keeps its gate, none removes it),
// recorded in the timeline. Through the App the trusted file sets them instead.
func runGates(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("gates")
	c.interspersed = true
	c.soakVar()
	c.approvalsFlags()
	c.windowsVar()
	c.str(&c.s.actor, "actor", "", "who changes them (default $GITHUB_ACTOR or $USER)")
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.positional) != 1 {
		return usageErrorf("name one environment: latestwins gates ENV [--soak 30m] [--approvals 1] [--windows 'tz=...; allow=...']")
	}
	env := c.positional[0]
	if err := authority.ValidateEnvironment(env); err != nil {
		return err
	}
	g, err := c.gates()
	if err != nil {
		return err
	}
	if c.s.actor = strings.TrimSpace(c.s.actor); c.s.actor == "" {
		c.s.actor = firstNonEmpty(c.io.Getenv("GITHUB_ACTOR"), c.io.Getenv("USER"))
	}
	c.mode = storeCreate
	if err := c.open(ctx); err != nil {
		return err
	}
	defer c.done()
	if g != nil {
		if _, err := c.auth.SetGates(ctx, env, *g, c.s.actor); err != nil {
			return err
		}
	}
	e, err := c.auth.State(ctx, env)
	if err != nil {
		return err
	}
	var now *authority.Gates
	if e != nil {
		now = e.Gates
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"environment": env, "gates": now})
	}
	c.printf("%s: %s\n", env, now.String())
	return nil
}
