//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package bolt

import (
	"context"
	"os"
	"time"
)

// lockWait does nothing where flock is not available: bbolt's own lock attempt fails at once on a
// busy file and Store.open polls. It never fails, so f is never closed here.
func lockWait(context.Context, *os.File, int, time.Time, func()) error { return nil }
