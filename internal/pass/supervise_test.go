package pass

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// fakeRenewer hands every renewal to the test, which answers it; with hang, renewals are never
// answered (a store that does not respond) and end only when the supervisor gives up on them.
type fakeRenewer struct {
	clk   Clock
	hang  bool
	calls chan *renewCall
}

type renewCall struct {
	at     time.Duration
	answer chan error
}

func (r *fakeRenewer) Renew(ctx context.Context, _ *authority.Grant, _ time.Duration) error {
	c := &renewCall{at: since(r.clk.Now()), answer: make(chan error, 1)}
	r.calls <- c
	if r.hang {
		<-ctx.Done()
		return fmt.Errorf("renew: %w", ctx.Err())
	}
	select {
	case err := <-c.answer:
		return err
	case <-ctx.Done():
		return fmt.Errorf("renew: %w", ctx.Err())
	}
}

// fakeChild is a command that ends when the test says.
type fakeChild struct {
	clk     Clock
	signals chan sigAt
	exit    chan error
}

type sigAt struct {
	Sig syscall.Signal
	At  time.Duration
}

func (c *fakeChild) signal(sig syscall.Signal) error {
	c.signals <- sigAt{sig, since(c.clk.Now())}
	return nil
}

type completion struct {
	outcome authority.Outcome
	msg     string
}

type runResult struct {
	res *Result
	err error
}

// rig runs a Supervisor on a fake clock, renewer and command. t0 is when it starts.
type rig struct {
	t         *testing.T
	clk       *fakeClock
	ren       *fakeRenewer
	kid       *fakeChild
	completed chan completion
	done      chan runResult
	cancel    context.CancelCauseFunc
}

const (
	ttl30  = 30 * time.Second
	margin = time.Second // killMargin(30s): TTL/20, at most 1 s
)

func startRig(t *testing.T, grace time.Duration, requestedAt time.Time, hang bool) *rig {
	t.Helper()
	clk := newFakeClock()
	r := &rig{t: t, clk: clk,
		ren:       &fakeRenewer{clk: clk, hang: hang, calls: make(chan *renewCall, 100)},
		kid:       &fakeChild{clk: clk, signals: make(chan sigAt, 100), exit: make(chan error, 1)},
		completed: make(chan completion, 10),
		done:      make(chan runResult, 1),
	}
	s := &Supervisor{Auth: r.ren, TTL: ttl30, Grace: grace, Clock: clk, Env: []string{},
		Grant: &authority.Grant{Environment: "prod", Generation: 2, Phase: "deploy", Holder: "b", Tokens: map[string]int64{"api": 1}, RequestedAt: requestedAt},
		Complete: func(_ context.Context, o authority.Outcome, msg string) (*authority.CompleteResult, error) {
			r.completed <- completion{o, msg}
			return &authority.CompleteResult{Results: map[string]authority.Result{"api": authority.ResultDeployed}}, nil
		},
		start: func(command) (child, <-chan error, error) { return r.kid, r.kid.exit, nil },
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	r.cancel = cancel
	go func() {
		res, err := s.Run(ctx, []string{"./deploy"})
		r.done <- runResult{res, err}
	}()
	return r
}

// timer returns the next timer the supervisor makes, which must be due at, from t0.
func (r *rig) timer(at time.Duration) *fakeTimer {
	r.t.Helper()
	tm := r.clk.next(r.t)
	if got := since(tm.at); got != at {
		r.t.Fatalf("the supervisor set a timer for %s, want %s", got, at)
	}
	return tm
}

// renewal returns the next renewal request, which must be sent at at.
func (r *rig) renewal(at time.Duration) *renewCall {
	r.t.Helper()
	select {
	case c := <-r.ren.calls:
		if c.at != at {
			r.t.Fatalf("renewal sent at %s, want %s", c.at, at)
		}
		return c
	case <-time.After(guard):
		r.t.Fatalf("no renewal within %s; want one at %s", guard, at)
		return nil
	}
}

func (r *rig) signal(want sigAt) {
	r.t.Helper()
	select {
	case got := <-r.kid.signals:
		if got != want {
			r.t.Fatalf("the command got %v at %s, want %v at %s", got.Sig, got.At, want.Sig, want.At)
		}
	case <-time.After(guard):
		r.t.Fatalf("no signal within %s; want %v at %s", guard, want.Sig, want.At)
	}
}

// end makes the command exit with err and returns what Run returned and recorded.
func (r *rig) end(err error) (runResult, completion) {
	r.t.Helper()
	r.kid.exit <- err
	var res runResult
	select {
	case res = <-r.done:
	case <-time.After(guard):
		r.t.Fatalf("Run did not return within %s of the command's exit", guard)
	}
	select {
	case c := <-r.completed:
		if len(r.completed) > 0 {
			r.t.Fatalf("the pass was completed more than once")
		}
		return res, c
	default:
		r.t.Fatal("Run returned without completing the pass")
		return res, completion{}
	}
}

func (r *rig) noSignals() {
	r.t.Helper()
	if n := len(r.kid.signals); n > 0 {
		r.t.Fatalf("the command got %d signals, want none", n)
	}
}

// TestSupervisorRenewsEveryThirdOfTheTTL: renewals go out every TTL/3, the first counted from when
// the grant was requested (2 s before the supervisor started), each next from the send time of
// the previous one, not from its answer.
func TestSupervisorRenewsEveryThirdOfTheTTL(t *testing.T) {
	r := startRig(t, 5*time.Second, t0.Add(-2*time.Second), false)
	s := time.Second
	// Deadline while a renewal is out: its send time + TTL - margin - grace.
	deadline := func(sent time.Duration) time.Duration { return sent + ttl30 - margin - 5*s }
	lastOK := -2 * s
	for _, at := range []time.Duration{8 * s, 18 * s, 28 * s} {
		r.clk.fire(r.timer(lastOK + 10*s))
		c := r.renewal(at)
		r.timer(deadline(lastOK))
		r.clk.set(t0.Add(at + 700*time.Millisecond)) // the answer takes 0.7 s
		c.answer <- nil
		lastOK = at
	}
	r.timer(38 * s)
	res, c := r.end(nil)
	if res.err != nil || res.res.Ending != Exited || c.outcome != authority.OutcomeSuccess {
		t.Fatalf("Run: %+v, %v, completed %+v; want exited, success", res.res, res.err, c)
	}
	r.noSignals()
}

// TestSupervisorRetriesFailedRenewalsThenStops: when renewals fail, the supervisor retries every
// quarter of the renewal interval, and stops the command (SIGTERM, then SIGKILL after the grace)
// so that SIGKILL lands before the lease, last renewed by the grant's request, could end.
func TestSupervisorRetriesFailedRenewalsThenStops(t *testing.T) {
	requested := t0.Add(-2 * time.Second)
	r := startRig(t, 5*time.Second, requested, false)
	s, ms := time.Second, time.Millisecond
	stopBy := 28*s - margin - 5*s // 22 s
	unreachable := errors.New("store unreachable")
	r.clk.fire(r.timer(8 * s))
	for _, at := range []time.Duration{8 * s, 10500 * ms, 13 * s, 15500 * ms, 18 * s, 20500 * ms} {
		c := r.renewal(at)
		r.timer(stopBy)
		c.answer <- unreachable
		if next := at + 2500*ms; next < stopBy {
			r.clk.fire(r.timer(next))
		}
	}
	r.clk.fire(r.timer(stopBy))
	r.signal(sigAt{syscall.SIGTERM, stopBy})
	r.clk.fire(r.timer(28*s - margin))
	r.signal(sigAt{syscall.SIGKILL, 28*s - margin})
	res, c := r.end(errors.New("signal: killed"))
	if res.err != nil || res.res.Ending != LeaseLost || !errors.Is(res.res.Lost, unreachable) {
		t.Fatalf("Run: %+v, %v; want lease lost because of the last renewal error", res.res, res.err)
	}
	if c.outcome != authority.OutcomeLost || !strings.Contains(c.msg, "no renewal succeeded in time") {
		t.Errorf("completed %+v, want lost", c)
	}
}

// stopTimes drives a supervisor whose store never answers a renewal, firing each timer as soon as
// it is made, and returns when the command got SIGTERM and SIGKILL, from t0.
func stopTimes(t *testing.T, grace time.Duration, requestedAt time.Time) (term, kill time.Duration) {
	t.Helper()
	r := startRig(t, grace, requestedAt, true)
	var got []sigAt
	for len(got) < 2 {
		select {
		case tm := <-r.clk.created:
			r.clk.fire(tm)
		case <-r.ren.calls:
		case s := <-r.kid.signals:
			got = append(got, s)
		case <-time.After(guard):
			t.Fatalf("the supervisor stopped acting after signals %v", got)
		}
	}
	if got[0].Sig != syscall.SIGTERM || got[1].Sig != syscall.SIGKILL {
		t.Fatalf("signals %v, want SIGTERM then SIGKILL", got)
	}
	if res, _ := r.end(errors.New("signal: killed")); res.res == nil || res.res.Ending != LeaseLost {
		t.Fatalf("Run: %+v, %v; want lease lost", res.res, res.err)
	}
	return got[0].At, got[1].At
}

// killCases are grants and grace periods under a store that stops answering: the grant requested
// when the supervisor starts or before, the grace short, at the limit, or far too long.
var killCases = []struct {
	grace     time.Duration
	requested time.Duration // before t0
}{
	{0, 0}, {5 * time.Second, 0}, {10 * time.Second, 0}, {time.Minute, 0},
	{5 * time.Second, 2 * time.Second}, {time.Minute, 2 * time.Second}, {10 * time.Second, 9 * time.Second},
}

// checkKillTimes returns what is wrong with the stop times of one case: SIGKILL must land margin
// before the lease, counted from the grant's request, could end, and follow SIGTERM by the grace
// cut to a third of the TTL.
func checkKillTimes(grace, requested, term, kill time.Duration) []string {
	var bad []string
	leaseEnd := ttl30 - requested
	if kill > leaseEnd-margin {
		bad = append(bad, fmt.Sprintf("SIGKILL at %s, past the lease's end %s less the margin", kill, leaseEnd))
	}
	if want := min(grace, ttl30/3); kill-term != want {
		bad = append(bad, fmt.Sprintf("SIGKILL %s after SIGTERM, want the grace %s", kill-term, want))
	}
	return bad
}

// TestSupervisorKillsBeforeTheLeaseCanEnd: whatever the grace period, SIGKILL goes out before the
// lease can end, counted from the grant's request.
func TestSupervisorKillsBeforeTheLeaseCanEnd(t *testing.T) {
	for _, c := range killCases {
		t.Run(fmt.Sprintf("grace %s, requested %s before", c.grace, c.requested), func(t *testing.T) {
			term, kill := stopTimes(t, c.grace, t0.Add(-c.requested))
			for _, b := range checkKillTimes(c.grace, c.requested, term, kill) {
				t.Error(b)
			}
		})
	}
}

// TestSupervisorStopsWhenTheStoreSaysLost: a renewal refused because the lease is no longer ours
// stops the command at once; a command that stops on SIGTERM gets nothing more.
func TestSupervisorStopsWhenTheStoreSaysLost(t *testing.T) {
	r := startRig(t, 5*time.Second, t0, false)
	s := time.Second
	r.clk.fire(r.timer(10 * s))
	c := r.renewal(10 * s)
	r.timer(30*s - margin - 5*s)
	lost := &authority.LostError{Resource: "prod/api", Token: 1, Holder: "c", Current: 2, Reason: "taken over"}
	c.answer <- fmt.Errorf("renew lease in prod: %w", lost)
	r.signal(sigAt{syscall.SIGTERM, 10 * s})
	r.timer(15 * s) // SIGKILL after the grace, should the command not stop
	res, comp := r.end(errors.New("signal: terminated"))
	if res.res == nil || res.res.Ending != LeaseLost || !errors.As(res.res.Lost, new(*authority.LostError)) {
		t.Fatalf("Run: %+v, %v; want lease lost with the store's refusal", res.res, res.err)
	}
	if comp.outcome != authority.OutcomeLost {
		t.Errorf("completed %+v, want lost", comp)
	}
	r.noSignals()
}

// TestSupervisorForwardsTheSignal: the signal that interrupted the supervisor goes to the command,
// then SIGKILL after the grace period, cut to a third of the TTL.
func TestSupervisorForwardsTheSignal(t *testing.T) {
	r := startRig(t, time.Hour, t0, false)
	s := time.Second
	r.timer(10 * s)
	r.clk.set(t0.Add(4 * s))
	r.cancel(&SignalCause{Signal: syscall.SIGINT})
	r.signal(sigAt{syscall.SIGINT, 4 * s})
	r.clk.fire(r.timer(14 * s))
	r.signal(sigAt{syscall.SIGKILL, 14 * s})
	res, comp := r.end(errors.New("signal: killed"))
	if res.res == nil || res.res.Ending != Interrupted || comp.outcome != authority.OutcomeInterrupted {
		t.Fatalf("Run: %+v, %v, completed %+v; want interrupted", res.res, res.err, comp)
	}
}

// TestCheckGrace: a grace period longer than a third of the lease is bad input that says the fix.
func TestCheckGrace(t *testing.T) {
	cases := []struct {
		grace, ttl time.Duration
		want       string // "" when accepted
	}{
		{10 * time.Second, 6 * time.Second, `invalid grace "10s": --grace 10s does not fit a 6s lease: use at most 2s, or a --lease-ttl of at least 30s`},
		{2 * time.Second, 6 * time.Second, ""},
		{10 * time.Second, authority.DefaultLeaseTTL, ""},
		{0, 3 * time.Second, ""},
		{1667 * time.Millisecond, 5 * time.Second, `invalid grace "1.667s": --grace 1.667s does not fit a 5s lease: use at most 1.666s, or a --lease-ttl of at least 5.001s`},
		{1666 * time.Millisecond, 5 * time.Second, ""},
		{1001 * time.Millisecond, 3 * time.Second, `invalid grace "1.001s": --grace 1.001s does not fit a 3s lease: use at most 1s, or a --lease-ttl of at least 3.003s`},
		{-time.Second, time.Minute, `invalid grace "-1s": use a grace period of zero or more`},
	}
	for _, c := range cases {
		err := CheckGrace(c.grace, c.ttl)
		got := ""
		if err != nil {
			got = err.Error()
			if !errors.Is(err, authority.ErrInvalidInput) || !errors.As(err, new(*authority.InputError)) {
				t.Errorf("CheckGrace(%s, %s) = %v: not an *authority.InputError", c.grace, c.ttl, err)
			}
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("CheckGrace(%s, %s) (-want +got):\n%s", c.grace, c.ttl, diff)
		}
	}
}

// TestSupervisorDoesNotStartOnAnExpiringGrant: a grant requested so long ago that the command could
// not be stopped before its lease ends is not used: nothing starts, and the pass is completed as lost.
func TestSupervisorDoesNotStartOnAnExpiringGrant(t *testing.T) {
	requested := t0.Add(-(ttl30 - margin - 5*time.Second)) // SIGTERM would be due at once
	r := startRig(t, 5*time.Second, requested, false)
	var res runResult
	select {
	case res = <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if res.err != nil || res.res == nil || res.res.Ending != LeaseLost {
		t.Fatalf("Run on an expiring grant: %+v, %v; want lease lost", res.res, res.err)
	}
	if c := <-r.completed; c.outcome != authority.OutcomeLost || !strings.Contains(c.msg, "not started") {
		t.Fatalf("completed %+v; want lost, saying the command was not started", c)
	}
	select {
	case s := <-r.kid.signals:
		t.Fatalf("a command was started and signalled: %+v", s)
	default:
	}
}
