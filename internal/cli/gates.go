package cli

import (
	"context"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
)

// defaultActor trims --actor and, when it is empty, takes who runs the command: $GITHUB_ACTOR,
// else $USER.
func (c *cmdEnv) defaultActor() {
	if c.s.actor = strings.TrimSpace(c.s.actor); c.s.actor == "" {
		c.s.actor = firstNonEmpty(c.io.Getenv("GITHUB_ACTOR"), c.io.Getenv("USER"))
	}
}

// gates reads the flags of the environment's gates (--soak, --approvals, --windows): nil when none
// is given, so that the stored gates stay; a gate whose flag is not given keeps its stored value.
func (c *cmdEnv) gates() (*authority.Gates, error) {
	var g authority.Gates
	var err error
	if g.Soak, err = c.soakFlag(); err != nil {
		return nil, err
	}
	if g.Approvals, err = c.approvalsFlag(); err != nil {
		return nil, err
	}
	if g.Windows, err = c.windowsFlag(); err != nil {
		return nil, err
	}
	if g == (authority.Gates{}) {
		return nil, nil
	}
	return &g, nil
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
	c.defaultActor()
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
