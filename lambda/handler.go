// Package lambda runs the App on AWS Lambda: a thin adapter that turns Function URL and API Gateway
// v2 HTTP events into requests for the App's http.Handler, and EventBridge scheduled events into one
// recovery sweep. Everything an invocation starts finishes before it returns: nothing runs after the
// response, since Lambda freezes the process then.
package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/latestwins/latestwins/internal/alert"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/heal"
	"github.com/latestwins/latestwins/internal/metrics"
	"github.com/latestwins/latestwins/internal/tracing"
)

// Defaults of the recovery sweep, the same as `latestwins sweep`.
const (
	DefaultStall       = 10 * time.Minute
	DefaultMaxAttempts = 3
	// DefaultReserve is the time kept back from the invocation's deadline to write the response.
	DefaultReserve = 500 * time.Millisecond
)

// Options configure a Handler.
type Options struct {
	// HTTP is the App; required.
	HTTP http.Handler
	// Authority runs the recovery sweep; required.
	Authority *authority.Authority
	// Redrive hands one piece of stalled work back to its workflow (a workflow_dispatch, attempt+1).
	// Nil makes every scheduled sweep a dry run: it logs what it would re-drive and changes nothing,
	// so no attempt is used up while nothing can dispatch.
	Redrive func(ctx context.Context, w authority.StalledWork) error
	// Stall is how long pending work may sit idle with no live lease before it is re-driven;
	// 0 means DefaultStall.
	Stall time.Duration
	// MaxAttempts is the re-drives of one intent before it ends with a terminal error; 0 means
	// DefaultMaxAttempts.
	MaxAttempts int
	// Reserve is kept back from the invocation's deadline for returning the response; 0 means
	// DefaultReserve.
	Reserve time.Duration
	// Metrics, when set, are written after each invocation as CloudWatch Embedded Metric Format
	// lines to MetricsOut (the function's log; default os.Stdout), and each sweep adds the behind
	// figure of every scope.
	Metrics    *metrics.Metrics
	MetricsOut io.Writer
	// Environments lists the configured environments, for the behind figures (beside those with
	// pending work); nil: only those.
	Environments func(ctx context.Context) ([]string, error)
	// Healer replays the webhook deliveries the App missed, before each scheduled sweep; nil: none.
	Healer *heal.Healer
	// Alerts tells the convergence alarms at each scheduled sweep; nil: none.
	Alerts *alert.Notifier
	// Tracing, when set, makes each scheduled sweep a span, and exports the invocation's spans
	// before it returns (Lambda freezes the process then); nil: no traces.
	Tracing *tracing.Tracing
	Logger  *slog.Logger
}

// Handler answers Lambda invocations.
type Handler struct {
	http        http.Handler
	auth        *authority.Authority
	redrive     func(context.Context, authority.StalledWork) error
	stall       time.Duration
	maxAttempts int
	reserve     time.Duration
	metrics     *metrics.Metrics
	emf         *metrics.EMF
	emfOut      io.Writer
	envs        func(ctx context.Context) ([]string, error)
	healer      *heal.Healer
	alerts      *alert.Notifier
	tracing     *tracing.Tracing
	log         *slog.Logger
}

// New checks the options.
func New(o Options) (*Handler, error) {
	switch {
	case o.HTTP == nil:
		return nil, errors.New("lambda: no HTTP handler (the App)")
	case o.Authority == nil:
		return nil, errors.New("lambda: no Authority for the recovery sweep")
	case o.Stall < 0:
		return nil, &authority.InputError{Field: "sweep stall", Value: o.Stall.String(), Fix: "give a positive duration such as 10m"}
	case o.MaxAttempts < 0:
		return nil, &authority.InputError{Field: "max attempts", Value: fmt.Sprint(o.MaxAttempts), Fix: "give at least 1"}
	case o.Reserve < 0:
		return nil, &authority.InputError{Field: "reserve", Value: o.Reserve.String(), Fix: "give a positive duration, or 0 for the default"}
	}
	h := &Handler{http: o.HTTP, auth: o.Authority, redrive: o.Redrive, stall: o.Stall, maxAttempts: o.MaxAttempts,
		reserve: o.Reserve, metrics: o.Metrics, emfOut: o.MetricsOut, envs: o.Environments, healer: o.Healer, alerts: o.Alerts, tracing: o.Tracing, log: o.Logger}
	if h.metrics != nil {
		h.emf = metrics.NewEMF(h.metrics.Gatherer())
		if h.emfOut == nil {
			h.emfOut = os.Stdout
		}
	}
	if h.stall == 0 {
		h.stall = DefaultStall
	}
	if h.maxAttempts == 0 {
		h.maxAttempts = DefaultMaxAttempts
	}
	if h.reserve == 0 {
		h.reserve = DefaultReserve
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	return h, nil
}

// probe holds the fields that tell the supported event shapes apart.
type probe struct {
	RequestContext struct {
		HTTP struct {
			Method string `json:"method"`
		} `json:"http"`
	} `json:"requestContext"`
	DetailType string `json:"detail-type"`
	Source     string `json:"source"`
}

// ErrUnsupportedEvent: the invocation is neither an HTTP event nor a scheduled event.
var ErrUnsupportedEvent = errors.New("unsupported Lambda event")

// Handle answers one invocation: a Function URL or API Gateway v2 HTTP event gets an
// events.APIGatewayV2HTTPResponse, an EventBridge scheduled event runs one recovery sweep and gets
// its report. Its signature is the one lambda.Start and lambda.NewHandler take.
func (h *Handler) Handle(ctx context.Context, payload json.RawMessage) (any, error) {
	ctx, cancel := h.withDeadline(ctx)
	defer cancel()
	defer h.writeMetrics(ctx)
	defer h.flushTraces(ctx)
	var p probe
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, fmt.Errorf("%w: the payload is not a JSON object: %w", ErrUnsupportedEvent, err)
	}
	switch {
	case p.RequestContext.HTTP.Method != "":
		var ev events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, fmt.Errorf("decode HTTP event: %w", err)
		}
		return h.serveHTTP(ctx, &ev)
	case p.DetailType == "Scheduled Event":
		ctx, end := h.tracing.Work(ctx, "sweep")
		res, err := h.sweep(ctx)
		end(err)
		return res, err
	}
	return nil, fmt.Errorf("%w: want a Function URL or API Gateway v2 HTTP event, or an EventBridge scheduled event (source %q, detail-type %q)",
		ErrUnsupportedEvent, p.Source, p.DetailType)
}

// writeMetrics writes what the invocation counted as EMF lines, before Lambda freezes the process.
func (h *Handler) writeMetrics(ctx context.Context) {
	if h.emf == nil {
		return
	}
	if err := h.emf.Write(h.emfOut, time.Now()); err != nil {
		h.log.WarnContext(ctx, "metrics not written", "err", err)
	}
}

// flushTraces exports the invocation's spans, before Lambda freezes the process.
func (h *Handler) flushTraces(ctx context.Context) {
	if err := h.tracing.Flush(ctx); err != nil {
		h.log.WarnContext(ctx, "traces not exported", "err", err)
	}
}

// withDeadline keeps Reserve of the invocation's time back for returning the response (half the
// time left, when less than twice Reserve is left).
func (h *Handler) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	left := time.Until(deadline)
	reserve := min(h.reserve, left/2)
	return context.WithDeadline(ctx, deadline.Add(-reserve))
}

// serveHTTP turns the event into a request for the App and its answer into the event response.
func (h *Handler) serveHTTP(ctx context.Context, ev *events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	req, err := NewRequest(ctx, ev)
	if err != nil {
		h.log.WarnContext(ctx, "HTTP event refused", "err", err)
		return errorResponse(http.StatusBadRequest, err.Error()), nil
	}
	w := newResponseWriter()
	h.http.ServeHTTP(w, req)
	return w.response(), nil
}

// NewRequest builds the request an HTTP event carries. A base64 body is decoded here, so that the
// App checks the webhook signature over the bytes GitHub signed. Headers arrive lowercase (and
// repeated headers joined by commas); they are set under their canonical names.
func NewRequest(ctx context.Context, ev *events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return nil, fmt.Errorf("the event says its body is base64 but it is not: %w", err)
		}
	}
	path := ev.RawPath
	if path == "" {
		path = "/"
	}
	u := &url.URL{Path: path, RawQuery: ev.RawQueryString}
	if raw, err := url.PathUnescape(path); err == nil && raw != path {
		u.Path, u.RawPath = raw, path
	}
	req, err := http.NewRequestWithContext(ctx, ev.RequestContext.HTTP.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build the request for %s %s: %w", ev.RequestContext.HTTP.Method, path, err)
	}
	for k, v := range ev.Headers {
		req.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	req.Host = req.Header.Get("Host")
	if req.Host == "" {
		req.Host = ev.RequestContext.DomainName
	}
	req.URL.Host = req.Host
	req.ContentLength = int64(len(body))
	req.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	req.RequestURI = u.RequestURI()
	return req, nil
}

// responseWriter collects the App's answer; the App writes it before ServeHTTP returns.
type responseWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

var _ http.ResponseWriter = (*responseWriter)(nil)

func newResponseWriter() *responseWriter { return &responseWriter{header: http.Header{}} }

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *responseWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// response is the event response: headers joined by commas (Set-Cookie as cookies), a body that is
// not UTF-8 in base64.
func (w *responseWriter) response() events.APIGatewayV2HTTPResponse {
	w.WriteHeader(http.StatusOK)
	res := events.APIGatewayV2HTTPResponse{StatusCode: w.status, Headers: map[string]string{}}
	for k, vs := range w.header {
		if k == "Set-Cookie" {
			res.Cookies = append(res.Cookies, vs...)
			continue
		}
		res.Headers[k] = strings.Join(vs, ", ")
	}
	if b := w.body.Bytes(); utf8.Valid(b) {
		res.Body = string(b)
	} else {
		res.Body, res.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	}
	return res
}

func errorResponse(status int, msg string) events.APIGatewayV2HTTPResponse {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(b) + "\n"}
}
