package authority_test

import (
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

const (
	shaA = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1"
	shaB = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2"
)

// approvalWorld is one Authority over a memory store and a fake clock.
type approvalWorld struct {
	t     *testing.T
	ctx   context.Context
	a     *authority.Authority
	clock *storetest.Clock
}

func newApprovalWorld(t *testing.T) *approvalWorld {
	clock := storetest.NewClock(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	return &approvalWorld{t: t, ctx: t.Context(), a: authority.New(memory.New(), authority.WithClock(clock), authority.WithSkew(time.Second)), clock: clock}
}

// push accepts sha pushed by actor for production's api under rule, claimed.
func (w *approvalWorld) push(id, sha, actor string, rule *authority.ApprovalRule, scopes ...string) int64 {
	w.t.Helper()
	if len(scopes) == 0 {
		scopes = []string{"api"}
	}
	res, err := w.a.Accept(w.ctx, authority.Intent{ID: id, Environment: "production", Scopes: scopes, Sha: sha, Ref: "refs/heads/main",
		Source: "push", Actor: actor, Gates: &authority.Gates{Approvals: rule}}, true)
	if err != nil {
		w.t.Fatalf("accept %s: %v", id, err)
	}
	return res.Generation
}

// gate asks for the deploy gate of gen in api: nil when it may deploy, else the approval it waits for.
func (w *approvalWorld) gate(gen int64) *authority.HeldError {
	w.t.Helper()
	_, err := w.a.Gate(w.ctx, authority.GateRequest{Environment: "production", Generation: gen, Scopes: []string{"api"}, Phase: "deploy",
		Holder: "run", LeaseTTL: time.Minute})
	if err == nil {
		return nil
	}
	var held *authority.HeldError
	if !errors.As(err, &held) || held.Reason != authority.ReasonApproval || held.Approval == nil {
		w.t.Fatalf("gate of %d: %v; want it held for approval", gen, err)
	}
	return held
}

func (w *approvalWorld) approve(login, sha string, scopes ...string) *authority.CommitApprovalResult {
	w.t.Helper()
	res, err := w.a.ApproveCommit(w.ctx, authority.CommitApprovalRequest{Environment: "production", Sha: sha, Scopes: scopes, Login: login, Door: authority.ApprovalDoorCLI})
	if err != nil {
		w.t.Fatalf("approve %s by %s: %v", sha[:7], login, err)
	}
	return res
}

func (w *approvalWorld) events(kind authority.EventKind) []authority.Event {
	w.t.Helper()
	page, err := w.a.History(w.ctx, "production", 0, 500)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []authority.Event
	for _, e := range page.Events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// A commit deploys only after N distinct people approved it there; the refusal says how many
// approved, who, and the commands that approve it; the same person twice counts once.
func TestApprovalsHoldUntilDistinctPeopleApproved(t *testing.T) {
	w := newApprovalWorld(t)
	gen := w.push("push-a", shaA, "pusher", &authority.ApprovalRule{Count: 2})
	held := w.gate(gen)
	want := "production/api: waiting for approval: 0 of 2 (latestwins approve production --sha a1a1a1a, or comment /latestwins approve production a1a1a1a); retry after 30s"
	if held.Error() != want {
		t.Fatalf("held: %s\nwant:  %s", held, want)
	}
	res := w.approve("alice", shaA[:7])
	if diff := cmp.Diff([]authority.ScopeApproval{{Scope: "api", Generation: gen, Sha: shaA, By: []string{"alice"}, Need: 1, Count: 2}}, res.Scopes); diff != "" {
		t.Fatalf("first approval (-want +got):\n%s", diff)
	}
	if held = w.gate(gen); !strings.Contains(held.Error(), "waiting for approval: 1 of 2, approved by alice (") {
		t.Fatalf("after one approval: %s", held)
	}
	for _, again := range []string{"alice", "Alice"} {
		if res := w.approve(again, shaA); !res.Scopes[0].Repeat || res.Scopes[0].Need != 1 {
			t.Fatalf("a repeat by %s: %+v; want a repeat that changes nothing", again, res.Scopes[0])
		}
		if held := w.gate(gen); held == nil || held.Approval.Need != 1 {
			t.Fatalf("a repeat by %s let it go, or changed the count: %v", again, held)
		}
	}
	if res := w.approve("bob", shaA); res.Scopes[0].Need != 0 || !cmp.Equal(res.Scopes[0].By, []string{"alice", "bob"}) {
		t.Fatalf("second approval: %+v", res.Scopes[0])
	}
	if held := w.gate(gen); held != nil {
		t.Fatalf("approved by two people, still held: %s", held)
	}
	ev := w.events(authority.EventApprovedCommit)
	if len(ev) != 2 || !strings.Contains(ev[0].Message, "approved by alice through the command line") || !strings.Contains(ev[1].Message, "bob") ||
		!strings.Contains(ev[1].Message, "2 of 2 approvals") || ev[1].Sha != shaA || ev[1].Scope != "api" || ev[1].Generation != gen {
		t.Fatalf("approval events %+v; want one per new approval, with who approved what", ev)
	}
	env, err := w.a.Status(w.ctx, "production")
	if err != nil {
		t.Fatal(err)
	}
	if got := authority.ApprovalsOf(env.Scopes["api"].Mailbox); !cmp.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("approvals kept on the commit: %v", got)
	}
	if a := env.Scopes["api"].Mailbox.Approvals[0]; a.Door != authority.ApprovalDoorCLI || !a.At.Equal(w.clock.Now()) {
		t.Fatalf("approval %+v; want the door and the time", a)
	}
}

// With pusher-may-approve: false the pusher's own approval is recorded but does not count; by
// default it does.
func TestApprovalsPusherOwnApproval(t *testing.T) {
	w := newApprovalWorld(t)
	gen := w.push("push-a", shaA, "pusher", &authority.ApprovalRule{Count: 1, ExcludePusher: true})
	res := w.approve("Pusher", shaA)
	if s := res.Scopes[0]; !s.Pusher || s.Need != 1 || len(s.By) != 0 {
		t.Fatalf("the pusher's approval: %+v; want it not counted", s)
	}
	if held := w.gate(gen); held == nil || held.Approval.Need != 1 || !held.Approval.ExcludePusher {
		t.Fatalf("the pusher's own approval let it go: %v", held)
	}
	if ev := w.events(authority.EventApprovedCommit); len(ev) != 1 || !strings.Contains(ev[0].Message, "the pusher's own approval does not count") {
		t.Fatalf("events %+v", ev)
	}
	w.approve("carol", shaA)
	if held := w.gate(gen); held != nil {
		t.Fatalf("approved by another person, still held: %s", held)
	}

	d := newApprovalWorld(t)
	gen = d.push("push-a", shaA, "pusher", &authority.ApprovalRule{Count: 1})
	d.approve("pusher", shaA)
	if held := d.gate(gen); held != nil {
		t.Fatalf("by default the pusher may approve, yet: %s", held)
	}
}

// An approval belongs to one commit: a newer commit needs its own, and a commit superseded while
// waiting drops out with its approvals (the newest waits); approving it then says what is pending.
func TestApprovalsBelongToOneCommit(t *testing.T) {
	w := newApprovalWorld(t)
	rule := &authority.ApprovalRule{Count: 1}
	genA := w.push("push-a", shaA, "pusher", rule)
	w.approve("alice", shaA)
	w.clock.Advance(time.Minute) // pushed later: it has waited since the older one was accepted
	genB := w.push("push-b", shaB, "pusher", rule)
	held := w.gate(genB)
	if held == nil || held.Approval.Sha != shaB || held.Approval.Need != 1 || len(held.Approval.By) != 0 {
		t.Fatalf("the newer commit: %v; want it waiting for its own approval", held)
	}
	_, err := w.a.ApproveCommit(w.ctx, authority.CommitApprovalRequest{Environment: "production", Sha: shaA, Login: "bob", Door: authority.ApprovalDoorCLI})
	var ie *authority.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "a1a1a1a is not pending in production; pending there: b2b2b2b in api (generation 2)") {
		t.Fatalf("approving the superseded commit: %v; want an InputError naming what is pending", err)
	}
	if _, err := w.a.Gate(w.ctx, authority.GateRequest{Environment: "production", Generation: genA, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-a", LeaseTTL: time.Minute}); !errors.Is(err, authority.ErrSuperseded) {
		t.Fatalf("the superseded commit's gate: %v", err)
	}
	w.approve("alice", shaB)
	if held := w.gate(genB); held != nil {
		t.Fatalf("approved, still held: %s", held)
	}
}

// Approving what is not pending, where the environment needs no approvals, or in a scope that
// does not have the commit is an InputError that says why.
func TestApprovalsRefusals(t *testing.T) {
	w := newApprovalWorld(t)
	cases := []struct {
		name string
		req  authority.CommitApprovalRequest
		want string
	}{
		{"unknown environment", authority.CommitApprovalRequest{Environment: "production", Sha: shaA, Login: "alice", Door: authority.ApprovalDoorCLI},
			"unknown environment"},
		{"no login", authority.CommitApprovalRequest{Environment: "production", Sha: shaA, Door: authority.ApprovalDoorCLI}, "an approval is a person's"},
		{"a token is not a door", authority.CommitApprovalRequest{Environment: "production", Sha: shaA, Login: "alice", Door: "api"}, "approvals come from people"},
		{"short sha", authority.CommitApprovalRequest{Environment: "production", Sha: "a1a1", Login: "alice", Door: authority.ApprovalDoorCLI}, "at least its first 7"},
	}
	for _, c := range cases {
		_, err := w.a.ApproveCommit(w.ctx, c.req)
		if !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want an InputError saying %q", c.name, err, c.want)
		}
	}
	w.push("push-0", shaB, "pusher", nil, "api", "web")
	if _, err := w.a.ApproveCommit(w.ctx, authority.CommitApprovalRequest{Environment: "production", Sha: shaB, Login: "alice", Door: authority.ApprovalDoorCLI}); !errors.Is(err, authority.ErrInvalidInput) ||
		!strings.Contains(err.Error(), "production needs no approvals") {
		t.Errorf("approval where none is needed: %v", err)
	}
	w.push("push-a", shaA, "pusher", &authority.ApprovalRule{Count: 1}, "api")
	_, err := w.a.ApproveCommit(w.ctx, authority.CommitApprovalRequest{Environment: "production", Sha: shaA, Scopes: []string{"web"}, Login: "alice", Door: authority.ApprovalDoorCLI})
	if !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), "a1a1a1a is not pending in production/web; pending there: b2b2b2b in web (generation 1)") {
		t.Errorf("approval in a scope without the commit: %v", err)
	}
	if res := w.approve("alice", shaA); len(res.Scopes) != 1 || res.Scopes[0].Scope != "api" {
		t.Errorf("approval in every scope where it is pending: %+v", res.Scopes)
	}
}

// A rollback is the way back from a bad deploy: no approval holds it.
func TestApprovalsNeverHoldARollback(t *testing.T) {
	w := newApprovalWorld(t)
	rule := &authority.ApprovalRule{Count: 1}
	for i, sha := range []string{shaA, shaB} {
		gen := w.push("push-"+sha[:1], sha, "pusher", rule)
		w.approve("alice", sha)
		g, err := w.a.Gate(w.ctx, authority.GateRequest{Environment: "production", Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: "run", LeaseTTL: time.Minute})
		if err != nil {
			t.Fatalf("deploy %d: %v", i, err)
		}
		if _, err := w.a.Complete(w.ctx, authority.Completion{Environment: "production", Generation: gen, Scopes: []string{"api"}, Holder: "run", Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	rb, err := w.a.Rollback(w.ctx, authority.RollbackRequest{Environment: "production", Scope: "api", Actor: "oncall", Reason: "b2b2b2b breaks checkout"})
	if err != nil {
		t.Fatal(err)
	}
	if held := w.gate(rb.Generation); held != nil {
		t.Fatalf("the rollback was held: %s", held)
	}
}

// Approvers named by login are re-checked by the evaluator: an approval by someone else (an
// operator's --actor, say) is recorded but does not count.
func TestApprovalsApproversRecheckedByLogin(t *testing.T) {
	w := newApprovalWorld(t)
	gen := w.push("push-a", shaA, "pusher", &authority.ApprovalRule{Count: 1, Approvers: []string{"alice", "bob"}})
	if res := w.approve("mallory", shaA); res.Scopes[0].Need != 1 {
		t.Fatalf("an approval by someone not among the approvers counted: %+v", res.Scopes[0])
	}
	if held := w.gate(gen); held == nil {
		t.Fatal("an approval by someone not among the approvers let it go")
	}
	w.approve("BOB", shaA)
	if held := w.gate(gen); held != nil {
		t.Fatalf("approved by an approver, still held: %s", held)
	}
}

// The rule's bounds, as a configuration maker gives it through an intent.
func TestApprovalRuleValidation(t *testing.T) {
	cases := []struct {
		rule authority.ApprovalRule
		want string // "" valid
	}{
		{authority.ApprovalRule{Count: 1}, ""},
		{authority.ApprovalRule{}, ""}, // removes the gate
		{authority.ApprovalRule{Count: 10, Approvers: []string{"@acme/sre"}}, ""},
		{authority.ApprovalRule{Count: 11}, "between 1 and 10"},
		{authority.ApprovalRule{Count: -1}, "between 1 and 10"},
		{authority.ApprovalRule{Approvers: []string{"alice"}}, "need approvals: N"},
		{authority.ApprovalRule{Count: 1, Approvers: []string{"-alice"}}, "teams as @org/team-slug"},
		{authority.ApprovalRule{Count: 1, Approvers: []string{"@acme"}}, "teams as @org/team-slug"},
		{authority.ApprovalRule{Count: 1, Approvers: []string{"alice", "Alice"}}, "each approver once"},
		{authority.ApprovalRule{Count: 2, Approvers: []string{"alice"}}, "can never come from the 1 approvers"},
	}
	for _, c := range cases {
		rule := c.rule
		_, err := authority.New(memory.New()).Accept(t.Context(), authority.Intent{ID: "x", Environment: "production", Scopes: []string{"api"}, Sha: shaA,
			Gates: &authority.Gates{Approvals: &rule}}, false)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.rule, err)
		case c.want != "" && (!errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: %v; want an InputError saying %q", c.rule, err, c.want)
		}
	}
}

// The approvals are stored with the commit, and read back whole.
func TestApprovalsStored(t *testing.T) {
	w := newApprovalWorld(t)
	w.push("push-a", shaA, "pusher", &authority.ApprovalRule{Count: 2, Approvers: []string{"alice", "@acme/sre"}, ExcludePusher: true})
	w.approve("alice", shaA)
	env, err := w.a.Status(w.ctx, "production")
	if err != nil {
		t.Fatal(err)
	}
	b, err := authority.EncodeEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	back, err := authority.DecodeEnv(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env.Scopes["api"].Mailbox.Approvals, back.Scopes["api"].Mailbox.Approvals); diff != "" {
		t.Errorf("approvals after a round trip (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(env.Gates, back.Gates); diff != "" {
		t.Errorf("gates after a round trip (-want +got):\n%s", diff)
	}
	if got := env.Gates.String(); got != "approvals 2 by alice, @acme/sre (not the pusher)" {
		t.Errorf("the rule says %q", got)
	}
}
