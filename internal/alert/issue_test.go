package alert

import (
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/report"
)

// An issue's words come from stored text (lease holders, scope rows): they never mention anyone,
// link or format, and the title names the worst state and every late scope.
func TestIssueWordsAreInert(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := now.Add(-40 * time.Minute)
	e := &authority.Env{Name: "prod", Desired: 2, AlertAfter: 30 * time.Minute, Scopes: map[string]*authority.Scope{
		"api": {Owner: 1, Mailbox: &authority.Ref{Generation: 1, Sha: "aaaaaaa", At: at},
			Lease: authority.Lease{Holder: "@octocat [x](https://evil.example) **run**", Generation: 1, Token: 1, ExpiresAt: now.Add(time.Minute)}},
		"web": {Mailbox: &authority.Ref{Generation: 2, Sha: "bbbbbbb", At: at}},
	}}
	st := report.NewStatus(e, now)
	late := lateScopes(st)
	ce := &config.Environment{Name: "prod", AlertAfter: 30 * time.Minute}
	body := issueBody(ce, st, late)
	for _, bad := range []string{"@octocat", "[x](", "**run**"} {
		if strings.Contains(body, bad) {
			t.Errorf("the body holds %q:\n%s", bad, body)
		}
	}
	if !strings.Contains(body, "behind 40m (alert after 30m)") || !strings.Contains(body, "stuck 40m") {
		t.Errorf("the body does not say each late scope:\n%s", body)
	}
	if got, want := issueTitle("prod", late), "latestwins: prod is stuck (api, web)"; got != want {
		t.Errorf("title %q; want %q", got, want)
	}
	if got := issueBody(ce, st, nil); !strings.HasPrefix(got, "Recovered:") {
		t.Errorf("the recovery's body: %q", got)
	}
}
