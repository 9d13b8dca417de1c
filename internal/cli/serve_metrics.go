package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// The metrics listener: loopback by default, since its figures name every environment and scope
// (GET /metrics on the App's own listener would publish them to whoever reaches the webhook URL).
const (
	defaultMetricsAddr = "127.0.0.1:9464"
	metricsOff         = "off"
)

// serveMetrics serves GET /metrics on a listener of its own at addr, and returns the function that
// stops it.
func (c *cmdEnv) serveMetrics(ctx context.Context, addr string) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %s: %w (give another host:port, or off)", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", c.metrics.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: serveReadHeaderTimeout, WriteTimeout: serveWriteTimeout,
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) }}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	c.progress("latestwins serve: metrics on http://%s/metrics", ln.Addr())
	return func() {
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutCtx)
		if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.WarnContext(ctx, "metrics listener", "err", err)
		}
	}, nil
}
