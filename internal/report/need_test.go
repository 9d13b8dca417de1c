package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// TestStatusTextRowsPutsWhatIsBehindFirst: an environment with more scopes than the rows asked for
// lists the stuck, failed, held and pending ones first, whatever their names, then settled ones up
// to the count, and one line says how many more there are in each state; within the count, or with
// 0, every scope is listed by name as before.
func TestStatusTextRowsPutsWhatIsBehindFirst(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	sha := func(i int) string { return fmt.Sprintf("%040x", i) }
	e := &authority.Env{Name: "staging", Desired: 60, Observed: 50, AlertAfter: 30 * time.Minute, Scopes: map[string]*authority.Scope{}}
	for i := range 50 {
		e.Scopes[fmt.Sprintf("svc-%02d", i)] = &authority.Scope{Owner: int64(i + 1), Live: &authority.Live{Sha: sha(i), Generation: int64(i + 1), At: now.Add(-time.Hour)}}
	}
	// svc-49 is stuck: pending for two hours, nothing running; svc-48 failed; svc-47 is on its way.
	e.Scopes["svc-49"].Mailbox = &authority.Ref{Generation: 58, Sha: sha(58), IntentID: "p58", At: now.Add(-2 * time.Hour)}
	e.Scopes["svc-48"].Failure = &authority.Failure{Generation: 59, Sha: sha(59), Message: "deploy.sh exited 1", At: now.Add(-time.Minute)}
	e.Scopes["svc-47"].Mailbox = &authority.Ref{Generation: 60, Sha: sha(60), IntentID: "p60", At: now.Add(-time.Minute)}

	var b bytes.Buffer
	if err := StatusTextRows(&b, e, now, 5); err != nil {
		t.Fatal(err)
	}
	var scopes []string
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], "svc-") {
			scopes = append(scopes, f[0])
		}
	}
	if want := []string{"svc-49", "svc-48", "svc-47", "svc-00", "svc-01"}; strings.Join(scopes, " ") != strings.Join(want, " ") {
		t.Errorf("rows listed: %v; want %v (stuck, failed, pending, then settled by name)\n%s", scopes, want, b.String())
	}
	if !strings.Contains(b.String(), "... and 45 more scopes (45 settled), listed by need: latestwins status staging --rows 0 lists every one") {
		t.Errorf("no summary of the other 45 scopes:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "stuck: svc-49:") {
		t.Errorf("the stuck scope's lateness is not said:\n%s", b.String())
	}

	b.Reset()
	if err := StatusTextRows(&b, e, now, 0); err != nil {
		t.Fatal(err)
	}
	var all bytes.Buffer
	if err := StatusText(&all, e, now); err != nil {
		t.Fatal(err)
	}
	if b.String() != all.String() || strings.Count(b.String(), "svc-") < 50 || strings.Contains(b.String(), "more scopes") {
		t.Errorf("with 0 rows: want every scope by name, as StatusText:\n%s", b.String())
	}
}
