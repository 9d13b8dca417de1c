package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// convergenceEnv is an environment with alert-after 30m, 42 minutes after its commits came: api
// is behind (a pass deploys it), web stuck (nothing runs), db stuck behind a promotion wait, docs
// still waiting and ops current.
func convergenceEnv(now time.Time) *authority.Env {
	at := now.Add(-42 * time.Minute)
	ref := func(gen int64, sha string) *authority.Ref {
		return &authority.Ref{Generation: gen, Sha: sha, At: at}
	}
	return &authority.Env{Name: "prod", Desired: 6, Observed: 1, AlertAfter: 30 * time.Minute,
		Requires: &authority.Requirements{Environments: []string{"staging"}},
		Scopes: map[string]*authority.Scope{
			"api": {Owner: 2, Mailbox: ref(2, "bbbbbbb2222222"), Lease: authority.Lease{Holder: "run-7", Purpose: "deploy", Generation: 2, Token: 4,
				Sha: "bbbbbbb2222222", ExpiresAt: now.Add(time.Minute)}},
			"web": {Owner: 3, Mailbox: ref(3, "ccccccc3333333"), Lease: authority.Lease{Holder: "run-8", Purpose: "deploy", Generation: 3, Token: 2,
				ExpiresAt: now.Add(-12 * time.Minute)}},
			"db":   {Mailbox: ref(4, "ddddddd4444444")},
			"docs": {Mailbox: &authority.Ref{Generation: 5, Sha: "eeeeeee5555555", At: now.Add(-5 * time.Minute)}},
			"ops":  {Live: &authority.Live{Sha: "aaaaaaa1111111", Generation: 1, At: at}},
		}}
}

func TestStatusRowsSayConvergence(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	e := convergenceEnv(now)
	required := map[string]*authority.Env{"staging": {Name: "staging", Scopes: map[string]*authority.Scope{
		"db": {Live: &authority.Live{Sha: "9999999000000", Generation: 9, At: now}}}}}
	st := NewStatusWith(e, now, required)
	want := map[string]struct {
		state authority.Convergence
		late  string
	}{
		"api":  {authority.ConvergenceBehind, "behind 42m (alert after 30m): a pass is deploying bbbbbbb (generation 2, run-7); it has not finished"},
		"web":  {authority.ConvergenceStuck, "stuck 42m (alert after 30m): nothing deploys ccccccc: waiting for staging: ccccccc is not live there yet"},
		"db":   {authority.ConvergenceStuck, "stuck 42m (alert after 30m): nothing deploys ddddddd: waiting for staging: ddddddd is not live there yet (9999999 is)"},
		"docs": {authority.ConvergenceWaiting, ""},
		"ops":  {authority.ConvergenceCurrent, ""},
	}
	for _, r := range st.Rows {
		w := want[r.Scope]
		if r.Convergence.State != w.state || r.Late != w.late {
			t.Errorf("%s: %s, %q; want %s, %q", r.Scope, r.Convergence.State, r.Late, w.state, w.late)
		}
	}
	// A reader who may not see staging reads the stuck row without staging's live commit.
	hidden := Viewer(func(env string) bool { return env != "staging" }).Status(NewStatusWith(e, now, required))
	for _, r := range hidden.Rows {
		if r.Scope == "db" && (strings.Contains(r.Late, "9999999") || !strings.Contains(r.Late, "waiting for staging")) {
			t.Errorf("the hidden reader's db row: %q", r.Late)
		}
	}
}

func TestStatusConvergenceGolden(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	e := convergenceEnv(now)
	e.Requires = nil
	var text, md bytes.Buffer
	if err := StatusText(&text, e, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-convergence.txt", text.String())
	if err := StatusMarkdown(&md, e, now, nil); err != nil {
		t.Fatal(err)
	}
	golden(t, "status-convergence.md", md.String())
}

func TestStatusWithoutAlertAfterSaysNothingNew(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	e := convergenceEnv(now)
	e.AlertAfter = 0
	var text bytes.Buffer
	if err := StatusText(&text, e, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "stuck") || strings.Contains(text.String(), "behind") {
		t.Fatalf("an environment without alert-after is judged:\n%s", text.String())
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0: "0s", 45 * time.Second: "45s", 59*time.Second + 600*time.Millisecond: "1m0s", time.Minute: "1m", 42*time.Minute + 59*time.Second: "42m",
		time.Hour: "1h", 65 * time.Minute: "1h5m", 50 * time.Hour: "50h",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%s) = %q; want %q", d, got, want)
		}
	}
}
