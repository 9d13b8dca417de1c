package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// DeliveryText writes a delivery report as a table: a row for the environment as a whole, then one
// per scope, and what the lead times are measured from.
func DeliveryText(w io.Writer, d *Delivery) error {
	last := d.Until.Format("2006-01-02 15:04 MST")
	if _, err := fmt.Fprintf(w, "%s  delivery over %d day(s), %s to %s\n", Escape(d.Environment), d.Days, d.Since.Format("2006-01-02"), last); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tDEPLOYS\tPER DAY\tCOMMITS/DEPLOY\tLEAD P50\tLEAD P90\tFROM COMMIT P50\tP90\tCHANGE FAILURE\tRESTORE P50\tP90\tBEHIND")
	rows := append([]Figures{d.Total}, d.Scopes...)
	for i, f := range rows {
		name := Escape(f.Scope)
		if i == 0 {
			name = "(all)"
		}
		commit := "-"
		if f.LeadFromCommit.Count > 0 {
			commit = fmt.Sprintf("%s (%d of %d)", Approx(f.LeadFromCommit.P50()), f.LeadFromCommit.Count, f.Commits)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, f.Deploys, f.DeploysPerDay, ratio(f.CommitsPerDeploy, f.Deploys),
			quantileText(f.LeadFromAccept.P50(), f.LeadFromAccept.Count), quantileText(f.LeadFromAccept.P90(), f.LeadFromAccept.Count),
			commit, quantileText(f.LeadFromCommit.P90(), f.LeadFromCommit.Count),
			failureText(f), quantileText(f.Restore.P50(), f.Restore.Count), quantileText(f.Restore.P90(), f.Restore.Count),
			fmt.Sprintf("%s (%.0f%%)", Duration(seconds(f.BehindSeconds)), 100*f.BehindShare))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "Lead time runs to live from the push's acceptance, and from the commit's own time where GitHub told it (FROM COMMIT: of how many commits);\n"+
		"change failures are terminal failures and rollbacks per deploy; restore runs from a change failure to the next deploy;\n"+
		"behind is the time some accepted commit waited to go live. Quantiles are within %.1f%%; the last day is partial.\n", 100*d.QuantileError)
	return err
}

func quantileText(d time.Duration, n uint64) string {
	if n == 0 {
		return "-"
	}
	return Approx(d)
}

// Approx is a quantile for people: rounded, not truncated, to the unit Duration shows, since the
// quantile itself is the middle of a bucket (19m58s is 20m).
func Approx(d time.Duration) string {
	if d >= time.Minute {
		d = d.Round(time.Minute)
	}
	return Duration(d)
}

func ratio(v float64, deploys int) string {
	if deploys == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func failureText(f Figures) string {
	if f.Deploys == 0 && f.Failures+f.Rollbacks == 0 {
		return "-"
	}
	rate := "-"
	if f.Deploys > 0 {
		rate = fmt.Sprintf("%.0f%%", 100*f.ChangeFailureRate)
	}
	return fmt.Sprintf("%s (%d failed, %d rolled back)", rate, f.Failures, f.Rollbacks)
}
