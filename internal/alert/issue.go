package alert

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/report"
)

// issue brings ce's alarm issue in line with late: opens it when a scope became late and none is
// open, comments when the late scopes changed, and closes it on the recovery. next gets what the
// issue now says.
func (n *Notifier) issue(ctx context.Context, ce *config.Environment, st *report.Status, next *authority.Alarm, late []authority.AlarmScope) error {
	if n.o.Issues == nil {
		return fmt.Errorf("alert-issue of %s: no GitHub App credentials, so no issue can be kept in %s", ce.Name, ce.AlertIssue)
	}
	body := issueBody(ce, st, late)
	switch {
	case next.IssueNumber == 0:
		num, err := n.o.Issues.Open(ctx, ce.AlertIssue, issueTitle(ce.Name, late), body)
		if err != nil {
			return fmt.Errorf("alert-issue of %s: %w", ce.Name, err)
		}
		next.IssueNumber, next.IssueRepo = num, ce.AlertIssue
		n.o.Log.InfoContext(ctx, "alarm issue opened", "environment", ce.Name, "repo", ce.AlertIssue, "issue", num)
	case len(late) == 0:
		repo := cmp.Or(next.IssueRepo, ce.AlertIssue)
		if err := n.o.Issues.Close(ctx, repo, next.IssueNumber, body); err != nil {
			return fmt.Errorf("alert-issue of %s: %w", ce.Name, err)
		}
		n.o.Log.InfoContext(ctx, "alarm issue closed", "environment", ce.Name, "repo", repo, "issue", next.IssueNumber)
		next.IssueNumber, next.IssueRepo = 0, ""
	default:
		repo := cmp.Or(next.IssueRepo, ce.AlertIssue)
		if err := n.o.Issues.Comment(ctx, repo, next.IssueNumber, body); err != nil {
			return fmt.Errorf("alert-issue of %s: %w", ce.Name, err)
		}
		n.o.Log.InfoContext(ctx, "alarm issue updated", "environment", ce.Name, "repo", repo, "issue", next.IssueNumber)
	}
	next.Issue = late
	return nil
}

// issueTitle names the environment's alarm.
func issueTitle(env string, late []authority.AlarmScope) string {
	return fmt.Sprintf("latestwins: %s is %s (%s)", env, worst(late), scopeNames(late))
}

// issueBody says what is late and for how long, each scope as its status row says it, and how to
// see more; on the recovery, that every scope caught up.
func issueBody(ce *config.Environment, st *report.Status, late []authority.AlarmScope) string {
	var b strings.Builder
	if len(late) == 0 {
		fmt.Fprintf(&b, "Recovered: every scope of **%s** has its newest accepted commit live, or is waiting less than alert-after (%s).\n", escape(ce.Name), report.Duration(ce.AlertAfter))
		return b.String()
	}
	fmt.Fprintf(&b, "**%s** has scopes that have waited longer than alert-after (%s) for their newest accepted commit:\n\n", escape(ce.Name), report.Duration(ce.AlertAfter))
	for _, r := range rowsOf(st, late) {
		fmt.Fprintf(&b, "- **%s**: %s\n", escape(r.Scope), escape(r.Late))
	}
	fmt.Fprintf(&b, "\n`latestwins status %s` shows the whole environment. latestwins closes this issue once every scope caught up.\n", ce.Name)
	return b.String()
}

// escape keeps stored text from becoming Markdown or mentions in an issue.
func escape(s string) string {
	return mdReplacer.Replace(report.Escape(s))
}

var mdReplacer = strings.NewReplacer(`\`, `\\`, "*", `\*`, "_", `\_`, "`", "'", "<", "&lt;", ">", "&gt;", "@", "@\u200b", "[", `\[`, "]", `\]`, "#", `\#`)
