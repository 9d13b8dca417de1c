package authority_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

func TestJudgeBoundaries(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	after := 30 * time.Minute
	pending := func() *authority.Scope {
		return &authority.Scope{Owner: 2, Mailbox: &authority.Ref{Generation: 2, Sha: "bbbbbbbbbb", At: t0}}
	}
	leased := func(gen int64, expires time.Time) *authority.Scope {
		s := pending()
		s.Lease = authority.Lease{Holder: "run-1", Generation: gen, Token: 3, ExpiresAt: expires}
		return s
	}
	superseded := pending()
	superseded.Mailbox.At, superseded.Mailbox.Since = t0.Add(10*time.Minute), t0 // a newer commit came later
	cases := []struct {
		name       string
		scope      *authority.Scope
		now        time.Time
		alertAfter time.Duration
		want       authority.Convergence
		waited     time.Duration
	}{
		{"no such scope", nil, t0, after, authority.ConvergenceCurrent, 0},
		{"nothing pending", &authority.Scope{Live: &authority.Live{Sha: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Generation: 1}}, t0.Add(time.Hour), after, authority.ConvergenceCurrent, 0},
		{"just accepted", pending(), t0, after, authority.ConvergenceWaiting, 0},
		{"exactly at alert-after", pending(), t0.Add(after), after, authority.ConvergenceWaiting, after},
		{"a nanosecond past, nothing running", pending(), t0.Add(after + 1), after, authority.ConvergenceStuck, after + 1},
		{"no alert-after never judges", pending(), t0.Add(100 * time.Hour), 0, authority.ConvergenceWaiting, 100 * time.Hour},
		{"negative alert-after is none", pending(), t0.Add(100 * time.Hour), -time.Minute, authority.ConvergenceWaiting, 100 * time.Hour},
		{"a live lease for the pending commit", leased(2, t0.Add(time.Hour)), t0.Add(42 * time.Minute), after, authority.ConvergenceBehind, 42 * time.Minute},
		{"the lease expires exactly now", leased(2, t0.Add(42*time.Minute)), t0.Add(42 * time.Minute), after, authority.ConvergenceStuck, 42 * time.Minute},
		{"the lease is a superseded pass's", leased(1, t0.Add(time.Hour)), t0.Add(42 * time.Minute), after, authority.ConvergenceStuck, 42 * time.Minute},
		{"counted from the oldest superseded", superseded, t0.Add(after + time.Second), after, authority.ConvergenceStuck, after + time.Second},
		{"a clock behind the acceptance", pending(), t0.Add(-time.Minute), after, authority.ConvergenceWaiting, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lag := authority.Judge(c.scope, c.now, c.alertAfter)
			if lag.State != c.want || lag.Waited != c.waited {
				t.Fatalf("Judge = %s after %s; want %s after %s", lag.State, lag.Waited, c.want, c.waited)
			}
			if c.want != authority.ConvergenceCurrent && (lag.Sha != "bbbbbbbbbb" || lag.Generation != 2) {
				t.Errorf("Judge names %d %q; want the newest pending commit, 2 bbbbbbbbbb", lag.Generation, lag.Sha)
			}
			if (lag.State == authority.ConvergenceBehind) != (lag.Lease.Holder != "") {
				t.Errorf("Judge's lease %+v for state %s: only behind names the running pass", lag.Lease, lag.State)
			}
			if lag.State.Late() != (c.want == authority.ConvergenceBehind || c.want == authority.ConvergenceStuck) {
				t.Errorf("%s.Late() = %v", lag.State, lag.State.Late())
			}
		})
	}
}

func TestJudgeQueueNamesTheNewest(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := &authority.Scope{Owner: 2,
		Mailbox: &authority.Ref{Generation: 2, Sha: "2222222", At: t0},
		Queue:   []*authority.Ref{{Generation: 3, Sha: "3333333", At: t0.Add(time.Minute)}},
		Lease:   authority.Lease{Holder: "run", Generation: 2, Token: 1, ExpiresAt: t0.Add(time.Hour)}}
	lag := authority.Judge(s, t0.Add(31*time.Minute), 30*time.Minute)
	if lag.State != authority.ConvergenceBehind || lag.Sha != "3333333" || lag.Since != t0 {
		t.Fatalf("Judge = %+v; want behind since the head's acceptance, reaching 3333333", lag)
	}
}

func TestConvergenceNames(t *testing.T) {
	t.Parallel()
	for _, c := range []authority.Convergence{authority.ConvergenceCurrent, authority.ConvergenceWaiting, authority.ConvergenceBehind, authority.ConvergenceStuck} {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var back authority.Convergence
		if err := json.Unmarshal(b, &back); err != nil || back != c {
			t.Errorf("%s: round trip %s gave %s, %v", c, b, back, err)
		}
	}
	if got := authority.Convergence(9).String(); got != "convergence(9)" {
		t.Errorf("unknown state = %q", got)
	}
	var c authority.Convergence
	if err := c.UnmarshalText([]byte("late")); err == nil {
		t.Error("an unknown name was read")
	}
}

func TestAlertAfterTravelsWithIntents(t *testing.T) {
	t.Parallel()
	store := authority.New(memory.New(), authority.WithClock(storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))))
	ctx := t.Context()
	d := 30 * time.Minute
	in := authority.Intent{ID: "i1", Environment: "staging", Scopes: []string{"api"}, Sha: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", AlertAfter: &d}
	if _, err := store.Accept(ctx, in, false); err != nil {
		t.Fatal(err)
	}
	e, err := store.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if e.AlertAfter != d {
		t.Fatalf("stored alert-after %s; want %s", e.AlertAfter, d)
	}
	in2 := authority.Intent{ID: "i2", Environment: "staging", Scopes: []string{"api"}, Sha: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}
	if _, err := store.Accept(ctx, in2, false); err != nil {
		t.Fatal(err)
	}
	if e, _ = store.Status(ctx, "staging"); e.AlertAfter != d {
		t.Fatalf("an intent without alert-after changed it to %s", e.AlertAfter)
	}
	zero := time.Duration(0)
	in3 := authority.Intent{ID: "i3", Environment: "staging", Scopes: []string{"api"}, Sha: "cccccccccccccccccccccccccccccccccccccccc", AlertAfter: &zero}
	if _, err := store.Accept(ctx, in3, false); err != nil {
		t.Fatal(err)
	}
	if e, _ = store.Status(ctx, "staging"); e.AlertAfter != 0 {
		t.Fatalf("an intent with alert-after 0 left %s", e.AlertAfter)
	}
	bad := -time.Second
	in4 := authority.Intent{ID: "i4", Environment: "staging", Scopes: []string{"api"}, Sha: "dddddddddddddddddddddddddddddddddddddddd", AlertAfter: &bad}
	if _, err := store.Accept(ctx, in4, false); err == nil {
		t.Fatal("a negative alert-after was accepted")
	}
}

func TestAlertAfterCodec(t *testing.T) {
	t.Parallel()
	e := &authority.Env{Name: "staging", AlertAfter: 45 * time.Minute}
	b, err := authority.EncodeEnv(e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := authority.DecodeEnv(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.AlertAfter != e.AlertAfter {
		t.Fatalf("decoded alert-after %s; want %s", back.AlertAfter, e.AlertAfter)
	}
	var probe struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(b, &probe); err != nil || probe.V != 2 {
		t.Fatalf("an alert-after alone made layout %d; a build that drops it loses only the alarm, so it stays 2", probe.V)
	}
}

// What a notifier told is written only under its alarm's lease: one whose lease was taken over
// after its expiry writes nothing.
func TestRecordAlarmIsFencedByTheLease(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	a := authority.New(memory.New(), authority.WithClock(clock), authority.WithSkew(time.Second))
	ctx := t.Context()
	name := authority.AlarmLease("prod")
	g1, err := a.Acquire(ctx, name, "n1", "alert", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	told := authority.Alarm{Webhook: []authority.AlarmScope{{Scope: "api", State: "stuck", Since: clock.Now()}}, IssueNumber: 3, IssueRepo: "acme/ops"}
	if err := a.RecordAlarm(ctx, g1, name, told); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	g2, err := a.Acquire(ctx, name, "n2", "alert", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RecordAlarm(ctx, g1, name, authority.Alarm{}); !errors.Is(err, authority.ErrLeaseLost) {
		t.Fatalf("RecordAlarm under a lease taken over = %v; want ErrLeaseLost", err)
	}
	nl, err := a.LeaseStatus(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if nl.Alarm == nil || nl.Alarm.IssueNumber != 3 || !authority.SameAlarm(nl.Alarm.Webhook, told.Webhook) {
		t.Fatalf("stored alarm %+v; want the first holder's", nl.Alarm)
	}
	if err := a.RecordAlarm(ctx, g2, name, authority.Alarm{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetAlertAfter(ctx, "nowhere", time.Minute); !errors.Is(err, authority.ErrInvalidInput) {
		t.Fatalf("SetAlertAfter of an unknown environment = %v; want bad input", err)
	}
}

func TestSameAlarm(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a := []authority.AlarmScope{{Scope: "api", State: "behind", Since: t0}}
	for name, b := range map[string][]authority.AlarmScope{
		"another state":   {{Scope: "api", State: "stuck", Since: t0}},
		"another episode": {{Scope: "api", State: "behind", Since: t0.Add(time.Second)}},
		"another scope":   {{Scope: "web", State: "behind", Since: t0}},
		"one more":        {a[0], {Scope: "web", State: "behind", Since: t0}},
		"none":            nil,
	} {
		if authority.SameAlarm(a, b) {
			t.Errorf("%s: told as the same", name)
		}
	}
	if !authority.SameAlarm(a, []authority.AlarmScope{{Scope: "api", State: "behind", Since: t0.In(time.FixedZone("x", 3600))}}) {
		t.Error("the same instant in another zone is another alarm")
	}
}
