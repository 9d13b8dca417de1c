package action

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/report"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// The pull_request.synchronize example is pull request #2 of Codertocat/Hello-World.
const (
	repoPath     = "/repos/Codertocat/Hello-World"
	commentsPath = repoPath + "/issues/2/comments"
	token        = "ghs_publication_test"
)

// call is a request as a test expects it: method, path and decoded JSON body.
type call struct {
	Method, Path string
	Body         any
}

func calls(reqs []githubtest.Request) []call {
	out := make([]call, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, call{r.Method, r.Path, r.Body})
	}
	return out
}

// published is a world whose jobs publish to a strict fake GitHub, on a clock that stands still so
// that what they render is exactly what the test renders from the store.
type published struct {
	*world
	gh    *githubtest.Server
	clock *storetest.Clock
	seen  int // requests already asserted
}

func newPublished(t *testing.T) *published {
	t.Helper()
	return &published{world: newWorld(t), gh: githubtest.New(t), clock: storetest.NewClock(time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))}
}

// job starts a job that publishes through the production wiring: the github-token input and
// GITHUB_API_URL pointing at the fake.
func (p *published) job(name, runID, eventName, eventFile string, edit func(map[string]any)) *job {
	j := p.world.job(name, runID, eventName, eventFile, edit)
	j.vars["GITHUB_API_URL"] = p.gh.URL
	j.vars["INPUT_GITHUB-TOKEN"] = token
	return j
}

func (p *published) step(j *job, inputs map[string]string) stepResult {
	p.t.Helper()
	return j.step(inputs, Deps{Clock: p.clock})
}

// newCalls returns the requests made since the last call, and checks that each carried the token.
func (p *published) newCalls() []call {
	p.t.Helper()
	reqs := p.gh.Requests()[p.seen:]
	p.seen += len(reqs)
	for _, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer "+token {
			p.t.Errorf("%s %s: Authorization %q, want the github-token input", r.Method, r.Path, got)
		}
	}
	return calls(reqs)
}

// env reads the environment from the store, as the Action did just before it published.
func (p *published) env(name string) *authority.Env {
	p.t.Helper()
	st, closeFn, err := openBolt(context.Background(), p.store)
	if err != nil {
		p.t.Fatal(err)
	}
	defer closeFn()
	e, err := authority.New(st).Status(context.Background(), name)
	if err != nil {
		p.t.Fatal(err)
	}
	return e
}

// comment is the body the sticky comment must have: pass rendered from the store's current state.
func (p *published) comment(pass report.Pass) map[string]any {
	p.t.Helper()
	var b bytes.Buffer
	if err := report.Comment(&b, report.Publication{Env: p.env("staging"), Now: p.clock.Now(), Pass: pass}); err != nil {
		p.t.Fatal(err)
	}
	return map[string]any{"body": b.String()}
}

// check is the body a check run request must have; create adds the head sha.
func (p *published) check(pass report.Pass, create bool) map[string]any {
	p.t.Helper()
	c := report.CheckRun(report.Publication{Env: p.env("staging"), Now: p.clock.Now(), Pass: pass})
	body := map[string]any{"name": "latestwins / staging", "status": c.Status, "details_url": pass.RunURL,
		"output": map[string]any{"title": c.Title, "summary": c.Summary}}
	if c.Conclusion != "" {
		body["conclusion"] = c.Conclusion
	}
	if create {
		body["head_sha"] = pass.Sha
	}
	return body
}

// issueComment is a comment the Action wrote: with GITHUB_TOKEN its author is the github-actions bot.
func issueComment(t *testing.T, id int64, body string) map[string]any {
	c := githubtest.Example(t, "POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", http.StatusCreated, "")
	c["id"], c["body"] = id, body
	user := c["user"].(map[string]any)
	user["login"], user["type"] = "github-actions[bot]", "Bot"
	return c
}

func checkRun(t *testing.T, id int64, sha string) map[string]any {
	cr := githubtest.Example(t, "PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}", http.StatusOK, "")
	cr["id"], cr["name"], cr["head_sha"] = id, "latestwins / staging", sha
	return cr
}

// expectNewComment stubs the first publication on the pull request: no comment has the marker yet.
func (p *published) expectNewComment(id int64) {
	p.gh.On("GET", commentsPath, http.StatusOK, []any{issueComment(p.t, 1, "looks good to me")})
	p.gh.On("POST", commentsPath, http.StatusCreated, issueComment(p.t, id, "created"))
}

// expectCommentUpdate stubs a later publication: the list call finds the marker, the comment is PATCHed.
func (p *published) expectCommentUpdate(id int64) {
	p.gh.On("GET", commentsPath, http.StatusOK, []any{issueComment(p.t, 1, "looks good to me"),
		issueComment(p.t, id, report.CommentMarker("staging")+"\nearlier state")})
	p.gh.On("PATCH", fmt.Sprintf("%s/issues/comments/%d", repoPath, id), http.StatusOK, issueComment(p.t, id, "updated"))
}

func (p *published) expectNewCheck(sha string, id int64) {
	p.gh.On("GET", checksPath(sha)+"?check_name=latestwins+%2F+staging", http.StatusOK, map[string]any{"total_count": 0, "check_runs": []any{}})
	p.gh.On("POST", repoPath+"/check-runs", http.StatusCreated, checkRun(p.t, id, sha))
}

func (p *published) expectCheckUpdate(sha string, id int64) {
	p.gh.On("GET", checksPath(sha)+"?check_name=latestwins+%2F+staging", http.StatusOK, map[string]any{"total_count": 1, "check_runs": []any{checkRun(p.t, id, sha)}})
	p.gh.On("PATCH", fmt.Sprintf("%s/check-runs/%d", repoPath, id), http.StatusOK, checkRun(p.t, id, sha))
}

func checksPath(sha string) string { return repoPath + "/commits/" + sha + "/check-runs" }

// prAt edits the pull_request.synchronize example into a push of head on top of before.
func prAt(before, head string) func(map[string]any) {
	return func(p map[string]any) {
		p["before"], p["after"] = before, head
		p["pull_request"].(map[string]any)["head"].(map[string]any)["sha"] = head
	}
}

func runURL(id string) string { return "https://github.com/Codertocat/Hello-World/actions/runs/" + id }

// TestStickyCommentIsCreatedOnceThenUpdatedInPlace: claim creates the pull request's comment; the
// run of the same job finds it through the list call and PATCHes it, both rendered from the store.
func TestStickyCommentIsCreatedOnceThenUpdatedInPlace(t *testing.T) {
	t.Parallel()
	p := newPublished(t)
	head := sha('e')
	j := p.job("pr", "401", "pull_request", syncEvent, prAt(sha('0'), head))
	pass := report.Pass{Generation: 1, Scopes: []string{"api"}, Sha: head, RunURL: runURL("401")}

	p.expectNewComment(11)
	r := p.step(j, map[string]string{"command": "claim", "environment": "staging", "scopes": "api"})
	if r.err != nil || r.outputs["outcome"] != "claimed" {
		t.Fatalf("claim: %v %v\n%s", r.err, r.outputs, r.log)
	}
	claimed := pass
	claimed.Outcome = report.OutcomeClaimed
	want := []call{{"GET", commentsPath, nil}, {"POST", commentsPath, p.comment(claimed)}}
	if diff := cmp.Diff(want, p.newCalls()); diff != "" {
		t.Errorf("claim: requests (-want +got):\n%s", diff)
	}

	p.expectNewCheck(head, 21)
	p.expectCommentUpdate(11)
	p.expectCheckUpdate(head, 21)
	var deploying map[string]any
	r = p.step(j, map[string]string{"command": "run", "environment": "staging", "run": "true"})
	if r.err != nil || r.outputs["outcome"] != "deployed" {
		t.Fatalf("run: %v %v\n%s", r.err, r.outputs, r.log)
	}
	got := p.newCalls()
	if len(got) == 6 {
		deploying = got[1].Body.(map[string]any)
	}
	deployed := pass
	deployed.Outcome = report.OutcomeDeployed
	want = []call{
		{"GET", checksPath(head), nil}, {"POST", repoPath + "/check-runs", deploying}, // in progress at the deploy gate
		{"GET", commentsPath, nil}, {"PATCH", repoPath + "/issues/comments/11", p.comment(deployed)},
		{"GET", checksPath(head), nil}, {"PATCH", repoPath + "/check-runs/21", p.check(deployed, false)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run: requests (-want +got):\n%s", diff)
	}
	if deploying["status"] != "in_progress" || deploying["head_sha"] != head || deploying["conclusion"] != nil ||
		deploying["output"].(map[string]any)["title"] != "Generation 1: deploy in progress" {
		t.Errorf("the check run at the deploy gate: %v", deploying)
	}
	if body := want[3].Body.(map[string]any)["body"].(string); !strings.Contains(body, "| api | `eeeeeee` | 1 |") || !strings.Contains(body, "**1/1** settled") {
		t.Errorf("the comment does not show the deploy:\n%s", body)
	}
	if strings.Contains(r.log, "::warning") {
		t.Errorf("publishing warned:\n%s", r.log)
	}
}

// TestRacePublishesAuthoritativeState is the A -> B -> C race on one pull request: A and B end with a
// neutral "Superseded by generation 3" check run, and the sticky comment, last written by B, shows C
// live: every publication renders the store, not the writer's view.
func TestRacePublishesAuthoritativeState(t *testing.T) {
	t.Parallel()
	p := newPublished(t)
	a := p.job("A", "101", "pull_request", syncEvent, prAt(sha('0'), sha('a')))
	b := p.job("B", "102", "pull_request", syncEvent, prAt(sha('a'), sha('b')))
	c := p.job("C", "103", "pull_request", syncEvent, prAt(sha('b'), sha('c')))

	for i, j := range []*job{a, b} {
		if i == 0 {
			p.expectNewComment(11)
		} else {
			p.expectCommentUpdate(11)
		}
		if r := p.step(j, map[string]string{"command": "claim", "environment": "staging", "scopes": "api"}); r.err != nil {
			t.Fatalf("%s claim: %v\n%s", j.name, r.err, r.log)
		}
		p.expectNewCheck(sha(j.name[0]+'a'-'A'), int64(21+i))
		if r := p.step(j, map[string]string{"command": "gate", "environment": "staging", "phase": "build"}); r.err != nil || r.outputs["authorized"] != "true" {
			t.Fatalf("%s build gate: %v %v\n%s", j.name, r.err, r.outputs, r.log)
		}
	}
	p.newCalls()

	p.expectNewCheck(sha('c'), 23)
	p.expectCommentUpdate(11)
	p.expectCheckUpdate(sha('c'), 23)
	if r := p.step(c, map[string]string{"command": "run", "environment": "staging", "scopes": "api", "run": "true"}); r.err != nil || r.outputs["outcome"] != "deployed" {
		t.Fatalf("C run: %v %v\n%s", r.err, r.outputs, r.log)
	}
	p.newCalls()

	var last map[string]any
	for i, j := range []*job{a, b} {
		head, id, gen := sha(j.name[0]+'a'-'A'), int64(21+i), int64(1+i)
		p.expectCommentUpdate(11)
		p.expectCheckUpdate(head, id)
		r := p.step(j, map[string]string{"command": "run", "environment": "staging", "run": "false"})
		if r.err != nil || r.outputs["outcome"] != "superseded" {
			t.Fatalf("%s run: %v %v\n%s", j.name, r.err, r.outputs, r.log)
		}
		pass := report.Pass{Generation: gen, Scopes: []string{"api"}, Sha: head, RunURL: runURL(fmt.Sprint(101 + i)), Outcome: report.OutcomeSuperseded}
		got := p.newCalls()
		want := []call{
			{"GET", commentsPath, nil}, {"PATCH", repoPath + "/issues/comments/11", p.comment(pass)},
			{"GET", checksPath(head), nil}, {"PATCH", fmt.Sprintf("%s/check-runs/%d", repoPath, id), p.check(pass, false)},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s superseded: requests (-want +got):\n%s", j.name, diff)
		}
		check := got[3].Body.(map[string]any)
		if check["conclusion"] != "neutral" || check["output"].(map[string]any)["title"] != "Superseded by generation 3 (ccccccc)" {
			t.Errorf("%s check run: %v", j.name, check)
		}
		last = got[1].Body.(map[string]any)
	}
	body := last["body"].(string)
	for _, want := range []string{report.CommentMarker("staging"), "**Superseded by generation 3 (ccccccc)**", "| api | `ccccccc` | 3 |", "**3/3** settled"} {
		if !strings.Contains(body, want) {
			t.Errorf("the last comment (written by B) lacks %q:\n%s", want, body)
		}
	}
}

// TestOnlyTheFinalAttemptPublishesAFailedCheckRun: the final attempt fails, the check run is red; a
// non-final attempt leaves it in progress ("will retry"). A push has no pull request, so no comment is
// written (the strict fake fails on any request not stubbed).
func TestOnlyTheFinalAttemptPublishesAFailedCheckRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, maxAttempts     string
		wantErr               error
		outcome, detail       string
		wantStatus, wantConcl any
	}{
		{"final attempt", "1", ErrFailed, report.OutcomeFailed, "Generation 1 failed on its final attempt (1 of 1); the error is recorded.", "completed", "failure"},
		{"non-final attempt", "2", ErrRetry, report.OutcomeRetry, "Generation 1 failed on attempt 1 of 2; re-run the job to retry.", "in_progress", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPublished(t)
			head := sha('f')
			j := p.job("j", "501", "push", pushEvent, pushOf(sha('0'), head))
			p.expectNewCheck(head, 31)
			p.expectCheckUpdate(head, 31)
			r := p.step(j, map[string]string{"environment": "staging", "scopes": "api", "run": "exit 1", "max-attempts": tt.maxAttempts})
			if !errors.Is(r.err, tt.wantErr) || r.outputs["outcome"] != tt.outcome {
				t.Fatalf("err = %v, outputs %v; want %v\n%s", r.err, r.outputs, tt.wantErr, r.log)
			}
			pass := report.Pass{Generation: 1, Scopes: []string{"api"}, Sha: head, RunURL: runURL("501"), Outcome: tt.outcome, Detail: tt.detail}
			got := p.newCalls()
			want := []call{
				{"GET", checksPath(head), nil}, {"POST", repoPath + "/check-runs", nil},
				{"GET", checksPath(head), nil}, {"PATCH", repoPath + "/check-runs/31", p.check(pass, false)},
			}
			if len(got) == 4 {
				want[1].Body = got[1].Body // the in-progress check run at the gate, asserted above
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if body := want[3].Body.(map[string]any); body["status"] != tt.wantStatus || body["conclusion"] != tt.wantConcl {
				t.Errorf("check run %v/%v, want %v/%v", body["status"], body["conclusion"], tt.wantStatus, tt.wantConcl)
			}
		})
	}
}

// TestLeaseLossIsNoFailure: a pass whose lease was unlocked under it ends "lost": the comment says it
// will retry and the check run stays in progress, never red.
func TestLeaseLossIsNoFailure(t *testing.T) {
	t.Parallel()
	p := newPublished(t)
	head := sha('d')
	j := p.job("j", "601", "pull_request", syncEvent, prAt(sha('0'), head))
	p.expectNewCheck(head, 41)
	if r := p.step(j, map[string]string{"command": "gate", "environment": "staging", "scopes": "api"}); r.err != nil {
		t.Fatalf("gate: %v\n%s", r.err, r.log)
	}
	p.newCalls()

	st, closeFn, err := openBolt(context.Background(), p.store)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := authority.New(st, authority.WithClock(p.clock)).Unlock(context.Background(), "staging/api", "stuck deploy", "ops"); err != nil {
		t.Fatal(err)
	}
	if err := closeFn(); err != nil {
		t.Fatal(err)
	}

	p.expectNewComment(12)
	p.expectCheckUpdate(head, 41)
	r := p.step(j, map[string]string{"command": "complete", "environment": "staging"})
	if !errors.Is(r.err, authority.ErrLeaseLost) || r.outputs["outcome"] != "lost" {
		t.Fatalf("complete: err %v outputs %v\n%s", r.err, r.outputs, r.log)
	}
	lost := report.Pass{Generation: 1, Scopes: []string{"api"}, Sha: head, RunURL: runURL("601"), Outcome: report.OutcomeLost,
		Detail: "The lease was lost while working: retryable infrastructure loss; nothing terminal was published."}
	want := []call{
		{"GET", commentsPath, nil}, {"POST", commentsPath, p.comment(lost)},
		{"GET", checksPath(head), nil}, {"PATCH", repoPath + "/check-runs/41", p.check(lost, false)},
	}
	if diff := cmp.Diff(want, p.newCalls()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if check := want[3].Body.(map[string]any); check["status"] != "in_progress" || check["conclusion"] != nil {
		t.Errorf("a lease loss must not complete the check run: %v", check)
	}
	if strings.Contains(r.log, "::error") {
		t.Errorf("a lease loss is no error annotation:\n%s", r.log)
	}
}

// TestPublicationFailureIsAWarning: GitHub refusing a publication (a token without the permission)
// or failing warns, naming the permission when it is one, and the step ends as it would have.
func TestPublicationFailureIsAWarning(t *testing.T) {
	t.Parallel()
	forbidden := map[string]any{"message": "Resource not accessible by integration", "documentation_url": "https://docs.github.com/rest"}
	down := map[string]any{"message": "Server Error"}
	tests := []struct {
		name    string
		command string
		stub    func(p *published)
		want    string
	}{
		{"comment forbidden", "claim", func(p *published) { p.gh.On("GET", commentsPath, http.StatusForbidden, forbidden) },
			"add `permissions: pull-requests: write` to the job"},
		{"check run forbidden", "gate", func(p *published) {
			p.gh.On("GET", checksPath(sha('9')), http.StatusOK, map[string]any{"total_count": 0, "check_runs": []any{}})
			p.gh.On("POST", repoPath+"/check-runs", http.StatusForbidden, forbidden)
		}, "add `permissions: checks: write` to the job"},
		{"GitHub down", "gate", func(p *published) { p.gh.On("GET", checksPath(sha('9')), http.StatusBadGateway, down) },
			"the deploy is not affected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPublished(t)
			j := p.job("j", "701", "pull_request", syncEvent, prAt(sha('0'), sha('9')))
			tt.stub(p)
			r := p.step(j, map[string]string{"command": tt.command, "environment": "staging", "scopes": "api"})
			if r.err != nil || r.outputs["authorized"] != "true" {
				t.Fatalf("a publication failure changed the step: err %v outputs %v\n%s", r.err, r.outputs, r.log)
			}
			if !strings.Contains(r.log, "::warning::could not publish") || !strings.Contains(r.log, tt.want) || strings.Contains(r.log, "::error") {
				t.Errorf("want one warning saying %q and no error:\n%s", tt.want, r.log)
			}
		})
	}
}

// TestPublicationInputsTurnItOff: comment and check-run false publish nothing (the strict fake fails
// on any request), and no token is needed then.
func TestPublicationInputsTurnItOff(t *testing.T) {
	t.Parallel()
	p := newPublished(t)
	j := p.job("j", "801", "pull_request", syncEvent, nil)
	delete(j.vars, "INPUT_GITHUB-TOKEN")
	r := p.step(j, map[string]string{"environment": "staging", "scopes": "api", "run": "true", "comment": "false", "check-run": "false"})
	if r.err != nil || r.outputs["outcome"] != "deployed" || strings.Contains(r.log, "::warning") {
		t.Fatalf("err %v outputs %v\n%s", r.err, r.outputs, r.log)
	}
	if got := p.gh.Requests(); len(got) != 0 {
		t.Errorf("requests with publications off: %v", calls(got))
	}
}

// TestCompleteWithALostOutcome: complete told that the lease was lost (LATESTWINS_OUTCOME: lost) ends
// "lost", retryable, not as a failed attempt.
func TestCompleteWithALostOutcome(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	j := w.job("j", "901", "push", pushEvent, nil)
	if r := j.step(map[string]string{"command": "gate", "environment": "staging", "scopes": "api", "check-run": "false"}); r.err != nil {
		t.Fatalf("gate: %v\n%s", r.err, r.log)
	}
	j.vars["LATESTWINS_OUTCOME"] = "lost"
	r := j.step(map[string]string{"command": "complete", "environment": "staging", "check-run": "false"})
	if !errors.Is(r.err, authority.ErrLeaseLost) || r.outputs["outcome"] != "lost" || strings.Contains(r.log, "::error") {
		t.Errorf("err %v outputs %v\n%s", r.err, r.outputs, r.log)
	}
}
