package metrics_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/metrics"
	"github.com/latestwins/latestwins/internal/metrics/metricstest"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func must(t *testing.T, fams metricstest.Families, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := fams.Value(name, labels...)
	if !ok || got != want {
		t.Errorf("%s%v = %v (present %v), want %v", name, labels, got, ok, want)
	}
}

// TestScrapeTellsWhatTheGatesDecided drives one scope through a supersession and a hand-over and
// reads the figures a platform team alarms on from a scrape: the gates' answers by reason, the
// hand-over time of the pass that waited, how long the scope has had a commit waiting to go live,
// and the store's requests and conflicts.
func TestScrapeTellsWhatTheGatesDecided(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := storetest.NewClock(t0)
	store := memory.New()
	m := metrics.New()
	a := authority.New(m.Store(store), authority.WithClock(clock), authority.WithObserver(m))
	m.ReportScopes(metrics.Scopes{Authority: a})

	push := func(id string, c byte) *authority.AcceptResult {
		t.Helper()
		res, err := a.Accept(ctx, authority.Intent{ID: id, Environment: "staging", Scopes: []string{"api"}, Sha: strings.Repeat(string(c), 40), Ref: "refs/heads/main"}, true)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	gate := func(gen int64, holder string) (*authority.Grant, error) {
		return a.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: holder, LeaseTTL: time.Minute})
	}

	first := push("push-1", 'a')
	g1, err := gate(first.Generation, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	second := push("push-2", 'b')
	var held *authority.HeldError
	if _, err := gate(second.Generation, "run-2"); !errors.As(err, &held) || held.Reason != authority.ReasonLocked {
		t.Fatalf("the newer pass while the older holds the lease: %v; want it held (locked)", err)
	}
	if _, err := a.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: first.Generation, Scopes: []string{"api"}, Phase: "publish"}); !errors.Is(err, authority.ErrSuperseded) {
		t.Fatalf("the older pass at its next phase: %v; want it superseded", err)
	}
	clock.Advance(4 * time.Second)
	if err := a.Release(ctx, g1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Second)
	g2, err := gate(second.Generation, "run-2")
	if err != nil {
		t.Fatal(err)
	}

	fams := metricstest.Scrape(t, m.Handler())
	must(t, fams, 2, "latestwins_gate_decisions_total", "environment", "staging", "reason", "go")
	must(t, fams, 1, "latestwins_gate_decisions_total", "environment", "staging", "reason", "locked")
	must(t, fams, 1, "latestwins_gate_decisions_total", "environment", "staging", "reason", "superseded")
	must(t, fams, 1, "latestwins_handover_seconds", "environment", "staging")
	if sum := fams["latestwins_handover_seconds"].GetMetric()[0].GetHistogram().GetSampleSum(); sum != 2 {
		t.Errorf("hand-over %v s, want 2 s: from the release to the grant of the pass that waited", sum)
	}
	// The second push superseded the first, which has waited since t0: 7 s ago.
	must(t, fams, 7, "latestwins_scope_behind_seconds", "environment", "staging", "scope", "api")
	if n, ok := fams.Value("latestwins_store_requests_total", "op", "put", "result", "ok"); !ok || n < 5 {
		t.Errorf("conditional writes counted %v; want one per transition at least", n)
	}

	if _, err := a.Complete(ctx, authority.Completion{Environment: "staging", Generation: second.Generation, Scopes: []string{"api"}, Holder: "run-2",
		Tokens: g2.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
	fams = metricstest.Scrape(t, m.Handler())
	must(t, fams, 0, "latestwins_scope_behind_seconds", "environment", "staging", "scope", "api")
}

// TestStoreConflictsAreCounted: two Authorities on one store, each writing from what it last
// wrote, make the store refuse a conditional write; the scrape counts it as a conflict.
func TestStoreConflictsAreCounted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := metrics.New()
	store := m.Store(memory.New())
	a1, a2 := authority.New(store), authority.New(store)
	in := func(id string, c byte) authority.Intent {
		return authority.Intent{ID: id, Environment: "staging", Scopes: []string{"api"}, Sha: strings.Repeat(string(c), 40), Ref: "refs/heads/main"}
	}
	if _, err := a1.Accept(ctx, in("one", 'a'), false); err != nil {
		t.Fatal(err)
	}
	if _, err := a2.Accept(ctx, in("two", 'b'), false); err != nil {
		t.Fatal(err)
	}
	if _, err := a1.Accept(ctx, in("three", 'c'), false); err != nil { // from its own stale revision
		t.Fatal(err)
	}
	fams := metricstest.Scrape(t, m.Handler())
	if n, _ := fams.Value("latestwins_store_requests_total", "op", "put", "result", "conflict"); n < 1 {
		t.Errorf("conflicts counted %v; want the stale write's", n)
	}
}

// TestWebhooksAreCountedByEventAndOutcome: the middleware counts a delivery by its event header and
// the App's answer, and leaves other requests alone.
func TestWebhooksAreCountedByEventAndOutcome(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-GitHub-Event") {
		case "push":
			w.WriteHeader(http.StatusAccepted)
		case "ping":
			_, _ = w.Write([]byte("{}"))
		default:
			http.Error(w, "webhook signature rejected", http.StatusUnauthorized)
		}
	})
	h := m.Webhooks("/webhook", app)
	for _, ev := range []string{"push", "push", "ping", "issue_comment"} {
		req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader("{}"))
		req.Header.Set("X-GitHub-Event", ev)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
	fams := metricstest.Scrape(t, m.Handler())
	must(t, fams, 2, "latestwins_deliveries_total", "event", "push", "outcome", "accepted")
	must(t, fams, 1, "latestwins_deliveries_total", "event", "ping", "outcome", "accepted")
	must(t, fams, 1, "latestwins_deliveries_total", "event", "issue_comment", "outcome", "refused")
	if n := len(fams["latestwins_deliveries_total"].GetMetric()); n != 3 {
		t.Errorf("%d delivery series, want 3 (GET /healthz is no delivery)", n)
	}
}
