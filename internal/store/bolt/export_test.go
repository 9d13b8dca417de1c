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

// Unprotect turns off the checks before bbolt maps a file and, unless keepGuard, the guard around
// bbolt, for a child process that shows what they prevent.
func Unprotect(keepGuard bool) { checkFile, guardBbolt = false, keepGuard }

// WithInPlaceCreate makes a Store create a new file the way bbolt does by itself, in place, as it
// does where the file system has no hard links.
func WithInPlaceCreate() Option { return func(s *Store) { s.inPlace = true } }

// Layout returns the page size, the number of pages the file's current meta page spans (its high
// water mark) and its freelist page.
func Layout(path string) (pageSize, pages, freelist int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, 0, err
	}
	m, err := pickMeta(f, uint64(fi.Size()))
	return int64(m.pageSize), int64(m.pgid), int64(m.freelist), err
}
