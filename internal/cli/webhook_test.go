package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

// webhook send signs GitHub's example push as GitHub does and sends it to a real App handler on
// loopback: the App accepts it; a wrong secret is refused with the App's answer and a non-zero exit.
func TestWebhookSendDeliversASignedPayload(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := writeServeConfig(t, h.dir, serveConfig)
	var stderr syncbuf.Buffer
	vars := map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret, "LATESTWINS_STORE": h.store}
	c := &cmdEnv{io: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return vars[k] }},
		log: slog.New(slog.DiscardHandler)}
	handler, _, err := c.serveHandler(context.Background(), []string{"--config", cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.done()
	var mu sync.Mutex
	var seen http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	payload := filepath.Join("..", "..", "testdata", "webhooks", "push.json")

	h.vars["LATESTWINS_WEBHOOK_SECRET"] = serveSecret
	o := h.must(ExitOK, "webhook", "send", "--event", "push", payload, "--url", srv.URL+"/webhook")
	if !strings.Contains(o.stdout, `"outcome":"accepted"`) || !strings.Contains(o.stderr, "200 OK") {
		t.Fatalf("webhook send said:\nstdout: %s\nstderr: %s", o.stdout, o.stderr)
	}
	mu.Lock()
	first := seen.Get("X-GitHub-Delivery")
	if seen.Get("Content-Type") != "application/json" || seen.Get("X-GitHub-Event") != "push" || first == "" ||
		!strings.HasPrefix(seen.Get("X-Hub-Signature-256"), "sha256=") {
		t.Errorf("the App was sent %v", seen)
	}
	mu.Unlock()
	if st := h.status("staging"); scopeField(st, "api", "pending").(map[string]any)["sha"] != fixtureSha {
		t.Fatalf("after the push: %v", st)
	}

	// --delivery names the delivery: the same one again is the App's duplicate, not a new intent.
	o = h.must(ExitOK, "webhook", "send", "--event", "push", payload, "--url", srv.URL+"/webhook", "--delivery", first)
	mu.Lock()
	if got := seen.Get("X-GitHub-Delivery"); got != first {
		t.Errorf("--delivery %s sent %s", first, got)
	}
	mu.Unlock()

	h.vars["LATESTWINS_WEBHOOK_SECRET"] = "not-the-secret"
	o = h.must(ExitUsage, "webhook", "send", "--event", "push", payload, "--url", srv.URL+"/webhook")
	if !strings.Contains(o.stderr, "401") || !strings.Contains(o.stdout, "does not match the body") || strings.Contains(o.stdout+o.stderr, "not-the-secret") {
		t.Fatalf("a wrongly signed delivery said:\nstdout: %s\nstderr: %s", o.stdout, o.stderr)
	}

	for _, args := range [][]string{
		{"--event", "push", payload, "--url", "file:///etc/passwd"},
		{"--event", "push", payload, "--url", "127.0.0.1:8080/webhook"},
		{payload, "--url", srv.URL + "/webhook"},
		{"--event", "push", "--url", srv.URL + "/webhook"},
		{"--event", "push", filepath.Join(h.dir, "missing.json"), "--url", srv.URL + "/webhook"},
	} {
		h.must(ExitUsage, append([]string{"webhook", "send"}, args...)...)
	}
	delete(h.vars, "LATESTWINS_WEBHOOK_SECRET")
	if o := h.must(ExitUsage, "webhook", "send", "--event", "push", payload, "--url", srv.URL+"/webhook"); !strings.Contains(o.stderr, "LATESTWINS_WEBHOOK_SECRET") {
		t.Errorf("without a secret: %s", o.stderr)
	}
	h.vars["LATESTWINS_WEBHOOK_SECRET"] = "s3cr3t-value-that-must-not-leak"
	if o := h.must(ExitOK, "webhook", "send", "-h"); strings.Contains(o.stdout+o.stderr, "s3cr3t") || !strings.Contains(o.stderr, "-webhook-secret") {
		t.Errorf("webhook send -h:\n%s", o.stderr)
	}
}
