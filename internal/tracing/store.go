package tracing

import (
	"context"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/latestwins/latestwins/internal/authority"
)

// Store wraps s so that each request to it is a client span, "store.OP", with the key and how it
// ended (ok, conflict: a conditional write lost a race and the transition is retried, not_found,
// error), under the span of the work that made it (a delivery, a sweep; none without one). What the store it wraps offers besides the port
// (listing environments, deleting expired records) it offers too.
func (t *Tracing) Store(s authority.Store) authority.Store {
	if t == nil {
		return s
	}
	return &tracingStore{Store: s, t: t}
}

type tracingStore struct {
	authority.Store
	t *Tracing
}

// start starts the span of one request, under the span of the work in ctx; with none, a span
// that records nothing, so that requests outside traced work (a scrape's reads) make no trace.
func (s *tracingStore) start(ctx context.Context, op string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(context.Background()) // a no-op span: its calls do nothing
	}
	return s.t.tracer.Start(ctx, "store."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(attrs, attribute.String("latestwins.store.op", op))...))
}

func end(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	result := errorClass(err, authority.ErrConflict, authority.ErrNotFound)
	span.SetAttributes(attribute.String("latestwins.store.result", result))
	if result == "error" {
		span.RecordError(err)
		span.SetStatus(codes.Error, "store request failed")
	}
	span.End()
}

// keyAttrs names a document: its key and, for an environment's, the environment.
func keyAttrs(key string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("latestwins.store.key", key)}
	if env, ok := strings.CutPrefix(key, authority.EnvKey("")); ok {
		attrs = append(attrs, attribute.String("latestwins.environment", env))
	}
	return attrs
}

func (s *tracingStore) Get(ctx context.Context, key string) (*authority.Doc, error) {
	ctx, span := s.start(ctx, "get", keyAttrs(key)...)
	d, err := s.Store.Get(ctx, key)
	if d != nil {
		span.SetAttributes(attribute.Int64("latestwins.store.revision", d.Rev))
	}
	end(span, err)
	return d, err
}

func (s *tracingStore) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	ctx, span := s.start(ctx, "put", append(keyAttrs(doc.Key), attribute.Int64("latestwins.store.expected_revision", doc.Rev),
		attribute.Bool("latestwins.store.pending", doc.Pending))...)
	rev, err := s.Store.Put(ctx, doc)
	if err == nil {
		span.SetAttributes(attribute.Int64("latestwins.store.revision", rev))
	}
	end(span, err)
	return rev, err
}

func (s *tracingStore) Pending(ctx context.Context) ([]string, error) {
	ctx, span := s.start(ctx, "pending")
	envs, err := s.Store.Pending(ctx)
	span.SetAttributes(attribute.Int("latestwins.store.environments", len(envs)))
	end(span, err)
	return envs, err
}

func (s *tracingStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	ctx, span := s.start(ctx, "add", append(keyAttrs(key), attribute.Int64("latestwins.store.delta", delta))...)
	n, err := s.Store.Add(ctx, key, delta)
	if err == nil {
		span.SetAttributes(attribute.Int64("latestwins.store.value", n))
	}
	end(span, err)
	return n, err
}

func (s *tracingStore) PutRecords(ctx context.Context, recs []authority.Record) error {
	ctx, span := s.start(ctx, "put_records", attribute.Int("latestwins.store.records", len(recs)))
	err := s.Store.PutRecords(ctx, recs)
	end(span, err)
	return err
}

func (s *tracingStore) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	ctx, span := s.start(ctx, "get_records", attribute.Int("latestwins.store.keys", len(keys)))
	recs, err := s.Store.GetRecords(ctx, keys)
	span.SetAttributes(attribute.Int("latestwins.store.records", len(recs)))
	end(span, err)
	return recs, err
}

// Environments lists the wrapped store's environments, when it can.
func (s *tracingStore) Environments(ctx context.Context) ([]string, error) {
	l, ok := s.Store.(authority.Lister)
	if !ok {
		return nil, authority.ErrNotListable
	}
	ctx, span := s.start(ctx, "environments")
	envs, err := l.Environments(ctx)
	end(span, err)
	return envs, err
}

// DeleteExpired deletes the wrapped store's expired records, when it keeps no time to live of its
// own; otherwise there is nothing to delete.
func (s *tracingStore) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	ex, ok := s.Store.(authority.Expirer)
	if !ok {
		return 0, nil
	}
	ctx, span := s.start(ctx, "delete_expired")
	n, err := ex.DeleteExpired(ctx, now)
	span.SetAttributes(attribute.Int("latestwins.store.records", n))
	end(span, err)
	return n, err
}
