package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/comments"
	"github.com/latestwins/latestwins/app/internal/configsource"
	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/intake"
	"github.com/latestwins/latestwins/app/internal/surfaces"
	"github.com/latestwins/latestwins/internal/authority"
)

const pushSha = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"

func TestEveryFixtureSignedIsAccepted(t *testing.T) {
	t.Parallel()
	want := map[string]struct {
		status  int
		outcome core.Outcome
	}{
		"push.json":                                 {http.StatusOK, core.OutcomeAccepted},
		"pull_request.opened.json":                  {http.StatusOK, core.OutcomeAccepted},
		"pull_request.synchronize.json":             {http.StatusOK, core.OutcomeAccepted},
		"pull_request.reopened.json":                {http.StatusOK, core.OutcomeAccepted},
		"pull_request.closed.json":                  {http.StatusOK, core.OutcomeReleased},
		"issue_comment.created.json":                {http.StatusOK, core.OutcomeRefused},       // no Conversation: permission cannot be checked
		"check_run.rerequested.json":                {http.StatusAccepted, core.OutcomeIgnored}, // not a latestwins check run
		"installation.created.json":                 {http.StatusOK, core.OutcomeRecorded},
		"deployment_protection_rule.requested.json": {http.StatusOK, surfaces.OutcomeRejected},  // no environment answers "production"
		"deployment_status.created.json":            {http.StatusAccepted, core.OutcomeIgnored}, // no scope deploys to "production"
	}
	files, err := filepath.Glob(filepath.Join("..", "testdata", "webhooks", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Errorf("%d fixtures in testdata/webhooks, %d expected: add the new one to this table", len(files), len(want))
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w, ok := want[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			h := newHarness(t, testConfig)
			body := fixture(t, name)
			// Every fixture parses: ParseDelivery sees a known event and a payload.
			hdr := newDelivery(eventOf(name), "d-"+name, body, sign(testSecret, body)).Header
			d, err := intake.ParseDelivery(testSecret, hdr, body)
			if err != nil || d.Payload == nil {
				t.Fatalf("ParseDelivery(%s) = %+v, %v", name, d, err)
			}
			rec := h.post(t, eventOf(name), "d-"+name, body)
			res := decodeResult(t, rec)
			if rec.Code != w.status || res.Outcome != w.outcome {
				t.Errorf("%s: %d %s (%s), want %d %s", name, rec.Code, res.Outcome, rec.Body, w.status, w.outcome)
			}
		})
	}
}

func TestRefusedDeliveries(t *testing.T) {
	t.Parallel()
	body := fixture(t, "push.json")
	good := sign(testSecret, body)
	tests := []struct {
		name     string
		req      func() *http.Request
		status   int
		contains string
	}{
		{"unsigned", func() *http.Request { return newDelivery("push", "d1", body, "") }, http.StatusUnauthorized, "no X-Hub-Signature-256 header"},
		{"badly signed", func() *http.Request { return newDelivery("push", "d1", body, sign([]byte("other secret"), body)) }, http.StatusUnauthorized, "does not match the body"},
		{"signature of another body", func() *http.Request {
			return newDelivery("push", "d1", append([]byte(" "), body...), good)
		}, http.StatusUnauthorized, "does not match the body"},
		{"sha1 only", func() *http.Request {
			r := newDelivery("push", "d1", body, "")
			r.Header.Set("X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567")
			return r
		}, http.StatusUnauthorized, "no X-Hub-Signature-256 header"},
		{"sha1 in the sha256 header", func() *http.Request {
			return newDelivery("push", "d1", body, "sha1=0123456789abcdef0123456789abcdef01234567")
		}, http.StatusUnauthorized, "must be sha256=HEX"},
		{"malformed JSON", func() *http.Request {
			b := []byte(`{"ref": "refs/heads/master", "after": `)
			return newDelivery("push", "d1", b, sign(testSecret, b))
		}, http.StatusBadRequest, "push payload"},
		{"no delivery id", func() *http.Request { return newDelivery("push", "", body, good) }, http.StatusBadRequest, "X-GitHub-Delivery must be"},
		{"no event", func() *http.Request { return newDelivery("", "d1", body, good) }, http.StatusBadRequest, "no X-GitHub-Event header"},
		{"xml", func() *http.Request {
			r := newDelivery("push", "d1", body, good)
			r.Header.Set("Content-Type", "application/xml")
			return r
		}, http.StatusBadRequest, "send application/json"},
		{"JSON sent as a form (curl --data without a Content-Type)", func() *http.Request {
			r := newDelivery("push", "d1", body, good)
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			return r
		}, http.StatusBadRequest, `Content-Type application/x-www-form-urlencoded without a payload field: send the JSON payload as Content-Type: application/json`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, testConfig)
			rec := h.do(tt.req())
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.contains) {
				t.Errorf("got %d %s, want %d containing %q", rec.Code, rec.Body, tt.status, tt.contains)
			}
			if envs, _ := h.auth.Pending(context.Background()); len(envs) != 0 {
				t.Errorf("a refused delivery changed state: pending %v", envs)
			}
			if n := len(h.disp.requests()); n != 0 {
				t.Errorf("a refused delivery dispatched %d workflows", n)
			}
		})
	}
}

func TestOversizedBody(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, func(o *Options) { o.MaxBodyBytes = 1024 })
	body := fixture(t, "push.json") // 8.8 KB
	rec := h.post(t, "push", "d1", body)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "body over 1024 bytes") {
		t.Errorf("got %d %s, want 413", rec.Code, rec.Body)
	}
	small := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	if rec := h.post(t, "ping", "d2", small); rec.Code != http.StatusAccepted {
		t.Errorf("a body under the cap: got %d %s, want 202", rec.Code, rec.Body)
	}
}

func TestUnknownEventIsAcknowledged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	for _, event := range []string{"made_up_event", "star"} {
		body := []byte(`{"action":"created"}`)
		rec := h.post(t, event, "d-"+event, body)
		res := decodeResult(t, rec)
		if rec.Code != http.StatusAccepted || res.Outcome != core.OutcomeIgnored {
			t.Errorf("%s: got %d %s, want 202 ignored", event, rec.Code, rec.Body)
		}
	}
}

func TestPushAcceptsAndDispatches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	ctx := context.Background()
	rec := h.post(t, "push", "delivery-1", fixture(t, "push.json"))
	if rec.Code != http.StatusOK {
		t.Fatalf("push: %d %s", rec.Code, rec.Body)
	}
	res := decodeResult(t, rec)
	// README.md changed: api (no paths) is selected, docs (docs/**) is not, web is another repository.
	wantIntents := []core.IntentInfo{{Environment: "staging", Generation: 1, Accepted: []string{"api"}}}
	if diff := cmp.Diff(wantIntents, res.Intents); diff != "" {
		t.Errorf("intents (-want +got):\n%s", diff)
	}
	want := []core.DispatchRequest{{Installation: 1, Repo: core.RepoRef{Owner: "Codertocat", Name: "Hello-World"}, Workflow: "deploy.yml", Ref: "master",
		Inputs: map[string]string{"environment": "staging", "generation": "1", "scopes": "api"}}}
	if diff := cmp.Diff(want, h.disp.requests()); diff != "" {
		t.Errorf("dispatches (-want +got):\n%s", diff)
	}
	env, err := h.auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	m := env.Scopes["api"].Mailbox
	if env.Desired != 1 || m == nil || m.Sha != pushSha || m.Ref != "refs/heads/master" || m.IntentID != "delivery-1" || m.Before != "" {
		t.Errorf("after the push: desired %d, mailbox %+v", env.Desired, m)
	}

	// The next push builds on it: generation 2, dispatched with generation 2.
	next := "a10867b14bb761a232cd80139fbd4c0d33264240"
	if rec := h.post(t, "push", "delivery-2", withPush(t, pushSha, next)); rec.Code != http.StatusOK {
		t.Fatalf("second push: %d %s", rec.Code, rec.Body)
	}
	reqs := h.disp.requests()
	if len(reqs) != 2 || reqs[1].Inputs["generation"] != "2" {
		t.Errorf("second dispatch = %+v, want generation 2", reqs)
	}
	env, _ = h.auth.Status(ctx, "staging")
	if env.Desired != 2 || env.Scopes["api"].Mailbox.Sha != next {
		t.Errorf("after the second push: desired %d, mailbox %+v", env.Desired, env.Scopes["api"].Mailbox)
	}

	// The first push delivered late again under a new id arrives behind the newer commit: it does
	// not replace the mailbox entry (the domain's out-of-order guard), and nothing is dispatched for it.
	late := withPush(t, "0000000000000000000000000000000000000000", pushSha)
	rec = h.post(t, "push", "delivery-3", late)
	res = decodeResult(t, rec)
	if rec.Code != http.StatusOK || len(res.Intents) != 1 || len(res.Intents[0].Stale) != 1 || len(res.Intents[0].Accepted) != 0 {
		t.Errorf("late push: %d %s, want the scope recorded as stale", rec.Code, rec.Body)
	}
	env, _ = h.auth.Status(ctx, "staging")
	if env.Scopes["api"].Mailbox.Sha != next {
		t.Errorf("a late push replaced the newer commit: mailbox %+v", env.Scopes["api"].Mailbox)
	}
	if n := len(h.disp.requests()); n != 2 {
		t.Errorf("%d dispatches after the late push, want still 2", n)
	}
}

func TestReplayedDeliveryChangesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	ctx := context.Background()
	body := fixture(t, "push.json")
	first := decodeResult(t, h.post(t, "push", "same-id", body))
	before, err := h.auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Minute)
	rec := h.post(t, "push", "same-id", body)
	second := decodeResult(t, rec)
	if rec.Code != http.StatusOK || second.Outcome != core.OutcomeDuplicate {
		t.Errorf("replay: %d %s, want 200 duplicate", rec.Code, rec.Body)
	}
	if first.Intents[0].Generation != second.Intents[0].Generation || !second.Intents[0].Duplicate {
		t.Errorf("replay got generation %+v, first %+v", second.Intents, first.Intents)
	}
	after, err := h.auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("a replayed delivery changed the environment (-before +after):\n%s", diff)
	}
	if n := len(h.disp.requests()); n != 1 {
		t.Errorf("%d dispatches, want 1: a replay dispatches nothing", n)
	}
}

func TestPushToUnconfiguredRepositoryAcceptsNothing(t *testing.T) {
	t.Parallel()
	cfg := "environments:\n  staging:\n    scopes:\n      web:\n        repository: acme/web\n        branch: master\n        workflow: web.yml\n"
	h := newHarness(t, cfg)
	rec := h.post(t, "push", "d1", fixture(t, "push.json"))
	res := decodeResult(t, rec)
	if rec.Code != http.StatusOK || res.Outcome != core.OutcomeNoScopes || !strings.Contains(res.Message, "no scope is built from Codertocat/Hello-World on master") {
		t.Errorf("got %d %s, want 200 no-scopes", rec.Code, rec.Body)
	}
	if envs, _ := h.auth.Pending(context.Background()); len(envs) != 0 {
		t.Errorf("pending environments %v, want none", envs)
	}
	if _, err := h.auth.Status(context.Background(), "staging"); !errors.Is(err, authority.ErrInvalidInput) {
		t.Errorf("staging exists after an unrelated push: %v", err)
	}
	if n := len(h.disp.requests()); n != 0 {
		t.Errorf("%d dispatches, want none", n)
	}
	// A push to another branch of a configured repository selects nothing either.
	h2 := newHarness(t, testConfig)
	other := fixture(t, "push.json")
	other = []byte(strings.Replace(string(other), `"ref": "refs/heads/master"`, `"ref": "refs/heads/feature"`, 1))
	if res := decodeResult(t, h2.post(t, "push", "d2", other)); res.Outcome != core.OutcomeNoScopes {
		t.Errorf("push to feature: %+v, want no-scopes", res)
	}
}

func TestPushOfATagOrDeletedBranchIsIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	tag := []byte(strings.Replace(string(fixture(t, "push.json")), `"ref": "refs/heads/master"`, `"ref": "refs/tags/v1"`, 1))
	if res := decodeResult(t, h.post(t, "push", "d1", tag)); res.Outcome != core.OutcomeIgnored {
		t.Errorf("tag push: %+v, want ignored", res)
	}
	deleted := withPush(t, pushSha, "0000000000000000000000000000000000000000")
	if res := decodeResult(t, h.post(t, "push", "d2", deleted)); res.Outcome != core.OutcomeIgnored {
		t.Errorf("deleted branch: %+v, want ignored", res)
	}
	if envs, _ := h.auth.Pending(context.Background()); len(envs) != 0 {
		t.Errorf("pending %v, want none", envs)
	}
}

func TestDispatchFailureIsReportedAndKeepsTheIntent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	h.disp.err = errors.New("GitHub said 500")
	rec := h.post(t, "push", "d1", fixture(t, "push.json"))
	if rec.Code != http.StatusBadGateway || !strings.Contains(rec.Body.String(), "dispatch deploy.yml in Codertocat/Hello-World for staging: GitHub said 500") {
		t.Errorf("got %d %s, want 502 naming the dispatch", rec.Code, rec.Body)
	}
	if envs, _ := h.auth.Pending(context.Background()); len(envs) != 1 {
		t.Errorf("pending %v: the intent must stay for the recovery sweep", envs)
	}
}

func TestInvalidConfigurationIs422(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "latestwins.yml")
	if err := os.WriteFile(path, []byte("environments:\n  staging:\n    scopes:\n      api:\n        branch: master\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, testConfig, func(o *Options) { o.Config = &configsource.File{Path: path} })
	rec := h.post(t, "push", "d1", fixture(t, "push.json"))
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "line 4: scope \\\"api\\\" of environment \\\"staging\\\" has no repository") {
		t.Errorf("got %d %s, want 422 naming the line", rec.Code, rec.Body)
	}
}

func TestWithoutDispatcherDispatchIsSkipped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, func(o *Options) { o.Dispatcher = nil })
	rec := h.post(t, "push", "d1", fixture(t, "push.json"))
	res := decodeResult(t, rec)
	if rec.Code != http.StatusOK || len(res.Dispatched) != 1 || len(res.Intents) != 1 {
		t.Errorf("got %d %s, want the intent accepted and the dispatch listed", rec.Code, rec.Body)
	}
}

func TestPullRequestPreviewLifecycle(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	ctx := context.Background()
	const head = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	rec := h.post(t, "pull_request", "pr-open", fixture(t, "pull_request.opened.json"))
	res := decodeResult(t, rec)
	if rec.Code != http.StatusOK || len(res.Intents) != 1 || res.Intents[0].Environment != "preview/pr-2" {
		t.Fatalf("opened: %d %s", rec.Code, rec.Body)
	}
	want := []core.DispatchRequest{{Installation: 1, Repo: core.RepoRef{Owner: "Codertocat", Name: "Hello-World"}, Workflow: "preview.yml", Ref: "changes",
		Inputs: map[string]string{"environment": "preview/pr-2", "generation": "1", "scopes": "api"}}}
	if diff := cmp.Diff(want, h.disp.requests()); diff != "" {
		t.Errorf("dispatches (-want +got):\n%s", diff)
	}
	env, err := h.auth.Status(ctx, "preview/pr-2")
	if err != nil {
		t.Fatal(err)
	}
	if m := env.Scopes["api"].Mailbox; m == nil || m.Sha != head || m.Ref != "refs/heads/changes" {
		t.Errorf("preview mailbox %+v, want the head commit", m)
	}

	// The dispatched run claims and takes the deploy lease; then the pull request is closed.
	if _, err := h.auth.Claim(ctx, "preview/pr-2", 1, []string{"api"}); err != nil {
		t.Fatal(err)
	}
	g, err := h.auth.Gate(ctx, authority.GateRequest{Environment: "preview/pr-2", Generation: 1, Scopes: []string{"api"},
		Phase: "deploy", Holder: "run-7", LeaseTTL: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	rec = h.post(t, "pull_request", "pr-close", fixture(t, "pull_request.closed.json"))
	res = decodeResult(t, rec)
	if rec.Code != http.StatusOK || res.Outcome != core.OutcomeReleased || !cmp.Equal(res.Released, []string{"preview/pr-2/api"}) {
		t.Fatalf("closed: %d %s", rec.Code, rec.Body)
	}
	env, _ = h.auth.Status(ctx, "preview/pr-2")
	if l := env.Scopes["api"].Lease; l.Holder != "" || l.Token != g.Tokens["api"] {
		t.Errorf("lease after close: %+v, want free with its token kept", l)
	}
	var kinds []authority.EventKind
	for _, ev := range env.Events[len(env.Events)-2:] {
		kinds = append(kinds, ev.Kind)
		if !strings.Contains(ev.Message, "pull request #2 closed") || !strings.Contains(ev.Message, "Codertocat") {
			t.Errorf("event %+v, want the reason and actor in it", ev)
		}
	}
	if want := []authority.EventKind{authority.EventUnlocked, authority.EventWithdrawn}; !cmp.Equal(kinds, want) {
		t.Errorf("last events %v, want %v: the lease unlocked, the running preview withdrawn", kinds, want)
	}
	// Closing again finds nothing to release and is still fine.
	if rec := h.post(t, "pull_request", "pr-close-2", fixture(t, "pull_request.closed.json")); rec.Code != http.StatusOK {
		t.Errorf("second close: %d %s", rec.Code, rec.Body)
	}
}

// A pull request closed before its preview ran: the pending work is withdrawn, so observed catches
// up with desired and the recovery sweep has nothing of it to re-drive; a replay changes nothing.
func TestClosedPullRequestWithdrawsItsPendingPreview(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	ctx := context.Background()
	if rec := h.post(t, "pull_request", "pr-open", fixture(t, "pull_request.opened.json")); rec.Code != http.StatusOK {
		t.Fatalf("opened: %d %s", rec.Code, rec.Body)
	}
	rec := h.post(t, "pull_request", "pr-close", fixture(t, "pull_request.closed.json"))
	res := decodeResult(t, rec)
	if rec.Code != http.StatusOK || res.Outcome != core.OutcomeReleased || !cmp.Equal(res.Withdrawn, []string{"preview/pr-2/api"}) {
		t.Fatalf("closed: %d %s, want preview/pr-2/api withdrawn", rec.Code, rec.Body)
	}
	env, err := h.auth.Status(ctx, "preview/pr-2")
	if err != nil {
		t.Fatal(err)
	}
	if m := env.Scopes["api"].Mailbox; m != nil || env.Observed != env.Desired {
		t.Errorf("after close: mailbox %+v, observed %d of desired %d; want nothing pending", m, env.Observed, env.Desired)
	}
	last := env.Events[len(env.Events)-1]
	if last.Kind != authority.EventWithdrawn || !strings.Contains(last.Message, "pull request #2 closed") || !strings.Contains(last.Message, "Codertocat") {
		t.Errorf("last event %+v, want the withdrawal with its reason and actor", last)
	}
	seq := env.EventSeq

	h.clock.Advance(time.Hour)
	rep, err := h.auth.Sweep(ctx, 10*time.Minute, 3, h.app.Redrive)
	if err != nil || len(rep.Redriven)+len(rep.Exhausted)+len(rep.Failed) != 0 {
		t.Errorf("sweep after the close: %+v, %v; want nothing to re-drive", rep, err)
	}
	if n := len(h.disp.requests()); n != 1 {
		t.Errorf("%d dispatches, want only the one of the opened pull request", n)
	}

	rec = h.post(t, "pull_request", "pr-close", fixture(t, "pull_request.closed.json"))
	if res := decodeResult(t, rec); rec.Code != http.StatusOK || len(res.Withdrawn)+len(res.Released) != 0 {
		t.Errorf("replayed close: %d %s, want nothing left to withdraw", rec.Code, rec.Body)
	}
	if env, _ := h.auth.Status(ctx, "preview/pr-2"); env.EventSeq != seq {
		t.Errorf("the replay recorded %d more events, want none", env.EventSeq-seq)
	}
}

// A pull request from a fork is recorded under its own ref (its branch name means another branch in
// the base repository), and neither dispatched nor given an origin for the recovery sweep.
func TestForkPullRequestIsRecordedNotDispatched(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	var m map[string]any
	if err := json.Unmarshal(fixture(t, "pull_request.opened.json"), &m); err != nil {
		t.Fatal(err)
	}
	head := m["pull_request"].(map[string]any)["head"].(map[string]any)
	head["repo"].(map[string]any)["full_name"] = "mallory/Hello-World"
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if rec := h.post(t, "pull_request", "pr-fork", body); rec.Code != http.StatusOK {
		t.Fatalf("opened: %d %s", rec.Code, rec.Body)
	}
	if reqs := h.disp.requests(); len(reqs) != 0 {
		t.Errorf("dispatched %+v, want nothing for a fork", reqs)
	}
	env, err := h.auth.Status(context.Background(), "preview/pr-2")
	if err != nil {
		t.Fatal(err)
	}
	if mb := env.Scopes["api"].Mailbox; mb == nil || mb.Ref != "refs/pull/2/head" || mb.Origin != "" {
		t.Errorf("mailbox %+v, want refs/pull/2/head and no origin", mb)
	}
}

func TestPullRequestSynchronizeCarriesBefore(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	if rec := h.post(t, "pull_request", "s1", fixture(t, "pull_request.synchronize.json")); rec.Code != http.StatusOK {
		t.Fatalf("synchronize: %d %s", rec.Code, rec.Body)
	}
	env, err := h.auth.Status(context.Background(), "preview/pr-2")
	if err != nil {
		t.Fatal(err)
	}
	if m := env.Scopes["api"].Mailbox; m.Before != "f95f852bd8fca8fcc58a9a2d6c842781e32a215e" {
		t.Errorf("mailbox before = %q, want the synchronize's before", m.Before)
	}
}

func TestNewRefusesEmptySecret(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	_, err := New(Options{Authority: h.auth, Config: staticConfig{}})
	if !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), "LATESTWINS_WEBHOOK_SECRET") {
		t.Errorf("New without a secret: %v", err)
	}
	if _, err := intake.ParseDelivery(nil, http.Header{"X-Hub-Signature-256": {"sha256=00"}}, []byte("{}")); !errors.Is(err, intake.ErrUnauthorized) {
		t.Errorf("ParseDelivery without a secret: %v, want refused", err)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	for _, tt := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/healthz", http.StatusOK},
		{"GET", "/", http.StatusOK},
		{"GET", "/webhook", http.StatusMethodNotAllowed},
		{"POST", "/", http.StatusMethodNotAllowed},
		{"GET", "/nothing", http.StatusNotFound},
	} {
		r, _ := http.NewRequest(tt.method, tt.path, nil)
		if rec := h.do(r); rec.Code != tt.status {
			t.Errorf("%s %s: %d, want %d", tt.method, tt.path, rec.Code, tt.status)
		}
	}
}

func TestStatusPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	ctx := context.Background()
	// Deploy the push fixture's commit, then hold the lease for the next push.
	h.post(t, "push", "d1", fixture(t, "push.json"))
	if _, err := h.auth.Claim(ctx, "staging", 1, []string{"api"}); err != nil {
		t.Fatal(err)
	}
	g, err := h.auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: 1, Scopes: []string{"api"},
		Outcome: authority.OutcomeSuccess, Tokens: g.Tokens, Holder: "run-1", Run: "run-1"}); err != nil {
		t.Fatal(err)
	}
	next := "a10867b14bb761a232cd80139fbd4c0d33264240"
	h.post(t, "push", "d2", withPush(t, pushSha, next))
	if _, err := h.auth.Claim(ctx, "staging", 2, []string{"api"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: 2, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-<2>", LeaseTTL: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(30 * time.Second)

	r, _ := http.NewRequest("GET", "/", nil)
	rec := h.do(r)
	page := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", rec.Code, rec.Header())
	}
	for _, want := range []string{
		`<h2>staging</h2>`,
		`<strong>1/2</strong>`,
		`<code title="` + pushSha + `">6113728</code>`,
		`a10867b (generation 2)`,
		`held by run-&lt;2&gt; for deploy, token 2, 1m30s left`, // escaped: the page never injects state as markup
		`Deployed 6113728 (generation 1)`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("status page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script") {
		t.Error("the status page has a script")
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
}

func ExampleParseCommand() {
	c, ok := comments.ParseCommand("/latestwins deploy api web\nthanks!")
	fmt.Println(ok, c.Name, c.Scopes)
	// Output: true deploy [api web]
}
