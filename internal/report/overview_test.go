package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// TestOverviewWhatIsLiveWhere: staging has x live, production has w live and x pending, waiting
// for staging until staging has it; the overview says per scope what is live in each environment,
// how far production is behind and why it waits, and the gate's own words for the wait.
func TestOverviewWhatIsLiveWhere(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := storetest.NewClock(t0)
	a := authority.New(memory.New(), authority.WithClock(clock))
	deploy := func(env, id, sha string, req *authority.Requirements) int64 {
		t.Helper()
		res, err := a.Accept(ctx, authority.Intent{ID: id, Environment: env, Scopes: []string{"api"}, Sha: sha, Requires: req}, true)
		if err != nil {
			t.Fatal(err)
		}
		return res.Generation
	}
	finish := func(env string, gen int64) error {
		g, err := a.Gate(ctx, authority.GateRequest{Environment: env, Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: "h", LeaseTTL: time.Minute})
		if err != nil {
			return err
		}
		_, err = a.Complete(ctx, authority.Completion{Environment: env, Generation: gen, Scopes: []string{"api"}, Holder: "h", Tokens: g.Tokens, Outcome: authority.OutcomeSuccess})
		return err
	}
	if err := finish("production", deploy("production", "p-w", shaC3, nil)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	gen := deploy("production", "p-x", shaB1, &authority.Requirements{Environments: []string{"staging"}})
	if err := finish("production", gen); err == nil {
		t.Fatal("production deployed x before staging had it")
	}
	clock.Advance(2 * time.Minute)
	sgen := deploy("staging", "s-y", shaB2, nil)
	if err := finish("staging", sgen); err != nil {
		t.Fatal(err)
	}
	read := func() *Overview {
		var envs []*authority.Env
		for _, n := range []string{"staging", "production"} {
			e, err := a.Status(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			envs = append(envs, e)
		}
		return NewOverview(envs, clock.Now())
	}
	o := read()
	if len(o.Scopes) != 1 || len(o.Scopes[0].Places) != 2 {
		t.Fatalf("overview %+v; want api in two environments", o)
	}
	prod, staging := o.Scopes[0].Places[0], o.Scopes[0].Places[1]
	if prod.Environment != "production" || prod.Live.Sha != shaC3 || prod.Behind != 1 || prod.Newest != shaB1 || prod.Age != "2m0s ago" ||
		prod.Waiting != "waiting for staging: abc1234 is not live there yet (bbb2222 is)" {
		t.Errorf("production: %+v", prod)
	}
	if staging.Environment != "staging" || staging.Live.Sha != shaB2 || staging.Behind != 0 || staging.Waiting != "" {
		t.Errorf("staging: %+v", staging)
	}
	var b bytes.Buffer
	if err := OverviewText(&b, o); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"api    production   ccc3333  3m0s ago  1 (newest abc1234, accepted 2m0s ago)  waiting for staging: abc1234 is not live there yet (bbb2222 is)",
		"api    staging      bbb2222  0s ago    -                                      -"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table:\n%s\nwant a line with %q", b.String(), want)
		}
	}

	// x live in staging: production no longer waits.
	if err := finish("staging", deploy("staging", "s-x", shaB1, nil)); err != nil {
		t.Fatal(err)
	}
	if p := read().Scopes[0].Places[0]; p.Waiting != "" || p.Behind != 1 {
		t.Errorf("production once staging has x: %+v; want x pending, no longer waiting", p)
	}
}

// A pass waiting for its commit in a required environment is told so in the publications' words,
// not as a lease held by nobody.
func TestWaitingForARequiredEnvironment(t *testing.T) {
	t.Parallel()
	held := &authority.HeldError{Resource: "production/api", Promotion: &authority.PromotionWait{Environment: "staging", Sha: shaB1, Live: shaB2}}
	if got, want := Waiting(held), "waiting for staging: abc1234 is not live there yet (bbb2222 is)"; got != want {
		t.Fatalf("Waiting = %q, want %q", got, want)
	}
}

// TestStatusRowSaysWhatTheHeadWaitsFor: production's head waits for staging; built with staging's
// state, its row says so in the gate's words, in Markdown (the sticky comment, the check run) and
// in plain text, and stops saying so once staging has the commit live. Built without it, nothing is
// claimed either way.
func TestStatusRowSaysWhatTheHeadWaitsFor(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := authority.New(memory.New(), authority.WithClock(storetest.NewClock(t0)))
	accept := func(env, id, sha string, req *authority.Requirements) int64 {
		t.Helper()
		res, err := a.Accept(ctx, authority.Intent{ID: id, Environment: env, Scopes: []string{"api"}, Sha: sha, Requires: req}, true)
		if err != nil {
			t.Fatal(err)
		}
		return res.Generation
	}
	status := func(env string) *authority.Env {
		t.Helper()
		e, err := a.Status(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	accept("production", "p-x", shaB1, &authority.Requirements{Environments: []string{"staging"}})
	sgen := accept("staging", "s-y", shaC3, nil)
	required := map[string]*authority.Env{"staging": status("staging")}
	st := NewStatusWith(status("production"), t0, required)
	want := "waiting for staging: " + ShortSha(shaB1) + " is not live there yet"
	if len(st.Rows) != 1 || st.Rows[0].Promotion != want || st.Rows[0].PromotionWait == nil || st.Rows[0].PromotionWait.Sha != shaB1 {
		t.Fatalf("row %+v; want the head %q", st.Rows, want)
	}
	var md strings.Builder
	writeStatusTable(&md, st)
	if !strings.Contains(md.String(), cell(want)) {
		t.Errorf("the Markdown row does not say %q:\n%s", want, md.String())
	}
	if st := NewStatus(status("production"), t0); st.Rows[0].Promotion != "" {
		t.Errorf("without the required states the row claims %q", st.Rows[0].Promotion)
	}

	// staging deploys x: production's head waits no more.
	g, err := a.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: sgen, Scopes: []string{"api"}, Phase: "deploy", Holder: "h", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Complete(ctx, authority.Completion{Environment: "staging", Generation: sgen, Scopes: []string{"api"}, Holder: "h", Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
	gen := accept("staging", "s-x", shaB1, nil)
	g, err = a.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: "h", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Complete(ctx, authority.Completion{Environment: "staging", Generation: gen, Scopes: []string{"api"}, Holder: "h", Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
	if st := NewStatusWith(status("production"), t0, map[string]*authority.Env{"staging": status("staging")}); st.Rows[0].Promotion != "" {
		t.Errorf("once staging has it live the row still says %q", st.Rows[0].Promotion)
	}
}
