package lambda_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/lambda"
)

// redrives records the re-drives a sweep hands over, and answers err.
type redrives struct {
	got []authority.StalledWork
	err error
}

func (r *redrives) redrive(_ context.Context, w authority.StalledWork) error {
	r.got = append(r.got, w)
	return r.err
}

func sweep(t testing.TB, h *lambda.Handler) (lambda.SweepResult, error) {
	t.Helper()
	out, err := invoke(context.Background(), h, fixture(t, "scheduled-sweep.json"))
	if err != nil {
		return lambda.SweepResult{}, err
	}
	var res lambda.SweepResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("sweep answer %s: %v", out, err)
	}
	return res, nil
}

// stalled accepts the push fixture and lets it sit idle past the stall timeout.
func stalled(t testing.TB, hs *harness) {
	t.Helper()
	if res := invokeHTTP(t, hs.h, fixture(t, "function-url-push.json")); res.StatusCode != 200 {
		t.Fatalf("push: %d %s", res.StatusCode, res.Body)
	}
	hs.clock.Advance(lambda.DefaultStall + time.Second)
}

// stalledAPI is the push fixture's work once stalled; its origin is how the App re-dispatches it.
var stalledAPI = authority.StalledWork{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Attempt: 1,
	Origins: map[string]string{"api": "github:1:Codertocat/Hello-World@master"}}

func TestScheduledSweepRedrives(t *testing.T) {
	t.Parallel()
	rd := &redrives{}
	hs := newHarness(t, func(o *lambda.Options) { o.Redrive = rd.redrive })
	stalled(t, hs)
	got, err := sweep(t, hs.h)
	if err != nil {
		t.Fatal(err)
	}
	want := lambda.SweepResult{SweepReport: authority.SweepReport{Redriven: []authority.StalledWork{stalledAPI}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("first sweep (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]authority.StalledWork{stalledAPI}, rd.got); d != "" {
		t.Fatalf("re-drives (-want +got):\n%s", d)
	}
	// The re-drive counts as activity: a second sweep right away leaves it alone.
	got, err = sweep(t, hs.h)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Redriven) != 0 || len(rd.got) != 1 {
		t.Fatalf("second sweep re-drove %+v (%d in all), want nothing", got.Redriven, len(rd.got))
	}
}

func TestScheduledSweepWithoutRedriveIsADryRun(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	stalled(t, hs)
	want := lambda.SweepResult{DryRun: true, SweepReport: authority.SweepReport{Redriven: []authority.StalledWork{stalledAPI}}}
	for i := range 2 {
		got, err := sweep(t, hs.h)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("dry run %d (-want +got):\n%s", i+1, d)
		}
	}
	env, err := hs.auth.Status(context.Background(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if a := env.Scopes["api"].Mailbox.Attempt; a != 0 {
		t.Fatalf("a dry run used attempts: %d", a)
	}
}

func TestScheduledSweepFailureCostsNoAttempt(t *testing.T) {
	t.Parallel()
	rd := &redrives{err: errors.New("GitHub is down")}
	hs := newHarness(t, func(o *lambda.Options) { o.Redrive = rd.redrive })
	stalled(t, hs)
	_, err := sweep(t, hs.h)
	if err == nil || !strings.Contains(err.Error(), "could not be handled ([staging])") {
		t.Fatalf("error %v, want one naming the environment that failed", err)
	}
	rd.err = nil
	got, err := sweep(t, hs.h)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]authority.StalledWork{stalledAPI}, got.Redriven); d != "" {
		t.Fatalf("after the failure the next sweep re-drives at once, as attempt 1 (-want +got):\n%s", d)
	}
}
