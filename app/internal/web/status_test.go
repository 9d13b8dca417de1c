package web

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// TestLargeEnvironmentListsWhatIsBehindFirst: on the status page an environment of more scopes than
// a screen lists the stuck one first, and says how many scopes are in each state; a small one keeps
// its rows by name and says nothing of the kind.
func TestLargeEnvironmentListsWhatIsBehindFirst(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	env := func(n int) *authority.Env {
		e := &authority.Env{Name: "staging", Desired: int64(n + 1), Observed: int64(n), AlertAfter: 30 * time.Minute, Scopes: map[string]*authority.Scope{}}
		for i := range n {
			e.Scopes[fmt.Sprintf("svc-%02d", i)] = &authority.Scope{Owner: int64(i + 1), Live: &authority.Live{Sha: fmt.Sprintf("%040x", i), Generation: int64(i + 1), At: now.Add(-time.Hour)}}
		}
		last := fmt.Sprintf("svc-%02d", n-1)
		e.Scopes[last].Mailbox = &authority.Ref{Generation: int64(n + 1), Sha: fmt.Sprintf("%040x", n+1), IntentID: "late", At: now.Add(-2 * time.Hour)}
		return e
	}
	render := func(e *authority.Env) string {
		var b bytes.Buffer
		if err := statusPage.Execute(&b, &pageData{Now: now, Environments: []envView{viewOf(e, now, nil, nil)}}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	page := render(env(45))
	first := strings.Index(page, "<td>svc-")
	if first < 0 || !strings.HasPrefix(page[first:], "<td>svc-44</td>") {
		t.Errorf("the first row of 45 scopes is not the stuck svc-44: %.80q", page[max(first, 0):])
	}
	if !strings.Contains(page, `id="needs-staging">45 scopes: 1 stuck, 44 settled, listed by need`) {
		t.Errorf("the page does not count the 45 scopes by need")
	}
	page = render(env(5))
	if first := strings.Index(page, "<td>svc-"); first < 0 || !strings.HasPrefix(page[first:], "<td>svc-00</td>") || strings.Contains(page, "listed by need") {
		t.Errorf("a small environment is not listed by name as before")
	}
}
