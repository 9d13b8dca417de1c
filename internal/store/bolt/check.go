package bolt

import (
	"context"
	"fmt"
	"strconv"

	"go.etcd.io/bbolt"
)

// Check reads the file's layout and changes nothing. It returns the schema version stored, and an
// error that says to run latestwins migrate when Migrate would change the file: the buckets of
// schema 2 missing, or an older version recorded. A file of a newer schema is ErrNewerSchema; a
// damaged one a *DamagedError.
func (s *Store) Check(ctx context.Context) (int, error) {
	var version int
	err := s.view(ctx, true, func(tx *bbolt.Tx) error {
		v, err := strconv.Atoi(string(tx.Bucket(bucketMeta).Get(keySchema)))
		if err != nil {
			return fmt.Errorf("unrecognised schema version: %w", err)
		}
		version = v
		if v < SchemaVersion || tx.Bucket(bucketRecords) == nil || tx.Bucket(bucketExpiry) == nil {
			return fmt.Errorf("schema version %d, this latestwins writes %d: run latestwins migrate with this store (the App's next write also upgrades it)", v, SchemaVersion)
		}
		return nil
	})
	if err != nil {
		return version, fmt.Errorf("check %s: %w", s.path, err)
	}
	return version, nil
}
