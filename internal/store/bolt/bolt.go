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
// deleted as new ones are written; "counters" maps a counter's key (authority.Store's Add) to its
// value in decimal, made by the first Add (a file without it holds no counter, and a latestwins
// that knows no counters leaves it be); "meta" holds the schema version.
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
	"runtime/debug"
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
	bucketDocs     = []byte("docs")
	bucketPending  = []byte("pending")
	bucketMeta     = []byte("meta")
	bucketRecords  = []byte("records")
	bucketExpiry   = []byte("expiry")
	bucketCounters = []byte("counters")
	keySchema      = []byte("schema")
)

var (
	// ErrBusy: another process held the database file for longer than the open timeout.
	ErrBusy = errors.New("database file is locked by another process")
	// ErrNewerSchema: the file was written by a newer latestwins with a layout this one does not know.
	ErrNewerSchema = errors.New("database schema is newer than this latestwins supports")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("bolt store closed")
	// ErrDamaged: the file is damaged (truncated, garbled); see DamagedError. Retrying cannot help,
	// but the path is right: the file has to be restored or moved away.
	ErrDamaged = errors.New("database file is damaged")
	// ErrNoStore: there is no database file at the path and the Store was opened WithReadOnly or
	// WithMustExist, or the file went away after Open.
	ErrNoStore = errors.New("no database file")
	// ErrUnusable: the path can never hold a database as it is: its directory is missing, it is a
	// directory, it is not a bbolt file, or its permissions forbid the access.
	ErrUnusable = errors.New("database path cannot be used")
	// ErrReadOnly: a write to a Store opened WithReadOnly.
	ErrReadOnly = errors.New("bolt store opened read-only")

	// errNoChange ends a write transaction without committing.
	errNoChange = errors.New("no change")
	// errBusyWait: lockWait reached the deadline.
	errBusyWait = errors.New("lock wait timed out")
)

// DamagedError says that the database file is damaged, and how.
type DamagedError struct {
	Path   string
	Reason string
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("%s is damaged (%s): restore it from a backup or move it away", e.Path, e.Reason)
}

// Is makes a DamagedError match ErrDamaged.
func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// pathError is an error of the database path: its message, and the categories and cause it matches.
type pathError struct {
	msg  string
	errs []error
}

func (e *pathError) Error() string   { return e.msg }
func (e *pathError) Unwrap() []error { return e.errs }

func unusable(cause error, format string, args ...any) error {
	return &pathError{msg: fmt.Sprintf(format, args...) + ": " + cause.Error(), errs: []error{ErrUnusable, cause}}
}

func noStore(cause error, format string, args ...any) error {
	return &pathError{msg: fmt.Sprintf(format, args...), errs: []error{ErrNoStore, cause}}
}

// mode is what a Store may do with its file.
type mode int

const (
	modeCreate    mode = iota // create the file and its buckets on first use (Open migrates)
	modeMustExist             // read and write a file that exists
	modeReadOnly              // only read a file that exists
)

// checkFile turns the checks of a file before bbolt maps it on, and guardBbolt the guard around
// bbolt; tests turn them off in a child process to show what they prevent.
var checkFile, guardBbolt = true, true

// Store is an authority.Store on a bbolt file. It is safe for concurrent use; operations of one
// Store are serialised in the process (reads may run together), and with other processes by the
// file lock.
type Store struct {
	path    string
	timeout time.Duration
	log     *slog.Logger
	mode    mode
	// inPlace makes create leave a new file to bbolt, as where there are no hard links (tests).
	inPlace bool

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

// WithReadOnly opens an existing database only to read it: Open creates nothing and fails with
// ErrNoStore when there is no database at the path, and writes fail with ErrReadOnly. The file is
// opened read-only, so a file the process may only read serves.
func WithReadOnly() Option { return func(s *Store) { s.mode = modeReadOnly } }

// WithMustExist opens an existing database to read and write it: Open creates nothing and fails
// with ErrNoStore when there is no database at the path.
func WithMustExist() Option { return func(s *Store) { s.mode = modeMustExist } }

// Open returns a Store on the file at path. By default it creates the file and its buckets on
// first use (the parent directory must exist); WithReadOnly and WithMustExist need a database
// there. Open checks the whole file first: a damaged one fails with a DamagedError (ErrDamaged), a
// path that cannot work with ErrUnusable. Open keeps nothing open: every operation opens the file
// anew.
func Open(path string, opts ...Option) (*Store, error) {
	s := &Store{path: path, timeout: DefaultOpenTimeout, log: slog.New(slog.DiscardHandler), commit: (*bbolt.Tx).Commit, lockWait: lockWait}
	for _, o := range opts {
		o(s)
	}
	if err := checkPath(path, s.mode); err != nil {
		return nil, fmt.Errorf("open bolt store: %w", err)
	}
	ctx := context.Background()
	var err error
	if s.mode == modeCreate {
		err = s.Migrate(ctx) // checks the whole file before it writes
	} else {
		err = s.view(ctx, true, func(*bbolt.Tx) error { return nil })
	}
	if err != nil {
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
// refuses a file whose schema is newer than SchemaVersion. It creates the file unless the Store was
// opened WithMustExist, and fails with ErrReadOnly on a Store opened WithReadOnly.
func (s *Store) Migrate(ctx context.Context) error {
	if s.mode == modeReadOnly {
		return fmt.Errorf("migrate %s: %w", s.path, ErrReadOnly)
	}
	inPlace := false
	if s.mode == modeCreate {
		var err error
		if inPlace, err = s.create(); err != nil {
			return fmt.Errorf("migrate %s: %w", s.path, err)
		}
	}
	if err := s.write(ctx, true, inPlace, migrate); err != nil {
		return fmt.Errorf("migrate %s: %w", s.path, err)
	}
	return nil
}

// migrate creates the buckets and records the schema version, or changes nothing (errNoChange).
func migrate(tx *bbolt.Tx) error {
	if err := checkBuckets(tx); err != nil {
		return err
	}
	meta := tx.Bucket(bucketMeta)
	if meta != nil {
		if err := checkVersion(meta.Get(keySchema)); err != nil {
			return err
		}
	}
	if checkSchema(tx) == nil && tx.Bucket(bucketRecords) != nil && tx.Bucket(bucketExpiry) != nil &&
		string(tx.Bucket(bucketMeta).Get(keySchema)) == strconv.Itoa(SchemaVersion) {
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
}

// create makes a missing database file whole or not at all: a new database is made and migrated
// under a temporary name in the same directory, then linked into place (a file another process
// linked first wins), so that the file at the path is never empty or half made, and an empty one is
// damage. Where the file system has no hard links, inPlace says to let bbolt create the file in
// place under the file lock, as it does by itself.
func (s *Store) create() (inPlace bool, err error) {
	if _, err := os.Lstat(s.path); !errors.Is(err, fs.ErrNotExist) {
		return false, nil // it exists, or the opening says why it cannot be looked at
	}
	if s.inPlace {
		return true, nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), filepath.Base(s.path)+".new-*")
	if err != nil {
		return false, describeOpenError(s.path, err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("create %s: %w", name, err)
	}
	db, err := bbolt.Open(name, fileMode, &bbolt.Options{NoStatistics: true})
	if err != nil {
		return false, fmt.Errorf("create %s: %w", name, err)
	}
	err = db.Update(migrate)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("create %s: %w", name, err)
	}
	switch err := os.Link(name, s.path); {
	case err == nil, errors.Is(err, fs.ErrExist):
		return false, nil
	default:
		s.log.Debug("cannot link the new database file into place; creating it in place", "path", s.path, "error", err)
		return true, nil
	}
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
	if s.mode == modeReadOnly {
		return 0, fmt.Errorf("put %s: %w", doc.Key, ErrReadOnly)
	}
	next := *doc
	next.Rev = doc.Rev + 1
	b, err := authority.EncodeDoc(&next)
	if err != nil {
		return 0, fmt.Errorf("put %s: encode: %w", doc.Key, err)
	}
	key := []byte(doc.Key)
	var decided bool // the transaction ran to its end, so a failure after it is the commit's
	err = s.write(ctx, false, false, func(tx *bbolt.Tx) error {
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

// Add implements authority.Store: the read and the write of the counter in one write transaction,
// which the file lock makes atomic across processes. Delta 0 is a read transaction. A commit that
// reports an error may have reached the disk; the Add fails then, and the value it would have
// returned is skipped if it did.
func (s *Store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if delta < 0 {
		return 0, fmt.Errorf("add %d to counter %s: %w", delta, key, authority.ErrInvalidInput)
	}
	var n int64
	if delta == 0 {
		err := s.read(ctx, func(tx *bbolt.Tx) error {
			var err error
			n, err = counter(tx.Bucket(bucketCounters), key)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("read counter %s: %w", key, err)
		}
		return n, nil
	}
	if s.mode == modeReadOnly {
		return 0, fmt.Errorf("add to counter %s: %w", key, ErrReadOnly)
	}
	err := s.write(ctx, false, false, func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketCounters)
		if err != nil {
			return fmt.Errorf("create bucket %s: %w", bucketCounters, err)
		}
		cur, err := counter(b, key)
		if err != nil {
			return err
		}
		n = cur + delta
		if n < cur {
			return fmt.Errorf("counter at %d: adding %d overflows: %w", cur, delta, authority.ErrInvalidInput)
		}
		if err := b.Put([]byte(key), strconv.AppendInt(nil, n, 10)); err != nil {
			return fmt.Errorf("write counter: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("add %d to counter %s: %w", delta, key, err)
	}
	return n, nil
}

// counter reads the value of the counter under key in b (nil: no counter yet); absent is 0.
func counter(b *bbolt.Bucket, key string) (int64, error) {
	if b == nil {
		return 0, nil
	}
	v := b.Get([]byte(key))
	if v == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		return 0, damagef("the counter %s holds %q, not a count", key, v)
	}
	return n, nil
}

// --- one transaction per opening of the file ------------------------------------------------------

// read runs fn in a read transaction on a shared opening of the file.
func (s *Store) read(ctx context.Context, fn func(*bbolt.Tx) error) error {
	return s.view(ctx, false, fn)
}

// view is read; with deep, the whole file is checked before bbolt maps it.
func (s *Store) view(ctx context.Context, deep bool, fn func(*bbolt.Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return s.guard(func(o *opening) error {
		db, err := s.open(ctx, o, true, false, deep)
		if err != nil {
			return err
		}
		defer s.close(ctx, db)
		// View rolls back if bbolt panics, so that guard can close the handle.
		return db.View(func(tx *bbolt.Tx) error {
			if err := checkSchema(tx); err != nil {
				return err
			}
			return fn(tx)
		})
	})
}

// write runs fn in a write transaction on an exclusive opening of the file. With migrating
// (Migrate), the file is checked whole before bbolt maps it and the schema is not checked first;
// with inPlace, a missing or empty file is bbolt's to create.
func (s *Store) write(ctx context.Context, migrating, inPlace bool, fn func(*bbolt.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.guard(func(o *opening) error {
		db, err := s.open(ctx, o, false, inPlace, migrating)
		if err != nil {
			return err
		}
		defer s.close(ctx, db)
		tx, err := db.Begin(true)
		if err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		defer func() {
			if tx.DB() != nil { // still open (bbolt panicked): release bbolt's locks so that the handle closes
				_ = tx.Rollback()
			}
		}()
		if !migrating {
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
	})
}

// opening is what one operation opened, so that guard can release it after a panic.
type opening struct {
	file *os.File
	db   *bbolt.DB
}

// guard runs fn, which opens the file and uses it through bbolt, and turns a panic or a memory
// fault in it into a DamagedError: bbolt trusts the file it maps, so a damage that the checks
// before mapping did not see makes it panic, or fault where a page lies past the end of the file.
// After a panic the file is closed at once, which releases the file lock, and the bbolt handle is
// closed on the side (its mapping with it), so that a lock bbolt still held cannot hang the caller.
func (s *Store) guard(fn func(*opening) error) (err error) {
	if !guardBbolt {
		return fn(&opening{})
	}
	o := &opening{}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if o.file != nil {
			_ = o.file.Close()
		}
		if db := o.db; db != nil {
			go func() { _ = db.Close() }()
		}
		err = &DamagedError{Path: s.path, Reason: fmt.Sprintf("reading it failed: %v", r)}
		s.log.Debug("bbolt panicked on the database file", "path", s.path, "panic", r, "stack", string(debug.Stack()))
	}()
	err = fn(o)
	if d := damage(""); errors.As(err, &d) && !errors.Is(err, ErrDamaged) {
		return &DamagedError{Path: s.path, Reason: d.Error()}
	}
	return err
}

// open opens the database file, waiting while another process holds it, until the open timeout or
// ctx ends. bbolt's own lock wait polls every 50 ms and ignores ctx, so bbolt is asked not to wait
// at all (a 1 ns timeout) and the waiting happens here: in lockWait, which blocks on the lock where
// flock exists, and otherwise by retrying with a short randomised pause. Once the file is locked it
// is inspected before bbolt maps it (the whole page tree with deep); the opened file is kept in o.
func (s *Store) open(ctx context.Context, o *opening, readOnly, create, deep bool) (*bbolt.DB, error) {
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
			if err := s.inspect(f, create, deep); err != nil {
				_ = f.Close()
				return nil, err
			}
			o.file = f
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
		o.file = nil
		db, err := bbolt.Open(s.path, fileMode, opts)
		switch {
		case err == nil:
			o.db = db
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

// inspect checks the locked file f before bbolt maps it (verify.go). A file is never empty (create
// links a whole new one into place) unless bbolt makes it in place (create).
func (s *Store) inspect(f *os.File, create, deep bool) error {
	if !checkFile {
		return nil
	}
	var d damage
	switch err := inspect(f, deep); {
	case err == nil:
		return nil
	case errors.Is(err, errEmpty):
		if create {
			return nil
		}
		return &DamagedError{Path: s.path, Reason: "the file is empty: 0 bytes"}
	case errors.Is(err, errNotBolt):
		return unusable(err, "%s is not a latestwins database: name the store's file, or move this one away", s.path)
	case errors.As(err, &d):
		return &DamagedError{Path: s.path, Reason: d.Error()}
	default:
		return fmt.Errorf("read %s: %w", s.path, err)
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

// checkPath explains the common mistakes before bbolt gives a terser error. A Store that must find
// its file fails with ErrNoStore when there is none.
func checkPath(path string, m mode) error {
	if path == "" {
		return unusable(errors.New("empty path"), "no database path given")
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return unusable(syscall.EISDIR, "%s is a directory; give the path of a database file inside it (e.g. %s)",
			path, filepath.Join(path, "latestwins.db"))
	case err == nil:
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return describeOpenError(path, err)
	}
	dir := filepath.Dir(path)
	di, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return unusable(err, "directory %s of database file %s does not exist; create it first", dir, path)
	case err != nil:
		return describeOpenError(path, err)
	case !di.IsDir():
		return unusable(syscall.ENOTDIR, "%s, the parent of database file %s, is not a directory", dir, path)
	case m != modeCreate:
		return noStore(fs.ErrNotExist, "no database at %s: nothing was ever recorded there", path)
	}
	return nil
}

// describeOpenError explains an error of opening the file; errors already explained pass through.
func describeOpenError(path string, err error) error {
	switch {
	case errors.Is(err, ErrDamaged), errors.Is(err, ErrNoStore), errors.Is(err, ErrUnusable):
		return err
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return unusable(err, "database file %s is not writable (or not readable, or its directory is not writable); check the permissions", path)
	case errors.Is(err, fs.ErrNotExist):
		return noStore(err, "no database at %s: the file does not exist (removed after the store was opened?); run latestwins migrate to create it", path)
	case errors.Is(err, syscall.ENOTDIR):
		return unusable(err, "a parent of database file %s is not a directory", path)
	case errors.Is(err, syscall.EISDIR):
		return unusable(err, "%s is a directory; give the path of a database file inside it", path)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch), errors.Is(err, berrors.ErrChecksum):
		return &DamagedError{Path: path, Reason: err.Error()}
	default:
		return fmt.Errorf("open database file %s: %w", path, err)
	}
}

// checkSchema verifies, in every transaction, that the file has the buckets and layout of this
// version: a newer latestwins may have migrated it since this Store was opened.
func checkSchema(tx *bbolt.Tx) error {
	if err := checkBuckets(tx); err != nil {
		return err
	}
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

// checkBuckets finds damage where a bucket belongs: a plain value under a bucket's name.
func checkBuckets(tx *bbolt.Tx) error {
	c := tx.Cursor()
	for _, name := range [][]byte{bucketDocs, bucketPending, bucketMeta, bucketCounters} {
		if k, v := c.Seek(name); bytes.Equal(k, name) && v != nil {
			return damagef("a plain value stands where its %s bucket belongs", name)
		}
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
