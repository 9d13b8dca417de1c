package app

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// A push through the App carries the trusted file's alert-after into the environment, so every
// surface judges by it: past it, with nothing running, the scope is stuck, and the status page
// says so on its row.
func TestPushCarriesAlertAfterToThePage(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(testConfig, "  staging:\n    scopes:", "  staging:\n    alert-after: 10m\n    scopes:", 1)
	h := newHarness(t, cfg)
	if w := h.post(t, "push", "alert-push", fixture(t, "push.json")); w.Code != http.StatusOK {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	env, err := h.auth.Status(t.Context(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if env.AlertAfter != 10*time.Minute {
		t.Fatalf("stored alert-after %v, want the trusted file's 10m", env.AlertAfter)
	}
	if lag := authority.Judge(env.Scopes["api"], h.clock.Now(), env.AlertAfter); lag.State != authority.ConvergenceWaiting {
		t.Fatalf("right after the push: %v, want waiting", lag.State)
	}
	h.clock.Advance(11 * time.Minute)
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	rec := h.do(r)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /: %d", rec.Code)
	}
	if body := rec.Body.String(); !strings.Contains(body, `<span class="error">stuck: `) || !strings.Contains(body, "alert after 10m") {
		t.Errorf("the page does not say the scope is stuck past alert-after:\n%s", envSection(t, body, "staging"))
	}
}
