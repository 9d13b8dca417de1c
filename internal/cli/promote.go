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

// requirements reads --requires and --requires-ancestor: nil when neither is given (keep the
// stored requirement), an empty one for --requires none.
func (c *cmdEnv) requirements() (*authority.Requirements, error) {
	raw := strings.TrimSpace(c.s.requires)
	if raw == "" {
		if c.s.requiresAncestor {
			return nil, c.badSetting("requires-ancestor", "true", "name the environments a commit must be live in first (--requires staging)")
		}
		return nil, nil
	}
	if raw == "none" {
		return &authority.Requirements{}, nil
	}
	return &authority.Requirements{Environments: splitList(raw), Ancestor: c.s.requiresAncestor}, nil
}

// runPromote asks for the commit live in a scope of --from in the same scope of ENV.
func runPromote(ctx context.Context, c *cmdEnv, args []string) error {
	var from, request string
	c.newFlags("promote")
	c.interspersed = true
	c.str(&from, "from", "", "the environment whose live commit is promoted, e.g. staging (required on a store; with --api, default the first environment ENV requires)")
	c.str(&c.s.actor, "actor", "", "who promotes (default $GITHUB_ACTOR or $USER)")
	c.str(&request, "request", "", "an id for this request: a repeat promotes once")
	c.apiFlags()
	if err := c.parse(args); err != nil {
		return err
	}
	if len(c.positional) != 1 {
		return usageErrorf("name one scope: latestwins promote ENV/SCOPE --from ENVIRONMENT")
	}
	env, scope, err := authority.SplitResource(c.positional[0])
	if err != nil {
		return err
	}
	if from = strings.TrimSpace(from); from == "" && c.s.api == "" {
		return c.badSetting("from", "", "name the environment whose live commit goes to "+env+", e.g. --from staging")
	}
	c.defaultActor()
	c.mode = storeMustExist
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	if client, ok := c.view.(*apiclient.Client); ok {
		return c.promoteRemote(ctx, client, authority.PromoteRequest{Environment: env, Scope: scope, From: from, Request: request})
	}
	res, err := c.auth.Promote(ctx, authority.PromoteRequest{Environment: env, Scope: scope, From: from, Actor: c.s.actor,
		Request: request, Source: "latestwins promote from " + from})
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"promote": c.positional[0], "from": from, "sha": res.Sha, "generation": res.Generation,
			"duplicate": res.Duplicate, "accepted": res.Accepted, "stale": res.Stale})
	}
	if res.Duplicate {
		c.printf("request %s was already answered: %s of %s is generation %d in %s\n", request, report.ShortSha(res.Sha), from, res.Generation, env)
		return nil
	}
	c.printf("promoted %s (live in %s/%s) to %s at generation %d; deploy it with\n"+
		"  latestwins run --environment %s --scopes %s --generation %d -- CMD\n",
		report.ShortSha(res.Sha), from, scope, env, res.Generation, env, scope, res.Generation)
	return nil
}

// promoteRemote promotes through the App's API: the App checks that ENV requires the environment
// promoted from, records the promotion with the token's actor and dispatches the scope's workflow.
func (c *cmdEnv) promoteRemote(ctx context.Context, client *apiclient.Client, r authority.PromoteRequest) error {
	res, err := client.Promote(ctx, r)
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(map[string]any{"promote": c.positional[0], "from": res.From, "sha": res.Sha, "generation": res.Generation,
			"duplicate": res.Duplicate, "dispatched": res.Dispatched, "dispatch_failed": res.DispatchFailed})
	}
	if res.Duplicate {
		c.printf("request %s was already answered: %s of %s is generation %d in %s\n", r.Request, report.ShortSha(res.Sha), res.From, res.Generation, r.Environment)
		return nil
	}
	c.printf("promoted %s (live in %s/%s) to %s at generation %d\n", report.ShortSha(res.Sha), res.From, r.Scope, r.Environment, res.Generation)
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
	return nil
}

// overview prints what is live where: every environment the store holds, per scope.
func (c *cmdEnv) overview(ctx context.Context) error {
	if c.s.api != "" {
		return c.overviewRemote(ctx)
	}
	c.mode = storeReadOnly
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	names, err := c.auth.Environments(ctx)
	if errors.Is(err, authority.ErrNotListable) {
		names, err = c.auth.Pending(ctx) // at least those with work pending
	}
	if err != nil {
		return err
	}
	envs := make([]*authority.Env, 0, len(names))
	var moved error
	for _, n := range names {
		e, err := c.auth.Status(ctx, n)
		if errors.Is(err, authority.ErrMoved) {
			c.progress("%v", err) // moved elsewhere: not this store's to show
			moved = err
			continue
		}
		if err != nil {
			return err
		}
		envs = append(envs, e)
	}
	if len(envs) == 0 && moved != nil {
		return fmt.Errorf("every environment of this store was moved to another one: %w", moved)
	}
	return c.printOverview(report.NewOverview(envs, c.auth.Now()))
}

// overviewRemote prints what is live where through the App's API: the environments the token's
// repository feeds.
func (c *cmdEnv) overviewRemote(ctx context.Context) error {
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	client, ok := c.view.(*apiclient.Client)
	if !ok {
		return errors.New("status --api: no API client")
	}
	o, err := client.Overview(ctx)
	if err != nil {
		return err
	}
	return c.printOverview(o)
}

func (c *cmdEnv) printOverview(o *report.Overview) error {
	if c.s.jsonOut {
		return c.printJSON(o)
	}
	if len(o.Scopes) == 0 {
		c.printf("no environment has been deployed to yet\n")
		return nil
	}
	return report.OverviewText(c.io.Stdout, o)
}
