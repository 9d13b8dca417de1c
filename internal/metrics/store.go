package metrics

import (
	"context"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// Store counts the requests of an authority.Store by operation and result. What the store it wraps
// offers besides the port (listing environments, deleting expired records) it offers too.
func (m *Metrics) Store(s authority.Store) authority.Store {
	return &countingStore{Store: s, m: m}
}

type countingStore struct {
	authority.Store
	m *Metrics
}

func (c *countingStore) count(op string, err error) {
	c.m.requests.WithLabelValues(op, result(err)).Inc()
}

func (c *countingStore) Get(ctx context.Context, key string) (*authority.Doc, error) {
	d, err := c.Store.Get(ctx, key)
	c.count("get", err)
	return d, err
}

func (c *countingStore) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	rev, err := c.Store.Put(ctx, doc)
	c.count("put", err)
	return rev, err
}

func (c *countingStore) Pending(ctx context.Context) ([]string, error) {
	envs, err := c.Store.Pending(ctx)
	c.count("pending", err)
	return envs, err
}

func (c *countingStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	n, err := c.Store.Add(ctx, key, delta)
	c.count("add", err)
	return n, err
}

func (c *countingStore) PutRecords(ctx context.Context, recs []authority.Record) error {
	err := c.Store.PutRecords(ctx, recs)
	c.count("put_records", err)
	return err
}

func (c *countingStore) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	recs, err := c.Store.GetRecords(ctx, keys)
	c.count("get_records", err)
	return recs, err
}

// Environments lists the wrapped store's environments, when it can.
func (c *countingStore) Environments(ctx context.Context) ([]string, error) {
	l, ok := c.Store.(authority.Lister)
	if !ok {
		return nil, authority.ErrNotListable
	}
	envs, err := l.Environments(ctx)
	c.count("environments", err)
	return envs, err
}

// DeleteExpired deletes the wrapped store's expired records, when it keeps no time to live of its
// own; otherwise there is nothing to delete.
func (c *countingStore) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	ex, ok := c.Store.(authority.Expirer)
	if !ok {
		return 0, nil
	}
	n, err := ex.DeleteExpired(ctx, now)
	c.count("delete_expired", err)
	return n, err
}
