package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/intake"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// policyConfig: staging queues every commit of api; production is latest-wins, and its api scope
// has barrier-paths (migrations) while its web scope has none.
const policyConfig = `environments:
  staging:
    policy: queue
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
  production:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        barrier-paths: [migrations/**]
        workflow: deploy.yml
      web:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
`

var pushBase = time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)

// policyPush is GitHub's example push rewritten as push i of a chain (see chainedPush), changing
// files (nil: a commit that lists none), forced or not.
func policyPush(t *testing.T, i int, files []string, forced bool) []byte {
	t.Helper()
	var p map[string]any
	at := pushBase.Add(time.Duration(i) * time.Second)
	if err := json.Unmarshal(chainedPush(t, i, at, at), &p); err != nil {
		t.Fatal(err)
	}
	p["forced"] = forced
	commit := p["commits"].([]any)[0].(map[string]any)
	commit["id"] = chainSha(i)
	commit["added"], commit["modified"], commit["removed"] = []string{}, orEmpty(files), []string{}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// newLimitedHarness is newHarness with an Authority that holds at most limit pending intents per scope.
func newLimitedHarness(t *testing.T, cfg string, limit int, opts ...func(*Options)) *harness {
	t.Helper()
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	auth := authority.New(memory.New(), authority.WithClock(clock), authority.WithQueueLimit(limit))
	h := newHarness(t, cfg, append(opts, func(o *Options) { o.Authority = auth })...)
	h.auth, h.clock = auth, clock
	return h
}

func intentOf(t *testing.T, res core.Result, env string) core.IntentInfo {
	t.Helper()
	for _, ii := range res.Intents {
		if ii.Environment == env {
			return ii
		}
	}
	t.Fatalf("no intent for %s in %+v", env, res.Intents)
	return core.IntentInfo{}
}

func entryShas(sc *authority.Scope) []string {
	var out []string
	for _, r := range sc.Entries() {
		out = append(out, r.Sha)
	}
	return out
}

// Under policy queue every push waits its turn: the second push of the branch queues behind the
// first instead of superseding it, the delivery's answer says how many are ahead, and the
// environment's stored policy is the file's.
func TestPushToQueueEnvironmentQueues(t *testing.T) {
	t.Parallel()
	h := newHarness(t, policyConfig)
	for i := 1; i <= 3; i++ {
		w := h.post(t, "push", fmt.Sprintf("d%d", i), policyPush(t, i, []string{"src/main.go"}, false))
		if w.Code != http.StatusOK {
			t.Fatalf("push %d: %d %s", i, w.Code, w.Body)
		}
		ii := intentOf(t, decodeResult(t, w), "staging")
		if want := i - 1; ii.Ahead["api"] != want {
			t.Errorf("push %d: %d ahead in staging/api, want %d (%+v)", i, ii.Ahead["api"], want, ii)
		}
	}
	e, err := h.auth.Status(context.Background(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if e.PolicyOrDefault() != authority.PolicyQueue {
		t.Errorf("staging's policy is %s, want queue (from the file)", e.PolicyOrDefault())
	}
	if diff := cmp.Diff([]string{chainSha(1), chainSha(2), chainSha(3)}, entryShas(e.Scopes["api"])); diff != "" {
		t.Errorf("staging/api pending (-want +got):\n%s", diff)
	}
	// production is latest-wins: only the newest is pending.
	p, err := h.auth.Status(context.Background(), "production")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{chainSha(3)}, entryShas(p.Scopes["api"])); diff != "" {
		t.Errorf("production/api pending (-want +got):\n%s", diff)
	}
	// Every accepted push was dispatched, one per environment: a queued one builds while it waits.
	if n := len(h.disp.requests()); n != 6 {
		t.Errorf("%d dispatches, want 6", n)
	}
}

// Under policy queue a push that arrives after a newer push of its branch is recorded as out of
// order; it is not slotted ahead of the newer one.
func TestQueueLatePushIsNotSlottedAhead(t *testing.T) {
	t.Parallel()
	h := newHarness(t, policyConfig)
	if w := h.post(t, "push", "d2", policyPush(t, 2, []string{"src/a.go"}, false)); w.Code != http.StatusOK {
		t.Fatalf("push 2: %d %s", w.Code, w.Body)
	}
	w := h.post(t, "push", "d1", policyPush(t, 1, []string{"src/a.go"}, false))
	ii := intentOf(t, decodeResult(t, w), "staging")
	if len(ii.Accepted) != 0 || ii.Stale["api"] == 0 {
		t.Errorf("the late push: %+v; want it recorded as out of order in api", ii)
	}
	e, err := h.auth.Status(context.Background(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{chainSha(2)}, entryShas(e.Scopes["api"])); diff != "" {
		t.Errorf("staging/api pending (-want +got):\n%s", diff)
	}
}

// Which pushes are barriers: those whose changed files touch a scope's barrier-paths, and those
// whose changed files are not known, in the scopes that have barrier-paths (never in the others).
func TestPushBarriers(t *testing.T) {
	t.Parallel()
	atCap := func(t *testing.T) []byte {
		var p map[string]any
		if err := json.Unmarshal(policyPush(t, 1, []string{"src/a.go"}, false), &p); err != nil {
			t.Fatal(err)
		}
		one := p["commits"].([]any)[0]
		commits := make([]any, intake.MaxListedCommits)
		for i := range commits {
			commits[i] = one
		}
		p["commits"] = commits
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		body    func(t *testing.T) []byte
		barrier []string
	}{
		{"touches barrier-paths", func(t *testing.T) []byte { return policyPush(t, 1, []string{"migrations/0042_add.sql"}, false) }, []string{"api"}},
		{"ordinary change", func(t *testing.T) []byte { return policyPush(t, 1, []string{"src/a.go"}, false) }, nil},
		{"lists no files", func(t *testing.T) []byte { return policyPush(t, 1, nil, false) }, []string{"api"}},
		{"forced", func(t *testing.T) []byte { return policyPush(t, 1, []string{"src/a.go"}, true) }, []string{"api"}},
		{"at GitHub's cap of listed commits", atCap, []string{"api"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, policyConfig)
			w := h.post(t, "push", "d1", tt.body(t))
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if diff := cmp.Diff(tt.barrier, intentOf(t, decodeResult(t, w), "production").Barrier); diff != "" {
				t.Errorf("barrier scopes in the answer (-want +got):\n%s", diff)
			}
			e, err := h.auth.Status(context.Background(), "production")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []string{"api", "web"} {
				m := e.Scopes[s].Mailbox
				if want := slices.Contains(tt.barrier, s); m == nil || m.Barrier != want {
					t.Errorf("production/%s pending %+v, want barrier %v", s, m, want)
				}
			}
		})
	}
}

// A barrier is not superseded: a newer ordinary push waits behind it in the barrier's scope, and
// supersedes as usual in a scope without barrier-paths; its answer says how many are ahead.
func TestNewerPushWaitsBehindBarrier(t *testing.T) {
	t.Parallel()
	h := newHarness(t, policyConfig)
	if w := h.post(t, "push", "d1", policyPush(t, 1, []string{"migrations/0042_add.sql"}, false)); w.Code != http.StatusOK {
		t.Fatalf("barrier push: %d %s", w.Code, w.Body)
	}
	w := h.post(t, "push", "d2", policyPush(t, 2, []string{"src/a.go"}, false))
	if ii := intentOf(t, decodeResult(t, w), "production"); ii.Ahead["api"] != 1 || ii.Ahead["web"] != 0 {
		t.Errorf("the newer push: ahead %v, want 1 in api and none in web", ii.Ahead)
	}
	e, err := h.auth.Status(context.Background(), "production")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{chainSha(1), chainSha(2)}, entryShas(e.Scopes["api"])); diff != "" {
		t.Errorf("production/api pending (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{chainSha(2)}, entryShas(e.Scopes["web"])); diff != "" {
		t.Errorf("production/web pending (-want +got):\n%s", diff)
	}
}

// A push beyond a full queue is refused visibly: 429 with the refusal in the answer, nothing
// written for that environment, while the other environment's intent is accepted and dispatched.
// Re-delivered once the queue has room, it is accepted there and changes nothing elsewhere.
func TestQueueFullPushIsRefused(t *testing.T) {
	t.Parallel()
	h := newLimitedHarness(t, policyConfig, 2)
	for i := 1; i <= 2; i++ {
		if w := h.post(t, "push", fmt.Sprintf("d%d", i), policyPush(t, i, []string{"src/a.go"}, false)); w.Code != http.StatusOK {
			t.Fatalf("push %d: %d %s", i, w.Code, w.Body)
		}
	}
	before := len(h.disp.requests())
	third := policyPush(t, 3, []string{"src/a.go"}, false)
	w := h.post(t, "push", "d3", third)
	res := decodeResult(t, w)
	if w.Code != http.StatusTooManyRequests || res.Outcome != core.OutcomeQueueFull {
		t.Fatalf("third push: %d %s %s; want 429 queue-full", w.Code, res.Outcome, w.Body)
	}
	if len(res.Refused) != 1 || res.Refused[0].Environment != "staging" || res.Refused[0].Scope != "api" ||
		!strings.Contains(res.Message, "2 intents are pending, the most one scope may hold (2)") {
		t.Errorf("refusal %+v, message %q", res.Refused, res.Message)
	}
	e, err := h.auth.Status(context.Background(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{chainSha(1), chainSha(2)}, entryShas(e.Scopes["api"])); diff != "" {
		t.Errorf("staging/api pending after the refusal (-want +got):\n%s", diff)
	}
	if ii := intentOf(t, res, "production"); len(ii.Accepted) != 2 {
		t.Errorf("production: %+v, want the push accepted in api and web", ii)
	}
	got := h.disp.requests()[before:]
	if len(got) != 1 || got[0].Inputs["environment"] != "production" {
		t.Errorf("dispatches for the third push: %+v; want production's only", got)
	}

	// The queue's head deploys; the same delivery, re-delivered, is accepted in staging now.
	deployHead(t, h, "staging", "api")
	before = len(h.disp.requests())
	w = h.post(t, "push", "d3", third)
	res = decodeResult(t, w)
	if w.Code != http.StatusOK || res.Outcome != core.OutcomeAccepted {
		t.Fatalf("re-delivery: %d %s", w.Code, w.Body)
	}
	if ii := intentOf(t, res, "production"); !ii.Duplicate {
		t.Errorf("production on re-delivery: %+v, want a duplicate", ii)
	}
	if got := h.disp.requests()[before:]; len(got) != 1 || got[0].Inputs["environment"] != "staging" {
		t.Errorf("dispatches on re-delivery: %+v; want staging's only", got)
	}
}

// deployHead runs the pass of the scope's head to success.
func deployHead(t *testing.T, h *harness, env, scope string) {
	t.Helper()
	deployHeadOutcome(t, h, env, scope, authority.OutcomeSuccess)
}

// deployHeadOutcome runs the pass of the scope's head to outcome, on its last attempt.
func deployHeadOutcome(t *testing.T, h *harness, env, scope string, outcome authority.Outcome) {
	t.Helper()
	ctx := context.Background()
	e, err := h.auth.Status(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	head := e.Scopes[scope].Mailbox
	if _, err := h.auth.Claim(ctx, env, head.Generation, []string{scope}); err != nil {
		t.Fatal(err)
	}
	g, err := h.auth.Gate(ctx, authority.GateRequest{Environment: env, Generation: head.Generation, Scopes: []string{scope}, Phase: "deploy", Holder: "run-head", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.Complete(ctx, authority.Completion{Environment: env, Generation: head.Generation, Scopes: []string{scope}, Holder: "run-head", Tokens: g.Tokens,
		Outcome: outcome, Attempt: 1, MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
}

// queuedPreviewConfig is commentConfig with the previews queued.
var queuedPreviewConfig = strings.Replace(commentConfig, "  preview/pr-{number}:\n", "  preview/pr-{number}:\n    policy: queue\n", 1)

// failTerminally accepts sha for scope of env under policy queue and ends its pass with a failure
// on its last attempt: it stays at the queue's head, blocking what waits behind it.
func failTerminally(t *testing.T, h *harness, env, scope, id, sha string) int64 {
	t.Helper()
	ctx := context.Background()
	ar, err := h.auth.Accept(ctx, authority.Intent{ID: id, Environment: env, Scopes: []string{scope}, Sha: sha, Ref: "refs/heads/changes",
		Policy: authority.PolicyQueue}, true)
	if err != nil {
		t.Fatal(err)
	}
	deployHeadOutcome(t, h, env, scope, authority.OutcomeFailure)
	return ar.Generation
}

// queueBehind accepts sha for scope of env under policy queue, behind what is pending.
func queueBehind(t *testing.T, h *harness, env, scope, id, sha string) {
	t.Helper()
	if _, err := h.auth.Accept(context.Background(), authority.Intent{ID: id, Environment: env, Scopes: []string{scope}, Sha: sha,
		Ref: "refs/heads/changes", Policy: authority.PolicyQueue}, false); err != nil {
		t.Fatal(err)
	}
}

func head(t *testing.T, h *harness, env, scope string) *authority.Ref {
	t.Helper()
	e, err := h.auth.Status(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return e.Scopes[scope].Mailbox
}

// /latestwins skip and retry, against the strict fake GitHub: write permission is checked, the
// decision is made and recorded with the commenter, and the reply says what happened.
func TestDecisionCommands(t *testing.T) {
	t.Parallel()
	const (
		react = "POST " + fixtureRepo + "/issues/comments/492700400/reactions"
		perm  = "GET " + fixtureRepo + "/collaborators/Codertocat/permission"
		reply = "POST " + fixtureRepo + "/issues/1/comments"
	)
	const third = "1111111111111111111111111111111111111111"
	blocked := func(t *testing.T, h *harness) {
		failTerminally(t, h, "preview/pr-1", "api", "first", olderSha)
		queueBehind(t, h, "preview/pr-1", "api", "second", headSha)
	}
	tests := []struct {
		name       string
		body       string
		seed       func(t *testing.T, h *harness)
		permission string
		outcome    core.Outcome
		reply      string
		check      func(t *testing.T, h *harness)
	}{
		{
			name: "skip gives up on the failure; the next waiting commit goes", body: "/latestwins skip api", seed: blocked,
			permission: "write", outcome: core.OutcomeDecided,
			reply: "Skipped 34c5c77 (generation 1) in preview/pr-1/api: it stays failed, and the next waiting commit goes.",
			check: func(t *testing.T, h *harness) {
				if m := head(t, h, "preview/pr-1", "api"); m == nil || m.Sha != headSha || m.Failed {
					t.Errorf("head %+v, want %s waiting to go", m, headSha)
				}
				e, _ := h.auth.Status(context.Background(), "preview/pr-1")
				last := e.Events[len(e.Events)-1]
				if last.Kind != authority.EventSkipped || !strings.Contains(last.Message, "by Codertocat") ||
					!strings.Contains(last.Message, "/latestwins skip on Codertocat/Hello-World#1 (delivery d-decide)") {
					t.Errorf("last event %+v, want the skip, by the commenter, with the comment as the reason", last)
				}
			},
		},
		{
			name: "retry tries the failure again", body: "/latestwins retry api", seed: blocked,
			permission: "admin", outcome: core.OutcomeDecided,
			reply: "34c5c77 (generation 1) in preview/pr-1/api will be retried from its first attempt",
			check: func(t *testing.T, h *harness) {
				if m := head(t, h, "preview/pr-1", "api"); m == nil || m.Sha != olderSha || m.Failed || m.Attempt != 0 {
					t.Errorf("head %+v, want %s again, no longer failed, from its first attempt", m, olderSha)
				}
			},
		},
		{
			name: "without write permission nothing is decided", body: "/latestwins skip api", seed: blocked,
			permission: "read", outcome: core.OutcomeRefused,
			reply: "`\"Codertocat\"` cannot run `/latestwins skip`: it needs write permission on Codertocat/Hello-World.",
			check: func(t *testing.T, h *harness) {
				if m := head(t, h, "preview/pr-1", "api"); m == nil || m.Sha != olderSha || !m.Failed {
					t.Errorf("head %+v, want the failure still blocking", m)
				}
			},
		},
		{
			name: "a scope nothing blocks", body: "/latestwins skip api",
			seed:       func(t *testing.T, h *harness) { queueBehind(t, h, "preview/pr-1", "api", "only", third) },
			permission: "write", outcome: core.OutcomeDecided,
			reply: "preview/pr-1/api is not blocked by a failure; nothing to skip.",
			check: func(t *testing.T, h *harness) {
				if m := head(t, h, "preview/pr-1", "api"); m == nil || m.Sha != third {
					t.Errorf("head %+v, want %s left alone", m, third)
				}
			},
		},
		{
			name: "before anything was accepted", body: "/latestwins retry worker",
			permission: "write", outcome: core.OutcomeDecided,
			reply: "preview/pr-1/worker is not blocked by a failure: nothing was accepted there yet.",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			h := newHarness(t, queuedPreviewConfig, withGitHub(inst))
			if tt.seed != nil {
				tt.seed(t, h)
			}
			runCommand(t, h, gh, "d-decide", tt.body, tt.permission, "",
				commandWant{outcome: tt.outcome, calls: []string{react, perm, reply}, reply: []string{tt.reply}})
			if tt.check != nil {
				tt.check(t, h)
			}
		})
	}
}

// A re-delivered skip does not skip again: when the commit that went next has failed terminally
// too by then, it stays blocking, and the reply says the command was carried out before.
func TestRedeliveredSkipSkipsOnce(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubReaction(t, gh).Times(2)
	stubPermission(gh, "Codertocat", "write").Times(2)
	st := stubReply(t, gh).Times(2)
	h := newHarness(t, queuedPreviewConfig, withGitHub(inst))
	failTerminally(t, h, "preview/pr-1", "api", "first", olderSha)
	queueBehind(t, h, "preview/pr-1", "api", "second", headSha)
	body := commentFixture(t, withBody("/latestwins skip api"))
	if w := h.post(t, "issue_comment", "d-skip", body); w.Code != http.StatusOK {
		t.Fatalf("skip: %d %s", w.Code, w.Body)
	}
	// The next commit deploys and fails on its last attempt; then GitHub re-delivers the comment.
	deployHeadOutcome(t, h, "preview/pr-1", "api", authority.OutcomeFailure)
	if m := head(t, h, "preview/pr-1", "api"); m == nil || m.Sha != headSha || !m.Failed {
		t.Fatalf("head %+v, want %s failed", m, headSha)
	}
	if w := h.post(t, "issue_comment", "d-skip", body); w.Code != http.StatusOK {
		t.Fatalf("re-delivered skip: %d %s", w.Code, w.Body)
	}
	if m := head(t, h, "preview/pr-1", "api"); m == nil || m.Sha != headSha || !m.Failed {
		t.Fatalf("after the re-delivered skip the head is %+v; want %s still failed and blocking", m, headSha)
	}
	reqs := st.Requests()
	m, _ := reqs[len(reqs)-1].Body.(map[string]any)
	last, _ := m["body"].(string)
	if !strings.Contains(last, "preview/pr-1/api: this command was carried out before (delivery d-skip); nothing more to skip.") {
		t.Errorf("reply to the re-delivery %q", last)
	}
}

// A deploy command beyond a full queue is refused visibly: 429, and a reply saying why.
func TestDeployCommandOnFullQueueReplies(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	h := newLimitedHarness(t, queuedPreviewConfig, 1, withGitHub(inst))
	stubReaction(t, gh)
	stubPermission(gh, "Codertocat", "write")
	st := stubReply(t, gh)
	queueBehind(t, h, "preview/pr-1", "api", "other", olderSha)    // its intent makes the environment, under policy queue
	deployed(t, h, "preview/pr-1", "pr-opened", headSha, "worker") // the pull request's head, newest

	w := h.post(t, "issue_comment", "d-deploy", commentFixture(t, withBody("/latestwins deploy")))
	res := decodeResult(t, w)
	if w.Code != http.StatusTooManyRequests || res.Outcome != core.OutcomeQueueFull {
		t.Fatalf("%d %s, want 429 queue-full: %s", w.Code, res.Outcome, w.Body)
	}
	if got := replyOf(t, st); !strings.Contains(got, "preview/pr-1: not accepted, the queue is full: preview/pr-1/api: 1 intents are pending, the most one scope may hold (1)") {
		t.Errorf("reply %q", got)
	}
	if m := head(t, h, "preview/pr-1", "worker"); m != nil {
		t.Errorf("worker has %+v pending; the refused intent wrote nothing", m)
	}
}

// The status reply names a policy other than latest, as the other renderings do.
func TestStatusReplyNamesThePolicy(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	h := newHarness(t, strings.Replace(commentConfig, "  preview/pr-{number}:\n", "  preview/pr-{number}:\n    policy: queue\n", 1), withGitHub(inst))
	if _, err := h.auth.Accept(context.Background(), authority.Intent{ID: "q1", Environment: "preview/pr-1", Scopes: []string{"api"},
		Sha: strings.Repeat("a", 40), Ref: "refs/heads/changes", Policy: authority.PolicyQueue}, false); err != nil {
		t.Fatal(err)
	}
	stubReaction(t, gh)
	reply := stubReply(t, gh)
	if rec := h.post(t, "issue_comment", "d-status", commentFixture(t, withBody("/latestwins status"))); rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	if body := replyOf(t, reply); !strings.Contains(body, "**preview/pr-1** 0/1 reconciling (observed/desired generation), policy **queue**") {
		t.Errorf("reply %q does not name the policy", body)
	}
}

// A retried failure's workflow is started at once from its recorded origin, not on the sweep's
// next round.
func TestRetryStartsTheWorkflowAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, queuedPreviewConfig, func(o *Options) { o.Conversation = allowAll{} })
	ar, err := h.auth.Accept(context.Background(), authority.Intent{ID: "p1", Environment: "preview/pr-1", Scopes: []string{"api"}, Sha: headSha,
		Ref: "refs/heads/changes", Policy: authority.PolicyQueue, Origin: core.OriginFor(1, "Codertocat/Hello-World", "changes")}, true)
	if err != nil {
		t.Fatal(err)
	}
	deployHeadOutcome(t, h, "preview/pr-1", "api", authority.OutcomeFailure)
	before := len(h.disp.requests())
	w := h.post(t, "issue_comment", "d-retry", commentFixture(t, withBody("/latestwins retry api")))
	if res := decodeResult(t, w); w.Code != http.StatusOK || res.Outcome != core.OutcomeDecided {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	reqs := h.disp.requests()
	if len(reqs) != before+1 || reqs[len(reqs)-1].Inputs["generation"] != fmt.Sprint(ar.Generation) || reqs[len(reqs)-1].Ref != "changes" {
		t.Fatalf("dispatches after retry: %+v; want one for generation %d on changes", reqs[before:], ar.Generation)
	}
}
