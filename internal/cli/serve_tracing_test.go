package cli

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
	"github.com/latestwins/latestwins/internal/tracing"
	"github.com/latestwins/latestwins/internal/tracing/tracingtest"
)

// serve with OTEL_EXPORTER_OTLP_ENDPOINT traces each webhook delivery and, under it, the store
// requests of the transition it made; the spans reach the collector by the time serve stops.
func TestServeSendsTraces(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	col := tracingtest.New(t)
	cfg := writeServeConfig(t, h.dir, serveConfig)
	var stderr syncbuf.Buffer
	vars := map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret, "LATESTWINS_STORE": h.store, tracing.EnvEndpoint: col.URL}
	c := &cmdEnv{io: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return vars[k] }},
		log: slog.New(slog.DiscardHandler)}
	handler, _, err := c.serveHandler(context.Background(), []string{"--config", cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(handler)
	resp := signedPush(t, srv.URL, "delivery-1", pushFixture(t))
	resp.Body.Close()
	srv.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("push: %d", resp.StatusCode)
	}
	if !strings.Contains(stderr.String(), "sending traces") {
		t.Errorf("serve did not say where its traces go:\n%s", stderr.String())
	}
	c.done() // stops serve's store and exports what is left

	hooks := col.Named("POST /webhook")
	if len(hooks) != 1 || hooks[0].Attr("github.delivery") != "delivery-1" || hooks[0].Attr("http.response.status_code") != "200" ||
		hooks[0].Service != "latestwins-serve" {
		t.Fatalf("webhook spans %+v; want the push's, of latestwins-serve, answered 200", hooks)
	}
	var put bool
	for _, sp := range col.Named("store.put") {
		put = put || (sp.Parent() == hooks[0].ID() && sp.Attr("latestwins.environment") == "staging")
	}
	if !put {
		t.Errorf("no store.put of staging under the delivery's span")
	}
	for _, sp := range col.Spans() {
		for _, kv := range sp.GetAttributes() {
			if v := kv.GetValue().GetStringValue(); strings.Contains(v, serveSecret) || strings.HasPrefix(v, "sha256=") {
				t.Errorf("span %s attribute %s holds a secret or a signature", sp.GetName(), kv.GetKey())
			}
		}
	}
}

// A tracing setting serve cannot honour stops it with what to set.
func TestServeRefusesATracingItCannotSend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.vars["LATESTWINS_WEBHOOK_SECRET"] = serveSecret
	h.vars[tracing.EnvEndpoint] = "http://127.0.0.1:4317"
	h.vars[tracing.EnvProtocol] = "grpc"
	o := h.must(ExitUsage, "serve", "--config", writeServeConfig(t, h.dir, serveConfig))
	if !strings.Contains(o.stderr, "OTLP/HTTP only") {
		t.Errorf("serve with grpc tracing: %s", o.stderr)
	}
}
