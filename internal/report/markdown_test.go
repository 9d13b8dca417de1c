package report

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// reconciling is a staging environment in the middle of things: api deployed by generation 7 with
// generation 9 pending and its deploy lease held, web at a terminal error, worker never deployed.
func reconciling() *authority.Env {
	e := &authority.Env{Name: "staging", Desired: 9, Observed: 7, EventSeq: 14, Scopes: map[string]*authority.Scope{
		"api": {
			Owner:   9,
			Live:    &authority.Live{Sha: "aaaa111bbbb222cccc333dddd444eeee555ffff6", Generation: 7, Token: 4, At: t0.Add(-90 * time.Second)},
			Mailbox: &authority.Ref{Generation: 9, Sha: "9999999aaaabbbbccccddddeeeeffff000011112", Attempt: 1},
			Lease: authority.Lease{Holder: "gha:acme/shop/1234/1/deploy", Purpose: "deploy", Generation: 9, Token: 5,
				AcquiredAt: t0.Add(-20 * time.Second), ExpiresAt: t0.Add(100 * time.Second)},
		},
		"web": {
			Owner:   8,
			Failure: &authority.Failure{Generation: 8, Sha: "8888888", Message: "deploy.sh: exit status 1 | <b>not html</b>\nsecond line", At: t0.Add(-time.Minute)},
			Lease:   authority.Lease{Token: 3},
		},
		"worker": {Mailbox: &authority.Ref{Generation: 6, Sha: "6666666"}},
	}}
	kinds := []authority.EventKind{authority.EventAccepted, authority.EventClaimed, authority.EventSuperseded, authority.EventLeased, authority.EventDeployed}
	for i := int64(1); i <= 14; i++ {
		e.Events = append(e.Events, authority.Event{Seq: i, At: t0.Add(time.Duration(i-15) * 10 * time.Second),
			Kind: kinds[i%int64(len(kinds))], Scope: []string{"api", "web", ""}[i%3], Generation: (i + 1) / 2,
			Message: fmt.Sprintf("event %d | with a pipe", i)})
	}
	return e
}

func settled() *authority.Env {
	return &authority.Env{Name: "preview/pr-803", Desired: 3, Observed: 3, Scopes: map[string]*authority.Scope{
		"api": {Owner: 3, Live: &authority.Live{Sha: "c0ffee0", Generation: 3, Token: 2, At: t0.Add(-5 * time.Second)},
			Lease: authority.Lease{Token: 2}},
	}, Events: []authority.Event{{Seq: 1, At: t0.Add(-9 * time.Second), Kind: authority.EventDeployed, Scope: "api", Generation: 3, Message: "Generation 3 deployed c0ffee0"}}}
}

func TestJobSummaryGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		s    Summary
	}{
		{"summary-reconciling", Summary{Env: reconciling(), Now: t0, Headline: "Generation 9 is waiting for the api lease.", Events: 5}},
		{"summary-settled", Summary{Env: settled(), Now: t0, Headline: "Generation 3 deployed api."}},
		{"summary-all-events", Summary{Env: reconciling(), Now: t0, Events: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := JobSummary(&b, tt.s); err != nil {
				t.Fatal(err)
			}
			golden(t, tt.name+".md", b.String())
		})
	}
}

func TestMarkdownCellsStayInTheirColumn(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := StatusMarkdown(&b, reconciling(), t0, nil); err != nil {
		t.Fatal(err)
	}
	if err := TimelineMarkdown(&b, reconciling().Events); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		// Every row of both tables has its columns and nothing else: escaped pipes do not count.
		cols := strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") - 1
		if cols != 7 && cols != 6 {
			t.Errorf("row has %d columns: %s", cols, line)
		}
	}
	if strings.Contains(b.String(), "<b>") {
		t.Errorf("HTML from a message reached the Markdown:\n%s", b.String())
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/report -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got); run go test ./internal/report -update if the change is intended:\n%s", name, diff)
	}
}
