package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/bbolt"

	"github.com/latestwins/latestwins/internal/authority"
)

// upgrade brings a file of schema 1 to schema 2 inside a write transaction: the records buckets, and
// the version that makes an older latestwins refuse the file rather than misread it.
func upgrade(tx *bbolt.Tx) error {
	if tx.Bucket(bucketRecords) != nil && tx.Bucket(bucketExpiry) != nil && string(tx.Bucket(bucketMeta).Get(keySchema)) == strconv.Itoa(SchemaVersion) {
		return nil
	}
	for _, name := range [][]byte{bucketRecords, bucketExpiry} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	if err := tx.Bucket(bucketMeta).Put(keySchema, []byte(strconv.Itoa(SchemaVersion))); err != nil {
		return fmt.Errorf("record schema version: %w", err)
	}
	return nil
}

// maxExpiredPerWrite bounds the expired records one DeleteExpired transaction deletes, so that it
// never holds the file for long.
const maxExpiredPerWrite = 1024

// PutRecords implements authority.Store in one write transaction.
func (s *Store) PutRecords(ctx context.Context, recs []authority.Record) error {
	if s.mode == modeReadOnly {
		return fmt.Errorf("put records: %w", ErrReadOnly)
	}
	enc := make([][]byte, len(recs))
	for i := range recs {
		b, err := json.Marshal(&recs[i])
		if err != nil {
			return fmt.Errorf("put records: encode %s: %w", recs[i].Key, err)
		}
		enc[i] = b
	}
	err := s.write(ctx, false, false, func(tx *bbolt.Tx) error {
		records, expiry := tx.Bucket(bucketRecords), tx.Bucket(bucketExpiry)
		for i, r := range recs {
			if old := records.Get([]byte(r.Key)); old != nil {
				var prev authority.Record
				if err := json.Unmarshal(old, &prev); err == nil {
					_ = expiry.Delete(expiryKey(prev.ExpiresAt, prev.Key))
				}
			}
			if err := records.Put([]byte(r.Key), enc[i]); err != nil {
				return fmt.Errorf("write record %s: %w", r.Key, err)
			}
			if err := expiry.Put(expiryKey(r.ExpiresAt, r.Key), nil); err != nil {
				return fmt.Errorf("index record %s: %w", r.Key, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("put %d records: %w", len(recs), err)
	}
	return nil
}

// DeleteExpired implements authority.Expirer: it deletes the records whose expiry is before now, as
// DynamoDB's time to live does for a table, and returns how many it deleted.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time) (int, error) {
	if s.mode == modeReadOnly {
		return 0, fmt.Errorf("delete expired records: %w", ErrReadOnly)
	}
	total := 0
	for {
		n := 0
		err := s.write(ctx, false, false, func(tx *bbolt.Tx) error {
			records, expiry := tx.Bucket(bucketRecords), tx.Bucket(bucketExpiry)
			c := expiry.Cursor()
			var done [][]byte
			for k, _ := c.First(); k != nil && len(done) < maxExpiredPerWrite; k, _ = c.Next() {
				if len(k) < 8 || int64(binary.BigEndian.Uint64(k[:8])) >= now.UnixNano() {
					break
				}
				done = append(done, append([]byte(nil), k...))
			}
			for _, k := range done {
				if err := records.Delete(k[8:]); err != nil {
					return fmt.Errorf("delete expired record: %w", err)
				}
				if err := expiry.Delete(k); err != nil {
					return fmt.Errorf("delete expired record: %w", err)
				}
			}
			n = len(done)
			if n == 0 {
				return errNoChange
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("delete expired records: %w", err)
		}
		total += n
		if n < maxExpiredPerWrite {
			return total, nil
		}
	}
}

// expiryKey orders records by expiry: the Unix nanoseconds, big-endian, then the record's key.
func expiryKey(t time.Time, key string) []byte {
	b := make([]byte, 8, 8+len(key))
	binary.BigEndian.PutUint64(b, uint64(max(t.UnixNano(), 0)))
	return append(b, key...)
}

// GetRecords implements authority.Store.
func (s *Store) GetRecords(ctx context.Context, keys []string) ([]authority.Record, error) {
	var raw [][]byte
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		records := tx.Bucket(bucketRecords)
		if records == nil {
			return nil // schema 1: none yet
		}
		for _, k := range keys {
			if b := records.Get([]byte(k)); b != nil {
				raw = append(raw, append([]byte(nil), b...))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("get records: %w", err)
	}
	out := make([]authority.Record, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("get records: decode: %w", err)
		}
	}
	return out, nil
}

// Environments lists every environment in the file, for latestwins migrate.
func (s *Store) Environments(ctx context.Context) ([]string, error) {
	var out []string
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketDocs).Cursor()
		prefix := []byte(authority.EnvKey(""))
		for k, _ := c.Seek(prefix); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == string(prefix); k, _ = c.Next() {
			out = append(out, string(k[len(prefix):]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list environments: %w", err)
	}
	return out, nil
}

var _ authority.RecordLister = (*Store)(nil)

// ListRecords returns the records whose keys begin with prefix (authority.RecordLister).
func (s *Store) ListRecords(ctx context.Context, prefix string) ([]authority.Record, error) {
	var raw [][]byte
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		records := tx.Bucket(bucketRecords)
		if records == nil {
			return nil // schema 1: none yet
		}
		c := records.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
			raw = append(raw, append([]byte(nil), v...))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	out := make([]authority.Record, len(raw))
	for i, b := range raw {
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("list records: decode: %w", err)
		}
	}
	return out, nil
}
