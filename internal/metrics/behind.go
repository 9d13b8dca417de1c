package metrics

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/latestwins/latestwins/internal/authority"
)

// behindCollector reports, at each scrape, how long each scope has had an accepted commit that is
// not live (0 when it runs the newest), read from the store then: the figures are as fresh as the
// scrape, and nothing is kept between scrapes.
type behindCollector struct {
	auth    *authority.Authority
	envs    func(ctx context.Context) ([]string, error)
	timeout time.Duration
	log     *slog.Logger
	behind  *prometheus.Desc
	errors  *prometheus.Desc
}

func newBehindCollector(o Scopes) *behindCollector {
	c := &behindCollector{auth: o.Authority, envs: o.Environments, timeout: o.Timeout, log: o.Logger}
	if c.timeout <= 0 {
		c.timeout = 10 * time.Second
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.behind = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "scope", "behind_seconds"),
		"How long the scope has had an accepted commit that is not live: since the oldest pending one (or the oldest it superseded) was accepted; 0 when the newest is live.",
		[]string{"environment", "scope"}, nil)
	c.errors = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "scrape", "read_errors"),
		"Environments the last scrape could not read (their behind figures are missing).", nil, nil)
	return c
}

func (c *behindCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.behind
	ch <- c.errors
}

func (c *behindCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	figures, failed := Behind(ctx, c.auth, c.envs, c.log)
	for _, f := range figures {
		ch <- prometheus.MustNewConstMetric(c.behind, prometheus.GaugeValue, f.Behind.Seconds(), f.Environment, f.Scope)
	}
	ch <- prometheus.MustNewConstMetric(c.errors, prometheus.GaugeValue, float64(failed))
}

// ScopeBehind is how long one scope has had a commit waiting to go live.
type ScopeBehind struct {
	Environment string
	Scope       string
	Behind      time.Duration
}

// Behind reads every environment (those envs lists, those the store lists, those with pending
// work) and says how long each scope has had a commit waiting; failed counts the environments it
// could not read.
func Behind(ctx context.Context, a *authority.Authority, envs func(context.Context) ([]string, error), log *slog.Logger) (out []ScopeBehind, failed int) {
	names := map[string]bool{}
	add := func(list []string, err error, what string) {
		if err != nil {
			log.WarnContext(ctx, "metrics: cannot list environments", "from", what, "error", err)
			return
		}
		for _, n := range list {
			names[n] = true
		}
	}
	if envs != nil {
		list, err := envs(ctx)
		add(list, err, "configuration")
	}
	if list, err := a.Environments(ctx); !errors.Is(err, authority.ErrNotListable) {
		add(list, err, "store")
	}
	list, err := a.Pending(ctx)
	add(list, err, "pending index")
	now := a.Now()
	for _, name := range slices.Sorted(maps.Keys(names)) {
		e, err := a.State(ctx, name)
		if err != nil {
			failed++
			log.WarnContext(ctx, "metrics: cannot read an environment", "environment", name, "error", err)
			continue
		}
		if e == nil {
			continue
		}
		for _, scope := range slices.Sorted(maps.Keys(e.Scopes)) {
			f := ScopeBehind{Environment: name, Scope: scope}
			if since, ok := e.Scopes[scope].WaitingSince(); ok && now.After(since) {
				f.Behind = now.Sub(since)
			}
			out = append(out, f)
		}
	}
	return out, failed
}
