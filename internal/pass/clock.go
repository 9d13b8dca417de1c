package pass

import "time"

// Clock is the time a pass reads and waits on. The supervisor and Gate take every decision on it,
// so a test can drive them through a schedule without sleeping.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now (at once when d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it stopped it.
	Stop() bool
}

// SystemClock is the machine's clock.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }

func (t systemTimer) Stop() bool { return t.t.Stop() }

func orSystem(c Clock) Clock {
	if c == nil {
		return SystemClock
	}
	return c
}
