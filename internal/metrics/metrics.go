// Package metrics counts what the App does, for a platform team to scrape and alarm on: webhook
// deliveries by event and outcome, gate decisions by the evaluator's reason, store requests and
// conflicts, hand-over times, sweeps, and how long each scope has had a commit waiting to go live.
// serve exposes them in the Prometheus text format on a listener of its own; the Lambda writes the
// same figures as CloudWatch Embedded Metric Format lines (emf.go).
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Namespace prefixes every family.
const Namespace = "latestwins"

// Metrics holds the families on a registry of their own (not the process-wide default one, so that
// two Apps in one process, as in tests, do not share counts).
type Metrics struct {
	reg        *prometheus.Registry
	deliveries *prometheus.CounterVec
	replayed   *prometheus.CounterVec
	decisions  *prometheus.CounterVec
	requests   *prometheus.CounterVec
	handover   *prometheus.HistogramVec
	sweeps     *prometheus.CounterVec
}

// Scopes says where the behind figures come from: read at each scrape.
type Scopes struct {
	// Authority reads the environments' state.
	Authority *authority.Authority
	// Environments lists the environments to report besides those the store lists or has pending
	// work in (the configured ones); nil: only those.
	Environments func(ctx context.Context) ([]string, error)
	// Timeout bounds the reads of one scrape; 0: 10 s.
	Timeout time.Duration
	Logger  *slog.Logger
}

// New makes the families and registers them, with Go's runtime and process figures.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "deliveries_total",
		Help: "Webhook deliveries by event and outcome (accepted: 2xx; refused: 4xx, e.g. a bad signature; failed: 5xx, GitHub shows it failed)."},
		[]string{"event", "outcome"})
	m.replayed = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "replayed_deliveries_total",
		Help: "Webhook deliveries GitHub failed to deliver that the App replayed from its delivery log, by event and outcome (as deliveries_total counts the live ones)."},
		[]string{"event", "outcome"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "gate_decisions_total",
		Help: "Answers of the deploy gates by environment and the evaluator's reason (go, superseded, locked, queued, promotion, frozen, ...); every poll counts."},
		[]string{"environment", "reason"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "store_requests_total",
		Help: "Requests to the store by operation and result (ok, conflict: a conditional write lost a race, not_found, error)."},
		[]string{"op", "result"})
	m.handover = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "handover_seconds",
		Help:    "How long a released scope lease stayed free before a pass that waited for it was granted it.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}},
		[]string{"environment"})
	m.sweeps = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "sweeps_total",
		Help: "Recovery sweeps by result (ok, error)."}, []string{"result"})
	m.reg.MustRegister(m.deliveries, m.replayed, m.decisions, m.requests, m.handover, m.sweeps,
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

// ReportScopes adds the behind figures of every scope, read from s at each scrape. An Authority
// made with WithObserver(m) is the usual s.Authority, so the Metrics come first.
func (m *Metrics) ReportScopes(s Scopes) {
	m.reg.MustRegister(newBehindCollector(s))
}

// Handler serves the families in the Prometheus text format (or protobuf, as a scraper asks).
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: nil, Registry: m.reg})
}

// Gatherer gives the families to other writers (the Lambda's EMF lines).
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// Decided implements authority.Observer.
func (m *Metrics) Decided(env, _ string, r authority.Reason) {
	m.decisions.WithLabelValues(env, r.String()).Inc()
}

// HandedOver implements authority.Observer.
func (m *Metrics) HandedOver(env, _ string, waited time.Duration) {
	m.handover.WithLabelValues(env).Observe(waited.Seconds())
}

var _ authority.Observer = (*Metrics)(nil)

// Swept counts one recovery sweep and whether it failed.
func (m *Metrics) Swept(err error) {
	m.sweeps.WithLabelValues(map[bool]string{true: "ok", false: "error"}[err == nil]).Inc()
}

// Delivered counts a webhook delivery of event answered with status.
func (m *Metrics) Delivered(event string, status int) {
	if event == "" {
		event = "unknown"
	}
	m.deliveries.WithLabelValues(event, outcome(status)).Inc()
}

// Replayed counts a missed delivery of event that the App replayed from its delivery log
// (heal.Options.Replayed), with the status a live one would have been answered with; it is not
// counted in deliveries_total, which counts what GitHub delivered.
func (m *Metrics) Replayed(event string, status int) {
	if event == "" {
		event = "unknown"
	}
	m.replayed.WithLabelValues(event, outcome(status)).Inc()
}

func outcome(status int) string {
	switch {
	case status < 400:
		return "accepted"
	case status < 500:
		return "refused"
	}
	return "failed"
}

// Webhooks wraps the App's handler so that every POST to path counts as a delivery of the event
// its X-GitHub-Event header names, with the status the App answered.
func (m *Metrics) Webhooks(path string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path || r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, r)
		m.Delivered(r.Header.Get("X-GitHub-Event"), sw.status)
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

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// result names how a store request ended.
func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, authority.ErrConflict):
		return "conflict"
	case errors.Is(err, authority.ErrNotFound):
		return "not_found"
	}
	return "error"
}
