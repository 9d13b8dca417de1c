// Package bolt is the embedded Store: one bbolt file on the local disk, the default of the CLI.
//
// Short-lived CLI processes use one file at the same time (a `latestwins run` can live for minutes
// while other processes gate and claim), so the Store never keeps the file open between operations:
// each operation opens the database, runs one transaction and closes it. bbolt locks the file with
// flock while it is open (exclusive for writes, shared for reads), so operations of different
// processes are serialised by the operating system; a process that finds the file locked retries
// for a bounded time and then reports that another process holds it.
//
// Buckets: "docs" maps a document key to its stored form (authority.EncodeDoc), its revision
// included; "pending" holds the names of the environments whose last stored document had Pending set
// (kept in the same transaction as the write); "records" maps a record key (an event, an accepted
// intent) to its JSON, and "expiry" orders the record keys by expiry so that expired records are
// deleted as new ones are written; "meta" holds the schema version.
//
// Schema 2 stores environments in their compact form beside records of their history. A file of
// schema 1 is read as it is and upgraded by its first write (the records buckets created, the
// version raised), after which a latestwins of schema 1 refuses it instead of misreading it.
package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/latestwins/latestwins/internal/authority"
)

// SchemaVersion is the layout this package writes; it reads 1 and 2.
const SchemaVersion = 2

// DefaultOpenTimeout bounds the wait for a file another process holds.
const DefaultOpenTimeout = 5 * time.Second

const (
	fileMode = 0o600
	// maxPoll caps the interval between attempts to lock a busy file.
	maxPoll = 20 * time.Millisecond
)

var (
	bucketDocs    = []byte("docs")
	bucketPending = []byte("pending")
	bucketMeta    = []byte("meta")
	bucketRecords = []byte("records")
	bucketExpiry  = []byte("expiry")
	keySchema     = []byte("schema")
)

var (
	// ErrBusy: another process held the database file for longer than the open timeout.
	ErrBusy = errors.New("database file is locked by another process")
	// ErrNewerSchema: the file was written by a newer latestwins with a layout this one does not know.
	ErrNewerSchema = errors.New("database schema is newer than this latestwins supports")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("bolt store closed")

	// errNoChange ends a write transaction without committing.
	errNoChange = errors.New("no change")
	// errBusyWait: lockWait reached the deadline.
	errBusyWait = errors.New("lock wait timed out")
)

// Store is an authority.Store on a bbolt file. It is safe for concurrent use; operations of one
// Store are serialised in the process (reads may run together), and with other processes by the
// file lock.
type Store struct {
	path    string
	timeout time.Duration
	log     *slog.Logger

	mu     sync.RWMutex // writers exclusive, readers shared, like the file lock
	closed bool

	// commit ends a write transaction; tests replace it to inject failures around the commit.
	commit func(*bbolt.Tx) error
	// lockWait waits for the file lock before bbolt takes it (lock_*.go); tests replace it to
	// exercise the polling fallback.
	lockWait func(ctx context.Context, f *os.File, flag int, deadline time.Time, onWait func()) error
}

var (
	_ authority.Store = (*Store)(nil)
	_ io.Closer       = (*Store)(nil)
)

// Option configures a Store.
type Option func(*Store)

// WithOpenTimeout sets how long an operation waits for a database file another process holds
// before it fails with ErrBusy (DefaultOpenTimeout if d <= 0).
func WithOpenTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.timeout = d
		}
	}
}

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// Open returns a Store on the file at path, creating the file and its buckets on first use. The
// parent directory must exist. Open keeps nothing open: every operation opens the file anew.
func Open(path string, opts ...Option) (*Store, error) {
	s := &Store{path: path, timeout: DefaultOpenTimeout, log: slog.New(slog.DiscardHandler), commit: (*bbolt.Tx).Commit, lockWait: lockWait}
	for _, o := range opts {
		o(s)
	}
	if err := checkPath(path); err != nil {
		return nil, fmt.Errorf("open bolt store: %w", err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		return nil, fmt.Errorf("open bolt store: %w", err)
	}
	return s, nil
}

// Path is the database file's path.
func (s *Store) Path() string { return s.path }

// Close ends the Store's use; later operations fail with ErrClosed. The file is not open between
// operations, so there is nothing else to release.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

// Migrate creates the buckets and records the schema version. It is idempotent, keeps data, and
// refuses a file whose schema is newer than SchemaVersion.
func (s *Store) Migrate(ctx context.Context) error {
	err := s.write(ctx, true, func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta != nil {
			if err := checkVersion(meta.Get(keySchema)); err != nil {
				return err
			}
		}
		if checkSchema(tx) == nil {
			return errNoChange
		}
		for _, name := range [][]byte{bucketDocs, bucketPending, bucketMeta, bucketRecords, bucketExpiry} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		if err := tx.Bucket(bucketMeta).Put(keySchema, []byte(strconv.Itoa(SchemaVersion))); err != nil {
			return fmt.Errorf("record schema version: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate %s: %w", s.path, err)
	}
	return nil
}

// Get implements authority.Store.
func (s *Store) Get(ctx context.Context, key string) (*authority.Doc, error) {
	var d *authority.Doc
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketDocs).Get([]byte(key))
		if b == nil {
			return authority.ErrNotFound
		}
		var err error
		d, err = authority.DecodeDoc(b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	return d, nil
}

// Put implements authority.Store: it stores doc iff the stored revision is doc.Rev (0: absent), in
// one write transaction that also maintains the pending index.
func (s *Store) Put(ctx context.Context, doc *authority.Doc) (int64, error) {
	if doc.Key == "" {
		return 0, errors.New("put: empty document key")
	}
	next := *doc
	next.Rev = doc.Rev + 1
	b, err := authority.EncodeDoc(&next)
	if err != nil {
		return 0, fmt.Errorf("put %s: encode: %w", doc.Key, err)
	}
	key := []byte(doc.Key)
	var decided bool // the transaction ran to its end, so a failure after it is the commit's
	err = s.write(ctx, false, func(tx *bbolt.Tx) error {
		docs := tx.Bucket(bucketDocs)
		stored, err := revision(docs.Get(key))
		if err != nil {
			return err
		}
		if stored != doc.Rev {
			return fmt.Errorf("at revision %d: stored revision is %d: %w", doc.Rev, stored, authority.ErrConflict)
		}
		if err := docs.Put(key, b); err != nil {
			return fmt.Errorf("write document: %w", err)
		}
		if env, ok := strings.CutPrefix(doc.Key, authority.EnvKey("")); ok {
			pending := tx.Bucket(bucketPending)
			if doc.Pending {
				err = pending.Put([]byte(env), []byte{})
			} else {
				err = pending.Delete([]byte(env))
			}
			if err != nil {
				return fmt.Errorf("update pending index: %w", err)
			}
		}
		decided = true
		return nil
	})
	if err != nil && decided {
		// The commit failed, but it may have reached the disk: answer from what is stored.
		err = s.resolve(ctx, key, b, err)
	}
	if err != nil {
		return 0, fmt.Errorf("put %s: %w", doc.Key, err)
	}
	return next.Rev, nil
}

// resolve decides a write whose commit reported an error: it succeeded iff the document it wrote is
// the one stored now.
func (s *Store) resolve(ctx context.Context, key, want []byte, commitErr error) error {
	var stored bool
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		stored = bytes.Equal(tx.Bucket(bucketDocs).Get(key), want)
		return nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("commit failed and its outcome is unknown (%w); re-read failed: %w", commitErr, err)
	case stored:
		s.log.WarnContext(ctx, "commit reported an error but the write is stored", "path", s.path, "key", string(key), "error", commitErr)
		return nil
	default:
		return fmt.Errorf("commit failed, write not stored: %w", commitErr)
	}
}

// Pending implements authority.Store.
func (s *Store) Pending(ctx context.Context) ([]string, error) {
	out := []string{}
	err := s.read(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPending).ForEach(func(k, _ []byte) error {
			out = append(out, string(k))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list pending: %w", err)
	}
	return out, nil // bbolt keeps keys sorted
}

// --- one transaction per opening of the file ------------------------------------------------------

// read runs fn in a read transaction on a shared opening of the file.
func (s *Store) read(ctx context.Context, fn func(*bbolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	db, err := s.open(ctx, true, false)
	if err != nil {
		return err
	}
	defer s.close(ctx, db)
	return db.View(func(tx *bbolt.Tx) error {
		if err := checkSchema(tx); err != nil {
			return err
		}
		return fn(tx)
	})
}

// write runs fn in a write transaction on an exclusive opening of the file. With create, the file
// is created when missing and the schema is not checked first (Migrate does).
func (s *Store) write(ctx context.Context, create bool, fn func(*bbolt.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	db, err := s.open(ctx, false, create)
	if err != nil {
		return err
	}
	defer s.close(ctx, db)
	tx, err := db.Begin(true)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if !create {
		if err = checkSchema(tx); err == nil {
			err = upgrade(tx)
		}
	}
	if err == nil {
		err = fn(tx)
	}
	if err != nil {
		_ = tx.Rollback()
		if errors.Is(err, errNoChange) {
			return nil
		}
		return err
	}
	if err := s.commit(tx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// open opens the database file, waiting while another process holds it, until the open timeout or
// ctx ends. bbolt's own lock wait polls every 50 ms and ignores ctx, so bbolt is asked not to wait
// at all (a 1 ns timeout) and the waiting happens here: in lockWait, which blocks on the lock where
// flock exists, and otherwise by retrying with a short randomised pause.
func (s *Store) open(ctx context.Context, readOnly, create bool) (*bbolt.DB, error) {
	start := time.Now()
	deadline := start.Add(s.timeout)
	logged := false
	onWait := func() {
		if !logged {
			logged = true
			s.log.DebugContext(ctx, "database file busy; waiting", "path", s.path, "timeout", s.timeout)
		}
	}
	opts := &bbolt.Options{Timeout: time.Nanosecond, ReadOnly: readOnly, NoStatistics: true,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			if !create {
				flag &^= os.O_CREATE // an operation on a removed file fails instead of starting an empty database
			}
			f, err := os.OpenFile(name, flag, perm)
			if err != nil {
				return nil, err
			}
			if err := s.lockWait(ctx, f, flag, deadline, onWait); err != nil {
				return nil, err // lockWait closed f
			}
			return f, nil
		}}
	busy := func() error {
		return fmt.Errorf("open %s: another process has held the file for %s (a running latestwins, or a tool that opened the database); try again, or raise the open timeout: %w",
			s.path, time.Since(start).Round(time.Millisecond), ErrBusy)
	}
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("open %s: %w", s.path, err)
		}
		db, err := bbolt.Open(s.path, fileMode, opts)
		switch {
		case err == nil:
			return db, nil
		case errors.Is(err, errBusyWait):
			return nil, busy()
		case ctx.Err() != nil:
			return nil, fmt.Errorf("open %s: waiting for another process to release the file: %w", s.path, ctx.Err())
		case !errors.Is(err, berrors.ErrTimeout):
			return nil, describeOpenError(s.path, err)
		}
		now := time.Now()
		if !now.Before(deadline) {
			return nil, busy()
		}
		onWait()
		poll := time.Duration(rand.Int64N(int64(min(time.Millisecond<<min(attempt, 5), maxPoll)))) + 100*time.Microsecond
		if err := wait(ctx, min(poll, deadline.Sub(now))); err != nil {
			return nil, fmt.Errorf("open %s: waiting for another process to release the file: %w", s.path, err)
		}
	}
}

func (s *Store) close(ctx context.Context, db *bbolt.DB) {
	if err := db.Close(); err != nil {
		s.log.WarnContext(ctx, "closing database file", "path", s.path, "error", err)
	}
}

func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// checkPath explains the common mistakes before bbolt gives a terser error.
func checkPath(path string) error {
	if path == "" {
		return errors.New("no database path given")
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%s is a directory; give the path of a database file inside it (e.g. %s): %w",
			path, filepath.Join(path, "latestwins.db"), syscall.EISDIR)
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return describeOpenError(path, err)
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("directory %s of database file %s does not exist; create it first: %w", dir, path, err)
	case err != nil:
		return describeOpenError(path, err)
	case !di.IsDir():
		return fmt.Errorf("%s, the parent of database file %s, is not a directory: %w", dir, path, syscall.ENOTDIR)
	}
	return nil
}

func describeOpenError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return fmt.Errorf("database file %s is not writable (or its directory is not); check its permissions: %w", path, err)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("database file %s does not exist (removed after the store was opened?); run latestwins migrate to create it: %w", path, err)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("a parent of database file %s is not a directory: %w", path, err)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return fmt.Errorf("%s is not a latestwins database (not a bbolt file, or a damaged one): %w", path, err)
	default:
		return fmt.Errorf("open database file %s: %w", path, err)
	}
}

// checkSchema verifies, in every transaction, that the file has the buckets and layout of this
// version: a newer latestwins may have migrated it since this Store was opened.
func checkSchema(tx *bbolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil || tx.Bucket(bucketDocs) == nil || tx.Bucket(bucketPending) == nil {
		return errors.New("database has no latestwins buckets; run latestwins migrate")
	}
	v := meta.Get(keySchema)
	if err := checkVersion(v); err != nil {
		return err
	}
	if v == nil {
		return errors.New("database has no schema version; run latestwins migrate")
	}
	return nil
}

// checkVersion refuses a schema version other than this package's; nil (absent) passes.
func checkVersion(v []byte) error {
	if v == nil {
		return nil
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 {
		return fmt.Errorf("database has an unrecognised schema version %q", v)
	}
	if n > SchemaVersion {
		return fmt.Errorf("schema version %d, this latestwins knows %d; upgrade latestwins: %w", n, SchemaVersion, ErrNewerSchema)
	}
	return nil
}

// revision reads the revision of a stored document; nil (absent) is revision 0. It reads tokens
// only up to the "rev" field, which Put writes near the start, instead of decoding the document.
func revision(b []byte) (int64, error) {
	if b == nil {
		return 0, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0, fmt.Errorf("decode stored revision: not a JSON object (%v)", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, fmt.Errorf("decode stored revision: %w", err)
		}
		if tok == "rev" {
			var rev int64
			if err := dec.Decode(&rev); err != nil {
				return 0, fmt.Errorf("decode stored revision: %w", err)
			}
			return rev, nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0, fmt.Errorf("decode stored revision: %w", err)
		}
	}
	return 0, errors.New("decode stored revision: the stored document has no revision")
}
