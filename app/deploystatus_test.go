package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
)

const productionConfig = `environments:
  production:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
`

// statusDelivery is GitHub's example deployment_status (a successful deployment of f95f852 to
// production in Codertocat/Hello-World), with its state set.
func statusDelivery(t *testing.T, state string) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(fixture(t, "deployment_status.created.json"), &p); err != nil {
		t.Fatal(err)
	}
	p["deployment_status"].(map[string]any)["state"] = state
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeploymentStatusClosesTheLoop: a job gated only by the protection rule records its outcome
// through its deployment's status: success makes the approved commit live; failures count attempts
// once per delivery, terminal on the third; a status of a commit that is not pending changes nothing;
// other states are not outcomes.
func TestDeploymentStatusClosesTheLoop(t *testing.T) {
	t.Parallel()
	const sha = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
	accept := func(h *harness, id, commit string) {
		t.Helper()
		if _, err := h.auth.Accept(t.Context(), authority.Intent{ID: id, Environment: "production", Scopes: []string{"api"}, Sha: commit,
			Ref: "refs/heads/master"}, false); err != nil {
			t.Fatal(err)
		}
	}
	api := func(h *harness) *authority.Scope {
		t.Helper()
		e, err := h.auth.Status(t.Context(), "production")
		if err != nil {
			t.Fatal(err)
		}
		return e.Scopes["api"]
	}

	// approve is the protection rule's answer for GitHub's example deployment of sha (145988746).
	approve := func(h *harness) {
		t.Helper()
		if w := h.post(t, core.EventProtectionRule, "d-approve", protectionFixture(t, nil)); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"approved"`) {
			t.Fatalf("protection rule: %d %s; want it approved", w.Code, w.Body)
		}
	}

	t.Run("success", func(t *testing.T) {
		h := newHarness(t, productionConfig)
		accept(h, "push-1", sha)
		approve(h)
		if w := h.post(t, "deployment_status", "s-1", statusDelivery(t, "success")); w.Code != http.StatusOK {
			t.Fatalf("deployment_status success: %d %s", w.Code, w.Body)
		}
		if sc := api(h); sc.Live == nil || sc.Live.Sha != sha || sc.Mailbox != nil {
			t.Fatalf("api after a successful deployment: %+v", sc)
		}
	})
	t.Run("failures", func(t *testing.T) {
		h := newHarness(t, productionConfig)
		accept(h, "push-1", sha)
		approve(h)
		for _, id := range []string{"f-1", "f-1", "f-2"} { // f-1 re-delivered: counted once
			h.post(t, "deployment_status", id, statusDelivery(t, "failure"))
		}
		if sc := api(h); sc.Mailbox == nil || sc.Mailbox.Attempt != 2 || sc.Failure != nil {
			t.Fatalf("api after two counted failures: %+v", sc)
		}
		h.post(t, "deployment_status", "f-3", statusDelivery(t, "error"))
		if sc := api(h); sc.Mailbox != nil || sc.Failure == nil || sc.Failure.Attempt != 3 {
			t.Fatalf("api after the third failure: %+v", sc)
		}
	})
	t.Run("superseded commit and other states", func(t *testing.T) {
		h := newHarness(t, productionConfig)
		accept(h, "push-1", sha)
		approve(h)
		accept(h, "push-2", "cccccccccccccccccccccccccccccccccccccccc")
		before := api(h)
		for i, state := range []string{"success", "in_progress", "queued", "inactive"} {
			if w := h.post(t, "deployment_status", "o-"+state, statusDelivery(t, state)); w.Code >= 300 {
				t.Fatalf("deployment_status %s: %d %s", state, w.Code, w.Body)
			}
			if sc := api(h); sc.Live != nil || sc.Mailbox.Sha != before.Mailbox.Sha {
				t.Fatalf("status %d (%s) changed api: %+v", i, state, sc)
			}
		}
	})
}

// promotionConfig makes production wait for staging: GitHub's example deployment (f95f852 to the
// GitHub environment production) feeds production's api.
const promotionStatusConfig = `environments:
  staging:
    github-environment: staging
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
  production:
    requires: [staging]
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
`

// A deployment status counts only for a deployment the protection rule approved: anyone who may
// write to the repository can create a deployment and its statuses through GitHub's API. One the
// rule never approved (it had to wait for staging, a freeze held it, or nobody asked the rule) is
// recorded once as a warning, shown with the environment, and makes nothing live: not for
// promotion, not through a freeze.
func TestDeploymentStatusOfAnUnapprovedDeployment(t *testing.T) {
	t.Parallel()
	const sha = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
	status := func(t *testing.T, h *harness, env string) *authority.Env {
		t.Helper()
		e, err := h.auth.Status(t.Context(), env)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	wantUnapproved := func(t *testing.T, h *harness, id string) {
		t.Helper()
		w := h.post(t, "deployment_status", id, statusDelivery(t, "success"))
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"outcome":"unapproved"`) {
			t.Fatalf("deployment_status success: %d %s; want it recorded as unapproved", w.Code, w.Body)
		}
		sc := status(t, h, "production").Scopes["api"]
		if sc.Live != nil || sc.Mailbox == nil || sc.Mailbox.Sha != sha {
			t.Fatalf("production/api after an unapproved success: live %+v, pending %+v; want nothing live and %s still pending", sc.Live, sc.Mailbox, sha[:7])
		}
		if sc.Unapproved == nil || sc.Unapproved.Deployment != 145988746 || !sc.Unapproved.Success {
			t.Fatalf("production/api warning: %+v; want the unapproved deployment 145988746", sc.Unapproved)
		}
	}

	t.Run("waiting for staging", func(t *testing.T) {
		h := newHarness(t, promotionStatusConfig)
		for _, env := range []string{"staging", "production"} {
			if _, err := h.auth.Accept(t.Context(), authority.Intent{ID: "push-" + env, Environment: env, Scopes: []string{"api"}, Sha: sha,
				Ref: "refs/heads/master", Requires: requiresOf(env)}, false); err != nil {
				t.Fatal(err)
			}
		}
		if w := h.post(t, core.EventProtectionRule, "d-ask", protectionFixture(t, nil)); !strings.Contains(w.Body.String(), `"rejected"`) ||
			!strings.Contains(w.Body.String(), "waiting for staging") {
			t.Fatalf("protection rule: %d %s; want it rejected, waiting for staging", w.Code, w.Body)
		}
		wantUnapproved(t, h, "s-1")
		wantUnapproved(t, h, "s-1") // a re-delivery: recorded once
		var warnings int
		for _, e := range status(t, h, "production").Events {
			if e.Kind == authority.EventUnapproved {
				warnings++
			}
		}
		if warnings != 1 {
			t.Errorf("unapproved reports recorded %d times; want once", warnings)
		}
		if st := status(t, h, "staging").Scopes["api"]; st.Live != nil {
			t.Errorf("staging/api: live %+v; want nothing", st.Live)
		}
	})
	t.Run("held by a freeze", func(t *testing.T) {
		h := newHarness(t, productionConfig)
		ctx := t.Context()
		old := "a" + sha[1:]
		for i, c := range []string{old, "b" + sha[1:]} {
			if _, err := h.auth.Accept(ctx, authority.Intent{ID: fmt.Sprintf("push-%d", i), Environment: "production", Scopes: []string{"api"}, Sha: c, Ref: "refs/heads/master"}, true); err != nil {
				t.Fatal(err)
			}
			deployHeadOutcome(t, h, "production", "api", authority.OutcomeSuccess)
		}
		if _, err := h.auth.Rollback(ctx, authority.RollbackRequest{Environment: "production", Scope: "api", To: old, Actor: "octocat", Reason: "bad deploy"}); err != nil {
			t.Fatal(err)
		}
		deployHeadOutcome(t, h, "production", "api", authority.OutcomeSuccess)
		if _, err := h.auth.Accept(ctx, authority.Intent{ID: "push-2", Environment: "production", Scopes: []string{"api"}, Sha: sha, Ref: "refs/heads/master"}, false); err != nil {
			t.Fatal(err)
		}
		if w := h.post(t, core.EventProtectionRule, "d-ask", protectionFixture(t, nil)); !strings.Contains(w.Body.String(), "held by a freeze") {
			t.Fatalf("protection rule: %d %s; want it held by the freeze", w.Code, w.Body)
		}
		w := h.post(t, "deployment_status", "s-1", statusDelivery(t, "success"))
		if !strings.Contains(w.Body.String(), `"outcome":"unapproved"`) {
			t.Fatalf("deployment_status: %d %s; want unapproved", w.Code, w.Body)
		}
		if sc := status(t, h, "production").Scopes["api"]; sc.Live.Sha != old || sc.Freeze == nil {
			t.Fatalf("production/api: live %+v, freeze %+v; want the rollback live and the freeze kept", sc.Live, sc.Freeze)
		}
	})
	t.Run("nobody asked the rule", func(t *testing.T) {
		h := newHarness(t, productionConfig)
		if _, err := h.auth.Accept(t.Context(), authority.Intent{ID: "push-1", Environment: "production", Scopes: []string{"api"}, Sha: sha, Ref: "refs/heads/master"}, false); err != nil {
			t.Fatal(err)
		}
		wantUnapproved(t, h, "s-1")
	})
}

// requiresOf is the promotion requirement of promotionStatusConfig's environment env.
func requiresOf(env string) *authority.Requirements {
	if env == "production" {
		return &authority.Requirements{Environments: []string{"staging"}}
	}
	return nil
}
