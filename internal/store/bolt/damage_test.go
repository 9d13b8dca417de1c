package bolt_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
)

// sample is a real store file: documents of 40 environments (enough for branch pages), the
// pending index and the schema version; its bytes and layout.
type sample struct {
	data                          []byte
	pageSize, highWater, freelist int64
}

func storeFile(tb testing.TB) sample {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "latestwins.db")
	s, err := bolt.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	for i := range 40 {
		if _, err := s.Put(context.Background(), envDoc(fmt.Sprintf("env-%02d", i), int64(i+2))); err != nil {
			tb.Fatal(err)
		}
	}
	var f sample
	if f.data, err = os.ReadFile(path); err != nil {
		tb.Fatal(err)
	}
	if f.pageSize, f.highWater, f.freelist, err = bolt.Layout(path); err != nil {
		tb.Fatal(err)
	}
	return f
}

func writeFile(tb testing.TB, data []byte) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "latestwins.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// checkDamaged fails unless err is the clear error of a damaged file at path.
func checkDamaged(t *testing.T, op, path string, err error) {
	t.Helper()
	var d *bolt.DamagedError
	switch {
	case err == nil:
		t.Errorf("%s on a damaged file succeeded", op)
	case !errors.Is(err, bolt.ErrDamaged) || !errors.As(err, &d):
		t.Errorf("%s: err = %v, want a DamagedError", op, err)
	case d.Path != path || !strings.Contains(err.Error(), path+" is damaged (") ||
		!strings.HasSuffix(d.Error(), "): restore it from a backup or move it away"):
		t.Errorf("%s: %q does not name %s, say how it is damaged and what to do", op, err, path)
	}
}

// A file cut short at any page boundary is a clear error for every operation, whether the Store is
// opened after the damage or was open before it (a long-running process), and nothing is written
// to it; a cut at or past the high water mark loses nothing.
func TestTruncatedAtEveryPageBoundary(t *testing.T) {
	t.Parallel()
	sf := storeFile(t)
	data, pageSize, highWater := sf.data, sf.pageSize, sf.highWater
	if highWater < 8 || int64(len(data))/pageSize <= highWater {
		t.Fatalf("the sample store spans %d of %d pages; want several, and room past them", highWater, int64(len(data))/pageSize)
	}
	want := envDoc("env-39", 41)
	for pages := int64(0); pages*pageSize <= int64(len(data)); pages++ {
		t.Run(fmt.Sprintf("%d pages", pages), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			path := writeFile(t, data)
			before := open(t, path) // opened while the file was whole
			if err := os.Truncate(path, pages*pageSize); err != nil {
				t.Fatal(err)
			}
			results := map[string]error{}
			for name, opts := range map[string][]bolt.Option{"Open": nil, "Open read-only": {bolt.WithReadOnly()}, "Open must-exist": {bolt.WithMustExist()}} {
				s, err := bolt.Open(path, opts...)
				if err == nil {
					_ = s.Close()
				}
				results[name] = err
			}
			got, err := before.Get(ctx, want.Key)
			results["Get"] = err
			_, results["Put"] = before.Put(ctx, envDoc("new", 1))
			_, results["Pending"] = before.Pending(ctx)
			results["Migrate"] = before.Migrate(ctx)
			if pages >= highWater {
				for op, err := range results {
					if err != nil {
						t.Errorf("%s on a file cut past its data: %v", op, err)
					}
				}
				if err == nil && !cmp.Equal(got.Env, want.Env) {
					t.Errorf("document read back differs:\n%s", cmp.Diff(want.Env, got.Env))
				}
				return
			}
			for op, err := range results {
				checkDamaged(t, op, path, err)
			}
			if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, data[:pages*pageSize]) {
				t.Errorf("the damaged file was changed (%v)", err)
			}
		})
	}
}

func TestGarbledMetaPages(t *testing.T) {
	t.Parallel()
	sf := storeFile(t)
	data, pageSize := sf.data, sf.pageSize
	flip := func(offsets ...int64) []byte {
		b := bytes.Clone(data)
		for _, o := range offsets {
			b[o] ^= 0x5a
		}
		return b
	}
	// One bad meta page is what a torn write leaves: bbolt falls back to the other one.
	for name, b := range map[string][]byte{"first": flip(16 + 40), "second": flip(pageSize + 16 + 40)} {
		path := writeFile(t, b)
		s, err := bolt.Open(path, bolt.WithReadOnly())
		if err != nil {
			t.Fatalf("one garbled meta page (the %s): %v", name, err)
		}
		if _, err := s.Get(t.Context(), authority.EnvKey("env-00")); err != nil {
			t.Errorf("read with the %s meta page garbled: %v", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"both checksums":   flip(16+40, pageSize+16+40),
		"both magic":       flip(16, pageSize+16),
		"both page sizes":  flip(16+9, pageSize+16+9),
		"empty":            {},
		"shorter than one": data[:100],
	} {
		path := writeFile(t, b)
		_, err := bolt.Open(path)
		if name == "both magic" {
			if !errors.Is(err, bolt.ErrUnusable) || !strings.Contains(err.Error(), "is not a latestwins database") {
				t.Errorf("%s: err = %v, want ErrUnusable saying it is not a database", name, err)
			}
			continue
		}
		checkDamaged(t, "Open with "+name, path, err)
	}
}

// Helper mode of TestDamageWithoutTheProtections: the child opens the file at the path and reads,
// with the protections turned off as the mode says, and prints the error it got.
const damageHelperEnv = "LATESTWINS_BOLT_DAMAGE_HELPER"

func TestDamageHelperProcess(t *testing.T) {
	mode, path, ok := strings.Cut(os.Getenv(damageHelperEnv), ":")
	if !ok {
		return
	}
	bolt.Unprotect(mode == "guard only")
	s, err := bolt.Open(path)
	if err == nil {
		_, err = s.Get(t.Context(), authority.EnvKey("env-00"))
	}
	fmt.Printf("error: %v\n", err)
}

// Shows that the protections are what keep a damaged file from crashing the process: without them
// a truncated file kills it with SIGBUS (or SIGSEGV) and a garbled freelist with bbolt's panic, both with a
// goroutine dump; the guard alone (no checks before mapping) already turns both into DamagedError.
func TestDamageWithoutTheProtections(t *testing.T) {
	t.Parallel()
	sf := storeFile(t)
	data, pageSize, freelist := sf.data, sf.pageSize, sf.freelist
	garbled := bytes.Clone(data)
	garbled[freelist*pageSize+8] ^= 0xff // the page type: anything but a freelist
	files := map[string][]byte{"truncated": data[:3*pageSize], "garbled freelist": garbled}
	for name, b := range files {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := bolt.Open(writeFile(t, b)); !errors.Is(err, bolt.ErrDamaged) {
				t.Fatalf("with the protections: err = %v, want ErrDamaged", err)
			}
			for _, mode := range []string{"none", "guard only"} {
				path := writeFile(t, b)
				cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestDamageHelperProcess$", "-test.count=1")
				cmd.Env = append(os.Environ(), damageHelperEnv+"="+mode+":"+path)
				out, err := cmd.CombinedOutput()
				// A read past a truncated file's end faults with SIGBUS, or with SIGSEGV where the
				// kernel maps the missing page away; either kills the process with a dump.
				crashed := err != nil && (bytes.Contains(out, []byte("SIGBUS")) || bytes.Contains(out, []byte("SIGSEGV")) || bytes.Contains(out, []byte("panic: ")))
				switch mode {
				case "none":
					if !crashed {
						t.Errorf("without the protections the process did not crash (%v):\n%s", err, out)
					}
				default:
					if err != nil || !bytes.Contains(out, []byte(path+" is damaged (reading it failed: ")) {
						t.Errorf("with the guard alone: %v\n%s", err, out)
					}
				}
			}
		})
	}
}

func TestReadOnlyAndMustExist(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	for name, opt := range map[string]bolt.Option{"read-only": bolt.WithReadOnly(), "must-exist": bolt.WithMustExist()} {
		_, err := bolt.Open(missing, opt)
		if !errors.Is(err, bolt.ErrNoStore) || !strings.Contains(err.Error(), "no database at "+missing+": nothing was ever recorded there") {
			t.Errorf("%s Open of a missing file: err = %v, want ErrNoStore naming the path", name, err)
		}
		if _, err := bolt.Open(filepath.Join(dir, "nodir", "x.db"), opt); !errors.Is(err, bolt.ErrUnusable) {
			t.Errorf("%s Open in a missing directory: err = %v, want ErrUnusable", name, err)
		}
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("opening a missing store created it (stat: %v)", err)
	}
	path := dbPath(t)
	w := open(t, path)
	if _, err := w.Put(ctx, envDoc("staging", 1)); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := open(t, path, bolt.WithReadOnly())
	if d, err := r.Get(ctx, authority.EnvKey("staging")); err != nil || d.Env.Name != "staging" {
		t.Fatalf("read-only Get: %v, %v", d, err)
	}
	if _, err := r.Put(ctx, envDoc("prod", 1)); !errors.Is(err, bolt.ErrReadOnly) {
		t.Errorf("read-only Put: err = %v, want ErrReadOnly", err)
	}
	if err := r.Migrate(ctx); !errors.Is(err, bolt.ErrReadOnly) {
		t.Errorf("read-only Migrate: err = %v, want ErrReadOnly", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("a read-only Store changed the file")
	}
	m := open(t, path, bolt.WithMustExist())
	if _, err := m.Put(ctx, envDoc("prod", 1)); err != nil {
		t.Errorf("must-exist Put: %v", err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := m.Migrate(ctx); !errors.Is(err, bolt.ErrNoStore) {
		t.Errorf("must-exist Migrate of a removed file: err = %v, want ErrNoStore", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a must-exist Store recreated its removed file (stat: %v)", err)
	}
}

// Processes that open a new path at the same time never see a half-made file: creators link a whole
// database into place, so a reader finds either no file or a database, never an empty file (which
// is damage). The mutant creates the file in place, as bbolt does by itself.
func TestNewFileAppearsWhole(t *testing.T) {
	t.Parallel()
	if sawEmpty := raceNewFile(t, nil); sawEmpty > 0 {
		t.Fatalf("readers saw an empty or damaged file %d times while it was created", sawEmpty)
	}
	for range 20 {
		if raceNewFile(t, bolt.WithInPlaceCreate()) > 0 {
			return // the mutant was caught
		}
	}
	t.Fatal("creating in place was never seen half made: the race does not exercise the creation")
}

// raceNewFile creates a file at a new path from several Stores while read-only Stores keep reading
// it; it returns how many openings found the file damaged.
func raceNewFile(t *testing.T, createOpt bolt.Option) (damaged int) {
	t.Helper()
	const rounds, creators, readers = 10, 3, 2
	for range rounds {
		path := dbPath(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		created := make(chan struct{})
		for range readers {
			wg.Go(func() {
				for {
					_, err := bolt.Open(path, bolt.WithReadOnly(), bolt.WithOpenTimeout(time.Minute))
					if errors.Is(err, bolt.ErrDamaged) {
						mu.Lock()
						damaged++
						mu.Unlock()
					}
					select {
					case <-created:
						return
					default:
					}
				}
			})
		}
		var cw sync.WaitGroup
		for range creators {
			cw.Go(func() {
				opts := []bolt.Option{bolt.WithOpenTimeout(time.Minute)}
				if createOpt != nil {
					opts = append(opts, createOpt)
				}
				s, err := bolt.Open(path, opts...)
				switch {
				case errors.Is(err, bolt.ErrDamaged):
					mu.Lock()
					damaged++
					mu.Unlock()
				case err != nil:
					t.Errorf("Open a new file: %v", err)
				default:
					_ = s.Close()
				}
			})
		}
		cw.Wait()
		close(created)
		wg.Wait()
	}
	return damaged
}

// FuzzOpenDamaged opens truncated and garbled copies of a real store file and uses them: whatever
// the damage, nothing panics or faults, and a failing Open says what is wrong in the terms the
// command line maps to its exit codes.
func FuzzOpenDamaged(f *testing.F) {
	sf := storeFile(f)
	data, pageSize, highWater := sf.data, sf.pageSize, sf.highWater
	for pages := int64(0); pages*pageSize <= int64(len(data)); pages++ {
		f.Add(data[:pages*pageSize])
	}
	f.Add(data[:pageSize+pageSize/2])
	f.Add(data[:highWater*pageSize-1])
	for page := range highWater {
		for _, at := range []int64{0, 8, 10, 12, 16, 20, 24, 28, 40, 64, 100, pageSize / 2, pageSize - 1} {
			b := bytes.Clone(data)
			b[page*pageSize+at] ^= 0xff
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx := t.Context()
		path := writeFile(t, b)
		for _, opts := range [][]bolt.Option{{bolt.WithReadOnly()}, nil} {
			s, err := bolt.Open(path, opts...)
			if err != nil {
				if !errors.Is(err, bolt.ErrDamaged) && !errors.Is(err, bolt.ErrUnusable) && !strings.Contains(err.Error(), "schema") &&
					!strings.Contains(err.Error(), "buckets") {
					t.Fatalf("Open: %v: not a damage, an unusable path or a schema error", err)
				}
				continue
			}
			for i := range 3 {
				_, _ = s.Get(ctx, authority.EnvKey(fmt.Sprintf("env-%02d", i*13)))
			}
			_, _ = s.Pending(ctx)
			_, _ = s.Put(ctx, envDoc("fuzz", 1))
			_ = s.Close()
		}
	})
}

// BenchmarkOpen measures Open, which checks the whole file with plain reads before bbolt maps it,
// on a store of 100 environments at the domain's caps; and one Get, whose opening checks the
// header pages only.
func BenchmarkOpen(b *testing.B) {
	path := dbPath(b)
	s := open(b, path)
	for i := range 100 {
		d := fullDoc()
		d.Key = authority.EnvKey(fmt.Sprintf("env-%03d", i))
		if _, err := s.Put(b.Context(), d); err != nil {
			b.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	for name, opts := range map[string][]bolt.Option{"create": nil, "read-only": {bolt.WithReadOnly()}} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				s, err := bolt.Open(path, opts...)
				if err != nil {
					b.Fatal(err)
				}
				_ = s.Close()
			}
			b.ReportMetric(float64(fi.Size())/(1<<20), "MB")
		})
	}
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Get(b.Context(), authority.EnvKey("env-050")); err != nil {
				b.Fatal(err)
			}
		}
	})
}
