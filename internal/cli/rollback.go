package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// runRollback asks for an older commit of one scope ahead of everything pending, and freezes it.
func runRollback(ctx context.Context, c *cmdEnv, args []string) error {
	var to, request string
	c.newFlags("rollback")
	c.interspersed = true
	c.str(&to, "to", "", fmt.Sprintf("the commit to roll back to: its full sha, or at least %d hex digits of one that was live in the scope (default: the one live before the current one)", authority.MinShaPrefix))
	c.str(&c.s.reason, "reason", "", "why, for the timeline (required)")
	c.str(&c.s.actor, "actor", "", "who rolls back (default $GITHUB_ACTOR or $USER)")
	c.str(&request, "request", "", "an id for this request: a repeat rolls back once")
	c.apiFlags()
	if err := c.parse(args); err != nil {
		return err
	}
	env, scope, err := c.scopeAndReason("rollback", "the deploy of def5678 breaks checkout")
	if err != nil {
		return err
	}
	raw := to
	var bad *authority.InputError
	if to = authority.CanonicalSha(to); to != "" && errors.As(authority.ValidateShaPrefix(to), &bad) {
		return c.badSetting("to", raw, bad.Fix)
	}
	c.mode = storeMustExist
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	if client, ok := c.view.(*apiclient.Client); ok {
		return c.rollbackRemote(ctx, client, authority.RollbackRequest{Environment: env, Scope: scope, To: to,
			Reason: c.s.reason, Request: request})
	}
	res, err := c.auth.Rollback(ctx, authority.RollbackRequest{Environment: env, Scope: scope, To: to,
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
		"  latestwins run --environment %s --scopes %s --generation %d -- CMD\n",
		c.positional[0], report.ShortSha(sha), res.Generation, env, scope, res.Generation)
	c.printFrozen(res.Generation)
	return nil
}

// printFrozen says that the scope rolled back is frozen, by the freeze named gen (the rollback's
// generation), and how to lift that freeze.
func (c *cmdEnv) printFrozen(gen int64) {
	c.printf("%s is frozen (freeze %d): newer intents are recorded and wait until `%s`\n", c.positional[0], gen, c.unfreezeCommand(gen))
}

// unfreezeCommand is the command line that lifts the freeze named gen of the scope named.
func (c *cmdEnv) unfreezeCommand(gen int64) string {
	api := ""
	if c.s.api != "" {
		api = " --api " + c.s.api
	}
	return fmt.Sprintf("latestwins unfreeze %s%s --freeze %d --reason TEXT", c.positional[0], api, gen)
}

// rollbackRemote rolls back through the App's API: the App records the rollback with the token's
// actor and dispatches the scope's workflow itself.
func (c *cmdEnv) rollbackRemote(ctx context.Context, client *apiclient.Client, r authority.RollbackRequest) error {
	res, err := client.Rollback(ctx, r)
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"rollback": c.positional[0], "generation": res.Generation, "sha": res.Sha, "duplicate": res.Duplicate,
			"dispatched": res.Dispatched, "dispatch_failed": res.DispatchFailed})
	}
	if res.Duplicate {
		c.printf("request %s was already answered: the rollback of %s is generation %d\n", r.Request, c.positional[0], res.Generation)
		return nil
	}
	c.printf("rolled %s back to %s at generation %d, ahead of everything pending\n", c.positional[0], report.ShortSha(res.Sha), res.Generation)
	for _, d := range res.Dispatched {
		c.printf("the App dispatched %s on %s in %s for generation %d\n", d.Workflow, d.Ref, d.Repository, res.Generation)
	}
	switch {
	case res.DispatchFailed != "":
		c.printf("the dispatch failed: %s\n", res.DispatchFailed)
	case len(res.Dispatched) == 0:
		c.printf("the App dispatched no workflow (none is configured for the scope, or the App has no credentials): deploy it with\n"+
			"  latestwins run --api %s --environment %s --scopes %s --generation %d -- CMD\n", c.s.api, r.Environment, r.Scope, res.Generation)
	}
	c.printFrozen(res.Generation)
	return nil
}

// unfreezer lifts freezes: the store's authority, or the App's API.
type unfreezer interface {
	Unfreeze(ctx context.Context, r authority.UnfreezeRequest) (*authority.Freeze, error)
}

var (
	_ unfreezer = (*authority.Authority)(nil)
	_ unfreezer = (*apiclient.Client)(nil)
)

// runUnfreeze lifts the rollback's freeze that --freeze names: the newest intent held meanwhile
// goes next. Another freeze (a newer rollback's) is refused, and the refusal says which freeze is
// current and the command that lifts it.
func runUnfreeze(ctx context.Context, c *cmdEnv, args []string) error {
	var request string
	var freeze int64
	c.newFlags("unfreeze")
	c.interspersed = true
	c.int64Var(&freeze, "freeze", 0, 0, "the freeze to lift: its rollback's generation, as status and the rollback show it (required)")
	c.str(&c.s.reason, "reason", "", "why, for the timeline (required)")
	c.str(&c.s.actor, "actor", "", "who unfreezes (default $GITHUB_ACTOR or $USER)")
	c.str(&request, "request", "", "an id for this request: a repeat unfreezes once")
	c.apiFlags()
	if err := c.parse(args); err != nil {
		return err
	}
	env, scope, err := c.scopeAndReason("unfreeze", "fixed forward in abc1234")
	if err != nil {
		return err
	}
	c.mode = storeMustExist
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	var u unfreezer = c.auth
	if client, ok := c.view.(*apiclient.Client); ok {
		u = client
	}
	f, err := u.Unfreeze(ctx, authority.UnfreezeRequest{Environment: env, Scope: scope, Freeze: freeze, Actor: c.s.actor, Reason: c.s.reason, Request: request})
	var mismatch *authority.FreezeMismatchError
	switch {
	case errors.As(err, &mismatch) && mismatch.Current != nil:
		return c.freezeMismatch(mismatch)
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
	c.printf("unfroze %s: lifted %s\n", c.positional[0], report.Escape(f.Describe()))
	c.printNext(ctx, env, scope)
	return nil
}

// printNext says what the scope deploys next, and the command that deploys it.
func (c *cmdEnv) printNext(ctx context.Context, env, scope string) {
	st, err := c.view.Status(ctx, env)
	if err != nil {
		c.progress("what goes next is unknown: %v", err)
		return
	}
	next := st.Scopes[scope].Mailbox
	if next == nil {
		c.printf("nothing is pending in %s: the next intent deploys\n", c.positional[0])
		return
	}
	api := ""
	if c.s.api != "" {
		api = " --api " + c.s.api
	}
	c.printf("next: %s at generation %d; deploy it with\n  latestwins run%s --environment %s --scopes %s --generation %d -- CMD\n",
		report.ShortSha(next.Sha), next.Generation, api, env, scope, next.Generation)
}

// freezeMismatch is the refusal of an unfreeze that did not name the current freeze: which freeze
// is current, and the command that lifts it, for the operator to run once they have read it.
func (c *cmdEnv) freezeMismatch(m *authority.FreezeMismatchError) error {
	cur := m.Current
	var b strings.Builder
	if m.Named == 0 {
		fmt.Fprintf(&b, "%s is frozen by %s; nothing was unfrozen: name the freeze to lift (--freeze), so that an unfreeze never lifts a freeze its author has not seen",
			c.positional[0], cur.Describe())
	} else {
		fmt.Fprintf(&b, "freeze %d is not the current freeze of %s (%s): it is frozen by %s; nothing was unfrozen", m.Named, c.positional[0], m.Why(), cur.Describe())
	}
	fmt.Fprintf(&b, "; to lift freeze %d: %s", cur.Generation, c.unfreezeCommand(cur.Generation))
	return &exitError{code: ExitUsage, msg: b.String()}
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
	c.defaultActor()
	return env, scope, nil
}

// claimGeneration claims scopes for a generation accepted before, on the store or through the
// App's API.
func (c *cmdEnv) claimGeneration(ctx context.Context, env string, gen int64, scopes []string) (*authority.ClaimResult, error) {
	if cl, ok := c.pass.(interface {
		ClaimGeneration(ctx context.Context, env string, gen int64, scopes []string) (*authority.ClaimResult, error)
	}); ok {
		return cl.ClaimGeneration(ctx, env, gen, scopes)
	}
	return c.auth.Claim(ctx, env, gen, scopes)
}
