package app

import (
	"context"
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
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// rollbackConfig: a preview and a staging scope built from the fixtures' repository, and a staging
// scope built from another repository.
const rollbackConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
      web:
        repository: acme/web
        branch: master
        workflow: web.yml
  preview/pr-{number}:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: preview.yml
`

const (
	shaA = "aaaaaaa111111111111111111111111111111111"
	shaB = "bbbbbbb222222222222222222222222222222222"
	shaC = "ccccccc333333333333333333333333333333333"
)

// liveThenPending makes A then B live in env/scope on ref, and C pending behind them.
func liveThenPending(t *testing.T, h *harness, env, scope, ref string) {
	t.Helper()
	deployedRef(t, h, env, "a", shaA, ref, scope)
	deployedRef(t, h, env, "b", shaB, ref, scope)
	if _, err := h.auth.Accept(context.Background(), authority.Intent{ID: "c", Environment: env, Scopes: []string{scope}, Sha: shaC, Ref: ref, Source: "push"}, false); err != nil {
		t.Fatal(err)
	}
}

func scopeState(t *testing.T, h *harness, env, scope string) *authority.Scope {
	t.Helper()
	e, err := h.auth.Status(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return e.Scopes[scope]
}

// /latestwins rollback against the strict fake GitHub: write permission is checked, the older
// commit jumps ahead of what is pending and freezes the scope, and the scope's workflow is
// dispatched at once for the rollback's generation, with the origin the sweep re-drives.
func TestRollbackCommand(t *testing.T) {
	t.Parallel()
	const (
		react   = "POST " + fixtureRepo + "/issues/comments/492700400/reactions"
		perm    = "GET " + fixtureRepo + "/collaborators/Codertocat/permission"
		preview = "POST " + fixtureRepo + "/actions/workflows/preview.yml/dispatches"
		deploy  = "POST " + fixtureRepo + "/actions/workflows/deploy.yml/dispatches"
		reply   = "POST " + fixtureRepo + "/issues/1/comments"
	)
	repo := core.RepoRef{Owner: "Codertocat", Name: "Hello-World"}
	tests := []struct {
		name       string
		body       string
		seed       func(t *testing.T, h *harness)
		permission string
		dispatch   string // the workflow stubbed, when one is dispatched
		outcome    core.Outcome
		calls      []string
		reply      []string
		dispatched []core.DispatchRequest
		frozen     string // ENV/SCOPE frozen at shaA afterwards
	}{
		{
			name:       "the pull request's preview goes back to the commit live before",
			body:       "/latestwins rollback api",
			seed:       func(t *testing.T, h *harness) { liveThenPending(t, h, "preview/pr-1", "api", "refs/heads/changes") },
			permission: "write", dispatch: "preview.yml", outcome: core.OutcomeRolledBack,
			calls: []string{react, perm, preview, reply},
			reply: []string{"Rolled preview/pr-1/api back to aaaaaaa at generation 4, ahead of everything pending. preview/pr-1/api is frozen (freeze 4): newer commits are recorded and wait until `/latestwins unfreeze api 4`.",
				"Dispatched preview.yml on changes in Codertocat/Hello-World (scopes api, generation 4)."},
			dispatched: []core.DispatchRequest{{Installation: fixtureInstallID, Repo: repo, Workflow: "preview.yml", Ref: "changes",
				Inputs: map[string]string{"environment": "preview/pr-1", "generation": "4", "scopes": "api"}}},
			frozen: "preview/pr-1/api",
		},
		{
			name:       "an environment the repository feeds, to an abbreviated commit",
			body:       "/latestwins rollback staging/api aaaaaaa1",
			seed:       func(t *testing.T, h *harness) { liveThenPending(t, h, "staging", "api", "refs/heads/master") },
			permission: "maintain", dispatch: "deploy.yml", outcome: core.OutcomeRolledBack,
			calls: []string{react, perm, deploy, reply},
			reply: []string{"Rolled staging/api back to aaaaaaa at generation 4", "`/latestwins unfreeze staging/api 4`",
				"Dispatched deploy.yml on master in Codertocat/Hello-World (scopes api, generation 4)."},
			dispatched: []core.DispatchRequest{{Installation: fixtureInstallID, Repo: repo, Workflow: "deploy.yml", Ref: "master",
				Inputs: map[string]string{"environment": "staging", "generation": "4", "scopes": "api"}}},
			frozen: "staging/api",
		},
		{
			name:       "a scope another repository feeds is refused",
			body:       "/latestwins rollback staging/web aaaaaaa",
			seed:       func(t *testing.T, h *harness) { liveThenPending(t, h, "staging", "web", "refs/heads/master") },
			permission: "write", outcome: core.OutcomeNoScopes,
			calls: []string{react, perm, reply},
			reply: []string{"staging/`\"web\"` is not built from Codertocat/Hello-World in .github/latestwins.yml, so a pull request of Codertocat/Hello-World cannot act on it."},
		},
		{
			name:       "without write permission nothing is rolled back",
			body:       "/latestwins rollback staging/api",
			seed:       func(t *testing.T, h *harness) { liveThenPending(t, h, "staging", "api", "refs/heads/master") },
			permission: "read", outcome: core.OutcomeRefused,
			calls: []string{react, perm, reply},
			reply: []string{"`\"Codertocat\"` cannot run `/latestwins rollback`: it needs write permission on Codertocat/Hello-World."},
		},
		{
			name:       "an abbreviation of no known commit",
			body:       "/latestwins rollback api 1234567",
			seed:       func(t *testing.T, h *harness) { liveThenPending(t, h, "preview/pr-1", "api", "refs/heads/changes") },
			permission: "write", outcome: core.OutcomeRolledBack,
			calls: []string{react, perm, reply},
			reply: []string{"Could not roll back preview/pr-1/api: invalid sha \"1234567\": no commit with that prefix was live in preview/pr-1/api " +
				"(live now, live before, or deployed there within its last 1000 events): " +
				"through the App a rollback goes back to a commit the scope ran; to deploy another, push it (or use the command line, which may name any)\n"},
		},
		{
			// A full sha that never reached the scope would skip its review and what the environment
			// requires: refused, and nothing is accepted.
			name:       "a commit that was never live there",
			body:       "/latestwins rollback api " + strings.Repeat("e", 40),
			seed:       func(t *testing.T, h *harness) { liveThenPending(t, h, "preview/pr-1", "api", "refs/heads/changes") },
			permission: "write", outcome: core.OutcomeRolledBack,
			calls: []string{react, perm, reply},
			reply: []string{"Could not roll back preview/pr-1/api: invalid sha \"" + strings.Repeat("e", 40) + "\": no commit with that prefix was live in preview/pr-1/api"},
		},
		{
			name:       "nothing accepted yet",
			body:       "/latestwins rollback api",
			permission: "write", outcome: core.OutcomeRolledBack,
			calls: []string{react, perm, reply},
			reply: []string{"Could not roll back preview/pr-1/api: invalid environment \"preview/pr-1\""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			h := newHarness(t, rollbackConfig, withGitHub(inst))
			if tt.seed != nil {
				tt.seed(t, h)
			}
			runCommand(t, h, gh, "d-rollback", tt.body, tt.permission, tt.dispatch,
				commandWant{outcome: tt.outcome, calls: tt.calls, reply: tt.reply, dispatched: tt.dispatched})
			for _, r := range []string{"preview/pr-1/api", "staging/api", "staging/web"} {
				env, scope, _ := authority.SplitResource(r)
				e, err := h.auth.Status(context.Background(), env)
				if err != nil {
					continue
				}
				sc := e.Scopes[scope]
				if sc == nil {
					continue
				}
				if r != tt.frozen {
					if sc.Freeze != nil {
						t.Errorf("%s is frozen: %+v", r, sc.Freeze)
					}
					continue
				}
				if sc.Freeze == nil || sc.Freeze.Sha != shaA || sc.Freeze.Actor != "Codertocat" ||
					!strings.Contains(sc.Freeze.Reason, "/latestwins rollback on Codertocat/Hello-World#1 (delivery d-rollback)") {
					t.Errorf("%s freeze %+v, want at %s by Codertocat, the comment as its reason", r, sc.Freeze, shaA)
				}
				m := sc.Mailbox
				wantOrigin := core.OriginFor(fixtureInstallID, "Codertocat/Hello-World", tt.dispatched[0].Ref)
				if m == nil || m.Sha != shaA || !m.Rollback || len(sc.Queue) != 0 || m.Origin != wantOrigin {
					t.Errorf("%s pending %+v (queue %d), want only the rollback to %s with origin %s", r, m, len(sc.Queue), shaA, wantOrigin)
				}
			}
		})
	}
}

// A re-delivered rollback comment rolls back once: the same generation, one dispatch, and a reply
// that says it was carried out before. Rolling back again would supersede the deploy the first
// one started and dispatch a second run.
func TestRedeliveredRollbackRollsBackOnce(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubReaction(t, gh).Times(2)
	stubPermission(gh, "Codertocat", "write").Times(2)
	disp := stubDispatch(t, gh, "deploy.yml")
	st := stubReply(t, gh).Times(2)
	h := newHarness(t, rollbackConfig, withGitHub(inst))
	liveThenPending(t, h, "staging", "api", "refs/heads/master")
	body := commentFixture(t, withBody("/latestwins rollback staging/api"))
	for i := range 2 {
		if w := h.post(t, "issue_comment", "d-once", body); w.Code != http.StatusOK {
			t.Fatalf("delivery %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	if n := len(disp.Requests()); n != 1 {
		t.Errorf("%d dispatches, want 1", n)
	}
	e, err := h.auth.Status(context.Background(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if e.Desired != 4 || e.Scopes["api"].Mailbox == nil || e.Scopes["api"].Mailbox.Generation != 4 {
		t.Errorf("desired %d, pending %+v; want the one rollback at generation 4", e.Desired, e.Scopes["api"].Mailbox)
	}
	reqs := st.Requests()
	m, _ := reqs[len(reqs)-1].Body.(map[string]any)
	if last, _ := m["body"].(string); !strings.Contains(last, "staging/api: this command was carried out before (delivery d-once): the rollback is generation 4.") {
		t.Errorf("reply to the re-delivery %q", last)
	}
}

// The rollback's run dies before it claims: the sweep finds the work stalled and dispatches the
// same workflow again, on the same branch, for the rollback's generation.
func TestSweepRedrivesARollback(t *testing.T) {
	t.Parallel()
	h := newHarness(t, rollbackConfig, func(o *Options) { o.Conversation = allowAll{} })
	liveThenPending(t, h, "staging", "api", "refs/heads/master")
	w := h.post(t, "issue_comment", "d-sweep", commentFixture(t, withBody("/latestwins rollback staging/api")))
	if res := decodeResult(t, w); w.Code != http.StatusOK || res.Outcome != core.OutcomeRolledBack || len(res.Dispatched) != 1 {
		t.Fatalf("rollback: %d %s", w.Code, w.Body)
	}
	h.clock.Advance(15 * time.Minute)
	rep, err := h.auth.Sweep(context.Background(), 10*time.Minute, 3, h.app.Redrive)
	if err != nil || len(rep.Failed) != 0 || len(rep.Redriven) != 1 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	all := h.disp.requests()
	if len(all) != 2 {
		t.Fatalf("dispatches: %+v; want the rollback's and one re-drive", all)
	}
	if diff := cmp.Diff(all[0], all[1]); diff != "" {
		t.Errorf("the re-drive differs from the rollback's dispatch (-first +redrive):\n%s", diff)
	}
}

// /latestwins unfreeze lifts the freeze once, recording the commenter; the commit pushed while
// frozen goes next.
func TestUnfreezeCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t, rollbackConfig, func(o *Options) { o.Conversation = allowAll{} })
	liveThenPending(t, h, "staging", "api", "refs/heads/master")
	post := func(id, body string) core.Result {
		t.Helper()
		w := h.post(t, "issue_comment", id, commentFixture(t, withBody(body)))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", body, w.Code, w.Body)
		}
		return decodeResult(t, w)
	}
	if res := post("d-not-frozen", "/latestwins unfreeze staging/api 4"); !strings.Contains(res.Reply, "staging/api is not frozen; nothing to unfreeze.") {
		t.Errorf("unfreeze before a rollback: %q", res.Reply)
	}
	post("d-rb", "/latestwins rollback staging/api")
	deployHead(t, h, "staging", "api") // the rollback's run deploys A
	held, err := h.auth.Accept(context.Background(), authority.Intent{ID: "d", Environment: "staging", Scopes: []string{"api"}, Sha: headSha,
		Ref: "refs/heads/master", Source: "push", Origin: core.OriginFor(1, "Codertocat/Hello-World", "master")}, false)
	if err != nil {
		t.Fatal(err)
	}
	before := len(h.disp.requests())
	res := post("d-unfreeze", "/latestwins unfreeze staging/api 4")
	// The held commit's workflow is started at once, not on the sweep's next round.
	if reqs := h.disp.requests(); len(reqs) != before+1 || reqs[len(reqs)-1].Inputs["generation"] != fmt.Sprint(held.Generation) {
		t.Errorf("dispatches after unfreeze: %+v; want one more, for generation %d", reqs[before:], held.Generation)
	}
	if res.Outcome != core.OutcomeUnfrozen || !strings.Contains(res.Reply, "Unfroze staging/api: lifted the freeze of the rollback to aaaaaaa by `\"Codertocat\"` (freeze 4).") {
		t.Errorf("unfreeze: %s %q", res.Outcome, res.Reply)
	}
	sc := scopeState(t, h, "staging", "api")
	if sc.Freeze != nil || sc.Mailbox == nil || sc.Mailbox.Sha != headSha {
		t.Errorf("after unfreeze: freeze %+v, pending %+v; want none, and %s next", sc.Freeze, sc.Mailbox, headSha)
	}
	if res := post("d-unfreeze", "/latestwins unfreeze staging/api 4"); !strings.Contains(res.Reply, "this command was carried out before (delivery d-unfreeze)") {
		t.Errorf("re-delivered unfreeze: %q", res.Reply)
	}
	e, _ := h.auth.Status(context.Background(), "staging")
	var found bool
	for _, ev := range e.Events {
		found = found || (ev.Kind == authority.EventUnfrozen && strings.Contains(ev.Message, "Unfrozen by Codertocat: /latestwins unfreeze on Codertocat/Hello-World#1 (delivery d-unfreeze)"))
	}
	if !found {
		t.Errorf("no unfreeze event by the commenter in %+v", e.Events)
	}
}

// Rollback 1 deployed, then rollback 2 froze staging/api again: `/latestwins unfreeze staging/api 4`,
// written for incident 1, is refused with a reply that names rollback 2's freeze and the comment
// that lifts it, and starts nothing; so is an unfreeze that names no freeze; naming freeze 5 lifts
// it.
func TestUnfreezeCommandNamesTheFreeze(t *testing.T) {
	t.Parallel()
	h := newHarness(t, rollbackConfig, func(o *Options) { o.Conversation = allowAll{} })
	liveThenPending(t, h, "staging", "api", "refs/heads/master")
	post := func(id, body string) core.Result {
		t.Helper()
		w := h.post(t, "issue_comment", id, commentFixture(t, withBody(body)))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", body, w.Code, w.Body)
		}
		return decodeResult(t, w)
	}
	post("d-rb1", "/latestwins rollback staging/api")
	deployHead(t, h, "staging", "api") // rollback 1's run deploys A
	if res := post("d-rb2", "/latestwins rollback staging/api bbbbbbb"); !strings.Contains(res.Reply, "staging/api is frozen (freeze 5)") {
		t.Fatalf("rollback 2: %q", res.Reply)
	}
	before := len(h.disp.requests())

	res := post("d-unfreeze-1", "/latestwins unfreeze staging/api 4")
	for _, want := range []string{"staging/api: freeze 4 is not the current freeze (a newer rollback has frozen the scope since).",
		"staging/api is frozen by freeze 5: the rollback to bbbbbbb by `\"Codertocat\"`", "Nothing was unfrozen.", "comment `/latestwins unfreeze staging/api 5`"} {
		if !strings.Contains(res.Reply, want) {
			t.Errorf("unfreeze naming rollback 1's freeze: reply %q does not say %q", res.Reply, want)
		}
	}
	res = post("d-unfreeze-none", "/latestwins unfreeze staging/api")
	if want := "staging/api is frozen by freeze 5: the rollback to bbbbbbb by `\"Codertocat\"`"; !strings.Contains(res.Reply, want) ||
		!strings.Contains(res.Reply, "comment `/latestwins unfreeze staging/api 5`") || strings.Contains(res.Reply, "is not the current freeze") {
		t.Errorf("unfreeze naming no freeze: reply %q; want it to name freeze 5 and the comment that lifts it", res.Reply)
	}
	if sc := scopeState(t, h, "staging", "api"); sc.Freeze == nil || sc.Freeze.Generation != 5 {
		t.Fatalf("after the refused unfreezes: freeze %+v; want rollback 2's", sc.Freeze)
	}
	if n := len(h.disp.requests()); n != before {
		t.Errorf("the refused unfreezes dispatched %d workflows", n-before)
	}

	if res := post("d-unfreeze-2", "/latestwins unfreeze staging/api 5"); !strings.Contains(res.Reply, "Unfroze staging/api: lifted the freeze of the rollback to bbbbbbb") {
		t.Errorf("unfreeze naming rollback 2's freeze: %q", res.Reply)
	}
	if sc := scopeState(t, h, "staging", "api"); sc.Freeze != nil {
		t.Errorf("after the unfreeze: freeze %+v; want none", sc.Freeze)
	}
}

// allowAll is a Conversation that lets every commenter write and answers nothing.
type allowAll struct{}

var _ comments.Conversation = allowAll{}

func (allowAll) React(context.Context, core.CommentRef, string) error            { return nil }
func (allowAll) Reply(context.Context, core.CommentRef, string) error            { return nil }
func (allowAll) CanWrite(context.Context, core.CommentRef, string) (bool, error) { return true, nil }

// A bad commit may break the repository's own configuration file: the rollback through the App still
// works, from the trusted configuration alone, while other commands are refused with the file's
// problems.
func TestRollbackWithARefusedOwnFile(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	h := newHarness(t, rollbackConfig, withGitHub(inst))
	liveThenPending(t, h, "staging", "api", "refs/heads/master")
	files, err := ghadapter.NewFiles(inst, h.auth, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "latestwins.yml")
	if err := os.WriteFile(path, []byte("allowed-overrides: [workflow]\n"+rollbackConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if h.app.core.Config, err = configsource.NewTrusted(configsource.TrustedOptions{Path: path, Files: files}); err != nil {
		t.Fatal(err)
	}
	stubConfig(t, gh, "environments:\n  production:\n    scopes: {}\n") // refused: production is not Hello-World's
	stubReaction(t, gh)
	stubPermission(gh, "Codertocat", "write")
	stubDispatch(t, gh, "deploy.yml")
	reply := stubReply(t, gh)
	rec := h.post(t, "issue_comment", "d-rollback", commentFixture(t, withBody("/latestwins rollback staging/api")))
	if res := decodeResult(t, rec); rec.Code != http.StatusOK || res.Outcome != core.OutcomeRolledBack || len(res.Dispatched) != 1 {
		t.Fatalf("%d %s: %s; want rolled back and dispatched", rec.Code, res.Outcome, rec.Body)
	}
	if sc := scopeState(t, h, "staging", "api"); sc.Freeze == nil || sc.Freeze.Sha != shaA {
		t.Fatalf("staging/api after the rollback: freeze %+v; want frozen at A", sc.Freeze)
	}
	if body := replyOf(t, reply); strings.Contains(body, "refused") {
		t.Errorf("reply %q speaks of the refused file; the rollback did not need it", body)
	}
}

// commandWant is what a comment command should come to: the delivery's outcome, the GitHub calls
// in order (METHOD PATH), parts of the reply, and the workflows dispatched.
type commandWant struct {
	outcome    core.Outcome
	calls      []string
	reply      []string
	dispatched []core.DispatchRequest
}

// runCommand posts body as a new comment (delivery id) by a user with permission on the
// repository, with the GitHub stubs a command needs (dispatch: the workflow it dispatches, "" for
// none), and checks the answer against want. It returns the delivery's result.
func runCommand(t *testing.T, h *harness, gh *githubtest.Server, id, body, permission, dispatch string, want commandWant) core.Result {
	t.Helper()
	stubReaction(t, gh)
	stubPermission(gh, "Codertocat", permission)
	if dispatch != "" {
		stubDispatch(t, gh, dispatch)
	}
	st := stubReply(t, gh)
	rec := h.post(t, "issue_comment", id, commentFixture(t, withBody(body)))
	res := decodeResult(t, rec)
	if rec.Code != http.StatusOK || res.Outcome != want.outcome {
		t.Errorf("%d %s, want 200 %s: %s", rec.Code, res.Outcome, want.outcome, rec.Body)
	}
	var got []string
	for _, c := range calls(gh.Requests()) {
		got = append(got, c.Method+" "+c.Path)
	}
	if diff := cmp.Diff(want.calls, got); diff != "" {
		t.Errorf("GitHub requests (-want +got):\n%s", diff)
	}
	reply := replyOf(t, st)
	for _, w := range want.reply {
		if !strings.Contains(reply, w) {
			t.Errorf("reply %q lacks %q", reply, w)
		}
	}
	if diff := cmp.Diff(want.dispatched, res.Dispatched); diff != "" {
		t.Errorf("dispatched (-want +got):\n%s", diff)
	}
	return res
}
