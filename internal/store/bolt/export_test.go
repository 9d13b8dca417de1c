package bolt

import (
	"context"
	"os"
	"time"

	"go.etcd.io/bbolt"
)

// SetCommit replaces how s ends its write transactions, to inject failures around the commit.
func SetCommit(s *Store, commit func(*bbolt.Tx) error) { s.commit = commit }

// PollForLock makes s wait for a busy file by polling, as it does where flock is not available.
func PollForLock(s *Store) {
	s.lockWait = func(context.Context, *os.File, int, time.Time, func()) error { return nil }
}
