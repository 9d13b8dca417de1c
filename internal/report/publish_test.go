package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

const runURL = "https://github.com/acme/shop/actions/runs/1234"

// raced is staging after the A -> B -> C race: C (generation 3) deployed api, A and B superseded.
func raced() *authority.Env {
	c := "cccccccccccccccccccccccccccccccccccccccc"
	return &authority.Env{Name: "staging", Desired: 3, Observed: 3, EventSeq: 4, Scopes: map[string]*authority.Scope{
		"api": {Owner: 3, Live: &authority.Live{Sha: c, Generation: 3, Token: 1, At: t0.Add(-3 * time.Second), Run: runURL},
			Lease: authority.Lease{Token: 1}},
	}, Events: []authority.Event{
		{Seq: 1, At: t0.Add(-30 * time.Second), Kind: authority.EventAccepted, Scope: "api", Generation: 1, Message: "Accepted aaaaaaa"},
		{Seq: 2, At: t0.Add(-20 * time.Second), Kind: authority.EventSuperseded, Scope: "api", Generation: 1, Message: "Superseded by generation 2 (bbbbbbb)"},
		{Seq: 3, At: t0.Add(-3 * time.Second), Kind: authority.EventDeployed, Scope: "api", Generation: 3, Message: "Deployed ccccccc (generation 3)"},
		{Seq: 4, At: t0.Add(-time.Second), Kind: authority.EventStopped, Scope: "api", Generation: 1, Message: "Pass 1 ended without publishing"},
	}}
}

func publications() []struct {
	name string
	p    Publication
} {
	a := "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	return []struct {
		name string
		p    Publication
	}{
		{"deployed", Publication{Env: raced(), Now: t0, Pass: Pass{Generation: 3, Scopes: []string{"api"}, Sha: "cccccccccccccccccccccccccccccccccccccccc", RunURL: runURL, Outcome: OutcomeDeployed}}},
		// The step saw generation 2 supersede it; the store knows that 3 is live since.
		{"superseded", Publication{Env: raced(), Now: t0, Pass: Pass{Generation: 1, Scopes: []string{"api"}, Sha: a, RunURL: runURL, Outcome: OutcomeSuperseded, By: 2, BySha: "bbbbbbb"}}},
		{"deployed-then-superseded", Publication{Env: reconciling(), Now: t0, Pass: Pass{Generation: 7, Scopes: []string{"api"}, Sha: "aaaa111bbbb222cccc333dddd444eeee555ffff6", Outcome: OutcomeDeployed}}},
		{"claimed", Publication{Env: reconciling(), Now: t0, Pass: Pass{Generation: 9, Scopes: []string{"api"}, Sha: "9999999aaaabbbbccccddddeeeeffff000011112", RunURL: runURL, Outcome: OutcomeClaimed}}},
		{"authorized", Publication{Env: reconciling(), Now: t0, Pass: Pass{Generation: 9, Scopes: []string{"api"}, Sha: "9999999aaaabbbbccccddddeeeeffff000011112", Phase: "deploy", Outcome: OutcomeAuthorized}}},
		{"retry", Publication{Env: reconciling(), Now: t0, Pass: Pass{Generation: 9, Scopes: []string{"api"}, Sha: "9999999", Outcome: OutcomeRetry,
			Detail: "Generation 9 failed on attempt 1 of 3; re-run the job to retry."}}},
		{"lost", Publication{Env: reconciling(), Now: t0, Pass: Pass{Generation: 9, Scopes: []string{"api"}, Sha: "9999999", Outcome: OutcomeLost,
			Detail: "The lease was lost while working: retryable infrastructure loss; nothing terminal was published."}}},
		{"failed", Publication{Env: reconciling(), Now: t0, Pass: Pass{Generation: 8, Scopes: []string{"web"}, Sha: "8888888", Outcome: OutcomeFailed,
			Detail: "Generation 8 failed on its final attempt (3 of 3); the error is recorded."}, Events: 2}},
		{"invalid", Publication{Env: settled(), Now: t0, Pass: Pass{Generation: 3, Scopes: []string{"api"}, Sha: "c0ffee0", Outcome: OutcomeInvalid,
			Detail: "cannot start | <script>: not found"}}},
	}
}

func TestCommentGolden(t *testing.T) {
	t.Parallel()
	for _, tt := range publications() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := Comment(&b, tt.p); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(b.String(), CommentMarker(tt.p.Env.Name)+"\n") {
				t.Errorf("the comment does not start with its marker:\n%s", b.String())
			}
			golden(t, "comment-"+tt.name+".golden.md", b.String())
		})
	}
}

func TestCheckRunGolden(t *testing.T) {
	t.Parallel()
	for _, tt := range publications() {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := CheckRun(tt.p)
			golden(t, "check-"+tt.name+".golden.md", fmt.Sprintf("status: %s\nconclusion: %s\ntitle: %s\n\n%s", c.Status, c.Conclusion, c.Title, c.Summary))
		})
	}
}

// TestCheckRunConclusions: grey for superseded, red only for terminal errors, never for a lease loss
// or a non-final attempt.
func TestCheckRunConclusions(t *testing.T) {
	t.Parallel()
	got := map[string][2]string{}
	for _, tt := range publications() {
		c := CheckRun(tt.p)
		got[tt.name] = [2]string{c.Status, c.Conclusion}
	}
	want := map[string][2]string{
		"deployed":                 {"completed", "success"},
		"superseded":               {"completed", "neutral"},
		"deployed-then-superseded": {"completed", "success"},
		"claimed":                  {"in_progress", ""},
		"authorized":               {"in_progress", ""},
		"retry":                    {"in_progress", ""},
		"lost":                     {"in_progress", ""},
		"failed":                   {"completed", "failure"},
		"invalid":                  {"completed", "failure"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status and conclusion (-want +got):\n%s", diff)
	}
}

func TestSuperseder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     *authority.Env
		gen     int64
		scopes  []string
		wantGen int64
		wantSha string
	}{
		{"live newer", raced(), 1, []string{"api"}, 3, "cccccccccccccccccccccccccccccccccccccccc"},
		{"still the newest", raced(), 3, []string{"api"}, 0, ""},
		{"pending newer than live", reconciling(), 7, []string{"api"}, 9, "9999999aaaabbbbccccddddeeeeffff000011112"},
		{"owner without a commit", reconciling(), 7, []string{"web"}, 8, ""},
		{"unknown scope", raced(), 1, []string{"nope"}, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gen, sha := Superseder(tt.env, tt.gen, tt.scopes)
			if diff := cmp.Diff([]any{tt.wantGen, tt.wantSha}, []any{gen, sha}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
