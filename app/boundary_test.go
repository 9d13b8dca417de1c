package app

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/intake"
	"github.com/latestwins/latestwins/internal/authority"
)

// year2100 is 2100-01-01T00:00:00Z, as a push payload's repository.pushed_at.
const year2100 = 4102444800

// syncBuffer is a log sink the handler may write from any goroutine.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records are the JSON log records written so far.
func (b *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// pushAt is GitHub's example push payload for commit after on top of before, pushed at pushedAt
// (Unix seconds) with its head commit dated committedAt.
func pushAt(t *testing.T, before, after string, pushedAt int64, committedAt time.Time) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(withPush(t, before, after), &p); err != nil {
		t.Fatal(err)
	}
	p["repository"].(map[string]any)["pushed_at"] = pushedAt
	head := p["head_commit"].(map[string]any)
	head["id"], head["timestamp"] = after, committedAt.Format(time.RFC3339)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPushFromTheFutureIsTakenInArrivalOrder: a push GitHub signed whose repository.pushed_at
// and head commit time are decades ahead of the App's clock is not refused (it would be lost),
// nor taken at its word (every later push would be older than it, and never deploy): the facts are
// left out with a warning naming them, and the push is accepted as it arrives. A later real push
// of the branch then still deploys.
func TestPushFromTheFutureIsTakenInArrivalOrder(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	h := newHarness(t, testConfig, func(o *Options) { o.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	future, real := strings.Repeat("f", 40), strings.Repeat("e", 40)

	w := h.post(t, "push", "from-the-future", pushAt(t, intake.ZeroSha, future, year2100, time.Unix(year2100, 0)))
	if res := decodeResult(t, w); w.Code != http.StatusOK || res.Outcome != core.OutcomeAccepted || len(res.Intents) != 1 || len(res.Intents[0].Accepted) != 1 {
		t.Fatalf("push from the future: %d %s; want it accepted", w.Code, w.Body)
	}
	var warned []string
	for _, r := range logs.records(t) {
		if r["level"] == "WARN" && strings.Contains(r["msg"].(string), "ordering fact") {
			if r["allowance"] != authority.MaxOrderSkew.String() || r["delivery_id"] != "from-the-future" {
				t.Errorf("warning %v; want the allowance and the delivery named", r)
			}
			warned = append(warned, r["field"].(string)+"="+r["value"].(string))
		}
	}
	if want := "pushed_at=2100-01-01T00:00:00Z committed_at=2100-01-01T00:00:00Z"; strings.Join(warned, " ") != want {
		t.Errorf("warned about %v; want %s", warned, want)
	}
	e, err := h.auth.Status(t.Context(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if m := e.Scopes["api"].Mailbox; m == nil || m.Sha != future || !m.Order.PushedAt.IsZero() || !m.Order.CommittedAt.IsZero() {
		t.Fatalf("pending %+v; want the push, without the facts from the future", m)
	}
	deployHeadOutcome(t, h, "staging", "api", authority.OutcomeSuccess)

	// A real push of the branch, not on top of the first (a force-push elsewhere, say), made now.
	now := h.clock.Now()
	w = h.post(t, "push", "real", pushAt(t, strings.Repeat("1", 40), real, now.Add(-time.Second).Unix(), now.Add(-time.Minute)))
	res := decodeResult(t, w)
	if w.Code != http.StatusOK || len(res.Intents) != 1 || len(res.Intents[0].Stale) != 0 || len(res.Intents[0].Accepted) != 1 {
		t.Fatalf("the real push after it: %d %s; want it accepted, not arrived out of order", w.Code, w.Body)
	}
	deployHeadOutcome(t, h, "staging", "api", authority.OutcomeSuccess)
	if e, err = h.auth.Status(t.Context(), "staging"); err != nil {
		t.Fatal(err)
	}
	if l := e.Scopes["api"].Live; l == nil || l.Sha != real {
		t.Fatalf("live %+v; want the real push deployed", l)
	}
}
