package pass

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock the test moves by hand. Every timer it makes is also sent on created, in
// order: code under test makes one timer each time it is about to block, so a test learns from
// it both what is scheduled and that the code is waiting.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	pending []*fakeTimer
	created chan *fakeTimer
}

type fakeTimer struct {
	clk *fakeClock
	at  time.Time
	d   time.Duration // as asked for
	ch  chan time.Time
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newFakeClock() *fakeClock {
	return &fakeClock{now: t0, created: make(chan *fakeTimer, 1000)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	t := &fakeTimer{clk: c, at: c.now.Add(d), d: d, ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
	} else {
		c.pending = append(c.pending, t)
	}
	c.mu.Unlock()
	c.created <- t
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	c := t.clk
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.pending {
		if p == t {
			c.pending = append(c.pending[:i], c.pending[i+1:]...)
			return true
		}
	}
	return false
}

// set moves the clock to at (never back) and fires the timers due by then.
func (c *fakeClock) set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.now) {
		c.now = at
	}
	kept := c.pending[:0]
	for _, t := range c.pending {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	c.pending = kept
}

// fire moves the clock to t's deadline, firing it (and any timer due before).
func (c *fakeClock) fire(t *fakeTimer) { c.set(t.at) }

// guard bounds every wait of a test on the code under test, so that a bug fails the test rather
// than hanging it. It is never how long something is expected to take.
const guard = 10 * time.Second

// next returns the next timer the code under test makes.
func (c *fakeClock) next(tb testing.TB) *fakeTimer {
	tb.Helper()
	select {
	case t := <-c.created:
		return t
	case <-time.After(guard):
		tb.Fatalf("no timer was made within %s", guard)
		return nil
	}
}

// since is a readable offset from t0.
func since(t time.Time) time.Duration { return t.Sub(t0) }
