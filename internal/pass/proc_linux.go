//go:build linux

package pass

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// startCommand starts the command through the guard when this binary can act as one (its main
// called MaybeGuard), or else directly. Either way the command leads a new process group, which
// the supervisor signals, and gets SIGKILL when its parent dies.
func startCommand(c command) (child, <-chan error, error) {
	if guardWired.Load() && mutant != mutantDirect && mutant != mutantPdeathsig {
		if _, err := os.Stat(selfExe); err == nil {
			return startGuarded(c)
		}
	}
	cmd := newCmd(c.argv, c)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if mutant == mutantDirect {
		cmd.SysProcAttr.Pdeathsig = 0
	}
	g := &group{}
	exited, err := spawn(cmd, func(pid int) { g.pgid = pid }, g.killAndForget)
	if err != nil {
		return nil, nil, err
	}
	return g, exited, nil
}

// selfExe is this binary, even when its file was replaced or removed since it started.
const selfExe = "/proc/self/exe"

// startGuarded starts the guard (see runGuard), which starts the command as the leader of a new
// process group and reports on a pipe whether it could, and its pid. The supervisor signals the
// command through the guard (see group.signal); the guard, in a group of its own, outlives the
// command to kill what it left behind.
func startGuarded(c command) (child, <-chan error, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	cmd := newCmd(append([]string{selfExe}, c.argv...), c)
	cmd.Args[0] = "latestwins-guard"
	cmd.Env = append(cmd.Env, guardEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.ExtraFiles = []*os.File{w} // the guard's fd 3
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	g := &group{}
	// Once the guard has exited it has killed and reaped the command: neither is signalled any
	// more, their numbers may be other processes'.
	exited, err := spawn(cmd, func(pid int) {
		g.mu.Lock()
		g.guard = pid
		g.mu.Unlock()
	}, g.forget)
	_ = w.Close()
	if err != nil {
		return nil, nil, err
	}
	// The guard writes "ok PID" or "err MESSAGE" and closes the pipe; a guard that died first
	// wrote nothing, and exited tells how it ended.
	b, _ := io.ReadAll(io.LimitReader(r, 4096))
	msg := strings.TrimSpace(string(b))
	if reason, failed := strings.CutPrefix(msg, "err "); failed {
		<-exited
		return nil, nil, errors.New(reason)
	}
	if pid, err := strconv.Atoi(strings.TrimPrefix(msg, "ok ")); err == nil && pid > 1 {
		g.mu.Lock()
		g.pgid = pid
		g.mu.Unlock()
	} else {
		g.forget()
	}
	return g, exited, nil
}

// spawn starts cmd, and waits for it, from a goroutine locked to its OS thread for as long as the
// child lives. started is told the child's pid; exited runs once the child has exited, before it is
// reaped, so that its pid (and process group) cannot belong to another process yet.
//
// Linux sends the parent-death signal when the thread that forked the child ends, not when the
// process does. The runtime ends a thread when a goroutine locked to it returns, so a fork from an
// arbitrary thread could kill a healthy command later. Locking the thread here, and keeping it
// locked until the child has been reaped, ties the signal to the death of this process.
func spawn(cmd *exec.Cmd, started func(pid int), exited func()) (<-chan error, error) {
	startErr := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		started(cmd.Process.Pid)
		startErr <- nil
		waitExited(cmd.Process.Pid)
		exited()
		done <- waitResult(cmd.Wait())
	}()
	if err := <-startErr; err != nil {
		return nil, err
	}
	return done, nil
}

// waitExited blocks until process pid has exited, without reaping it.
func waitExited(pid int) {
	const pPID = 1      // P_PID
	var info [16]uint64 // siginfo_t: 128 bytes
	for {
		_, _, e := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info)),
			syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if e != syscall.EINTR {
			return
		}
	}
}
