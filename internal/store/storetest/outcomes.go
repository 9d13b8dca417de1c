package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 8: a lost lease is a retryable infrastructure loss with no failure recorded; a failure
// before the last attempt is retryable with nothing terminal; a failure on the last attempt
// publishes exactly one terminal failure and observed moves past it; bad input is terminal at once.
func outcomeCases() []testCase {
	return []testCase{
		{"LeaseLost", testOutcomeLost},
		{"FailureUntilFinalAttempt", testOutcomeFailures},
		{"Invalid", testOutcomeInvalid},
		{"TerminalWithoutMessage", testTerminalWithoutMessage},
		{"ReportedByDeploymentStatus", testReported},
		{"EndingOfSeveralScopesMeetsARace", testEndingMeetsARace},
	}
}

// testEndingMeetsARace: in the per-scope layout the completion or release of a pass of several
// scopes writes their documents one by one, and another process may write one of them in between
// (a push naming it alone). The ending that lost that race finishes what it began: it reports
// the deploys, frees every lease, and does not take its own earlier write for a lease lost.
func testEndingMeetsARace(t *testing.T, h *harness) {
	if !h.split {
		t.Skip("the single document ends every scope of a pass in one write")
	}
	const env = "staging"
	web := authority.ScopeKey(env, "web")
	for i, end := range []string{"complete", "release"} {
		first := h.accept(h.process(), push(env, fmt.Sprintf("%s-pass", end), sha("p", i), "api", "web"), true)
		g := h.gate(h.process(), env, first.Generation, "run-"+end, "api", "web")
		paused := newPutPausing(h.store, web)
		a := h.authority(paused)
		type ended struct {
			res *authority.CompleteResult
			err error
		}
		done := make(chan ended, 1)
		go func() {
			if end == "release" {
				done <- ended{err: a.Release(h.ctx, g)}
				return
			}
			res, err := a.Complete(h.ctx, authority.Completion{Environment: env, Generation: g.Generation, Scopes: []string{"api", "web"},
				Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3, Run: "run-" + end})
			done <- ended{res, err}
		}()
		<-paused.paused // api's document is written, web's not yet
		newer := h.accept(h.process(), push(env, fmt.Sprintf("%s-newer", end), sha("n", i), "web"), false)
		close(paused.resumed)
		got := <-done
		if got.err != nil {
			t.Fatalf("%s of the pass at %d after a push on web wrote web's document between its writes: %v; want it to finish", end, g.Generation, got.err)
		}
		e := h.env(env)
		for _, name := range []string{"api", "web"} {
			if l := e.Scopes[name].Lease; l.Holder != "" {
				t.Fatalf("%s: %s still leased to %s (token %d) after the %s", end, name, l.Holder, l.Token, end)
			}
		}
		if end == "complete" {
			for _, name := range []string{"api", "web"} {
				if got.res.Results[name] != authority.ResultDeployed {
					t.Fatalf("completion results %v; want both scopes deployed", got.res.Results)
				}
				if live := e.Scopes[name].Live; live == nil || live.Generation != g.Generation {
					t.Fatalf("%s live %+v; want the pass at %d", name, live, g.Generation)
				}
			}
		}
		if m := e.Scopes["web"].Mailbox; m == nil || m.Generation != newer.Generation {
			t.Fatalf("web's pending intent %+v; want the newer push at %d", m, newer.Generation)
		}
		// The newer push deploys, so that the next round starts on settled scopes.
		h.deploy(h.process(), env, newer.Generation, "run-newer-"+end, "run-newer-"+end, "web")
		if end == "release" {
			h.deploy(h.process(), env, first.Generation, "run-again", "run-again", "api")
		}
	}
}

// pass accepts an intent for scopes with a claim and gates deploy: a pass in the middle of its work.
func (h *harness) pass(a *authority.Authority, env, id, commit, holder string, scopes ...string) *authority.Grant {
	h.t.Helper()
	res := h.accept(a, push(env, id, commit, scopes...), true)
	return h.gate(a, env, res.Generation, holder, scopes...)
}

// wantRetryState fails the test unless the pass left scope pending as it was, with no failure.
func wantRetryState(t *testing.T, h *harness, before *authority.Env, scope string) {
	t.Helper()
	after := h.env("staging")
	bm, am := *before.Scopes[scope].Mailbox, after.Scopes[scope].Mailbox
	if am == nil {
		t.Fatalf("%s: a retryable outcome cleared the mailbox", scope)
	}
	bm.Attempt = am.Attempt // the failed-attempt count may move; the entry may not
	if diff := cmp.Diff(&bm, am); diff != "" {
		t.Fatalf("%s: a retryable outcome changed the mailbox entry (-before +after):\n%s", scope, diff)
	}
	if after.Scopes[scope].Failure != nil || after.Scopes[scope].Live != nil {
		t.Fatalf("%s: a retryable outcome published %+v / %+v", scope, after.Scopes[scope].Failure, after.Scopes[scope].Live)
	}
	if after.Observed != before.Observed {
		t.Fatalf("observed moved from %d to %d on a retryable outcome", before.Observed, after.Observed)
	}
	if !slices.Contains(h.pending(), "staging") {
		t.Fatalf("pending %v; want staging still listed after a retryable outcome", h.pending())
	}
}

func testOutcomeLost(t *testing.T, h *harness) {
	a := h.process()
	g := h.pass(a, "staging", "run-1", sha("a", 1), "run-1/1", "api")
	before := h.env("staging")
	res, err := a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: g.Generation, Scopes: []string{"api"},
		Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeLost, Message: "store unreachable past the TTL"})
	if err != nil || res.Results["api"] != authority.ResultRetry || res.Overall() != authority.ResultRetry {
		t.Fatalf("complete lost: %+v, %v; want retry", res, err)
	}
	wantRetryState(t, h, before, "api")
	e := h.env("staging")
	if n := len(eventsOf(e, authority.EventFailed)); n != 0 {
		t.Fatalf("a lost lease recorded %d failure events", n)
	}
	if n := len(eventsOf(e, authority.EventLost)); n != 1 {
		t.Fatalf("a lost lease recorded %d lost events, want 1", n)
	}
	// The next attempt claims the same intent again.
	res2, err := h.process().Claim(h.ctx, "staging", g.Generation, []string{"api"})
	if err != nil || len(res2.Claimed) != 1 || res2.Claimed[0].IntentID != "run-1" {
		t.Fatalf("re-claim after a loss: %+v, %v", res2, err)
	}
}

func testOutcomeFailures(t *testing.T, h *harness) {
	const maxAttempts = 3
	a := h.process()
	g := h.pass(a, "staging", "run-1", sha("a", 1), "run-1/1", "api", "web")
	for attempt := 1; attempt < maxAttempts; attempt++ {
		before := h.env("staging")
		res, err := a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: g.Generation, Scopes: []string{"api", "web"},
			Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeFailure, Attempt: attempt, MaxAttempts: maxAttempts, Message: "exit status 1"})
		if err != nil || res.Overall() != authority.ResultRetry {
			t.Fatalf("failure on attempt %d of %d: %+v, %v; want retry", attempt, maxAttempts, res, err)
		}
		for _, s := range []string{"api", "web"} {
			wantRetryState(t, h, before, s)
			if got := h.scope("staging", s).Mailbox.Attempt; got != attempt {
				t.Fatalf("%s: %d failed attempts recorded, want %d", s, got, attempt)
			}
		}
		// The next attempt re-claims and re-gates, and learns how many attempts failed.
		cr, err := a.Claim(h.ctx, "staging", g.Generation, []string{"api"})
		if err != nil || len(cr.Claimed) != 1 || cr.Claimed[0].Attempt != attempt {
			t.Fatalf("claim for attempt %d: %+v, %v", attempt+1, cr, err)
		}
		g = h.gate(a, "staging", g.Generation, fmt.Sprintf("run-1/%d", attempt+1), "api", "web")
	}
	if n := countEvents(h.env("staging"), authority.EventFailed, func(ev authority.Event) bool { return strings.Contains(ev.Message, "final") }); n != 0 {
		t.Fatalf("%d terminal failures before the final attempt", n)
	}

	res, err := a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: g.Generation, Scopes: []string{"api", "web"},
		Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeFailure, Attempt: maxAttempts, MaxAttempts: maxAttempts, Message: "exit status 1"})
	if err != nil || res.Overall() != authority.ResultFailed {
		t.Fatalf("failure on the final attempt: %+v, %v; want failed", res, err)
	}
	// Reported twice (a retried request), it is still published once.
	if _, err := a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: g.Generation, Scopes: []string{"api", "web"},
		Outcome: authority.OutcomeFailure, Attempt: maxAttempts, MaxAttempts: maxAttempts, Message: "exit status 1"}); err != nil {
		t.Fatalf("repeated final failure: %v", err)
	}
	e := h.env("staging")
	for _, s := range []string{"api", "web"} {
		sc := e.Scopes[s]
		want := &authority.Failure{Generation: g.Generation, Sha: sha("a", 1), Message: "exit status 1", Attempt: maxAttempts, MaxAttempts: maxAttempts, At: h.clock.Now()}
		if diff := cmp.Diff(want, sc.Failure); diff != "" || sc.Mailbox != nil || sc.Live != nil {
			t.Fatalf("%s after the final attempt: mailbox %+v, live %+v, failure (-want +got):\n%s", s, sc.Mailbox, sc.Live, diff)
		}
		if n := countEvents(e, authority.EventFailed, func(ev authority.Event) bool { return ev.Scope == s && strings.Contains(ev.Message, "final") }); n != 1 {
			t.Fatalf("%s: %d terminal failure events, want exactly 1", s, n)
		}
	}
	if e.Observed != e.Desired {
		t.Fatalf("observed %d/%d after the terminal failure; want it moved past it", e.Observed, e.Desired)
	}
	if slices.Contains(h.pending(), "staging") {
		t.Fatalf("pending %v still lists staging after a terminal failure", h.pending())
	}
	// A later deploy clears the failure.
	next := h.accept(a, push("staging", "run-2", sha("a", 2), "api"), false)
	h.deploy(a, "staging", next.Generation, "run-2/1", "run-2/1", "api")
	if sc := h.scope("staging", "api"); sc.Failure != nil || sc.Live.Sha != sha("a", 2) {
		t.Fatalf("api after a successful deploy: %+v", sc)
	}
	if h.scope("staging", "web").Failure == nil {
		t.Fatalf("a deploy of api cleared web's failure")
	}
}

func testOutcomeInvalid(t *testing.T, h *harness) {
	a := h.process()
	g := h.pass(a, "staging", "run-1", sha("a", 1), "run-1/1", "api")
	res, err := a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: g.Generation, Scopes: []string{"api"},
		Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeInvalid, Attempt: 1, MaxAttempts: 3, Message: "unknown scope in .github/latestwins.yml"})
	if err != nil || res.Results["api"] != authority.ResultFailed {
		t.Fatalf("invalid on the first attempt: %+v, %v; want failed at once", res, err)
	}
	e := h.env("staging")
	sc := e.Scopes["api"]
	if sc.Failure == nil || sc.Failure.Message != "unknown scope in .github/latestwins.yml" || sc.Mailbox != nil || e.Observed != e.Desired {
		t.Fatalf("after an invalid outcome: %+v, observed %d/%d", sc, e.Observed, e.Desired)
	}
	if sc.Lease.Holder != "" {
		t.Fatalf("the lease was not released by the completion: %+v", sc.Lease)
	}
}

// testTerminalWithoutMessage: a terminal ending that says nothing still records what happened, so
// that status never shows an error with an empty reason.
func testTerminalWithoutMessage(t *testing.T, h *harness) {
	a := h.process()
	for i, o := range []authority.Outcome{authority.OutcomeInvalid, authority.OutcomeFailure} {
		scope := []string{"api", "web"}[i]
		g := h.pass(a, "staging", "run-"+scope, sha("a", i+1), "run/"+scope, scope)
		res, err := a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: g.Generation, Scopes: []string{scope},
			Holder: g.Holder, Tokens: g.Tokens, Outcome: o, Attempt: 3, MaxAttempts: 3, Message: " \t"})
		if err != nil || res.Results[scope] != authority.ResultFailed {
			t.Fatalf("%s without a message: %+v, %v; want failed", o, res, err)
		}
		f := h.scope("staging", scope).Failure
		if f == nil || !strings.Contains(f.Message, fmt.Sprintf("pass %d", g.Generation)) || !strings.Contains(f.Message, "without") {
			t.Fatalf("%s without a message recorded failure %+v; want a default message naming the pass", o, f)
		}
		ev := eventsOf(h.env("staging"), authority.EventFailed)
		if last := ev[len(ev)-1]; !strings.HasSuffix(last.Message, f.Message) {
			t.Fatalf("timeline says %q; want it to end with %q", last.Message, f.Message)
		}
	}
}

// testReported: the outcome of a deployment latestwins did not run (a job gated only by the
// protection rule, as GitHub's deployment status tells it) applies only to a scope whose pending
// intent is that very commit; a success makes it live, failures count attempts once per report,
// terminal on the last; a report of any other commit changes nothing.
func testReported(t *testing.T, h *harness) {
	a := h.process()
	x := h.accept(a, push("staging", "push-x", sha("x", 1), "api", "web"), false)
	// Deployments 1 of x, 2 of y and 4 of w are approved by the protection rule; 3 of z is not.
	deployment := map[string]int64{sha("x", 1): 1, sha("y", 2): 2, sha("w", 0): 4, sha("z", 3): 3}
	approve := func(commit string, scopes ...string) {
		t.Helper()
		if err := h.process().Approve(h.ctx, authority.Approval{Environment: "staging", Scopes: scopes, Sha: commit, Deployment: deployment[commit], Run: 7}); err != nil {
			t.Fatalf("approve %s: %v", commit, err)
		}
	}
	report := func(id, commit string, ok bool, scopes ...string) *authority.CompleteResult {
		t.Helper()
		res, err := h.process().Report(h.ctx, authority.Report{ID: id, Environment: "staging", Scopes: scopes, Sha: commit, Deployment: deployment[commit],
			Success: ok, Run: "https://github.com/example/app/actions/runs/7", Message: "job failed"})
		if err != nil {
			t.Fatalf("report %s: %v", id, err)
		}
		return res
	}
	approve(sha("x", 1), "api", "web")
	if res := report("status-1", sha("x", 1), true, "api"); res.Results["api"] != authority.ResultDeployed {
		t.Fatalf("reported success: %+v", res)
	}
	e := h.env("staging")
	if l := e.Scopes["api"].Live; l == nil || l.Sha != sha("x", 1) || l.Generation != x.Generation || e.Scopes["api"].Mailbox != nil {
		t.Fatalf("api after a reported success: %+v", e.Scopes["api"])
	}
	if e.Scopes["web"].Mailbox == nil || e.Scopes["web"].Live != nil {
		t.Fatalf("web changed by a report for api: %+v", e.Scopes["web"])
	}
	if res := report("status-1", sha("x", 1), true, "api"); res.Results["api"] != authority.ResultDeployed {
		t.Fatalf("the same report again: %+v", res)
	}
	// w is approved while it goes next, then y supersedes it: w's late success changes nothing.
	h.accept(a, push("staging", "push-w", sha("w", 0), "api"), false)
	approve(sha("w", 0), "api")
	y := h.accept(a, push("staging", "push-y", sha("y", 2), "api"), false)
	approve(sha("y", 2), "api")
	mid := h.doc(authority.EnvKey("staging"))
	if res := report("status-old", sha("w", 0), true, "api"); res.Results["api"] != authority.ResultSuperseded {
		t.Fatalf("report of a commit that is not pending: %+v", res)
	}
	if diff := cmp.Diff(mid.Env.Scopes, h.doc(authority.EnvKey("staging")).Env.Scopes); diff != "" {
		t.Fatalf("a report of another commit changed the scopes (-before +after):\n%s", diff)
	}
	// Failures count once per report (status-a is delivered twice); the third counted is terminal.
	for i, step := range []struct {
		id   string
		want authority.Result
	}{{"status-a", authority.ResultRetry}, {"status-a", authority.ResultRetry}, {"status-b", authority.ResultRetry}, {"status-c", authority.ResultFailed}} {
		if res := report(step.id, sha("y", 2), false, "api"); res.Results["api"] != step.want {
			t.Fatalf("failure report %d (%s): %s, want %s", i, step.id, res.Results["api"], step.want)
		}
	}
	e = h.env("staging")
	if f := e.Scopes["api"].Failure; f == nil || f.Generation != y.Generation || f.Attempt != 3 || e.Scopes["api"].Mailbox != nil {
		t.Fatalf("api after three counted failures: %+v", e.Scopes["api"])
	}
	if l := e.Scopes["api"].Live; l == nil || l.Sha != sha("x", 1) {
		t.Fatalf("a failure changed live: %+v", l)
	}
	// A success of a deployment nobody approved makes nothing live: it is the scope's warning.
	h.accept(a, push("staging", "push-z", sha("z", 3), "api"), false)
	if res := report("status-z", sha("z", 3), true, "api"); res.Results["api"] != authority.ResultUnapproved {
		t.Fatalf("report of an unapproved deployment: %+v", res)
	}
	if sc := h.env("staging").Scopes["api"]; sc.Live != nil && sc.Live.Sha == sha("z", 3) || sc.Mailbox == nil || sc.Unapproved == nil || sc.Unapproved.Deployment != 3 {
		t.Fatalf("api after an unapproved success: live %+v, pending %+v, warning %+v", sc.Live, sc.Mailbox, sc.Unapproved)
	}
}
