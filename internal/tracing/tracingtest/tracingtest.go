// Package tracingtest is an OTLP/HTTP collector on loopback for tests: it decodes each export
// request as a collector does (protobuf, gzip or not) and keeps the spans.
package tracingtest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one exported span with the service that sent it.
type Span struct {
	*tracepb.Span
	Service string
}

// Attr is the value of the span's attribute key as text ("" when it has none).
func (s Span) Attr(key string) string { return Attr(s.GetAttributes(), key) }

// ID and Parent are the span's id and its parent's, in hex ("" for a root).
func (s Span) ID() string     { return hex.EncodeToString(s.GetSpanId()) }
func (s Span) Parent() string { return hex.EncodeToString(s.GetParentSpanId()) }
func (s Span) Trace() string  { return hex.EncodeToString(s.GetTraceId()) }

// Collector receives exports at URL (an httptest server on 127.0.0.1).
type Collector struct {
	URL   string
	mu    sync.Mutex
	spans []Span
	paths []string
}

// New starts a Collector, closed when the test ends.
func New(t testing.TB) *Collector {
	c := &Collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Errorf("tracingtest: gzip: %v", err)
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			t.Errorf("tracingtest: read the export: %v", err)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
			t.Errorf("tracingtest: export Content-Type %q, want application/x-protobuf", ct)
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(raw, &req); err != nil {
			t.Errorf("tracingtest: the export is no ExportTraceServiceRequest: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.paths = append(c.paths, r.URL.Path)
		for _, rs := range req.GetResourceSpans() {
			svc := Attr(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					c.spans = append(c.spans, Span{Span: sp, Service: svc})
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

// Spans are the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// Paths are the paths the exports were posted to.
func (c *Collector) Paths() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...)
}

// Named are the spans called name.
func (c *Collector) Named(name string) []Span {
	var out []Span
	for _, s := range c.Spans() {
		if s.GetName() == name {
			out = append(out, s)
		}
	}
	return out
}

// Attr is the value of attribute key among kvs as text.
func Attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.GetKey() != key {
			continue
		}
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			return strconv.FormatBool(v.BoolValue)
		case *commonpb.AnyValue_DoubleValue:
			return strconv.FormatFloat(v.DoubleValue, 'g', -1, 64)
		}
	}
	return ""
}
