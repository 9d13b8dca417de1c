package pass

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// okRenewer renews every time.
type okRenewer struct{}

func (okRenewer) Renew(context.Context, *authority.Grant, time.Duration) error { return nil }

// realRun supervises argv as a real process under a lease that stays ours, and returns the
// result and what was recorded.
func realRun(t *testing.T, argv ...string) (*Result, error, []completion) {
	t.Helper()
	var done []completion
	s := &Supervisor{Auth: okRenewer{}, TTL: time.Minute, Grace: time.Second,
		Grant:  &authority.Grant{Environment: "prod", Generation: 1, Holder: "a", Tokens: map[string]int64{"api": 1}, RequestedAt: time.Now()},
		Stdout: testLog{t}, Stderr: testLog{t},
		Complete: func(_ context.Context, o authority.Outcome, msg string) (*authority.CompleteResult, error) {
			done = append(done, completion{o, msg})
			return &authority.CompleteResult{}, nil
		}}
	res, err := s.Run(t.Context(), argv)
	return res, err, done
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// alive reports whether pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	p, ok := parseStat(pid, string(b))
	return ok && p.state != 'Z'
}

func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the command did not write %s: %v", filepath.Base(path), err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s holds %q, not a pid", filepath.Base(path), b)
	}
	return pid
}

// leaveBehind is a command that starts two sleepers, one in its process group and one in a new
// session, and exits as soon as both have written their pids into the directory $1.
const leaveBehind = `sh -c 'echo $$ > "$1/in-group.tmp"; mv "$1/in-group.tmp" "$1/in-group"; exec sleep 300' sh "$1" &
setsid sh -c 'echo $$ > "$1/own-session.tmp"; mv "$1/own-session.tmp" "$1/own-session"; exec sleep 300' sh "$1" &
until [ -e "$1/in-group" ] && [ -e "$1/own-session" ]; do sleep 0.01; done`

// survivors runs leaveBehind and returns which of its sleepers are still alive when Run has
// returned (and kills them).
func survivors(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	res, err, done := realRun(t, "sh", "-c", leaveBehind, "sh", dir)
	if err != nil || res.Ending != Exited || len(done) != 1 || done[0].outcome != authority.OutcomeSuccess {
		t.Fatalf("Run: %+v, %v, completed %+v; want exited, success", res, err, done)
	}
	var left []string
	for _, name := range []string{"in-group", "own-session"} {
		pid := readPid(t, filepath.Join(dir, name))
		if alive(pid) {
			left = append(left, name)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return left
}

// TestRunLeavesNoProcessBehind: when the command exits, Run returns only once every process it
// started is dead, in its process group or not.
func TestRunLeavesNoProcessBehind(t *testing.T) {
	if left := survivors(t); len(left) > 0 {
		t.Fatalf("still alive after Run returned: %v", left)
	}
}

// TestRunThroughTheGuardReportsTheCommand: through the guard, Run still tells a command that
// cannot start (bad input), an exit status and a death by signal.
func TestRunThroughTheGuardReportsTheCommand(t *testing.T) {
	if !guardWired.Load() {
		t.Fatal("the test binary is not wired as a guard")
	}
	res, err, done := realRun(t, filepath.Join(t.TempDir(), "no-such-command"))
	var se *StartError
	if !errors.As(err, &se) || !errors.Is(err, authority.ErrInvalidInput) || res != nil {
		t.Fatalf("Run of a missing command: %+v, %v; want a *StartError", res, err)
	}
	if !strings.Contains(se.Error(), "no such file or directory") || len(done) != 1 || done[0].outcome != authority.OutcomeInvalid {
		t.Errorf("start error %q, completed %+v; want the reason, completed as invalid", se, done)
	}

	for _, c := range []struct{ script, msg string }{
		{"exit 3", "sh: exit status 3"},
		{"kill -TERM $$", "sh: signal: terminated"},
	} {
		res, err, done := realRun(t, "sh", "-c", c.script)
		if err != nil || res.Ending != Exited || len(done) != 1 || done[0] != (completion{authority.OutcomeFailure, c.msg}) {
			t.Errorf("%q: %+v, %v, completed %+v; want a failure %q", c.script, res, err, done, c.msg)
		}
	}
}

// TestRunForwardsASignalThroughTheGuard: the signal that interrupts Run reaches the command, which
// may end cleanly on it.
func TestRunForwardsASignalThroughTheGuard(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	go func() {
		f, err := os.Open(ready) // returns once the command opened the pipe: its trap is set
		if err == nil {
			_ = f.Close()
		}
		cancel(&SignalCause{Signal: syscall.SIGINT})
	}()
	var done []completion
	s := &Supervisor{Auth: okRenewer{}, TTL: time.Minute, Grace: 20 * time.Second,
		Grant: &authority.Grant{Environment: "prod", Generation: 1, Holder: "a", Tokens: map[string]int64{"api": 1}},
		Complete: func(_ context.Context, o authority.Outcome, msg string) (*authority.CompleteResult, error) {
			done = append(done, completion{o, msg})
			return &authority.CompleteResult{}, nil
		}}
	script := `trap 'echo INT > "$1/got"; exit 0' INT; : > "$1/ready"; while :; do sleep 0.05; done`
	res, err := s.Run(ctx, []string{"sh", "-c", script, "sh", dir})
	if err != nil || res.Ending != Interrupted || len(done) != 1 || done[0].outcome != authority.OutcomeInterrupted {
		t.Fatalf("Run: %+v, %v, completed %+v; want interrupted", res, err, done)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "got")); err != nil || strings.TrimSpace(string(b)) != "INT" {
		t.Fatalf("the command did not get SIGINT: %q, %v", b, err)
	}
}

// stoppedWrapper runs script as the child of a wrapper shell (sh -c 'sh -c SCRIPT; ...'), which
// ends at once on SIGTERM, under a supervisor with the given grace period. The child writes its
// pid into the named pipe $1/ready once it is set up; the run is then interrupted with SIGTERM.
// It returns the result, how long Run took from the interruption, and the directory $1.
func stoppedWrapper(t *testing.T, grace time.Duration, script string) (*Result, time.Duration, string) {
	t.Helper()
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	if err := syscall.Mkfifo(ready, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	interrupted := make(chan time.Time, 1)
	go func() {
		f, err := os.Open(ready) // returns once the child opened the pipe: it is set up
		if err == nil {
			_, _ = io.ReadAll(f)
			_ = f.Close()
		}
		interrupted <- time.Now()
		cancel(&SignalCause{Signal: syscall.SIGTERM})
	}()
	var done []completion
	s := &Supervisor{Auth: okRenewer{}, TTL: time.Minute, Grace: grace,
		Grant:  &authority.Grant{Environment: "prod", Generation: 1, Holder: "a", Tokens: map[string]int64{"api": 1}},
		Stdout: testLog{t}, Stderr: testLog{t},
		Complete: func(_ context.Context, o authority.Outcome, msg string) (*authority.CompleteResult, error) {
			done = append(done, completion{o, msg})
			return &authority.CompleteResult{}, nil
		}}
	wrapper := `sh -c "$2" sh "$1"; echo "the wrapper was not stopped" > "$1/wrapper"`
	res, err := s.Run(ctx, []string{"sh", "-c", wrapper, "sh", dir, script})
	took := time.Since(<-interrupted)
	if err != nil || res.Ending != Interrupted || len(done) != 1 || done[0].outcome != authority.OutcomeInterrupted {
		t.Fatalf("Run: %+v, %v, completed %+v; want interrupted", res, err, done)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "wrapper")); err == nil {
		t.Fatalf("the wrapper shell went on after SIGTERM (%q): the test does not stop a wrapper", b)
	}
	return res, took, dir
}

// TestRunAWrappersChildFinishesItsStep: a command run through a wrapper shell that ends at once on
// SIGTERM keeps the grace period for the program it runs, which finishes its step (and writes
// its marker) before Run returns. Run returns as soon as it has, not at the grace's end.
func TestRunAWrappersChildFinishesItsStep(t *testing.T) {
	const grace = 20 * time.Second
	script := `trap 'sleep 0.3; echo finished > "$1/marker"; exit 0' TERM
echo $$ > "$1/ready"
while :; do sleep 0.05; done`
	_, took, dir := stoppedWrapper(t, grace, script)
	if b, err := os.ReadFile(filepath.Join(dir, "marker")); err != nil || strings.TrimSpace(string(b)) != "finished" {
		t.Fatalf("the wrapped program did not finish its step within the grace period: marker %q, %v", b, err)
	}
	if took >= grace {
		t.Errorf("Run took %s after the interruption: it waited for the SIGKILL deadline although nothing was left", took)
	}
	t.Logf("Run returned %s after the interruption", took.Round(time.Millisecond))
}

// TestRunAWrappersStubbornChildrenAreKilledAtTheDeadline: leftovers of a wrapper that ignore
// SIGTERM, one in the command's process group and one that left it, live until the grace period
// is over and are dead when Run returns.
func TestRunAWrappersStubbornChildrenAreKilledAtTheDeadline(t *testing.T) {
	const grace = time.Second
	script := `trap '' TERM
setsid sh -c 'echo $$ > "$1/own-session.tmp"; mv "$1/own-session.tmp" "$1/own-session"; while :; do sleep 0.05; done' sh "$1" &
until [ -e "$1/own-session" ]; do sleep 0.01; done
echo $$ > "$1/in-group"
echo $$ > "$1/ready"
while :; do sleep 0.05; done`
	_, took, dir := stoppedWrapper(t, grace, script)
	for _, name := range []string{"in-group", "own-session"} {
		if pid := readPid(t, filepath.Join(dir, name)); alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("the stubborn process %s (%d) is alive after Run returned", name, pid)
		}
	}
	if took < grace {
		t.Errorf("Run returned %s after the interruption, before the grace period of %s was over: the leftovers did not get it", took, grace)
	}
	t.Logf("Run returned %s after the interruption", took.Round(time.Millisecond))
}
