package cli

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/alert"
	"github.com/latestwins/latestwins/internal/authority"
)

// runSweep is one pass of the recovery sweep. With a command after --, every stalled piece of work
// is re-driven by running it (with LATESTWINS_ENVIRONMENT, _GENERATION, _SCOPES and _ATTEMPT set, and
// LATESTWINS_ORIGIN: how the intent's maker starts it again, e.g. the Action's gha:OWNER/REPO/PATH@REF,
// the workflow that claimed it; a non-zero exit counts as a failed dispatch and costs no attempt).
// Without one, it only lists what a sweep would re-drive and re-drives nothing. The App re-drives
// by dispatching the configured workflow. With a trusted configuration (--config, or the App's
// credentials to read it from GitHub), the sweep then tells the convergence alarms as serve's and
// the Lambda's sweeps do, dry run or not: telling is not re-driving.
func runSweep(ctx context.Context, c *cmdEnv, args []string) error {
	c.newFlags("sweep")
	var ts trustedSettings
	c.trustedFlags(&ts, "; with it (or the App's credentials), the sweep also tells the environments' convergence alarms")
	c.durVar(&c.s.stall, "stall", 10*time.Minute, "how long pending work may sit idle with no live lease before it is re-driven")
	c.intVar(&c.s.maxAttempts, "max-attempts", 3, 1, "re-drives of one intent before it ends with a terminal error")
	c.durVar(&c.s.skew, "lease-skew", authority.DefaultSkew, "margin past a lease's expiry before it counts as expired")
	if err := c.parse(args); err != nil {
		return err
	}
	argv, err := c.command()
	if err != nil {
		return err
	}
	inst, err := ts.check(ctx)
	if err != nil {
		return err
	}
	c.mode = storeMustExist
	if err := c.open(ctx); err != nil {
		return err
	}
	defer c.done()
	var alarms *alert.Notifier
	if ts.hasSource(inst) {
		src, gh, err := c.trustedSource(&ts, inst, c.log)
		if err != nil {
			return err
		}
		if alarms, err = c.notifier(&ts, src, gh, "sweep@"+hostname(), c.log); err != nil {
			return err
		}
	}
	stall := c.s.stall
	if len(argv) == 0 {
		work, exhausted, err := c.auth.Stalled(ctx, stall, c.s.maxAttempts)
		if err != nil {
			return err
		}
		told, alarmErr := alarms.Tell(ctx)
		if c.s.jsonOut {
			out := map[string]any{"dry_run": true, "would_redrive": orEmpty(work), "would_end": orEmpty(exhausted)}
			if told != nil {
				out["alarms"] = told
			}
			if err := c.printJSON(out); err != nil {
				return err
			}
		} else {
			for _, w := range work {
				c.printf("would re-drive %s generation %d (%s), attempt %d\n", w.Environment, w.Generation, strings.Join(w.Scopes, ","), w.Attempt)
			}
			for _, w := range exhausted {
				c.printf("would end %s/%s with a terminal error: %d attempts used\n", w.Environment, w.Scopes[0], w.Attempt)
			}
			c.printAlarms(told)
			c.printf("dry run: %d to re-drive, %d to end; give a command after -- to re-drive\n", len(work), len(exhausted))
		}
		return alarmsFailed(told, alarmErr)
	}
	rep, err := c.auth.Sweep(ctx, stall, c.s.maxAttempts, func(ctx context.Context, w authority.StalledWork) error {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = c.io.Stderr, c.io.Stderr
		cmd.Env = append(os.Environ(),
			"LATESTWINS_ENVIRONMENT="+w.Environment,
			fmt.Sprintf("LATESTWINS_GENERATION=%d", w.Generation),
			"LATESTWINS_SCOPES="+strings.Join(w.Scopes, ","),
			fmt.Sprintf("LATESTWINS_ATTEMPT=%d", w.Attempt),
			"LATESTWINS_ORIGIN="+workOrigin(w))
		return cmd.Run()
	})
	if err != nil {
		return err
	}
	// After the re-drives, so that a slow alarm receiver never holds them up.
	told, alarmErr := alarms.Tell(ctx)
	if c.s.jsonOut {
		if err := c.printJSON(sweepOutput{SweepReport: rep, Alarms: told}); err != nil {
			return err
		}
	} else {
		for _, w := range rep.Redriven {
			c.printf("re-drove %s generation %d (%s), attempt %d\n", w.Environment, w.Generation, strings.Join(w.Scopes, ","), w.Attempt)
		}
		for _, w := range rep.Exhausted {
			c.printf("ended %s/%s with a terminal error after %d attempts\n", w.Environment, w.Scopes[0], w.Attempt)
		}
		for env, why := range rep.Failed {
			c.printf("%s: %s\n", env, why)
		}
		if rep.Expired > 0 {
			c.printf("deleted %d records past the retention\n", rep.Expired)
		}
		c.printAlarms(told)
	}
	if len(rep.Failed) > 0 {
		return &exitError{code: ExitError, msg: fmt.Sprintf("%d environment(s) could not be re-driven; the next sweep retries", len(rep.Failed))}
	}
	return alarmsFailed(told, alarmErr)
}

// sweepOutput is sweep's --json: the sweep's report, and what the alarms told when a trusted
// configuration was given.
type sweepOutput struct {
	*authority.SweepReport
	Alarms *alert.Report `json:"alarms,omitempty"`
}

// printAlarms says what the alarms told and what they could not.
func (c *cmdEnv) printAlarms(rep *alert.Report) {
	if rep == nil {
		return
	}
	for _, t := range rep.Told {
		var to []string
		if t.Webhook {
			to = append(to, "alert-webhook")
		}
		if t.Issue != 0 {
			to = append(to, fmt.Sprintf("alert-issue #%d", t.Issue))
		}
		scopes := ""
		if len(t.Scopes) > 0 {
			scopes = " (" + strings.Join(t.Scopes, ",") + ")"
		}
		c.printf("alarm: told %s %s%s to %s\n", t.Environment, t.Event, scopes, strings.Join(to, " and "))
	}
	for _, env := range slices.Sorted(maps.Keys(rep.Failed)) {
		c.printf("alarm of %s not told: %s\n", env, rep.Failed[env])
	}
}

// alarmsFailed is the sweep's error when an alarm could not be told: the trusted configuration
// could not be read, or a channel failed (the next sweep tries again).
func alarmsFailed(rep *alert.Report, err error) error {
	switch {
	case err != nil:
		return err
	case rep != nil && len(rep.Failed) > 0:
		return &exitError{code: ExitError, msg: fmt.Sprintf("the alarms of %d environment(s) could not be told; the next sweep tries again", len(rep.Failed))}
	}
	return nil
}

// workOrigin is the origin the work's scopes share ("" when none has one, or they differ: one
// generation is one intent, so they do not).
func workOrigin(w authority.StalledWork) string {
	origin := ""
	for i, s := range w.Scopes {
		if o := w.Origins[s]; i == 0 {
			origin = o
		} else if o != origin {
			return ""
		}
	}
	return origin
}

func orEmpty(w []authority.StalledWork) []authority.StalledWork {
	if w == nil {
		return []authority.StalledWork{}
	}
	return w
}
