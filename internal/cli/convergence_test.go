package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// status says a scope that has waited past its alert-after is stuck, and --json carries the state
// and how long it waited; --alert-after on claim sets the threshold, 0 removes it.
func TestStatusShowsConvergence(t *testing.T) {
	h := newHarness(t)
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api,web", "--sha", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "--intent-id", "i0", "--alert-after", "30m")

	// An intent accepted two hours ago (a clock of its own), still pending.
	st, err := bolt.Open(strings.TrimPrefix(h.store, "bolt://"))
	if err != nil {
		t.Fatal(err)
	}
	past := authority.New(st, authority.WithClock(storetest.NewClock(time.Now().Add(-2*time.Hour))))
	if _, err := past.Accept(context.Background(), authority.Intent{ID: "i1", Environment: "prod", Scopes: []string{"api"}, Sha: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}, false); err != nil {
		t.Fatal(err)
	}
	st.Close()
	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "web", "--sha", "cccccccccccccccccccccccccccccccccccccccc", "--intent-id", "i2", "--alert-after", "30m")

	m := h.status("prod")
	if m["alert_after_seconds"] != float64(1800) {
		t.Errorf("alert_after_seconds = %v; want 1800", m["alert_after_seconds"])
	}
	if got := scopeField(m, "api", "convergence"); got != "stuck" {
		t.Errorf("api convergence = %v; want stuck", got)
	}
	if w, _ := scopeField(m, "api", "waiting_seconds").(float64); w < 7190 || w > 7300 {
		t.Errorf("api waiting_seconds = %v; want about 7200", w)
	}
	if got := scopeField(m, "web", "convergence"); got != "waiting" {
		t.Errorf("web convergence = %v; want waiting", got)
	}
	o := h.must(ExitOK, "status", "prod")
	if !strings.Contains(o.stdout, "stuck: api: stuck 2h (alert after 30m): nothing is running for bbbbbbb") || strings.Contains(o.stdout, "web: stuck") {
		t.Errorf("status does not say api is stuck:\n%s", o.stdout)
	}

	h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "web", "--sha", "dddddddddddddddddddddddddddddddddddddddd", "--intent-id", "i3", "--alert-after", "0")
	if m := h.status("prod"); m["alert_after_seconds"] != float64(0) || scopeField(m, "api", "convergence") != "waiting" {
		t.Errorf("after --alert-after 0: %v, api %v; want 0 and waiting", m["alert_after_seconds"], scopeField(m, "api", "convergence"))
	}
	if o := h.must(ExitUsage, "claim", "--environment", "prod", "--scopes", "web", "--sha", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "--alert-after", "soon"); !strings.Contains(o.stderr, "--alert-after") {
		t.Errorf("a bad --alert-after: %s", o.stderr)
	}
}
