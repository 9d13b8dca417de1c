package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 4: a pass at G enters its next phase for S iff owner[S] == G and nothing newer than G
// was accepted for S. A superseded pass may finish the step it is in, never start the next one,
// and never changes live state.
func authorityCases() []testCase {
	return []testCase{
		{"SupersededPassStops", testSupersededPassStops},
		{"SupersededPassCannotPublish", testSupersededCannotPublish},
		{"UnclaimedPassStops", testUnclaimedPassStops},
		{"Property", testProperty},
	}
}

// wantSuperseded fails the test unless err is a *SupersededError for scope at gen, by the
// generation and sha given.
func wantSuperseded(t *testing.T, err error, scope string, gen, by int64, bySha string) {
	t.Helper()
	var sup *authority.SupersededError
	if !errors.As(err, &sup) || !errors.Is(err, authority.ErrSuperseded) {
		t.Fatalf("got %v; want a *SupersededError matching ErrSuperseded", err)
	}
	if sup.Scope != scope || sup.Generation != gen || sup.By != by || sup.BySha != bySha {
		t.Fatalf("refusal %+v; want scope %s, generation %d superseded by %d (%s)", sup, scope, gen, by, bySha)
	}
}

func testSupersededPassStops(t *testing.T, h *harness) {
	a, b := h.process(), h.process()
	passA := h.accept(a, push("staging", "run-a", sha("a", 1), "api"), true)
	if _, err := a.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: passA.Generation, Scopes: []string{"api"}, Phase: "build"}); err != nil {
		t.Fatalf("pass A's build gate: %v", err)
	}

	// B is accepted while A builds: A may not deploy, with or without a lease.
	passB := h.accept(b, push("staging", "run-b", sha("b", 2), "api"), false)
	for _, ttl := range []time.Duration{0, testTTL} {
		_, err := a.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: passA.Generation, Scopes: []string{"api"},
			Phase: "deploy", Holder: "run-a", LeaseTTL: ttl})
		wantSuperseded(t, err, "api", passA.Generation, passB.Generation, sha("b", 2))
	}
	if l := h.scope("staging", "api").Lease; l.Holder != "" || l.Token != 0 {
		t.Fatalf("a superseded pass got a lease: %+v", l)
	}
	stopped := eventsOf(h.env("staging"), authority.EventStopped)
	if len(stopped) != 1 || stopped[0].Generation != passA.Generation {
		t.Fatalf("stopped events %+v; want one for pass A (asking twice writes one line)", stopped)
	}

	// Once B has claimed, A is still refused, by B.
	h.claim(b, "staging", passB.Generation, "api")
	_, err := h.process().Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: passA.Generation, Scopes: []string{"api"}, Phase: "publish"})
	wantSuperseded(t, err, "api", passA.Generation, passB.Generation, sha("b", 2))

	// After B deployed, A is refused naming B's live commit.
	g := h.gate(b, "staging", passB.Generation, "run-b", "api")
	h.complete(b, g, authority.OutcomeSuccess, "run-b")
	_, err = a.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: passA.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-a", LeaseTTL: testTTL})
	wantSuperseded(t, err, "api", passA.Generation, passB.Generation, sha("b", 2))
}

func testSupersededCannotPublish(t *testing.T, h *harness) {
	a, b := h.process(), h.process()
	// api has a live commit from an earlier pass.
	h.accept(a, push("staging", "run-0", sha("z", 0), "api", "web"), false)
	h.deploy(a, "staging", 1, "run-0", "run-0", "api", "web")

	passA := h.accept(a, push("staging", "run-a", sha("a", 1), "api"), true)
	grantA := h.gate(a, "staging", passA.Generation, "run-a", "api")
	passB := h.accept(b, push("staging", "run-b", sha("b", 1), "api"), false)

	// A is deploying when B arrives: it may finish its step, renewing its lease...
	h.clock.Advance(testTTL / 2)
	if err := a.Renew(h.ctx, grantA, testTTL); err != nil {
		t.Fatalf("a superseded pass renewing the lease of the step it is in: %v", err)
	}
	before := h.env("staging")

	// ...but no failure it reports is published: B's intent is what the scope is waiting for.
	for _, c := range []authority.Completion{
		{Outcome: authority.OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "boom"},
		{Outcome: authority.OutcomeInvalid, Message: "bad config"},
	} {
		c.Environment, c.Generation, c.Scopes, c.Holder, c.Run = "staging", passA.Generation, []string{"api"}, "run-a", "run-a"
		res, err := a.Complete(h.ctx, c)
		if err != nil {
			t.Fatalf("complete %s by a superseded pass: %v", c.Outcome, err)
		}
		if res.Results["api"] != authority.ResultSuperseded {
			t.Fatalf("complete %s by a superseded pass: result %s, want superseded", c.Outcome, res.Results["api"])
		}
		wantSuperseded(t, res.Superseded["api"], "api", passA.Generation, passB.Generation, sha("b", 1))
		after := h.env("staging")
		for _, s := range []string{"api", "web"} {
			if diff := cmp.Diff(before.Scopes[s].Live, after.Scopes[s].Live); diff != "" {
				t.Fatalf("a superseded pass changed %s's live state (-before +after):\n%s", s, diff)
			}
			if diff := cmp.Diff(before.Scopes[s].Mailbox, after.Scopes[s].Mailbox); diff != "" {
				t.Fatalf("a superseded pass changed %s's mailbox (-before +after):\n%s", s, diff)
			}
			if after.Scopes[s].Failure != nil || after.Scopes[s].Owner != before.Scopes[s].Owner {
				t.Fatalf("a superseded pass changed %s: failure %+v, owner %d (was %d)", s, after.Scopes[s].Failure, after.Scopes[s].Owner, before.Scopes[s].Owner)
			}
		}
		if after.Observed != before.Observed || after.Desired != before.Desired {
			t.Fatalf("a superseded pass moved the counters: %d/%d, was %d/%d", after.Observed, after.Desired, before.Observed, before.Desired)
		}
	}
	// A's deploy, finished under its valid grant, is what the target serves now: it is recorded as
	// live (guarantee 5), while B's newer intent stays pending and owned as it was.
	res, err := a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: passA.Generation, Scopes: []string{"api"},
		Holder: "run-a", Tokens: grantA.Tokens, Outcome: authority.OutcomeSuccess, Run: "run-a"})
	if err != nil || res.Results["api"] != authority.ResultDeployed {
		t.Fatalf("complete success by a pass superseded while it deployed under its grant: %+v, %v; want deployed", res, err)
	}
	after := h.env("staging")
	if l := after.Scopes["api"].Live; l == nil || l.Sha != sha("a", 1) || l.Generation != passA.Generation || l.Token != grantA.Tokens["api"] {
		t.Fatalf("api live %+v; want A's commit at generation %d with token %d", l, passA.Generation, grantA.Tokens["api"])
	}
	if diff := cmp.Diff(before.Scopes["api"].Mailbox, after.Scopes["api"].Mailbox); diff != "" {
		t.Fatalf("recording A's deploy changed the pending intent (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(before.Scopes["web"], after.Scopes["web"]); diff != "" {
		t.Fatalf("recording A's deploy on api changed web (-before +after):\n%s", diff)
	}
	if after.Observed != before.Observed || after.Desired != before.Desired || after.Scopes["api"].Lease.Holder != "" {
		t.Fatalf("after A's deploy: %d/%d (was %d/%d), lease %+v; want the counters kept and the lease released",
			after.Observed, after.Desired, before.Observed, before.Desired, after.Scopes["api"].Lease)
	}
	// Repeating that completion (its answer was lost) reports the same result and changes nothing.
	res, err = a.Complete(h.ctx, authority.Completion{Environment: "staging", Generation: passA.Generation, Scopes: []string{"api"},
		Holder: "run-a", Tokens: grantA.Tokens, Outcome: authority.OutcomeSuccess, Run: "run-a"})
	if err != nil || res.Results["api"] != authority.ResultDeployed {
		t.Fatalf("a repeated completion: %+v, %v; want deployed again", res, err)
	}
	if diff := cmp.Diff(after, h.env("staging")); diff != "" {
		t.Fatalf("a repeated completion changed the environment (-before +after):\n%s", diff)
	}
	// B goes on and deploys its commit.
	h.deploy(b, "staging", passB.Generation, "run-b", "run-b", "api")
	if l := h.scope("staging", "api").Live; l.Sha != sha("b", 1) || l.Generation != passB.Generation {
		t.Fatalf("api live %+v; want B's commit at generation %d", l, passB.Generation)
	}
}

// testUnclaimedPassStops: a pass that never claimed a scope may not enter a phase for it.
func testUnclaimedPassStops(t *testing.T, h *harness) {
	a := h.process()
	res := h.accept(a, push("staging", "run-a", sha("a", 1), "api"), false)
	_, err := a.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-a", LeaseTTL: testTTL})
	if !errors.Is(err, authority.ErrSuperseded) {
		t.Fatalf("gate of an unclaimed scope: %v; want a refusal matching ErrSuperseded", err)
	}
	// A scope the environment has never had is a typo: bad input that names the scopes it has.
	_, err = a.Gate(h.ctx, authority.GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"never-seen"}, Phase: "deploy"})
	if !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), "it has api") {
		t.Fatalf("gate of an unknown scope: %v; want invalid input naming the scopes there are", err)
	}
	if l := h.scope("staging", "api").Lease; l.Holder != "" {
		t.Fatalf("an unclaimed pass got a lease: %+v", l)
	}
}
