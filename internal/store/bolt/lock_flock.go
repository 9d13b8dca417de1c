//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bolt

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lockWait takes the file lock bbolt is about to take (exclusive for a file opened for writing,
// shared otherwise) on f, blocking until another process releases it, ctx ends or the deadline
// passes; it returns errBusyWait at the deadline. bbolt's own non-blocking flock then succeeds at
// once, because the lock is held through the same open file. A blocked flock lets the kernel hand the
// lock over when it is released, where polling could starve a waiter behind a busy process.
//
// On error f is closed: at once, or, for a wait given up, by the goroutine whose flock call stays
// blocked until the holder releases the file (closing f then drops the lock it got).
func lockWait(ctx context.Context, f *os.File, flag int, deadline time.Time, onWait func()) error {
	how := syscall.LOCK_EX
	if flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		how = syscall.LOCK_SH
	}
	fd := int(f.Fd())
	err := syscall.Flock(fd, how|syscall.LOCK_NB)
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		_ = f.Close()
		return err
	}
	onWait()
	done := make(chan error, 1)
	go func() { done <- flockRetry(fd, how) }()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			_ = f.Close()
		}
		return err
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = errBusyWait
	}
	go func() {
		<-done
		_ = f.Close()
	}()
	return err
}

func flockRetry(fd, how int) error {
	for {
		err := syscall.Flock(fd, how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
