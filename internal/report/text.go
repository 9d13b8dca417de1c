// Package report renders authoritative state for people: status tables and timelines as plain text
// for terminals and logs, and Markdown for job summaries, sticky PR comments and check runs.
package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/latestwins/latestwins/internal/authority"
)

// StatusText writes an environment's status table: observed/desired, then one row per scope with
// its live commit, pending work, owner and lease. Text from users is escaped (Escape).
func StatusText(w io.Writer, e *authority.Env, now time.Time) error {
	state := "settled"
	if e.Observed < e.Desired {
		state = "reconciling"
	}
	policy := ""
	if p := e.PolicyOrDefault(); p != authority.PolicyLatest {
		policy = "  policy " + string(p)
	}
	if _, err := fmt.Fprintf(w, "%s  %d/%d %s%s\n", Escape(e.Name), e.Observed, e.Desired, state, policy); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tLIVE\tGEN\tDEPLOYED\tPENDING\tOWNER\tLEASE")
	names := make([]string, 0, len(e.Scopes))
	for n := range e.Scopes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := e.Scopes[n]
		live, gen, at := "-", "-", "-"
		if s.Live != nil {
			live, gen, at = Escape(ShortSha(s.Live.Sha)), fmt.Sprint(s.Live.Generation), Ago(now, s.Live.At)
		}
		pending := "-"
		if m := s.Mailbox; m != nil {
			pending = fmt.Sprintf("%s (gen %d)", Escape(ShortSha(m.Sha)), m.Generation)
			if m.Attempt > 0 {
				pending += fmt.Sprintf(", %d failed", m.Attempt)
			}
			pending += queueText(s, func(sha string) string { return Escape(ShortSha(sha)) })
		}
		if f := s.Failure; f != nil && s.Mailbox == nil {
			pending = fmt.Sprintf("ERROR gen %d: %s", f.Generation, oneLine(f.Message, 48))
		}
		owner := "-"
		if s.Owner > 0 {
			owner = fmt.Sprint(s.Owner)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", Escape(n), live, gen, at, pending, owner, LeaseText(s.Lease, now))
	}
	return tw.Flush()
}

// LeaseText describes a lease in a few words, its holder and purpose escaped (Escape).
func LeaseText(l authority.Lease, now time.Time) string {
	if l.Holder == "" {
		return "free"
	}
	holder, purpose := Escape(l.Holder), Escape(l.Purpose)
	left := l.ExpiresAt.Sub(now).Round(time.Second)
	if left <= 0 {
		return fmt.Sprintf("%s: %s by %s, token %d, expired %s ago", "expired", purpose, holder, l.Token, (-left).String())
	}
	return fmt.Sprintf("%s by %s, token %d, %s left", purpose, holder, l.Token, left)
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

// queueText says what more a scope's pending cell holds beyond its head: that the head is a
// barrier or failed and blocks, and the intents waiting behind it with their places.
func queueText(s *authority.Scope, sha func(string) string) string {
	var b strings.Builder
	if m := s.Mailbox; m != nil && m.Failed {
		b.WriteString(", FAILED: blocks until skip or retry")
	} else if m != nil && m.Barrier {
		b.WriteString(", barrier")
	}
	if len(s.Queue) > 0 {
		parts := make([]string, 0, len(s.Queue))
		for i, q := range s.Queue {
			parts = append(parts, fmt.Sprintf("%d. %s (gen %d)", i+2, sha(q.Sha), q.Generation))
		}
		fmt.Fprintf(&b, "; waiting: %s", strings.Join(parts, ", "))
	}
	return b.String()
}

// Waiting is the publication's words for a pass that waits its turn: "queued: 3 ahead of this
// commit", "waiting for barrier abc1234", or blocked by a failure; "" when it does not wait.
func Waiting(held *authority.HeldError) string {
	if held == nil || (held.Ahead == 0 && held.Barrier == "" && !held.Blocked && held.Frozen == nil) {
		return ""
	}
	return Escape(authority.WaitText(held))
}
