package authority

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const keptKeyPrefix = "kept#"

// KeptKey is the document key of the value name kept beside environment env.
func KeptKey(env, name string) string { return keptKeyPrefix + env + "#" + name }

// KeptRecordKey is the record key of the immutable value id of the values name kept beside env.
func KeptRecordKey(env, name, id string) string { return keptKeyPrefix + env + "#" + name + "#" + id }

// ReadKept reads the value name kept beside env (the report's delivery rollup, say) and its
// revision; nil and 0 when none is kept.
func (a *Authority) ReadKept(ctx context.Context, env, name string) (json.RawMessage, int64, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, 0, err
	}
	d, err := a.store.Get(ctx, KeptKey(env, name))
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("read the %s kept for %s: %w", name, env, err)
	}
	return d.Kept, d.Rev, nil
}

// WriteKept writes the value name kept beside env, conditional on the revision rev it was
// computed from (0: none kept yet); an error matching ErrConflict when another writer moved it on.
func (a *Authority) WriteKept(ctx context.Context, env, name string, rev int64, v json.RawMessage) (int64, error) {
	if err := ValidateEnvironment(env); err != nil {
		return 0, err
	}
	n, err := a.store.Put(ctx, &Doc{Key: KeptKey(env, name), Rev: rev, Kept: v})
	if err != nil {
		return 0, fmt.Errorf("write the %s kept for %s: %w", name, env, err)
	}
	return n, nil
}

// KeptValue is an immutable value kept as a record, and the time its retention runs from (the end
// of the day it sums, say).
type KeptValue struct {
	Value json.RawMessage
	At    time.Time
}

// KeepRecords stores immutable values of the values name kept beside env, by id, each expiring
// the retention after its At, as the events it sums do.
func (a *Authority) KeepRecords(ctx context.Context, env, name string, values map[string]KeptValue) error {
	if err := ValidateEnvironment(env); err != nil {
		return err
	}
	recs := make([]Record, 0, len(values))
	for id, v := range values {
		recs = append(recs, Record{Key: KeptRecordKey(env, name, id), ExpiresAt: v.At.Add(a.retention), Kept: v.Value})
	}
	if len(recs) == 0 {
		return nil
	}
	if err := a.store.PutRecords(ctx, recs); err != nil {
		return fmt.Errorf("store the %s kept for %s: %w", name, env, err)
	}
	return nil
}

// ReadKeptRecords reads the values ids of the values name kept beside env; an id with nothing
// stored (or expired) is left out.
func (a *Authority) ReadKeptRecords(ctx context.Context, env, name string, ids []string) (map[string]json.RawMessage, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, err
	}
	keys := make([]string, len(ids))
	byKey := make(map[string]string, len(ids))
	for i, id := range ids {
		keys[i] = KeptRecordKey(env, name, id)
		byKey[keys[i]] = id
	}
	now := a.clock.Now()
	out := map[string]json.RawMessage{}
	for start := 0; start < len(keys); start += maxRecordsPerRead {
		recs, err := a.store.GetRecords(ctx, keys[start:min(start+maxRecordsPerRead, len(keys))])
		if err != nil {
			return nil, fmt.Errorf("read the %s kept for %s: %w", name, env, err)
		}
		for _, r := range recs {
			if id, ok := byKey[r.Key]; ok && len(r.Kept) > 0 && now.Before(r.ExpiresAt) {
				out[id] = r.Kept
			}
		}
	}
	return out, nil
}
