package cli

import (
	"context"
	"errors"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// runRollback asks for an older commit of one scope ahead of everything pending, and freezes it.
func runRollback(ctx context.Context, c *cmdEnv, args []string) error {
	var to, request string
	c.newFlags("rollback")
	c.interspersed = true
	c.str(&to, "to", "", "the commit to roll back to (default: the one live before the current one)")
	c.str(&c.s.reason, "reason", "", "why, for the timeline (required)")
	c.str(&c.s.actor, "actor", "", "who rolls back (default $GITHUB_ACTOR or $USER)")
	c.str(&request, "request", "", "an id for this request: a repeat rolls back once")
	if err := c.parse(args); err != nil {
		return err
	}
	env, scope, err := c.scopeAndReason("rollback", "the deploy of def5678 breaks checkout")
	if err != nil {
		return err
	}
	c.mode = storeMustExist
	if err := c.open(ctx); err != nil {
		return err
	}
	defer c.done()
	res, err := c.auth.Rollback(ctx, authority.RollbackRequest{Environment: env, Scope: scope, To: strings.TrimSpace(to),
		Actor: c.s.actor, Reason: c.s.reason, Request: request, Source: "latestwins rollback"})
	if err != nil {
		return err
	}
	st, err := c.auth.Status(ctx, env)
	if err != nil {
		return err
	}
	sc := st.Scopes[scope]
	sha := ""
	if sc.Freeze != nil {
		sha = sc.Freeze.Sha
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"rollback": c.positional[0], "generation": res.Generation, "sha": sha, "duplicate": res.Duplicate, "frozen": sc.Freeze})
	}
	if res.Duplicate {
		c.printf("request %s was already answered: the rollback of %s is generation %d\n", request, c.positional[0], res.Generation)
		return nil
	}
	c.printf("rolled %s back to %s at generation %d, ahead of everything pending; deploy it with\n"+
		"  latestwins run --environment %s --scopes %s --generation %d -- CMD\n"+
		"%s is frozen: newer intents are recorded and wait until `latestwins unfreeze %s --reason TEXT`\n",
		c.positional[0], report.ShortSha(sha), res.Generation, env, scope, res.Generation, c.positional[0], c.positional[0])
	return nil
}

// runUnfreeze lifts a rollback's freeze: the newest intent held meanwhile goes next.
func runUnfreeze(ctx context.Context, c *cmdEnv, args []string) error {
	var request string
	c.newFlags("unfreeze")
	c.interspersed = true
	c.str(&c.s.reason, "reason", "", "why, for the timeline (required)")
	c.str(&c.s.actor, "actor", "", "who unfreezes (default $GITHUB_ACTOR or $USER)")
	c.str(&request, "request", "", "an id for this request: a repeat unfreezes once")
	if err := c.parse(args); err != nil {
		return err
	}
	env, scope, err := c.scopeAndReason("unfreeze", "fixed forward in abc1234")
	if err != nil {
		return err
	}
	c.mode = storeMustExist
	if err := c.open(ctx); err != nil {
		return err
	}
	defer c.done()
	f, err := c.auth.Unfreeze(ctx, authority.UnfreezeRequest{Environment: env, Scope: scope, Actor: c.s.actor, Reason: c.s.reason, Request: request})
	switch {
	case errors.Is(err, authority.ErrNotFrozen):
		c.printf("%s is not frozen; nothing to do\n", c.positional[0])
		return nil
	case errors.Is(err, authority.ErrRepeated):
		c.printf("request %s was already answered: %s was unfrozen then\n", request, c.positional[0])
		return nil
	case err != nil:
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"unfrozen": c.positional[0], "freeze": f})
	}
	c.printf("unfroze %s (held since the rollback to %s, generation %d): the newest intent held meanwhile goes next\n",
		c.positional[0], report.ShortSha(f.Sha), f.Generation)
	return nil
}

// scopeAndReason reads the one ENV/SCOPE argument, the required --reason and the actor of verb.
func (c *cmdEnv) scopeAndReason(verb, example string) (env, scope string, err error) {
	if len(c.positional) != 1 {
		return "", "", usageErrorf("name one scope: latestwins %s ENV/SCOPE --reason TEXT", verb)
	}
	if env, scope, err = authority.SplitResource(c.positional[0]); err != nil {
		return "", "", err
	}
	if c.s.reason = strings.TrimSpace(c.s.reason); c.s.reason == "" {
		return "", "", c.badSetting("reason", "", "say why, e.g. --reason \""+example+"\"; it goes in the timeline")
	}
	if c.s.actor = strings.TrimSpace(c.s.actor); c.s.actor == "" {
		c.s.actor = firstNonEmpty(c.io.Getenv("GITHUB_ACTOR"), c.io.Getenv("USER"))
	}
	return env, scope, nil
}
