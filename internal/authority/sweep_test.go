package authority_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

func TestSweepRedrivesStalledWorkOncePerStallAndEndsItAfterMaxAttempts(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	a := authority.New(memory.New(), authority.WithClock(clock), authority.WithSkew(time.Second))
	const stall, ttl = 10 * time.Minute, 2 * time.Minute

	// staging: api was claimed by a pass that took the lease and died; web waits for nobody.
	res, err := a.Accept(ctx, authority.Intent{ID: "push-1", Environment: "staging", Scopes: []string{"api", "web"}, Sha: "aaaa111000000000000000000000000000000000",
		Origin: "github:7:acme/shop@main"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"api"},
		Phase: "deploy", Holder: "dead-runner", LeaseTTL: ttl}); err != nil {
		t.Fatal(err)
	}
	// prod: settled, never in the sweep's way.
	if _, err := a.Accept(ctx, authority.Intent{ID: "push-2", Environment: "prod", Scopes: []string{"api"}, Sha: "bbbb222000000000000000000000000000000000"}, true); err != nil {
		t.Fatal(err)
	}
	g, err := a.Gate(ctx, authority.GateRequest{Environment: "prod", Generation: 1, Scopes: []string{"api"}, Phase: "deploy", Holder: "ok", LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Complete(ctx, authority.Completion{Environment: "prod", Generation: 1, Scopes: []string{"api"}, Holder: "ok",
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}

	var redriven []authority.StalledWork
	sweep := func() *authority.SweepReport {
		t.Helper()
		rep, err := a.Sweep(ctx, stall, 2, func(_ context.Context, w authority.StalledWork) error {
			redriven = append(redriven, w)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}

	// Not stalled yet: nothing happens.
	clock.Advance(stall / 2)
	if rep := sweep(); len(rep.Redriven) != 0 {
		t.Fatalf("re-drove work that had not stalled: %+v", rep.Redriven)
	}
	// Stalled: the lease expired long ago and nothing moved for the stall timeout.
	clock.Advance(stall)
	rep := sweep()
	want := []authority.StalledWork{{Environment: "staging", Generation: 1, Scopes: []string{"api", "web"}, Attempt: 1}}
	if !slices.EqualFunc(rep.Redriven, want, equalWork) {
		t.Fatalf("first sweep re-drove %+v; want %+v", rep.Redriven, want)
	}
	if o := rep.Redriven[0].Origins; o["api"] != "github:7:acme/shop@main" || o["web"] != "github:7:acme/shop@main" {
		t.Fatalf("re-drive origins %v; want the intent's origin for both scopes", o)
	}
	// A second sweep in the same stall period re-drives nothing: the re-drive was recorded.
	if rep := sweep(); len(rep.Redriven) != 0 {
		t.Fatalf("the same stall was re-driven twice: %+v", rep.Redriven)
	}
	clock.Advance(stall)
	if rep := sweep(); len(rep.Redriven) != 1 || rep.Redriven[0].Attempt != 2 {
		t.Fatalf("second stall: %+v; want attempt 2", rep.Redriven)
	}
	// The third stall exceeds max attempts: one terminal error, observed moves past it, and the
	// environment leaves the pending index, so no later sweep resurrects it.
	clock.Advance(stall)
	rep = sweep()
	if len(rep.Redriven) != 0 || len(rep.Exhausted) != 2 {
		t.Fatalf("after the attempts ran out: %+v", rep)
	}
	e, err := a.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if e.Observed != e.Desired || e.Scopes["api"].Failure == nil || e.Scopes["api"].Mailbox != nil {
		t.Fatalf("exhausted work not ended: %d/%d, api %+v", e.Observed, e.Desired, e.Scopes["api"])
	}
	failures := 0
	for _, ev := range e.Outbox {
		if ev.Kind == authority.EventFailed && ev.Scope == "api" {
			failures++
			if !strings.Contains(ev.Message, "no pass completed after 2 attempts") {
				t.Fatalf("failure event: %q", ev.Message)
			}
		}
	}
	if failures != 1 {
		t.Fatalf("%d terminal failures recorded for api; want exactly one", failures)
	}
	if pending, _ := a.Pending(ctx); len(pending) != 0 {
		t.Fatalf("pending index still lists %v", pending)
	}
	clock.Advance(stall)
	if rep := sweep(); len(rep.Redriven)+len(rep.Exhausted) != 0 {
		t.Fatalf("a settled environment was swept again: %+v", rep)
	}
}

func TestSweepLeavesLiveLeasesAloneAndReportsFailedRedrives(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	a := authority.New(memory.New(), authority.WithClock(clock), authority.WithSkew(time.Second))
	if _, err := a.Accept(ctx, authority.Intent{ID: "i", Environment: "qa", Scopes: []string{"api"}, Sha: "aaaa111000000000000000000000000000000000"}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Gate(ctx, authority.GateRequest{Environment: "qa", Generation: 1, Scopes: []string{"api"}, Phase: "deploy",
		Holder: "slow", LeaseTTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Minute) // idle, but the lease is live: a long deploy, not a stall
	boom := errors.New("dispatch refused")
	rep, err := a.Sweep(ctx, 10*time.Minute, 3, func(context.Context, authority.StalledWork) error { return boom })
	if err != nil || len(rep.Redriven) != 0 || len(rep.Failed) != 0 {
		t.Fatalf("live lease swept: %+v %v", rep, err)
	}
	clock.Advance(time.Hour)
	rep, err = a.Sweep(ctx, 10*time.Minute, 3, func(context.Context, authority.StalledWork) error { return boom })
	if err != nil || len(rep.Redriven) != 0 || !strings.Contains(rep.Failed["qa"], "dispatch refused") {
		t.Fatalf("a failed re-drive must be reported: %+v %v", rep, err)
	}
	// The failed dispatch cost no attempt, and the next sweep tries again at once.
	var got []authority.StalledWork
	rep, err = a.Sweep(ctx, 10*time.Minute, 3, func(_ context.Context, w authority.StalledWork) error { got = append(got, w); return nil })
	if err != nil || len(got) != 1 || got[0].Attempt != 1 {
		t.Fatalf("after a failed dispatch: %+v %+v %v; want attempt 1 re-driven at once", got, rep, err)
	}
	if _, err := a.Sweep(ctx, 0, 3, nil); !errors.Is(err, authority.ErrInvalidInput) {
		t.Fatalf("zero stall timeout: %v; want invalid input", err)
	}
}

func equalWork(a, b authority.StalledWork) bool {
	return a.Environment == b.Environment && a.Generation == b.Generation && a.Attempt == b.Attempt && slices.Equal(a.Scopes, b.Scopes)
}

func TestWithdrawEndsPendingWorkSoTheSweepLeavesIt(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	a := authority.New(memory.New(), authority.WithClock(clock), authority.WithSkew(time.Second))
	if _, err := a.Accept(ctx, authority.Intent{ID: "pr-7", Environment: "preview/pr-7", Scopes: []string{"api"}, Sha: "aaaa111000000000000000000000000000000000",
		Origin: "github:7:acme/shop@feature"}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Gate(ctx, authority.GateRequest{Environment: "preview/pr-7", Generation: 1, Scopes: []string{"api"}, Phase: "deploy",
		Holder: "run-1", LeaseTTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	got, err := a.Withdraw(ctx, "preview/pr-7", []string{"api"}, "pull request #7 closed", "octocat")
	if err != nil || len(got) != 1 {
		t.Fatalf("withdraw: %v %v", got, err)
	}
	e, _ := a.Status(ctx, "preview/pr-7")
	if e.Observed != e.Desired || e.Scopes["api"].Mailbox != nil || e.Scopes["api"].Lease.Holder != "" || e.Scopes["api"].Failure != nil {
		t.Fatalf("after withdrawing: %d/%d, %+v", e.Observed, e.Desired, e.Scopes["api"])
	}
	clock.Advance(time.Hour)
	rep, err := a.Sweep(ctx, 10*time.Minute, 3, func(context.Context, authority.StalledWork) error {
		t.Fatal("withdrawn work was re-driven")
		return nil
	})
	if err != nil || len(rep.Redriven)+len(rep.Exhausted) != 0 {
		t.Fatalf("sweep after withdrawing: %+v %v", rep, err)
	}
	if again, err := a.Withdraw(ctx, "preview/pr-7", []string{"api"}, "pull request #7 closed", "octocat"); err != nil || len(again) != 0 {
		t.Fatalf("withdrawing again: %v %v; want nothing to do", again, err)
	}
}

func TestSweepCountsPermanentRedriveFailuresUntilTheWorkEnds(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	a := authority.New(memory.New(), authority.WithClock(clock), authority.WithSkew(time.Second))
	if _, err := a.Accept(ctx, authority.Intent{ID: "i", Environment: "qa", Scopes: []string{"api"}, Sha: "aaaa111000000000000000000000000000000000"}, false); err != nil {
		t.Fatal(err)
	}
	gone := fmt.Errorf("workflow deploy.yml not found: %w", authority.ErrPermanent)
	for round := 1; round <= 3; round++ {
		clock.Advance(time.Hour)
		rep, err := a.Sweep(ctx, 10*time.Minute, 2, func(context.Context, authority.StalledWork) error { return gone })
		if err != nil {
			t.Fatal(err)
		}
		if round == 3 && len(rep.Exhausted) != 1 {
			t.Fatalf("round 3: %+v; want the work ended after 2 counted attempts", rep)
		}
	}
	if e, _ := a.Status(ctx, "qa"); e.Observed != e.Desired || e.Scopes["api"].Failure == nil {
		t.Fatalf("work with a permanent re-drive failure still pending: %d/%d", e.Observed, e.Desired)
	}
}

// A long-lived process that touches many environments remembers a bounded number of them.
func TestRememberedDocumentsAreBounded(t *testing.T) {
	ctx := context.Background()
	a := authority.New(memory.New())
	for i := range 600 {
		env := fmt.Sprintf("preview/pr-%d", i)
		if _, err := a.Accept(ctx, authority.Intent{ID: env, Environment: env, Scopes: []string{"api"}, Sha: "aaaa111000000000000000000000000000000000"}, false); err != nil {
			t.Fatal(err)
		}
	}
	if n := authority.RememberedForTest(a); n > 256 {
		t.Fatalf("the Authority remembers %d documents; want at most 256", n)
	}
}
