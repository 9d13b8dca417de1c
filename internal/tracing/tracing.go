// Package tracing sends OpenTelemetry traces of what the App does: a span for each webhook
// delivery it handles and each recovery sweep, and under it a span for each request to the store
// (the reads and the conditional writes that make up a transition), so that a slow or failed
// delivery shows where its time went. A store request outside such work (a metrics scrape's
// reads) makes no span of its own. It is off unless OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// names a collector: then the spans are batched and exported over OTLP/HTTP (protobuf). Off, no
// exporter is made and no goroutine starts, and the wrappers return what they are given.
//
// Spans carry what names the work (the event, the delivery id, the store key, the result) and never
// a secret: no signature, no payload, no token.
package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The variables that turn tracing on and name the service, as every OpenTelemetry SDK reads them.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"        // the collector's base URL; traces go to its /v1/traces
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" // the full URL traces go to, overriding EnvEndpoint
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"
)

// Config is where the traces go; a zero Config is off.
type Config struct {
	// URL is the full OTLP/HTTP traces URL ("": tracing off).
	URL string
	// Service is the resource's service.name; "": the name Start is given.
	Service string
}

// On reports whether c sends traces.
func (c Config) On() bool { return c.URL != "" }

// ConfigFrom reads the OpenTelemetry variables through getenv. Without an endpoint tracing is off;
// an endpoint that is no http(s) URL, or a protocol other than OTLP/HTTP with protobuf, is an error
// that says what to set.
func ConfigFrom(getenv func(string) string) (Config, error) {
	if strings.EqualFold(getenv(EnvSDKDisabled), "true") {
		return Config{}, nil
	}
	name, raw := EnvTracesEndpoint, getenv(EnvTracesEndpoint)
	if raw == "" {
		name, raw = EnvEndpoint, getenv(EnvEndpoint)
	}
	if raw == "" {
		return Config{}, nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Config{}, fmt.Errorf("%s=%q: give the collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318 (or unset it to send no traces)", name, Redact(raw))
	}
	if name == EnvEndpoint {
		u = u.JoinPath("v1", "traces") // the signal's path under the base URL, as the specification says
	}
	pvar, protocol := EnvTracesProtocol, getenv(EnvTracesProtocol)
	if protocol == "" {
		pvar, protocol = EnvProtocol, getenv(EnvProtocol)
	}
	if protocol != "" && protocol != "http/protobuf" {
		return Config{}, fmt.Errorf("%s=%q: latestwins exports traces over OTLP/HTTP only: set it to http/protobuf (or unset it) and point %s at the collector's HTTP port (4318)",
			pvar, protocol, name)
	}
	return Config{URL: u.String(), Service: getenv(EnvServiceName)}, nil
}

// Tracing makes the spans and exports them. A nil *Tracing is off: its wrappers return what they
// are given and Flush and Shutdown do nothing.
type Tracing struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// Start makes the exporter for c, and nil when c is off. service names the process
// (latestwins-serve, latestwins-lambda) unless OTEL_SERVICE_NAME did. Export failures are logged
// to log, without the spans; they never fail the work that made them.
func Start(ctx context.Context, c Config, service string, log *slog.Logger) (*Tracing, error) {
	if !c.On() {
		return nil, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(c.URL))
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter to %s: %w", Redact(c.URL), err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", cmp.Or(c.Service, service))))
	if err != nil {
		return nil, fmt.Errorf("tracing: the resource: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("traces not exported; the work they describe went on", "err", err)
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	log.InfoContext(ctx, "sending traces", "endpoint", Redact(c.URL))
	return &Tracing{tp: tp, tracer: tp.Tracer("github.com/latestwins/latestwins")}, nil
}

// Flush exports the spans ended so far: the Lambda calls it before each invocation returns, since
// the process is frozen afterwards.
func (t *Tracing) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.tp.ForceFlush(ctx); err != nil {
		return fmt.Errorf("tracing: flush: %w", err)
	}
	return nil
}

// Shutdown exports what is left and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	if err := t.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shut down: %w", err)
	}
	return nil
}

// Work starts a span for a piece of work other than a delivery (a recovery sweep), under which
// the store's spans of that work nest; end ends it with how the work ended. Off, ctx comes back as
// it was and end does nothing.
func (t *Tracing) Work(ctx context.Context, name string) (_ context.Context, end func(error)) {
	if t == nil {
		return ctx, func(error) {}
	}
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, name+" failed")
		}
		span.End()
	}
}

// Webhooks wraps the App's handler so that every POST to path is a server span, "POST path", with
// the delivery's event and id and the status the App answered; the request's context carries it,
// so the store's spans of the delivery are its children.
func (t *Tracing) Webhooks(path string, h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path || r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		ctx, span := t.tracer.Start(r.Context(), r.Method+" "+path, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("http.request.method", r.Method),
				attribute.String("http.route", path),
				attribute.String("github.event", cmp.Or(r.Header.Get("X-GitHub-Event"), "unknown")),
				attribute.String("github.delivery", r.Header.Get("X-GitHub-Delivery")),
				attribute.Int64("http.request.body.size", r.ContentLength)))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Redact is an endpoint as a log line may show it: without credentials or a query.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if !strings.ContainsAny(raw, "@?#") {
			return raw // nothing secret in it: show what was given (a host:port without a scheme, say)
		}
		return "the OTLP endpoint"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// errorClass names how a request to the store ended, as the metrics do.
func errorClass(err error, conflict, notFound error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, conflict):
		return "conflict"
	case errors.Is(err, notFound):
		return "not_found"
	}
	return "error"
}
