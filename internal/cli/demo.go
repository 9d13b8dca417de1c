package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/demo"
)

func runDemo(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("demo")
	o := demo.DefaultOptions()
	c.durVar(&o.Build, "build", o.Build, "how long each simulated build takes")
	c.durVar(&o.Deploy, "deploy", o.Deploy, "how long the simulated deploy takes")
	c.str(&c.s.policy, "policy", "latest", "latest: the A -> B -> C race where C wins; queue: A, B and C deploy in order")
	scenario := "race"
	c.str(&scenario, "scenario", scenario, "race: the A -> B -> C race (under --policy); rollback: A live, B building, a rollback to A jumps ahead and freezes, C waits until unfreeze; "+
		"gates: production soaks, waits for an approval and for its change window, on a simulated clock, and only the newest of three commits deploys")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.noArguments(); err != nil {
		return err
	}
	policy, err := authority.ParsePolicy(c.s.policy)
	if err != nil {
		return err
	}
	if scenario != "race" && scenario != "rollback" && scenario != "gates" {
		return c.badSetting("scenario", scenario, "use race (the default), rollback or gates")
	}
	var clk *demo.Clock
	if scenario == "gates" {
		// Soak times and change windows pass in an instant on a simulated clock.
		clk = demo.NewClock(demo.GatesStart)
		c.clock = clk
	}
	given := false
	c.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "store" })
	if !given && c.io.Getenv("LATESTWINS_STORE") == "" {
		// The embedded store, in a fresh file: the demo never touches ./latestwins.db.
		dir, err := os.MkdirTemp("", "latestwins-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		c.s.store = "bolt://" + filepath.Join(dir, "demo.db")
	}
	if strings.HasPrefix(c.s.store, "bolt://") || strings.HasPrefix(c.s.store, "memory://") {
		o.Environment = "demo"
	} else {
		o.Environment = fmt.Sprintf("demo/%d", time.Now().Unix())
	}
	if err := c.open(ctx); err != nil {
		return err
	}
	defer c.done()
	if _, err := c.auth.Status(ctx, o.Environment); err == nil {
		o.Environment = fmt.Sprintf("demo/%d", time.Now().UnixNano())
	}
	fmt.Fprintf(c.io.Stdout, "latestwins demo on %s\n", c.s.store)
	run, won := demo.Run, "C, the newest commit, is live; A and B deployed nothing."
	switch {
	case scenario == "gates":
		run = func(ctx context.Context, a *authority.Authority, w io.Writer, o demo.Options) (*demo.Result, error) {
			return demo.RunGates(ctx, a, clk, w, o)
		}
		won = "production soaked, waited for an approval and its window, and deployed only C; A and B never deployed there."
	case scenario == "rollback":
		run, won = demo.RunRollback, "the rollback to A jumped ahead of B, B deployed nothing, and C waited for the unfreeze."
	case policy == authority.PolicyQueue:
		run, won = demo.RunQueue, "A, B and C deployed in order; none was superseded."
	}
	res, err := run(ctx, c.auth, c.io.Stdout, o)
	if err != nil {
		return err
	}
	if len(res.Violations) > 0 {
		fmt.Fprintln(c.io.Stdout, "\nGuarantees broken:")
		for _, v := range res.Violations {
			fmt.Fprintf(c.io.Stdout, "  - %s\n", v)
		}
		return &exitError{code: ExitError, msg: fmt.Sprintf("%d guarantee(s) broken", len(res.Violations))}
	}
	fmt.Fprintln(c.io.Stdout, "\nAll guarantees held: "+won)
	return nil
}
