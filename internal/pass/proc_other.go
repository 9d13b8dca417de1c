//go:build !linux

package pass

import "syscall"

// MaybeGuard does nothing here: only Linux has the parent-death signal and subreapers the guard
// needs. See the package doc.
func MaybeGuard() {}

// startCommand starts the command as the leader of a new process group and kills that group once
// the leader has exited. Without a parent-death signal, a command outlives a supervisor that was
// killed with SIGKILL.
func startCommand(c command) (child, <-chan error, error) {
	cmd := newCmd(c.argv, c)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	g := &group{pgid: cmd.Process.Pid}
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		// Only after the leader was reaped: its number could in principle be reused by then.
		g.killAndForget()
		exited <- waitResult(err)
	}()
	return g, exited, nil
}
