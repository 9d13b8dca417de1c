package cli

import (
	"context"
)

func runMigrate(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("migrate")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.noArguments(); err != nil {
		return err
	}
	return migrateStore(ctx, c)
}
