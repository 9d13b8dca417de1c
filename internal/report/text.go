// Package report renders authoritative state for people: status tables and timelines as plain text
// for terminals and logs, and Markdown for job summaries, sticky PR comments and check runs.
package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/latestwins/latestwins/internal/authority"
)

// StatusText writes an environment's status table: observed/desired (and the policy unless it is
// latest), then one row per scope with its live commit, pending work with each intent's place,
// owner and lease. Text from users is escaped (Escape).
func StatusText(w io.Writer, e *authority.Env, now time.Time) error {
	return writeStatusText(w, NewStatus(e, now))
}

// writeStatusText writes st as StatusText does, a row per st.Rows.
func writeStatusText(w io.Writer, st *Status) error {
	policy := ""
	if p := st.PolicyNote(); p != "" {
		policy = "  policy " + Escape(p)
	}
	if _, err := fmt.Fprintf(w, "%s  %d/%d %s%s\n", Escape(st.Name), st.Observed, st.Desired, st.State(), policy); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tLIVE\tGEN\tDEPLOYED\tPENDING\tOWNER\tLEASE")
	for _, r := range st.Rows {
		live, gen, at := "-", "-", "-"
		if l := r.Live; l != nil {
			live, gen, at = Escape(l.Short), fmt.Sprint(l.Generation), l.Ago
		}
		pending := r.pendingCell(textCell)
		if f := r.Failure; f != nil && r.Head() == nil {
			pending = fmt.Sprintf("ERROR gen %d: %s", f.Generation, oneLine(f.Message, 48))
		}
		owner := "-"
		if r.Owner > 0 {
			owner = fmt.Sprint(r.Owner)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", Escape(r.Scope), live, gen, at, pending, owner, r.Lease.text())
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range st.Rows {
		if r.Late != "" {
			if _, err := fmt.Fprintf(w, "%s: %s: %s\n", r.Convergence.State, Escape(r.Scope), Escape(r.Late)); err != nil {
				return err
			}
		}
	}
	for _, r := range st.Rows {
		if r.Warning != "" {
			if _, err := fmt.Fprintf(w, "warning: %s: %s\n", Escape(r.Scope), Escape(r.Warning)); err != nil {
				return err
			}
		}
	}
	return nil
}

// LeaseText describes a lease in a few words, its holder and purpose escaped (Escape).
func LeaseText(l authority.Lease, now time.Time) string { return newLease(l, now).text() }

func (l Lease) text() string {
	if l.Holder == "" {
		return "free"
	}
	holder, purpose := Escape(l.Holder), Escape(l.Purpose)
	if !l.Held {
		return fmt.Sprintf("expired: %s by %s, token %d, expired %s ago", purpose, holder, l.Token, l.Left)
	}
	return fmt.Sprintf("%s by %s, token %d, %s left", purpose, holder, l.Token, l.Left)
}

// TimelineText writes events, oldest first, one per line; text from users is escaped (Escape), so
// an entry is always one line.
func TimelineText(w io.Writer, events []authority.Event) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, ev := range events {
		scope := ev.Scope
		if scope == "" {
			scope = "-"
		}
		gen := "-"
		if ev.Generation > 0 {
			gen = fmt.Sprint(ev.Generation)
		}
		fmt.Fprintf(tw, "%s\t#%d\t%s\t%s\tgen %s\t%s\n", ev.At.UTC().Format("15:04:05.000"), ev.Seq, Escape(string(ev.Kind)), Escape(scope), gen, Escape(ev.Message))
	}
	return tw.Flush()
}

// ShortSha is the seven-character form of a commit sha people read.
func ShortSha(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// Ago says how long before now t was, to the second; "-" for no time.
func Ago(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

// oneLine is s escaped (Escape), its runs of spaces collapsed, cut to at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(Escape(s)), " ")
	if utf8.RuneCountInString(s) > n {
		r := []rune(s)
		return string(r[:n-1]) + "…"
	}
	return s
}

// Waiting is the publication's words for a pass that waits its turn: "queued: 3 ahead of this
// commit", "waiting for barrier abc1234", blocked by a failure, held by a freeze, or "waiting for
// staging: abc1234 is not live there yet"; "" when it does not wait.
func Waiting(held *authority.HeldError) string {
	if held == nil || held.Why() == authority.ReasonLocked {
		return ""
	}
	return Escape(authority.WaitText(held))
}

// FrozenText is the words for a rollback's freeze on a scope's row: the commit rolled back to, who
// and why, and the freeze's name (its rollback's generation), which an unfreeze must give.
func FrozenText(f *authority.Freeze) string {
	return fmt.Sprintf("frozen by the rollback to %s (%s: %s) until unfreeze (freeze %d)", ShortSha(f.Sha), orUnknown(f.Actor), f.Reason, f.Generation)
}
