package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

// binPath is the latestwins binary TestMain builds once for every process test and benchmark.
var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "latestwins-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "temp dir for the binary: %v\n", err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "latestwins")
	build := exec.Command("go", "build", "-o", binPath, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "go build the latestwins binary: %v\n", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	dynalitetest.Stop()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// procTimeout bounds every process a test starts, so that a hung process fails the test instead of
// hanging it.
const procTimeout = 2 * time.Minute

// fixture is one store shared by the latestwins processes of a test.
type fixture struct {
	tb    testing.TB
	ctx   context.Context
	dir   string
	home  string
	store string
	// perScope: new environments of the store are in the per-scope layout (migrate --per-scope),
	// whose generations may skip and whose events are numbered per scope.
	perScope bool
}

// newDynamoFixture gives the test a fresh table on dynalite, created by a `latestwins migrate` process.
func newDynamoFixture(tb testing.TB) *fixture {
	tb.Helper()
	ep := dynalitetest.Endpoint(tb)
	store := fmt.Sprintf("dynamodb://%s?region=us-east-1&endpoint=%s", dynalitetest.TableName(tb), url.QueryEscape(ep))
	return newFixture(tb, store)
}

// newDynamoPerScopeFixture is newDynamoFixture with the table's new environments in the per-scope
// layout, as `latestwins migrate --per-scope` sets it.
func newDynamoPerScopeFixture(tb testing.TB) *fixture {
	tb.Helper()
	f := newDynamoFixture(tb)
	if r := f.must(0, "migrate", "--per-scope"); !strings.Contains(r.stdout, "new environments use the per-scope layout") {
		tb.Fatalf("migrate --per-scope said %q, want the new environments' layout", r.stdout)
	}
	f.perScope = true
	return f
}

// newGitFixture gives the test a fresh bare repository, reached as a git+file:// store through git's
// own upload-pack and receive-pack, with nothing run in the background of a push.
func newGitFixture(tb testing.TB) *fixture {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testutil.MissingTool(tb, "git is not on the PATH: a git+file:// store runs git's receive-pack")
	}
	repo := filepath.Join(tb.TempDir(), "state.git")
	for _, args := range [][]string{{"init", "--bare", "-q", repo}, {"-C", repo, "config", "receive.autogc", "false"},
		{"-C", repo, "config", "gc.auto", "0"}, {"-C", repo, "config", "core.fsync", "none"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return newFixture(tb, "git+file://"+repo)
}

// newBoltFixture gives the test a fresh embedded store file.
func newBoltFixture(tb testing.TB) *fixture {
	tb.Helper()
	return newFixture(tb, "")
}

func newFixture(tb testing.TB, store string) *fixture {
	tb.Helper()
	dir := tb.TempDir()
	if store == "" {
		store = "bolt://" + filepath.Join(dir, "latestwins.db")
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Minute)
	tb.Cleanup(cancel)
	f := &fixture{tb: tb, ctx: ctx, dir: dir, home: home, store: store}
	f.must(0, "migrate")
	return f
}

// environ is the whole environment of a latestwins process: nothing is inherited but PATH, so that
// neither GitHub Actions variables nor AWS settings of the machine change what the processes do.
func (f *fixture) environ() []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + f.home,
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_REGION=us-east-1",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(f.home, "aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(f.home, "aws-credentials"),
		"LATESTWINS_STORE=" + f.store,
	}
}

func (f *fixture) path(name string) string { return filepath.Join(f.dir, name) }

// proc is a running latestwins process.
type proc struct {
	args   []string
	cmd    *exec.Cmd
	stdout syncbuf.Buffer
	stderr syncbuf.Buffer
	done   chan struct{}
	code   int
	err    error
}

// result is how a process ended.
type result struct {
	code           int
	stdout, stderr string
}

func (f *fixture) start(args ...string) *proc {
	f.tb.Helper()
	return startWith(f, binPath, args...)
}

// startWith is f.start with another binary (a mutant build, say).
func startWith(f *fixture, bin string, args ...string) *proc {
	f.tb.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, procTimeout)
	p := &proc{args: args, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, args...)
	p.cmd.Env = f.environ()
	p.cmd.Dir = f.dir
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		cancel()
		f.tb.Fatalf("start %s %s: %v", filepath.Base(bin), strings.Join(args, " "), err)
	}
	go func() {
		defer cancel()
		err := p.cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			p.code = ee.ExitCode()
		default:
			p.code, p.err = -2, err
		}
		close(p.done)
	}()
	return p
}

func (p *proc) wait() result {
	<-p.done
	return p.result()
}

func (p *proc) result() result {
	return result{code: p.code, stdout: p.stdout.String(), stderr: p.stderr.String()}
}

func (p *proc) String() string { return "latestwins " + strings.Join(p.args, " ") }

func (f *fixture) run(args ...string) result {
	f.tb.Helper()
	return f.start(args...).wait()
}

// must runs a process and ends the test unless it exits with code.
func (f *fixture) must(code int, args ...string) result {
	f.tb.Helper()
	p := f.start(args...)
	r := p.wait()
	if r.code != code {
		f.tb.Fatalf("%v: exit %d, want %d (%v)\nstdout:\n%s\nstderr:\n%s", p, r.code, code, p.err, r.stdout, r.stderr)
	}
	return r
}

// statusView is the shape of `latestwins status --json`.
type statusView struct {
	Environment string                `json:"environment"`
	Desired     int64                 `json:"desired_generation"`
	Observed    int64                 `json:"observed_generation"`
	Settled     bool                  `json:"settled"`
	Scopes      map[string]*scopeView `json:"scopes"`
}

type scopeView struct {
	Live      *authority.Live    `json:"live"`
	Pending   *authority.Ref     `json:"pending"`
	Owner     int64              `json:"owner"`
	Lease     authority.Lease    `json:"lease"`
	LeaseHeld bool               `json:"lease_held"`
	Failure   *authority.Failure `json:"failure"`
}

func (f *fixture) status(env string) *statusView {
	f.tb.Helper()
	r := f.must(0, "status", env, "--json")
	var s statusView
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		f.tb.Fatalf("status --json is not JSON: %v\n%s", err, r.stdout)
	}
	return &s
}

func (f *fixture) scope(env, scope string) *scopeView {
	f.tb.Helper()
	s := f.status(env)
	sc := s.Scopes[scope]
	if sc == nil {
		f.tb.Fatalf("status of %s has no scope %s: %+v", env, scope, s)
	}
	return sc
}

// history returns every kept event of env, from `latestwins history --json --limit 0`.
func (f *fixture) history(env string) []authority.Event {
	f.tb.Helper()
	r := f.must(0, "history", env, "--json", "--limit", "0")
	var page authority.HistoryPage
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || page.Before != 0 {
		f.tb.Fatalf("history --json --limit 0 is not one whole page: %v\n%s", err, r.stdout)
	}
	return page.Events
}

func eventsOf(events []authority.Event, kind authority.EventKind) []authority.Event {
	var out []authority.Event
	for _, ev := range events {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

// fifoLine makes a named pipe at path and returns a channel that receives the first line a process
// writes into it.
func fifoLine(tb testing.TB, path string) <-chan string {
	tb.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		tb.Fatalf("mkfifo: %v", err)
	}
	lines := make(chan string, 1)
	go func() {
		fh, err := os.Open(path) // blocks until a writer opens the pipe
		if err != nil {
			close(lines)
			return
		}
		defer fh.Close()
		line, _ := bufio.NewReader(fh).ReadString('\n')
		lines <- strings.TrimSpace(line)
	}()
	tb.Cleanup(func() {
		// Unblock the reader if nothing ever wrote: open the write end and close it at once.
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
	})
	return lines
}

// awaitLine returns the line the fifo receives, failing the test if p exits first.
func awaitLine(tb testing.TB, lines <-chan string, p *proc) string {
	tb.Helper()
	guard := time.NewTimer(procTimeout)
	defer guard.Stop()
	select {
	case line, ok := <-lines:
		if !ok {
			tb.Fatal("the named pipe could not be read")
		}
		return line
	case <-p.done:
		r := p.result()
		tb.Fatalf("%v exited (%d) before its command started\nstdout:\n%s\nstderr:\n%s", p, r.code, r.stdout, r.stderr)
	case <-guard.C:
		tb.Fatalf("%v: its command did not start within %s\nstderr:\n%s", p, procTimeout, p.stderr.String())
	}
	return ""
}

// The binary, interrupted by SIGINT while gate waits for a lease another pass holds, exits 8 and
// takes nothing.
func TestGateInterruptedWhileWaitingExits8(t *testing.T) {
	t.Parallel()
	f := newBoltFixture(t)
	state := f.path("a.json")
	f.must(0, "claim", "--environment", "qa", "--scopes", "api", "--sha", shaA, "--intent-id", "a", "--state", state)
	f.must(0, "gate", "--state", state, "--holder", "first", "--lease-ttl", "1m")
	cmd := exec.CommandContext(f.ctx, binPath, "gate", "--state", state, "--holder", "second", "--wait", "10m")
	cmd.Env, cmd.Dir = f.environ(), f.dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	var said []string
	for lines.Scan() && !strings.HasPrefix(lines.Text(), "waiting: qa/api is locked by first") {
		said = append(said, lines.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT: %v (gate said %q)", err, said)
	}
	for lines.Scan() {
		said = append(said, lines.Text())
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 8 || !strings.Contains(strings.Join(said, "\n"), "interrupted while waiting for the lease") {
		t.Fatalf("gate interrupted while waiting: %v, want exit 8; it said:\n%s", err, strings.Join(said, "\n"))
	}
	if holder := f.scope("qa", "api").Lease.Holder; holder != "first" {
		t.Fatalf("after the interrupted gate the lease is held by %q, want first", holder)
	}
}

// A damaged store file makes every command of the binary exit 1 with one line naming the file and
// what to do, never a crash: a file cut short used to end in SIGBUS with a goroutine dump.
func TestDamagedStoreFileIsAClearError(t *testing.T) {
	t.Parallel()
	f := newBoltFixture(t)
	state := f.path("a.json")
	f.must(0, "claim", "--environment", "qa", "--scopes", "api", "--sha", shaA, "--intent-id", "a", "--state", state)
	for i := range 30 {
		f.must(0, "claim", "--environment", fmt.Sprintf("env-%d", i), "--scopes", "api,web", "--sha", shaB, "--intent-id", fmt.Sprintf("b%d", i))
	}
	path := strings.TrimPrefix(f.store, "bolt://")
	if err := os.Truncate(path, 3*int64(os.Getpagesize())); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status", "qa"}, {"history", "qa"}, {"gate", "--state", state, "--phase", "deploy"},
		{"claim", "--environment", "qa", "--scopes", "api", "--sha", shaB, "--intent-id", "c"},
		{"run", "--state", state, "--", "true"}, {"unlock", "qa/api", "--reason", "stuck"}, {"sweep"}, {"migrate"},
	} {
		r := f.run(args...)
		want := fmt.Sprintf("latestwins %s: %s is damaged (", args[0], path)
		if r.code != 1 || !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 ||
			!strings.HasSuffix(r.stderr, "): restore it from a backup or move it away\n") {
			t.Errorf("%s on a damaged file: exit %d, stderr:\n%s\nwant exit 1 and one line %q...", args[0], r.code, r.stderr, want)
		}
	}
}

// status and history with no store named look in ./latestwins.db, say so, and create nothing.
func TestReadingNoStoreCreatesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, verb := range []string{"status", "history"} {
		cmd := exec.CommandContext(t.Context(), binPath, verb, "staging")
		cmd.Env, cmd.Dir = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}, dir
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 ||
			!strings.Contains(string(out), "no store at bolt://./latestwins.db: nothing was ever recorded there; check the path, or pass --store") {
			t.Errorf("%s with no store: %v\n%s", verb, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "latestwins.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a read created ./latestwins.db (stat: %v)", err)
	}
}
