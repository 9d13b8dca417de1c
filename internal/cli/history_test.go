package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// TestHistoryPagesThroughEverything: history shows the newest page and says how to get the older
// one; --before pages back, --limit 0 shows every event, --json carries the cursor.
func TestHistoryPagesThroughEverything(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	for i := range 30 {
		h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", fmt.Sprintf("%040x", i+1), "--intent-id", fmt.Sprintf("d-%d", i))
	}
	var page authority.HistoryPage
	o := h.must(ExitOK, "history", "staging", "--limit", "10", "--json")
	// A new store keeps its environments in the per-scope layout: events numbered per scope, and
	// pages by time that hold every event of their oldest time (so a page may hold more).
	if err := json.Unmarshal([]byte(o.stdout), &page); err != nil || len(page.Events) < 10 || !page.Timed && len(page.Events) != 10 || page.Before == 0 {
		t.Fatalf("history --limit 10 --json: %v\n%s", err, o.stdout)
	}
	newest := page.Newest
	type id struct {
		scope string
		seq   int64
		kind  authority.EventKind
	}
	seen := map[id]bool{}
	for _, ev := range page.Events {
		seen[id{ev.Scope, ev.Seq, ev.Kind}] = true
	}
	for page.Before != 0 {
		o := h.must(ExitOK, "history", "staging", "--limit", "10", "--json", "--before", fmt.Sprint(page.Before))
		page = authority.HistoryPage{}
		if err := json.Unmarshal([]byte(o.stdout), &page); err != nil {
			t.Fatal(err)
		}
		for _, ev := range page.Events {
			if k := (id{ev.Scope, ev.Seq, ev.Kind}); seen[k] {
				t.Fatalf("event %+v on two pages", k)
			} else {
				seen[k] = true
			}
		}
	}
	if int64(len(seen)) != newest {
		t.Fatalf("paging saw %d events of %d", len(seen), newest)
	}
	all := h.must(ExitOK, "history", "staging", "--limit", "0")
	if n := strings.Count(all.stdout, "\n"); n < int(newest) || strings.Contains(all.stderr, "older events") {
		t.Fatalf("history --limit 0 printed %d lines for %d events; stderr %q", n, newest, all.stderr)
	}
	text := h.must(ExitOK, "history", "staging", "--limit", "5")
	if !strings.Contains(text.stderr, "older events: latestwins history staging --before") {
		t.Fatalf("a partial page does not say how to see older events: %q", text.stderr)
	}
}

// TestOrderingFlags: --pushed-at orders pushes of a branch whatever order they are claimed in; a
// malformed time is bad input, refused before anything is written.
func TestOrderingFlags(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	claim := func(code int, id, sha, pushed string) outcome {
		return h.must(code, "claim", "--environment", "staging", "--scopes", "api", "--ref", "refs/heads/main", "--sha", sha,
			"--intent-id", id, "--pushed-at", pushed)
	}
	claim(ExitOK, "c", strings.Repeat("c", 40), "2026-11-30T12:00:03Z")
	o := claim(ExitSuperseded, "a", strings.Repeat("a", 40), "1764504001") // Unix seconds: 12:00:01
	if !strings.Contains(o.stdout, "arrived out of order") {
		t.Fatalf("an older push claimed later: %q; want it reported as arrived out of order", o.stdout)
	}
	before, err := os.ReadFile(strings.TrimPrefix(h.store, "bolt://"))
	if err != nil {
		t.Fatal(err)
	}
	o = claim(ExitUsage, "b", strings.Repeat("b", 40), "yesterday")
	if !strings.Contains(o.stderr, "pushed-at") || !strings.Contains(o.stderr, "RFC 3339") {
		t.Fatalf("a malformed --pushed-at: %q", o.stderr)
	}
	after, _ := os.ReadFile(strings.TrimPrefix(h.store, "bolt://"))
	if string(before) != string(after) {
		t.Fatalf("a refused claim changed the store")
	}
	if m := h.status("staging"); !strings.Contains(fmt.Sprint(m), strings.Repeat("c", 40)) {
		t.Fatalf("status %v; want c still pending", m)
	}
}

// TestEventPayloadOrdersClaims: in GitHub Actions, a run of a push takes its parent and push time
// from the event payload, so runs that claim out of order still leave the newest commit pending.
func TestEventPayloadOrdersClaims(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	push := func(run int, sha, before string, pushedAt int64) outcome {
		ev := filepath.Join(h.dir, fmt.Sprintf("event-%d.json", run))
		body := fmt.Sprintf(`{"after":%q,"before":%q,"forced":false,"ref":"refs/heads/main","repository":{"pushed_at":%d},"head_commit":{"timestamp":"2026-11-30T11:00:00Z"}}`, sha, before, pushedAt)
		if err := os.WriteFile(ev, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		h.vars = map[string]string{"GITHUB_RUN_ID": fmt.Sprint(run), "GITHUB_REPOSITORY": "acme/api", "GITHUB_SHA": sha, "GITHUB_REF": "refs/heads/main",
			"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": ev, "GITHUB_RUN_ATTEMPT": "1"}
		return h.run(t.Context(), "claim", "--environment", "staging", "--scopes", "api")
	}
	a, b, c := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	if o := push(3, c, b, 1764504003); o.code != ExitOK {
		t.Fatalf("run of C: %d %s", o.code, o.stderr)
	}
	for _, o := range []outcome{push(1, a, strings.Repeat("0", 40), 1764504001), push(2, b, a, 1764504002)} {
		if o.code != ExitSuperseded {
			t.Fatalf("an older push's run: exit %d\n%s%s", o.code, o.stdout, o.stderr)
		}
	}
	h.vars = map[string]string{}
	if m := h.status("staging"); !strings.Contains(fmt.Sprint(m), c) {
		t.Fatalf("status %v; want C pending", m)
	}
}

// TestEventPayloadNullsAreIgnored: a push payload whose pushed_at is null (GitHub's schema allows
// it) is not the user's bad input: the claim goes through without that fact.
func TestEventPayloadNullsAreIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ev := filepath.Join(h.dir, "event.json")
	sha := strings.Repeat("d", 40)
	if err := os.WriteFile(ev, []byte(`{"after":"`+sha+`","before":null,"repository":{"pushed_at":null},"head_commit":{"timestamp":"soon"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h.vars = map[string]string{"GITHUB_RUN_ID": "9", "GITHUB_REPOSITORY": "acme/api", "GITHUB_SHA": sha, "GITHUB_REF": "refs/heads/main",
		"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": ev, "GITHUB_RUN_ATTEMPT": "1"}
	if o := h.run(t.Context(), "claim", "--environment", "staging", "--scopes", "api"); o.code != ExitOK {
		t.Fatalf("claim with null facts in the payload: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
}
