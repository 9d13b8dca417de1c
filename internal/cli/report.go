package cli

import (
	"context"
	"errors"

	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// runReport prints an environment's delivery report: from the store's timeline, or as the App
// computes it (--api).
func runReport(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("report")
	c.interspersed = true
	c.str(&c.s.environment, "environment", "", "environment (or the first argument)")
	c.apiFlags()
	c.str(&c.s.since, "since", "30d", "how far back: the last N UTC days, today's included (30d), or a duration (720h)")
	if err := c.parse(args); err != nil {
		return err
	}
	if err := c.envArg(); err != nil {
		return err
	}
	since, err := report.ParseSince(c.s.since)
	if ie := (*authority.InputError)(nil); errors.As(err, &ie) {
		return c.badSetting("since", c.s.since, ie.Fix)
	}
	c.mode = storeReadOnly
	if err := c.connect(ctx); err != nil {
		return err
	}
	defer c.done()
	var d *report.Delivery
	if client, ok := c.view.(*apiclient.Client); ok {
		d, err = client.Report(ctx, c.s.environment, since)
	} else {
		// Status refuses an environment nothing was ever accepted for, and gives the commit times
		// of what the state still holds.
		state, serr := c.view.Status(ctx, c.s.environment)
		if serr != nil {
			return serr
		}
		d, err = report.ReadDelivery(ctx, c.view, c.s.environment, state, since, c.view.Now())
	}
	if err != nil {
		return err
	}
	if c.s.jsonOut {
		return c.printJSON(d)
	}
	return report.DeliveryText(c.io.Stdout, d)
}
