package app

import (
	"encoding/json"
	"net/http"
	"testing"

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

	t.Run("success", func(t *testing.T) {
		h := newHarness(t, productionConfig)
		accept(h, "push-1", sha)
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
