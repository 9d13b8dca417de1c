package lambda_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/metrics"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/lambda"
)

// emfLine is one Embedded Metric Format object as CloudWatch reads it.
type emfLine struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	fields map[string]any
}

// emf parses the lines written since the last call, checking each is a well-formed EMF object:
// one metric in the latestwins namespace whose value and dimensions are fields of the object.
func emf(t *testing.T, out *bytes.Buffer) []emfLine {
	t.Helper()
	var lines []emfLine
	for _, raw := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if raw == "" {
			continue
		}
		var l emfLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("not JSON: %s", raw)
		}
		if err := json.Unmarshal([]byte(raw), &l.fields); err != nil {
			t.Fatal(err)
		}
		if len(l.AWS.CloudWatchMetrics) != 1 || l.AWS.Timestamp == 0 {
			t.Fatalf("not an EMF object: %s", raw)
		}
		d := l.AWS.CloudWatchMetrics[0]
		if d.Namespace != metrics.EMFNamespace || len(d.Metrics) != 1 || len(d.Dimensions) != 1 {
			t.Fatalf("EMF object %s: want one metric in namespace %s and one dimension set", raw, metrics.EMFNamespace)
		}
		if _, ok := l.fields[d.Metrics[0].Name].(float64); !ok {
			t.Fatalf("EMF object %s: no value for %s", raw, d.Metrics[0].Name)
		}
		for _, dim := range d.Dimensions[0] {
			if _, ok := l.fields[dim].(string); !ok {
				t.Fatalf("EMF object %s: dimension %s has no value", raw, dim)
			}
		}
		lines = append(lines, l)
	}
	out.Reset()
	return lines
}

// find is the value of the line for metric name whose dimensions are exactly dims with values.
func find(lines []emfLine, name string, dims ...string) (float64, bool) {
next:
	for _, l := range lines {
		d := l.AWS.CloudWatchMetrics[0]
		if d.Metrics[0].Name != name || len(d.Dimensions[0]) != len(dims)/2 {
			continue
		}
		for i := 0; i+1 < len(dims); i += 2 {
			if l.fields[dims[i]] != dims[i+1] {
				continue next
			}
		}
		return l.fields[name].(float64), true
	}
	return 0, false
}

// TestInvocationsWriteEmbeddedMetrics: each invocation writes what it counted as EMF lines, a
// counter as what it counted since the last invocation; a scheduled sweep adds the behind figure of
// each scope and the largest of them without dimensions, which the stacks' alarm watches.
func TestInvocationsWriteEmbeddedMetrics(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	m := metrics.New()
	auth := authority.New(m.Store(memory.New()), authority.WithClock(clock), authority.WithObserver(m))
	a, err := app.New(app.Options{Secret: testSecret, Authority: auth, Config: &app.FileConfig{Path: testdata(t, "lambda", "latestwins.yml")}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	h, err := lambda.New(lambda.Options{HTTP: m.Webhooks("/webhook", a), Authority: auth, Metrics: m, MetricsOut: &out})
	if err != nil {
		t.Fatal(err)
	}

	if res := invokeHTTP(t, h, fixture(t, "function-url-push.json")); res.StatusCode != 200 {
		t.Fatalf("push: %d %s", res.StatusCode, res.Body)
	}
	lines := emf(t, &out)
	if v, ok := find(lines, "latestwins_deliveries_total", "event", "push", "outcome", "accepted"); !ok || v != 1 {
		t.Errorf("deliveries line %v (present %v), want 1 push accepted", v, ok)
	}
	if v, ok := find(lines, "latestwins_store_requests_total", "op", "put", "result", "ok"); !ok || v < 1 {
		t.Errorf("store writes line %v (present %v), want the accept's", v, ok)
	}

	clock.Advance(time.Minute)
	if _, err := sweep(t, h); err != nil {
		t.Fatal(err)
	}
	lines = emf(t, &out)
	if _, ok := find(lines, "latestwins_deliveries_total", "event", "push", "outcome", "accepted"); ok {
		t.Errorf("the sweep wrote the push's delivery again: a CloudWatch metric sums its lines")
	}
	if v, ok := find(lines, metrics.SweepsMetric, "result", "ok"); !ok || v != 1 {
		t.Errorf("sweeps line %v (present %v), want 1 ok", v, ok)
	}
	if v, ok := find(lines, metrics.BehindMetric, "environment", "staging", "scope", "api"); !ok || v != 60 {
		t.Errorf("behind of staging/api %v s (present %v), want 60 s: the push has waited a minute", v, ok)
	}
	if v, ok := find(lines, metrics.BehindMetric); !ok || v != 60 {
		t.Errorf("largest behind without dimensions %v (present %v), want 60", v, ok)
	}
}
