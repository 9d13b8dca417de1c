package report

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// Commits of the scenarios below; the first is the barrier that fails.
const (
	shaB1 = "abc1234aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	shaB2 = "bbb2222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	shaC3 = "ccc3333ccccccccccccccccccccccccccccccccc"
)

// scenario drives a real Authority on the memory store with a fake clock, as passes would.
type scenario struct {
	t     *testing.T
	ctx   context.Context
	clock *storetest.Clock
	auth  *authority.Authority
	env   string
}

func newScenario(t *testing.T, env string) *scenario {
	clock := storetest.NewClock(t0)
	return &scenario{t: t, ctx: t.Context(), clock: clock, auth: authority.New(memory.New(), authority.WithClock(clock)), env: env}
}

func (s *scenario) accept(id, sha string, policy authority.Policy, barrier bool) int64 {
	s.t.Helper()
	in := authority.Intent{ID: id, Environment: s.env, Scopes: []string{"api"}, Sha: sha, Ref: "refs/heads/main",
		Source: "push", Actor: "octocat", Policy: policy}
	if barrier {
		in.Barrier = []string{"api"}
	}
	res, err := s.auth.Accept(s.ctx, in, true)
	if err != nil {
		s.t.Fatalf("accept %s: %v", id, err)
	}
	return res.Generation
}

// gate asks for the deploy lease of api for the pass at gen: the grant, or what the pass is told
// while it waits.
func (s *scenario) gate(gen int64, holder string) (*authority.Grant, *authority.HeldError) {
	s.t.Helper()
	g, err := s.auth.Gate(s.ctx, authority.GateRequest{Environment: s.env, Generation: gen, Scopes: []string{"api"}, Phase: "deploy",
		Holder: holder, LeaseTTL: 2 * time.Minute})
	var held *authority.HeldError
	if errors.As(err, &held) {
		return nil, held
	}
	if err != nil {
		s.t.Fatalf("gate %d: %v", gen, err)
	}
	return g, nil
}

func (s *scenario) complete(g *authority.Grant, outcome authority.Outcome) {
	s.t.Helper()
	if _, err := s.auth.Complete(s.ctx, authority.Completion{Environment: s.env, Generation: g.Generation, Scopes: []string{"api"},
		Holder: g.Holder, Tokens: g.Tokens, Outcome: outcome, Attempt: 3, MaxAttempts: 3, Message: "migration 42 failed", Run: g.Holder}); err != nil {
		s.t.Fatalf("complete %d: %v", g.Generation, err)
	}
}

func (s *scenario) status() (*authority.Env, *Status) {
	s.t.Helper()
	e, err := s.auth.Status(s.ctx, s.env)
	if err != nil {
		s.t.Fatal(err)
	}
	return e, NewStatus(e, s.clock.Now())
}

// entryPlace is what the tests compare of an entry: its place and commit.
type entryPlace struct {
	Position   int
	Generation int64
	Short      string
	Ahead      int
	Barrier    bool
	Failed     bool
	Wait       string
}

func places(r Row) []entryPlace {
	var out []entryPlace
	for _, e := range r.Pending {
		out = append(out, entryPlace{e.Position, e.Generation, e.Short, e.Ahead, e.Barrier, e.Failed, e.Wait})
	}
	return out
}

// queueBehindBarrier is staging under policy latest with api's pending work three deep: barrier
// abc1234 at the head (its pass holds the lease), barrier bbb2222 waiting behind it, then the
// newest commit ccc3333. It returns the scenario, the head's grant and the generations.
func queueBehindBarrier(t *testing.T) (*scenario, *authority.Grant, [3]int64) {
	s := newScenario(t, "staging")
	var gens [3]int64
	gens[0] = s.accept("b1", shaB1, "", true)
	g, held := s.gate(gens[0], "run-1")
	if held != nil {
		t.Fatalf("the head's pass waits: %v", held)
	}
	s.clock.Advance(10 * time.Second)
	gens[1] = s.accept("b2", shaB2, "", true)
	gens[2] = s.accept("c3", shaC3, "", false)
	s.clock.Advance(20 * time.Second)
	return s, g, gens
}

// Each waiting intent's place in the model is what the gate tells its pass, word for word: the
// renderings say what the passes are told.
func TestStatusQueueWithBarrierAndBlockedHead(t *testing.T) {
	t.Parallel()
	s, g, gens := queueBehindBarrier(t)

	_, st := s.status()
	if st.Policy != authority.PolicyLatest || st.PolicyNote() != "" || st.Settled || st.State() != "reconciling" || len(st.Rows) != 1 {
		t.Fatalf("status %+v; want policy latest (not noted), reconciling, one row", st)
	}
	r := st.Rows[0]
	want := []entryPlace{
		{1, gens[0], "abc1234", 0, true, false, ""},
		{2, gens[1], "bbb2222", 1, true, false, "waiting for barrier abc1234"},
		{3, gens[2], "ccc3333", 2, false, false, "waiting for barrier bbb2222"},
	}
	if diff := cmp.Diff(want, places(r)); diff != "" {
		t.Errorf("pending while the barrier deploys (-want +got):\n%s", diff)
	}
	if r.Blocked != "" || r.Head().Generation != gens[0] || len(r.Waiting()) != 2 {
		t.Errorf("row %+v; want not blocked, head %d, two waiting", r, gens[0])
	}
	if !r.Lease.Held || r.Lease.Holder != "run-1" || r.Lease.Left != 90*time.Second || r.Lease.Generation != gens[0] {
		t.Errorf("lease %+v; want held by run-1 for 1m30s more", r.Lease)
	}
	for i, holder := range []string{"run-2", "run-3"} {
		if _, held := s.gate(gens[i+1], holder); held == nil || authority.WaitText(held) != r.Pending[i+1].Wait {
			t.Errorf("the pass of generation %d is told %v; the status says %q", gens[i+1], held, r.Pending[i+1].Wait)
		}
	}

	// The barrier fails terminally: it stays at the head and blocks the scope.
	s.complete(g, authority.OutcomeFailure)
	_, st = s.status()
	r = st.Rows[0]
	want[0].Failed = true
	if diff := cmp.Diff(want, places(r)); diff != "" {
		t.Errorf("pending once the barrier failed (-want +got):\n%s", diff)
	}
	if wantBlocked := "blocked: generation 1 (abc1234) failed terminally; waiting for a decision (skip or retry)"; r.Blocked != wantBlocked {
		t.Errorf("blocked %q, want %q", r.Blocked, wantBlocked)
	}
	for i, holder := range []string{"run-2", "run-3"} {
		if _, held := s.gate(gens[i+1], holder); held == nil || !held.Blocked || authority.WaitText(held) != r.Blocked {
			t.Errorf("the pass of generation %d is told %v; the status says the scope is %q", gens[i+1], held, r.Blocked)
		}
	}
	if r.Lease.Held || r.Lease.Holder != "" || r.Failure == nil || r.Failure.Message != "migration 42 failed" {
		t.Errorf("lease %+v, failure %+v; want the lease released and the failure kept", r.Lease, r.Failure)
	}
}

// queueOfThree is staging under policy queue with three commits pending on api, the head's pass
// holding the lease with 1m30s left.
func queueOfThree(t *testing.T) (*scenario, [3]int64) {
	s := newScenario(t, "staging")
	var gens [3]int64
	for i, sha := range []string{shaB1, shaB2, shaC3} {
		gens[i] = s.accept("p"+sha[:1], sha, authority.PolicyQueue, i == 1)
	}
	if _, held := s.gate(gens[0], "run-1"); held != nil {
		t.Fatalf("the head's pass waits: %v", held)
	}
	s.clock.Advance(30 * time.Second)
	return s, gens
}

// Under policy queue every waiting intent is told how many go before it; a barrier changes
// nothing there. A held lease is shown with its holder and time left, then as expired.
func TestStatusQueuePositionsAndLease(t *testing.T) {
	t.Parallel()
	s, gens := queueOfThree(t)
	_, st := s.status()
	if st.Policy != authority.PolicyQueue || st.PolicyNote() != "queue" {
		t.Fatalf("policy %q, note %q; want queue", st.Policy, st.PolicyNote())
	}
	r := st.Rows[0]
	want := []entryPlace{
		{1, gens[0], "abc1234", 0, false, false, ""},
		{2, gens[1], "bbb2222", 1, true, false, "queued: 1 ahead of this commit"},
		{3, gens[2], "ccc3333", 2, false, false, "queued: 2 ahead of this commit"},
	}
	if diff := cmp.Diff(want, places(r)); diff != "" {
		t.Errorf("pending (-want +got):\n%s", diff)
	}
	for i, holder := range []string{"run-2", "run-3"} {
		if _, held := s.gate(gens[i+1], holder); held == nil || authority.WaitText(held) != r.Pending[i+1].Wait {
			t.Errorf("the pass of generation %d is told %v; the status says %q", gens[i+1], held, r.Pending[i+1].Wait)
		}
	}
	wantLease := Lease{Holder: "run-1", Purpose: "deploy", Generation: gens[0], Token: 1, ExpiresAt: t0.Add(2 * time.Minute), Held: true, Left: 90 * time.Second}
	if diff := cmp.Diff(wantLease, r.Lease); diff != "" {
		t.Errorf("held lease (-want +got):\n%s", diff)
	}

	s.clock.Advance(2 * time.Minute)
	_, st = s.status()
	wantLease.Held, wantLease.Left = false, 30*time.Second
	if diff := cmp.Diff(wantLease, st.Rows[0].Lease); diff != "" {
		t.Errorf("expired lease (-want +got):\n%s", diff)
	}
}

// A settled environment: observed reached desired, the commit live, nothing pending, no lease.
func TestStatusSettled(t *testing.T) {
	t.Parallel()
	s := newScenario(t, "preview/pr-7")
	gen := s.accept("p1", shaC3, "", false)
	g, _ := s.gate(gen, "run-1")
	s.clock.Advance(40 * time.Second)
	s.complete(g, authority.OutcomeSuccess)
	s.clock.Advance(5 * time.Second)
	_, st := s.status()
	want := &Status{Name: "preview/pr-7", Policy: authority.PolicyLatest, Observed: 1, Desired: 1, Settled: true, Rows: []Row{{
		Scope: "api", Owner: 1,
		Live:  &Live{Sha: shaC3, Short: "ccc3333", Generation: 1, At: t0.Add(40 * time.Second), Ago: "5s ago"},
		Lease: Lease{Purpose: "deploy", Generation: 1, Token: 1},
	}}}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("settled status (-want +got):\n%s", diff)
	}
	if st.State() != "settled" || st.Rows[0].Head() != nil || st.Rows[0].Waiting() != nil {
		t.Errorf("state %q, head %v, waiting %v; want settled and nothing pending", st.State(), st.Rows[0].Head(), st.Rows[0].Waiting())
	}
}

// Every rendering shows the places: the CLI's table, the Markdown table (PR comment, check run)
// and the job summary, with the policy when it is not latest.
func TestRenderingsShowPlaces(t *testing.T) {
	t.Parallel()
	blocked, g, _ := queueBehindBarrier(t)
	barrierEnv, _ := blocked.status()
	blocked.complete(g, authority.OutcomeFailure)
	blockedEnv, _ := blocked.status()
	queue, _ := queueOfThree(t)
	queueEnv, _ := queue.status()
	for _, e := range []*authority.Env{barrierEnv, blockedEnv, queueEnv} {
		e.Events = nil // the timeline tells the same words in its own tables
	}

	render := map[string]func(*authority.Env, time.Time) string{
		"text": func(e *authority.Env, now time.Time) string {
			var b bytes.Buffer
			if err := StatusText(&b, e, now); err != nil {
				t.Fatal(err)
			}
			return b.String()
		},
		"markdown": func(e *authority.Env, now time.Time) string {
			var b bytes.Buffer
			if err := StatusMarkdown(&b, e, now, nil); err != nil {
				t.Fatal(err)
			}
			return b.String()
		},
		"job summary": func(e *authority.Env, now time.Time) string {
			var b bytes.Buffer
			if err := JobSummary(&b, Summary{Env: e, Now: now}); err != nil {
				t.Fatal(err)
			}
			return b.String()
		},
		"comment": func(e *authority.Env, now time.Time) string {
			var b bytes.Buffer
			if err := Comment(&b, Publication{Env: e, Now: now, Pass: Pass{Generation: 3, Scopes: []string{"api"}, Outcome: OutcomeLocked}}); err != nil {
				t.Fatal(err)
			}
			return b.String()
		},
	}
	cases := []struct {
		name    string
		env     *authority.Env
		now     time.Time
		want    []string
		wantNot []string
	}{
		{"queue", queueEnv, queue.clock.Now(), []string{"queued: 1 ahead", "queued: 2 ahead", "held"}, []string{"blocked", "waiting for barrier"}},
		{"barrier", barrierEnv, blocked.clock.Now(), []string{"waiting for barrier abc1234", "waiting for barrier bbb2222"}, []string{"blocked", "queued:"}},
		{"blocked", blockedEnv, blocked.clock.Now(), []string{"blocked: generation 1 (abc1234) failed terminally; waiting for a decision (skip or retry)",
			"migration 42 failed", "waiting for barrier bbb2222"}, nil},
	}
	for _, tc := range cases {
		for name, r := range render {
			out := r(tc.env, tc.now)
			for _, w := range tc.want {
				if w == "held" {
					w = "deploy by run-1, token 1, 1m30s left"
				}
				if !strings.Contains(out, w) {
					t.Errorf("%s of %s lacks %q:\n%s", name, tc.name, w, out)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(out, w) {
					t.Errorf("%s of %s says %q:\n%s", name, tc.name, w, out)
				}
			}
			if hasLine := strings.Contains(out, "policy"); (name == "text" || name == "job summary" || name == "comment") && hasLine != (tc.name == "queue") {
				t.Errorf("%s of %s mentions the policy: %v; want it only under policy queue:\n%s", name, tc.name, hasLine, out)
			}
		}
	}
}

// The places as the CLI and the job summary lay them out, pinned in golden files.
func TestStatusQueueGolden(t *testing.T) {
	t.Parallel()
	blocked, g, _ := queueBehindBarrier(t)
	blocked.complete(g, authority.OutcomeFailure)
	blockedEnv, _ := blocked.status()
	queue, _ := queueOfThree(t)
	queueEnv, _ := queue.status()
	blockedEnv.Events, queueEnv.Events = nil, nil // the timeline has goldens of its own

	var text bytes.Buffer
	for _, c := range []struct {
		e   *authority.Env
		now time.Time
	}{{queueEnv, queue.clock.Now()}, {blockedEnv, blocked.clock.Now()}} {
		if err := StatusText(&text, c.e, c.now); err != nil {
			t.Fatal(err)
		}
	}
	golden(t, "status-queue.txt", text.String())

	var md bytes.Buffer
	if err := JobSummary(&md, Summary{Env: queueEnv, Now: queue.clock.Now(), Headline: "Generation 3 is queued: 2 ahead of this commit."}); err != nil {
		t.Fatal(err)
	}
	if err := JobSummary(&md, Summary{Env: blockedEnv, Now: blocked.clock.Now(), Headline: "Generation 3 is blocked."}); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary-queue.md", md.String())
}

// A rollback's freeze shows on its row in every rendering, and the commits it holds say so.
func TestStatusShowsAFreeze(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rb := &authority.Ref{Generation: 3, Sha: "aaaa1110000000000000000000000000000000000", Rollback: true, Barrier: true}
	held := &authority.Ref{Generation: 4, Sha: "cccc3330000000000000000000000000000000000"}
	e := &authority.Env{Name: "prod", Desired: 4, Observed: 2, Scopes: map[string]*authority.Scope{"api": {
		Mailbox: rb, Queue: []*authority.Ref{held}, Owner: 3,
		Freeze: &authority.Freeze{Generation: 3, Sha: rb.Sha, Actor: "oncall", Reason: "B breaks checkout", At: now}}}}
	st := NewStatus(e, now)
	row := st.Rows[0]
	if !strings.Contains(row.Frozen, "frozen by the rollback to aaaa111 (oncall: B breaks checkout)") || !row.Pending[0].Rollback ||
		!strings.Contains(row.Pending[1].Wait, "held by a freeze") {
		t.Fatalf("row %+v", row)
	}
	var text, md strings.Builder
	if err := StatusText(&text, e, now); err != nil {
		t.Fatal(err)
	}
	if err := StatusMarkdown(&md, e, now, nil); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "markdown": md.String()} {
		for _, want := range []string{"rollback", "frozen by the rollback to", "until unfreeze (freeze 3)", "held by a freeze"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s does not say %q:\n%s", name, want, out)
			}
		}
	}
}

// A deployment status of a deployment latestwins never approved is shown as the scope's warning on
// every rendering, and nothing is shown live for it.
func TestStatusShowsAnUnapprovedDeployment(t *testing.T) {
	s := newScenario(t, "production")
	s.accept("push-1", shaB1, authority.PolicyLatest, false)
	if _, err := s.auth.Report(s.ctx, authority.Report{ID: "d-1", Environment: "production", Scopes: []string{"api"}, Sha: shaB1, Deployment: 77, Success: true}); err != nil {
		t.Fatal(err)
	}
	e, err := s.auth.Status(s.ctx, "production")
	if err != nil {
		t.Fatal(err)
	}
	want := "deployment 77 of abc1234 reported success, but latestwins never approved it: not counted as live"
	if row := NewStatus(e, t0).Rows[0]; row.Warning != want || row.Live != nil {
		t.Fatalf("row: warning %q, live %+v; want %q and nothing live", row.Warning, row.Live, want)
	}
	var text, md bytes.Buffer
	if err := StatusText(&text, e, t0); err != nil {
		t.Fatal(err)
	}
	if err := StatusMarkdown(&md, e, t0, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "warning: api: "+want) || !strings.Contains(md.String(), "api: "+want) {
		t.Errorf("text:\n%s\nmarkdown:\n%s\nwant the warning in both", text.String(), md.String())
	}
}
