package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// DefaultSummaryEvents is how many of the newest timeline events a job summary shows.
const DefaultSummaryEvents = 10

// Summary is what a job summary shows: an environment's current state as read from the store, and
// one line about the step that wrote it.
type Summary struct {
	Env *authority.Env
	// Required is the states of the environments Env requires (Publication.Required); nil: not known.
	Required map[string]*authority.Env
	Now      time.Time
	Headline string // what this step did, e.g. "Generation 9 deployed api."
	Events   int    // newest timeline events to show (0: DefaultSummaryEvents)
}

// JobSummary writes a job summary as GitHub-flavoured Markdown: a heading, the headline, the status
// table and an excerpt of the timeline, newest last.
func JobSummary(w io.Writer, s Summary) error {
	e := s.Env
	st := NewStatusWith(e, s.Now, s.Required)
	var b strings.Builder
	fmt.Fprintf(&b, "### latestwins: %s\n\n", cell(e.Name))
	if s.Headline != "" {
		fmt.Fprintf(&b, "%s\n\n", Escape(s.Headline))
	}
	writeStatusLine(&b, st)
	writeStatusTable(&b, st)
	n := s.Events
	if n <= 0 {
		n = DefaultSummaryEvents
	}
	events := e.Events
	if len(events) > n {
		events = events[len(events)-n:]
	}
	if len(events) > 0 {
		fmt.Fprintf(&b, "\n<details><summary>Timeline (newest %d of %d kept)</summary>\n\n", len(events), len(e.Events))
		writeTimelineTable(&b, events)
		b.WriteString("\n</details>\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// StatusMarkdown writes an environment's status table as Markdown: one row per scope with its live
// commit, pending work with each intent's place (and, given the states of the environments e
// requires, what the head waits for there), owner and lease. required nil: not known.
func StatusMarkdown(w io.Writer, e *authority.Env, now time.Time, required map[string]*authority.Env) error {
	return StatusMarkdownFor(w, e, now, required, nil)
}

// StatusMarkdownFor is StatusMarkdown for a reader: what the rows say of the environments e
// requires is worded as the viewer may read it (Viewer.Status).
func StatusMarkdownFor(w io.Writer, e *authority.Env, now time.Time, required map[string]*authority.Env, v Viewer) error {
	var b strings.Builder
	writeStatusTable(&b, v.Status(NewStatusWith(e, now, required)))
	_, err := io.WriteString(w, b.String())
	return err
}

// TimelineMarkdown writes events, oldest first, as a Markdown table.
func TimelineMarkdown(w io.Writer, events []authority.Event) error {
	var b strings.Builder
	writeTimelineTable(&b, events)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeStatusTable(b *strings.Builder, st *Status) {
	b.WriteString("| scope | live | generation | deployed | pending | owner | lease |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range st.Rows {
		live, gen, at := "-", "-", "-"
		if l := r.Live; l != nil {
			live, gen, at = code(l.Short), fmt.Sprint(l.Generation), l.Ago
		}
		pending := r.pendingCell(markdownCell)
		if f := r.Failure; f != nil && r.Head() == nil {
			pending = fmt.Sprintf("**error** (generation %d): %s", f.Generation, cell(oneLine(f.Message, 120)))
		}
		owner := "-"
		if r.Owner > 0 {
			owner = fmt.Sprint(r.Owner)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", cell(r.Scope), live, gen, at, pending, owner, cell(r.Lease.text()))
	}
	for _, r := range st.Rows {
		if r.Late != "" {
			fmt.Fprintf(b, "\n> [!CAUTION]\n> %s: %s\n", cell(r.Scope), cell(r.Late))
		}
	}
	for _, r := range st.Rows {
		if r.Warning != "" {
			fmt.Fprintf(b, "\n> [!WARNING]\n> %s: %s\n", cell(r.Scope), cell(r.Warning))
		}
	}
}

// writeStatusLine writes observed/desired, whether the environment is settled, and its policy
// unless it is latest.
func writeStatusLine(b *strings.Builder, st *Status) {
	fmt.Fprintf(b, "**%d/%d** %s (observed/desired generation)", st.Observed, st.Desired, st.State())
	if p := st.PolicyNote(); p != "" {
		fmt.Fprintf(b, ", policy **%s**", cell(p))
	}
	b.WriteString("\n\n")
}

func writeTimelineTable(b *strings.Builder, events []authority.Event) {
	b.WriteString("| time (UTC) | # | event | scope | generation | message |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	for _, ev := range events {
		scope, gen := "-", "-"
		if ev.Scope != "" {
			scope = cell(ev.Scope)
		}
		if ev.Generation > 0 {
			gen = fmt.Sprint(ev.Generation)
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s |\n", ev.At.UTC().Format("15:04:05"), ev.Seq, cell(string(ev.Kind)), scope, gen, cell(oneLine(ev.Message, 200)))
	}
}

// cell makes text safe inside a Markdown table cell: control characters escaped (Escape), so no
// line breaks; no column separators, no HTML, and backslashes shown as they are.
func cell(s string) string {
	return cellReplacer.Replace(strings.Join(strings.Fields(Escape(s)), " "))
}

var cellReplacer = strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", "&lt;", ">", "&gt;", "`", "'")

func code(s string) string { return "`" + strings.ReplaceAll(Escape(s), "`", "'") + "`" }
