//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// mutantBinary builds latestwins with one old behaviour of internal/pass restored (the names are
// those of its link-time variable mutant) and returns its path.
func mutantBinary(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "latestwins-"+name)
	build := exec.Command("go", "build", "-tags", "latestwins_mutants", "-ldflags", "-X github.com/latestwins/latestwins/internal/pass.mutant="+name, "-o", path, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build the %s mutant: %v\n%s", name, err, out)
	}
	return path
}

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	pid, pgrp int
	state     string
	comm      string
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	line := string(b)
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return procStat{}, false
	}
	f := strings.Fields(line[end+1:])
	if len(f) < 3 {
		return procStat{}, false
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return procStat{}, false
	}
	return procStat{pid: pid, pgrp: pgrp, state: f[0], comm: line[open+1 : end]}, true
}

// alive reports whether pid runs (a zombie has ended).
func alive(pid int) bool {
	s, ok := readStat(pid)
	return ok && s.state != "Z"
}

// liveInGroup lists the processes of group pgid that have not ended.
func liveInGroup(pgid int) []procStat {
	entries, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := readStat(pid); ok && s.pgrp == pgid && s.state != "Z" {
			out = append(out, s)
		}
	}
	return out
}

func pgrpOf(t *testing.T, pid int) int {
	t.Helper()
	s, ok := readStat(pid)
	if !ok {
		t.Fatalf("process %d is gone", pid)
	}
	return s.pgrp
}

func readInt(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", filepath.Base(path), err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s holds %q, not a number", filepath.Base(path), b)
	}
	return n
}

// heartbeatDeploy is a deploy command that leaves two heartbeat writers running (every 50 ms): one
// in its process group, and one that moved to a session of its own. Once both beat, it sends its
// pid into the named pipe $1/started and waits.
const heartbeatDeploy = `dir=$1
sh -c 'while :; do date +%s%N >> "$1/heartbeat"; sleep 0.05; done' sh "$dir" &
setsid sh -c 'echo $$ > "$1/session.tmp"; mv "$1/session.tmp" "$1/session"; while :; do date +%s%N >> "$1/heartbeat-session"; sleep 0.05; done' sh "$dir" &
until [ -s "$dir/heartbeat" ] && [ -s "$dir/heartbeat-session" ]; do sleep 0.01; done
echo $$ > "$dir/started"
wait`

// killedRunLeftovers kills `run` (the binary bin) with SIGKILL in the middle of heartbeatDeploy,
// and returns what of its command is still alive 1 s later: nothing, when the command cannot
// outlive the process that supervises it.
func killedRunLeftovers(t *testing.T, bin string) []string {
	f := newBoltFixture(t)
	lines := fifoLine(t, f.path("started"))
	p := startWith(f, bin, "run", "--environment", "prod", "--scopes", "api", "--sha", shaA, "--ref", mainRf, "--intent-id", "push-a",
		"--", "sh", "-c", heartbeatDeploy, "sh", f.dir)
	cmdPid, err := strconv.Atoi(awaitLine(t, lines, p))
	if err != nil {
		t.Fatalf("the deploy command did not send its pid: %v", err)
	}
	pgid := pgrpOf(t, cmdPid)
	session := readInt(t, f.path("session"))
	t.Cleanup(func() {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		_ = syscall.Kill(session, syscall.SIGKILL)
	})
	// The command's shell and its writer's loop are in the group; the writer's sleep and date come
	// and go, so they are not counted on.
	if n := len(liveInGroup(pgid)); n < 2 || !alive(session) || pgrpOf(t, session) == pgid {
		t.Fatalf("before the kill: %d processes in the command's group, the other writer alive %v: the command did not start as meant", n, alive(session))
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL the run process: %v", err)
	}
	<-p.done
	deadline := time.Now().Add(time.Second)
	for {
		var left []string
		for _, s := range liveInGroup(pgid) {
			left = append(left, fmt.Sprintf("%d (%s) in the command's process group", s.pid, s.comm))
		}
		if alive(session) {
			left = append(left, fmt.Sprintf("%d in a session of its own", session))
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(10 * time.Millisecond) // polls what other processes do, for at most the 1 s allowed
	}
}

// TestProcessesKilledRunLeavesNothingBehind: `kill -9` of `run` in the middle of a deploy stops
// every process of the deploy command within 1 s, those in its process group and one that left it.
func TestProcessesKilledRunLeavesNothingBehind(t *testing.T) {
	if left := killedRunLeftovers(t, binPath); len(left) > 0 {
		t.Fatalf("1 s after SIGKILL of run, still alive: %s", strings.Join(left, "; "))
	}
}

// TestProcessesKilledRunLeavesNothingBehindCatchesOldStarts runs the same against binaries with
// the old ways of starting the command: no parent-death signal (the whole command lives on), one on
// the direct child only (its children live on), a guard that is not a subreaper (the writer that
// left the group lives on).
func TestProcessesKilledRunLeavesNothingBehindCatchesOldStarts(t *testing.T) {
	for _, m := range []string{"direct", "pdeathsig", "nosubreaper"} {
		t.Run(m, func(t *testing.T) {
			left := killedRunLeftovers(t, mutantBinary(t, m))
			if len(left) == 0 {
				t.Fatal("nothing left alive: the test cannot tell this old behaviour from the fix")
			}
			t.Logf("left alive: %s", strings.Join(left, "; "))
		})
	}
}

// cutProxy forwards TCP connections to target until Cut, after which it refuses new ones and
// closes those it had: a store that became unreachable for its clients.
type cutProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(p.Cut)
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_, _ = in.Close(), out.Close()
			continue
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
		go func() { _, _ = io.Copy(in, out); _ = in.Close() }()
	}
}

func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	_ = p.ln.Close()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// stubbornDeploy ignores SIGTERM (its children too), sends its pid into the named pipe
// $1/started, and writes a heartbeat into $1/old-heartbeat every 50 ms.
const stubbornDeploy = `trap '' TERM
echo $$ > "$1/started"
while :; do date +%s%N >> "$1/old-heartbeat"; sleep 0.05; done`

// countGroup is a deploy command that counts the live processes of process group $2 when it
// starts, into $1/old-alive.
const countGroup = `dir=$1 pg=$2 n=0
for f in /proc/[0-9]*/stat; do
	{ read -r line < "$f"; } 2>/dev/null || continue
	set -- ${line##*) }
	if [ "$3" = "$pg" ] && [ "$1" != Z ]; then n=$((n+1)); fi
done
echo "$n" > "$dir/old-alive"`

// stoppedBeforeTakeover runs stubbornDeploy under `run` (the binary bin) with a 5 s lease and a
// 1 s grace period, then makes the store unreachable for it only, and at once starts a newer pass
// (the binary under test) that waits for the lease and takes it over. It returns what shows that
// the old command was alive once another pass could have the lease: past the expiry the store
// holds for it (the skew is 1 ms), or once the newer pass got it.
//
// The deploy command is `sh -c script[0] sh DIR script[1:]...`; it sends its pid into the named
// pipe DIR/started. When it also writes the pid of a process that left its process group into
// DIR/session before that, that process is watched too.
func stoppedBeforeTakeover(t *testing.T, bin string, script ...string) []string {
	f := newDynamoFixture(t)
	ep, err := url.Parse(dynalitetest.Endpoint(t))
	if err != nil {
		t.Fatalf("dynalite endpoint: %v", err)
	}
	px := newCutProxy(t, ep.Host)
	su, err := url.Parse(f.store)
	if err != nil {
		t.Fatalf("store URL: %v", err)
	}
	q := su.Query()
	q.Set("endpoint", "http://"+px.ln.Addr().String())
	su.RawQuery = q.Encode()

	lines := fifoLine(t, f.path("started"))
	args := append([]string{}, "run", "--store", su.String(), "--environment", "prod", "--scopes", "api", "--sha", shaA, "--ref", mainRf,
		"--intent-id", "push-old", "--lease-ttl", "5s", "--grace", "1s", "--lease-skew", "1ms", "--")
	args = append(append(args, "sh", "-c", script[0], "sh", f.dir), script[1:]...)
	old := startWith(f, bin, args...)
	cmdPid, err := strconv.Atoi(awaitLine(t, lines, old))
	if err != nil {
		t.Fatalf("the deploy command did not send its pid: %v", err)
	}
	pgid := pgrpOf(t, cmdPid)
	t.Cleanup(func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	session := 0
	if _, err := os.Stat(f.path("session")); err == nil {
		session = readInt(t, f.path("session"))
		t.Cleanup(func() { _ = syscall.Kill(session, syscall.SIGKILL) })
		if pgrpOf(t, session) == pgid {
			t.Fatalf("process %d did not leave the command's process group", session)
		}
	}
	px.Cut()

	// gone receives when no process of the old command's group was alive any more.
	gone := make(chan time.Time, 1)
	watch, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	go func() {
		for watch.Err() == nil {
			if len(liveInGroup(pgid)) == 0 && (session == 0 || !alive(session)) {
				gone <- time.Now()
				return
			}
			time.Sleep(5 * time.Millisecond) // polls another process's state
		}
	}()
	// The lease as the old pass left it: it was granted a moment ago, and the renewal due a third of
	// the TTL later cannot reach the store any more.
	lease := f.scope("prod", "api").Lease
	if lease.Token != 1 || lease.ExpiresAt.IsZero() {
		t.Fatalf("after the cut the lease is %+v, want the old pass's", lease)
	}

	r := f.must(0, "run", "--environment", "prod", "--scopes", "api", "--sha", shaB, "--ref", mainRf, "--before", shaA,
		"--intent-id", "push-new", "--wait", "60s", "--lease-skew", "1ms",
		"--", "sh", "-c", countGroup, "sh", f.dir, strconv.Itoa(pgid))
	if !strings.Contains(r.stderr, "prod/api: recovered an interrupted operation") {
		t.Fatalf("the newer pass did not take the lease over:\n%s", r.stderr)
	}
	var granted time.Time
	for _, ev := range eventsOf(f.history("prod"), authority.EventTookOver) {
		if ev.Generation == 2 {
			granted = ev.At
		}
	}
	if granted.IsZero() {
		t.Fatal("the timeline has no takeover by generation 2")
	}

	var bad []string
	if n := readInt(t, f.path("old-alive")); n != 0 {
		bad = append(bad, fmt.Sprintf("%d processes of the old command were alive when the newer pass's command started", n))
	}
	select {
	case at := <-gone:
		if !at.Before(lease.ExpiresAt) {
			bad = append(bad, fmt.Sprintf("the old command was seen gone %s after its lease expired", at.Sub(lease.ExpiresAt)))
		}
		if !at.Before(granted) {
			bad = append(bad, fmt.Sprintf("the old command was seen gone %s after the newer pass got the lease", at.Sub(granted)))
		}
		t.Logf("the old command was seen gone at %s from its lease's expiry, %s from the newer pass's grant (negative: before)",
			at.Sub(lease.ExpiresAt).Round(time.Millisecond), at.Sub(granted).Round(time.Millisecond))
	default:
		bad = append(bad, "the old command was still alive when the newer pass had deployed")
	}
	if b, err := os.ReadFile(f.path("old-heartbeat")); err == nil {
		beats := strings.Fields(string(b))
		if ns, err := strconv.ParseInt(beats[len(beats)-1], 10, 64); err == nil && !time.Unix(0, ns).Before(granted) {
			bad = append(bad, fmt.Sprintf("the old command wrote a heartbeat %s after the newer pass got the lease", time.Unix(0, ns).Sub(granted)))
		}
	}
	if len(bad) == 0 {
		if o := old.wait(); o.code != 5 || !strings.Contains(o.stderr, "lease lost") {
			bad = append(bad, fmt.Sprintf("the old run exited %d, want 5 (lease lost)\nstderr:\n%s", o.code, o.stderr))
		}
	}
	return bad
}

// TestProcessesStubbornCommandStoppedBeforeTakeover: a command that ignores SIGTERM, under a short
// lease that can no longer be renewed, is dead before a newer pass can take the lease over.
func TestProcessesStubbornCommandStoppedBeforeTakeover(t *testing.T) {
	for _, b := range stoppedBeforeTakeover(t, binPath, stubbornDeploy) {
		t.Error(b)
	}
}

// TestProcessesStubbornCommandStoppedBeforeTakeoverCatchesOldStop runs the same against a binary
// with the old stop rule (deadline counted from the supervisor's start, SIGKILL a full grace after
// SIGTERM): with a grace that fits the lease, its SIGKILL still lands after the lease's expiry.
func TestProcessesStubbornCommandStoppedBeforeTakeoverCatchesOldStop(t *testing.T) {
	bad := stoppedBeforeTakeover(t, mutantBinary(t, "oldstop"), stubbornDeploy)
	if len(bad) == 0 {
		t.Fatal("no violation: the test cannot tell the old stop rule from the fix")
	}
	t.Logf("under the old rule: %s", strings.Join(bad, "; "))
}

// wrapperDeploy runs the program $2 (with the arguments $1 and $3) through a wrapper shell, which
// ends at once on SIGTERM as sh -c, make and npm scripts do; one that went on would write
// $1/wrapper.
const wrapperDeploy = `sh -c "$2" sh "$1" "$3"; echo "the wrapper went on" > "$1/wrapper"`

// stepProgram finishes its step when it gets SIGTERM: 0.3 s more work, then it writes $1/marker
// and exits. It sends its pid into the named pipe $1/started once its trap is set.
const stepProgram = `trap 'sleep 0.3; echo finished > "$1/marker"; exit 0' TERM
echo $$ > "$1/started"
while :; do sleep 0.05; done`

// stoppedWrapperStep runs stepProgram through wrapperDeploy under `run` (the binary bin) with a 20 s
// grace period, and stops the run with SIGTERM once the program is set. It returns what shows that
// the program did not get to finish its step.
func stoppedWrapperStep(t *testing.T, bin string) []string {
	f := newBoltFixture(t)
	lines := fifoLine(t, f.path("started"))
	p := startWith(f, bin, "run", "--environment", "prod", "--scopes", "api", "--sha", shaA, "--ref", mainRf, "--intent-id", "push-a",
		"--lease-ttl", "60s", "--grace", "20s", "--", "sh", "-c", wrapperDeploy, "sh", f.dir, stepProgram)
	pid, err := strconv.Atoi(awaitLine(t, lines, p))
	if err != nil {
		t.Fatalf("the deploy program did not send its pid: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	stopped := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM the run process: %v", err)
	}
	r := p.wait()
	took := time.Since(stopped)
	if _, err := os.Stat(f.path("wrapper")); err == nil {
		t.Fatal("the wrapper shell went on after SIGTERM: the test does not stop a wrapper")
	}
	t.Logf("run exited %d, %s after SIGTERM", r.code, took.Round(time.Millisecond))
	var bad []string
	if r.code != 8 || !strings.Contains(r.stderr, "forwarding it to the command") {
		bad = append(bad, fmt.Sprintf("run exited %d, want 8 (interrupted, the signal forwarded)\nstderr:\n%s", r.code, r.stderr))
	}
	if b, err := os.ReadFile(f.path("marker")); err != nil || strings.TrimSpace(string(b)) != "finished" {
		bad = append(bad, fmt.Sprintf("the wrapped program did not finish its step: marker %q, %v", b, err))
	}
	if alive(pid) {
		bad = append(bad, fmt.Sprintf("the wrapped program (%d) is alive after run exited", pid))
	}
	if took >= 20*time.Second {
		bad = append(bad, fmt.Sprintf("run exited %s after SIGTERM: it waited for the SIGKILL deadline although the program had finished", took))
	}
	return bad
}

// TestProcessesStoppedWrapperChildFinishesItsStep: `run -- sh -c ...` stopped by SIGTERM gives
// the program the wrapper runs its grace period, although the wrapper itself ends at once: the
// program finishes its step, and run exits 8 as soon as it has.
func TestProcessesStoppedWrapperChildFinishesItsStep(t *testing.T) {
	for _, b := range stoppedWrapperStep(t, binPath) {
		t.Error(b)
	}
}

// TestProcessesStoppedWrapperChildFinishesItsStepCatchesLeaderEndsGrace runs the same against a
// binary whose guard kills what the command left behind as soon as the command exits, stop or
// not: the program is killed before it finishes its step.
func TestProcessesStoppedWrapperChildFinishesItsStepCatchesLeaderEndsGrace(t *testing.T) {
	for _, m := range []string{"leaderendsgrace"} {
		t.Run(m, func(t *testing.T) {
			bad := stoppedWrapperStep(t, mutantBinary(t, m))
			if len(bad) == 0 {
				t.Fatal("the program finished its step: the test cannot tell this old behaviour from the fix")
			}
			t.Logf("under the old behaviour: %s", strings.Join(bad, "; "))
		})
	}
}

// stubbornProgram ignores SIGTERM, and so does the heartbeat writer $2 it leaves in a session of
// its own (which writes its pid into $1/session). Then it sends its pid into the named pipe
// $1/started and writes a heartbeat into $1/old-heartbeat every 50 ms.
const stubbornProgram = `trap '' TERM
setsid sh -c "$2" sh "$1" &
until [ -e "$1/session" ]; do sleep 0.01; done
echo $$ > "$1/started"
while :; do date +%s%N >> "$1/old-heartbeat"; sleep 0.05; done`

// sessionHeartbeat writes its pid into $1/session, then a heartbeat into $1/old-heartbeat every
// 50 ms.
const sessionHeartbeat = `echo $$ > "$1/session.tmp"; mv "$1/session.tmp" "$1/session"
while :; do date +%s%N >> "$1/old-heartbeat"; sleep 0.05; done`

// TestProcessesStubbornWrappedCommandStoppedBeforeTakeover: what a wrapper that ended on SIGTERM
// leaves behind, ignoring SIGTERM, in its process group or not, is dead before a newer pass can
// take the lease over.
func TestProcessesStubbornWrappedCommandStoppedBeforeTakeover(t *testing.T) {
	for _, b := range stoppedBeforeTakeover(t, binPath, wrapperDeploy, stubbornProgram, sessionHeartbeat) {
		t.Error(b)
	}
}

// TestProcessesStubbornWrappedCommandStoppedBeforeTakeoverCatchesKillGroupOnly runs the same
// against a binary whose SIGKILL reaches the command's process group only: the guard keeps waiting
// for the writer that left the group, which lives on past the lease.
func TestProcessesStubbornWrappedCommandStoppedBeforeTakeoverCatchesKillGroupOnly(t *testing.T) {
	for _, m := range []string{"killgrouponly"} {
		t.Run(m, func(t *testing.T) {
			bad := stoppedBeforeTakeover(t, mutantBinary(t, m), wrapperDeploy, stubbornProgram, sessionHeartbeat)
			if len(bad) == 0 {
				t.Fatal("no violation: the test cannot tell this behaviour from the fix")
			}
			t.Logf("under this behaviour: %s", strings.Join(bad, "; "))
		})
	}
}
