package tracing_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/tracing"
	"github.com/latestwins/latestwins/internal/tracing/tracingtest"
)

type env map[string]string

func (e env) get(k string) string { return e[k] }

const signature = "sha256=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// With an endpoint, a webhook delivery is a server span named for its route, with the event, the
// delivery id and the answer, and each store request the App made for it is a child span that
// names the key and how it ended; a sweep's requests nest under its span, and a read outside
// traced work (a scrape's) makes none. The export reaches the collector as OTLP/HTTP protobuf at
// /v1/traces, under the service's name, and no attribute holds the delivery's signature.
func TestWebhookAndStoreSpansReachTheCollector(t *testing.T) {
	t.Parallel()
	col := tracingtest.New(t)
	cfg, err := tracing.ConfigFrom(env{tracing.EnvEndpoint: col.URL}.get)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := tracing.Start(t.Context(), cfg, "latestwins-test", nil)
	if err != nil || tr == nil {
		t.Fatalf("Start: %v, %v; want tracing on", tr, err)
	}
	auth := authority.New(tr.Store(memory.New()))
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := auth.Accept(r.Context(), authority.Intent{ID: r.Header.Get("X-GitHub-Delivery"), Environment: "staging",
			Scopes: []string{"api"}, Sha: strings.Repeat("a", 40), Ref: "refs/heads/main"}, false); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	h := tr.Webhooks("/webhook", app)
	req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(`{"ref":"refs/heads/main"}`))
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	req.Header.Set("X-Hub-Signature-256", signature)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusAccepted {
		t.Fatalf("the App answered %d", rec.Code)
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil)) // no delivery: no span
	ctx, end := tr.Work(t.Context(), "sweep")
	if _, _, err := auth.Stalled(ctx, time.Nanosecond, 3); err != nil {
		t.Fatal(err)
	}
	end(nil)
	if _, err := auth.State(t.Context(), "staging"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	for _, p := range col.Paths() {
		if p != "/v1/traces" {
			t.Errorf("exported to %s, want /v1/traces under the endpoint", p)
		}
	}
	spans := col.Spans()
	var names []string
	for _, sp := range spans {
		names = append(names, sp.GetName())
		if sp.Service != "latestwins-test" {
			t.Errorf("span %s of service %q, want latestwins-test", sp.GetName(), sp.Service)
		}
		for _, kv := range sp.GetAttributes() {
			if strings.Contains(kv.GetValue().GetStringValue(), "0123456789abcdef") {
				t.Errorf("span %s attribute %s holds the signature", sp.GetName(), kv.GetKey())
			}
		}
		if strings.HasPrefix(sp.GetName(), "store.") && sp.Parent() == "" {
			t.Errorf("%s without a parent: a store request outside traced work made a trace", sp.GetName())
		}
	}
	hooks := col.Named("POST /webhook")
	if len(hooks) != 1 {
		t.Fatalf("webhook spans %d, want 1 (spans: %v)", len(hooks), names)
	}
	hook := hooks[0]
	if hook.GetKind() != tracepb.Span_SPAN_KIND_SERVER || hook.Attr("github.event") != "push" ||
		hook.Attr("github.delivery") != "72d3162e-cc78-11e3-81ab-4c9367dc0958" || hook.Attr("http.response.status_code") != "202" {
		t.Errorf("webhook span %v: want a server span with the event, the delivery id and status 202", hook)
	}
	var envPut bool
	var inDelivery int
	for _, sp := range spans {
		if !strings.HasPrefix(sp.GetName(), "store.") || sp.Trace() != hook.Trace() {
			continue
		}
		inDelivery++
		if sp.Parent() != hook.ID() {
			t.Errorf("%s is not a child of the delivery's span", sp.GetName())
		}
		if sp.GetKind() != tracepb.Span_SPAN_KIND_CLIENT || sp.Attr("latestwins.store.result") == "" {
			t.Errorf("%s: kind %v, result %q; want a client span that says how it ended", sp.GetName(), sp.GetKind(), sp.Attr("latestwins.store.result"))
		}
		if sp.GetName() == "store.put" && sp.Attr("latestwins.store.key") == authority.EnvKey("staging") {
			envPut = sp.Attr("latestwins.environment") == "staging" && sp.Attr("latestwins.store.result") == "ok" && sp.Attr("latestwins.store.revision") != ""
		}
	}
	if inDelivery == 0 || !envPut {
		t.Errorf("store spans in the delivery's trace: %d, a put of staging's document that ended ok: %v; spans %v", inDelivery, envPut, names)
	}
	sweeps := col.Named("sweep")
	if len(sweeps) != 1 {
		t.Fatalf("sweep spans %d, want 1", len(sweeps))
	}
	var under int
	for _, sp := range spans {
		if strings.HasPrefix(sp.GetName(), "store.") && sp.Parent() == sweeps[0].ID() {
			under++
		}
	}
	if under == 0 {
		t.Errorf("no store span under the sweep's")
	}
}

// Without an endpoint nothing changes: no exporter, and the wrappers hand back what they were given.
func TestOffWithoutAnEndpoint(t *testing.T) {
	t.Parallel()
	for _, vars := range []env{{}, {tracing.EnvServiceName: "x"}, {tracing.EnvEndpoint: "http://127.0.0.1:4318", tracing.EnvSDKDisabled: "true"}} {
		cfg, err := tracing.ConfigFrom(vars.get)
		if err != nil || cfg.On() {
			t.Fatalf("%v: %+v, %v; want off", vars, cfg, err)
		}
		tr, err := tracing.Start(context.Background(), cfg, "latestwins", nil)
		if err != nil || tr != nil {
			t.Fatalf("Start off: %v, %v; want nil", tr, err)
		}
		st := memory.New()
		if got := tr.Store(st); got != authority.Store(st) {
			t.Errorf("the store is wrapped with tracing off")
		}
		h := &plain{}
		if got := tr.Webhooks("/webhook", h); got != http.Handler(h) {
			t.Errorf("the App is wrapped with tracing off")
		}
		if ctx, end := tr.Work(t.Context(), "sweep"); ctx != t.Context() {
			t.Errorf("Work changed the context with tracing off")
		} else {
			end(nil)
		}
		if err := tr.Flush(context.Background()); err != nil {
			t.Error(err)
		}
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}
}

type plain struct{}

func (*plain) ServeHTTP(http.ResponseWriter, *http.Request) {}

// The endpoint variables are read as the OpenTelemetry specification says, and a setting latestwins
// cannot honour is refused with what to set instead.
func TestConfigFrom(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		vars    env
		url     string
		wantErr string
	}{
		{vars: env{tracing.EnvEndpoint: "http://127.0.0.1:4318"}, url: "http://127.0.0.1:4318/v1/traces"},
		{vars: env{tracing.EnvEndpoint: "https://otel.example.com/base/"}, url: "https://otel.example.com/base/v1/traces"},
		{vars: env{tracing.EnvEndpoint: "http://a:4318", tracing.EnvTracesEndpoint: "http://b:4318/custom"}, url: "http://b:4318/custom"},
		{vars: env{tracing.EnvEndpoint: "http://a:4318", tracing.EnvProtocol: "http/protobuf"}, url: "http://a:4318/v1/traces"},
		{vars: env{tracing.EnvEndpoint: "127.0.0.1:4318"}, wantErr: tracing.EnvEndpoint + `="127.0.0.1:4318": give the collector's OTLP/HTTP address`},
		{vars: env{tracing.EnvEndpoint: "http://a:4317", tracing.EnvProtocol: "grpc"}, wantErr: tracing.EnvProtocol + `="grpc": latestwins exports traces over OTLP/HTTP only`},
	} {
		cfg, err := tracing.ConfigFrom(c.vars.get)
		switch {
		case c.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%v: %v; want an error saying %q", c.vars, err, c.wantErr)
			}
		case err != nil || cfg.URL != c.url:
			t.Errorf("%v: %q, %v; want %q", c.vars, cfg.URL, err, c.url)
		}
	}
}
