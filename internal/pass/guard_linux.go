//go:build linux

package pass

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// guardEnv marks a process the supervisor started to guard its command; its value is the
// supervisor's pid.
const guardEnv = "LATESTWINS_INTERNAL_GUARD"

// guardWired says that this binary's main called MaybeGuard, so it can be started as a guard.
var guardWired atomic.Bool

// Process-control operations of prctl(2).
const (
	prSetPdeathsig       = 1
	prSetChildSubreaper  = 36
	parentGoneSignal     = syscall.SIGUSR1 // the guard's own parent-death signal: it catches it
	guardExitParentGone  = 128 + int(syscall.SIGKILL)
	guardExitCannotStart = 127
)

// MaybeGuard must be the first call of main in a binary that supervises commands. In a process
// the supervisor started as its command's guard it runs the guard and exits; anywhere else it
// returns at once, and tells the supervisor that it may start this binary as a guard. (A binary
// whose main does not call it, such as a test binary, runs commands without a guard.)
func MaybeGuard() {
	parent, ok := os.LookupEnv(guardEnv)
	if !ok {
		guardWired.Store(true)
		return
	}
	os.Exit(runGuard(parent, os.Args[1:]))
}

// runGuard is the guard, between the supervisor and the command, in a process group of its own.
// It is a child subreaper: every orphaned descendant of the command becomes its child rather than
// init's, including those that left the command's group (setsid), so it can always find them.
//
// The supervisor signals the command through the guard, which passes the signals on to the
// command's group. When the command exits by itself, or when the supervisor dies (the guard's
// parent-death signal), or on killNowSignal (the supervisor's SIGKILL), the guard kills every
// process of the command's group and every descendant, and then exits as the command did. Once it
// has passed on a signal that stops the command (SIGTERM, SIGINT, SIGHUP, SIGQUIT), the command's
// exit ends nothing: a wrapper such as sh -c may end at once on SIGTERM while the program it runs
// finishes its step within the grace period. The guard then waits until every process the command left has exited, or until the
// supervisor's killNowSignal, before it exits as the command did. The command stays unreaped (a
// zombie) until then, so that its process group keeps its number for the supervisor's SIGKILL.
func runGuard(parent string, argv []string) int {
	// The command's parent-death signal is tied to this thread (see spawn): it stays locked until
	// the process ends.
	runtime.LockOSThread()
	ppid, err := strconv.Atoi(parent)
	status := os.NewFile(3, "guard-status")
	if err != nil || len(argv) == 0 || status == nil {
		fmt.Fprintln(os.Stderr, "latestwins: the internal guard was started without a command")
		return 2
	}
	syscall.CloseOnExec(3)
	_ = os.Unsetenv(guardEnv)

	// Caught rather than ignored: an ignored signal would stay ignored in the command after exec.
	// One channel per kind, so that a burst of SIGCHLD cannot crowd out a stop or the kill (a
	// signal that finds its channel full is dropped).
	children := make(chan os.Signal, 1) // one pending SIGCHLD is enough: each looks at every child
	signal.Notify(children, syscall.SIGCHLD)
	stops := make(chan os.Signal, 8)
	signal.Notify(stops, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1)
	killNow := make(chan os.Signal, 1)
	signal.Notify(killNow, killNowSignal)
	subreaper := mutant != mutantNoSubreaper
	if subreaper {
		_ = prctl(prSetChildSubreaper, 1)
	}
	// Replace the SIGKILL the supervisor set (which covered the guard until now, when it had no
	// children) with a signal the guard catches, then make sure the supervisor did not die before.
	_ = prctl(prSetPdeathsig, uintptr(parentGoneSignal))
	if os.Getppid() != ppid {
		return guardExitParentGone
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(status, "err %v\n", err)
		_ = status.Close()
		return guardExitCannotStart
	}
	pid := cmd.Process.Pid
	fmt.Fprintf(status, "ok %d\n", pid)
	_ = status.Close()

	exited := make(chan struct{})
	go func(exited chan<- struct{}) {
		waitExited(pid) // not reaped: its pid, and so its group, stay the command's until killed
		close(exited)
	}(exited)
	// The parent-death signal can be lost (see above): the parent is also checked on a short tick,
	// so a lost signal cannot leave the command running. The same tick looks again for leftovers
	// that ended without the guard hearing of it (not its children).
	parentCheck := time.NewTicker(250 * time.Millisecond)
	defer parentCheck.Stop()
	self := os.Getpid()
	var (
		stopping   bool // a stop signal was passed on to the command
		leaderGone bool // the command exited during a stop; its leftovers finish their step
	)
	// finished says whether the command has exited and left nothing running.
	finished := func() bool { return leaderGone && len(guardVictims(self, pid, subreaper)) == 0 }
	for {
		select {
		case <-exited:
			exited = nil // closed: never ready again
			if !stopping || mutant == mutantLeaderEndsGrace {
				killCommand(pid, subreaper)
				return exitAs(reap(pid))
			}
			leaderGone = true
			if finished() {
				return exitAs(reap(pid))
			}
		case <-killNow:
			killCommand(pid, subreaper)
			if leaderGone {
				return exitAs(reap(pid))
			}
			// The command itself was killed too: its exit, next, ends the guard.
		case <-parentCheck.C:
			if os.Getppid() != ppid {
				killCommand(pid, subreaper)
				return guardExitParentGone
			}
			if finished() {
				return exitAs(reap(pid))
			}
		case <-children:
			if os.Getppid() != ppid {
				killCommand(pid, subreaper)
				return guardExitParentGone
			}
			reapOrphans(pid)
			if finished() {
				return exitAs(reap(pid))
			}
		case s := <-stops:
			if os.Getppid() != ppid {
				killCommand(pid, subreaper)
				return guardExitParentGone
			}
			if s == parentGoneSignal {
				continue // sent by someone else: the parent is alive
			}
			stopping = true
			_ = syscall.Kill(-pid, s.(syscall.Signal))
		}
	}
}

// reap collects the command's exit status.
func reap(pid int) syscall.WaitStatus {
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
			return ws
		}
	}
}

// reapOrphans collects the descendants that were handed to the guard and have ended, all but the
// command, whose exit status is read last.
func reapOrphans(command int) {
	self := os.Getpid()
	for _, p := range readProcs() {
		if p.ppid == self && p.state == 'Z' && p.pid != command {
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(p.pid, &ws, syscall.WNOHANG, nil)
		}
	}
}

// exitAs ends the guard the way the command ended: with its exit status, or by its signal.
func exitAs(ws syscall.WaitStatus) int {
	if !ws.Signaled() {
		return ws.ExitStatus()
	}
	sig := ws.Signal()
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	time.Sleep(100 * time.Millisecond) // a fatal signal ends the process meanwhile
	return 128 + int(sig)
}

// killCommand kills, with SIGKILL, every process of the command's group (pgid) and, when the guard
// is a subreaper, every descendant of the guard, looking again until none is left alive: a process
// forked meanwhile is in the group, or (its parent killed) the guard's child.
func killCommand(pgid int, subreaper bool) {
	self := os.Getpid()
	for range 5000 {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		victims := guardVictims(self, pgid, subreaper)
		if len(victims) == 0 {
			return
		}
		for _, pid := range victims {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond) // let the kills land before looking again
	}
}

// guardVictims lists the live processes (zombies have ended) in group pgid or below self.
func guardVictims(self, pgid int, descendants bool) []int {
	procs := readProcs()
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	below := map[int]bool{}
	if descendants {
		queue := []int{self}
		for len(queue) > 0 {
			pid := queue[0]
			queue = queue[1:]
			for _, c := range children[pid] {
				if !below[c] {
					below[c] = true
					queue = append(queue, c)
				}
			}
		}
	}
	var out []int
	for _, p := range procs {
		if p.pid != self && p.state != 'Z' && (p.pgrp == pgid || below[p.pid]) {
			out = append(out, p.pid)
		}
	}
	return out
}

// procInfo is what /proc/PID/stat says of a process.
type procInfo struct {
	pid, ppid, pgrp int
	state           byte
}

// readProcs reads every process's stat line; processes that end meanwhile are skipped.
func readProcs() []procInfo {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if p, ok := parseStat(pid, string(b)); ok {
			out = append(out, p)
		}
	}
	return out
}

// parseStat reads state, ppid and pgrp from a stat line: "PID (COMM) S PPID PGRP ...". COMM may
// hold spaces and parentheses, so the fields are counted from the last ')'.
func parseStat(pid int, line string) (procInfo, bool) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(line[i+1:])
	if len(f) < 3 || len(f[0]) != 1 {
		return procInfo{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procInfo{}, false
	}
	return procInfo{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0]}, true
}

func prctl(op, arg uintptr) error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, op, arg, 0); e != 0 {
		return e
	}
	return nil
}
