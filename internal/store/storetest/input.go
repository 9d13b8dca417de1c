package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 8, bad input: invalid names, an unknown environment and a generation out of range are
// refused with an error matching ErrInvalidInput whose message says what to fix, and nothing is
// written.
func inputCases() []testCase {
	return []testCase{
		{"Refused", testInputErrors},
	}
}

func testInputErrors(t *testing.T, h *harness) {
	a := h.process()
	h.accept(a, push("staging", "d1", sha("a", 1), "api"), true)
	h.accept(a, push("staging", "d2", sha("a", 2), "web"), false)
	const desired = 2
	good := push("staging", "d9", sha("a", 9), "api")
	with := func(f func(*authority.Intent)) authority.Intent {
		in := good
		in.Scopes = append([]string{}, good.Scopes...)
		f(&in)
		return in
	}
	gate := func(r authority.GateRequest) error {
		_, err := a.Gate(h.ctx, r)
		return err
	}
	complete := func(c authority.Completion) error {
		_, err := a.Complete(h.ctx, c)
		return err
	}
	okGate := authority.GateRequest{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1", LeaseTTL: testTTL}

	cases := []struct {
		name string
		// field is what the message must name; mention is a further word of the fix it must contain.
		field, mention string
		call           func() error
	}{
		{"empty environment", "environment", "", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.Environment = "" }), false)
			return err
		}},
		{"environment with a space", "environment", "staging env", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.Environment = "staging env" }), false)
			return err
		}},
		{"environment starting with a dash", "environment", "", func() error { _, err := a.Claim(h.ctx, "-staging", 1, nil); return err }},
		{"environment with an empty segment", "environment", "", func() error { _, err := a.Claim(h.ctx, "preview//pr-1", 1, nil); return err }},
		{"environment ending in a slash", "environment", "", func() error { _, err := a.Status(h.ctx, "preview/"); return err }},
		{"environment too long", "environment", "128", func() error { _, err := a.Status(h.ctx, strings.Repeat("e", 129)); return err }},
		{"scope with a slash", "scope", "api/v2", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.Scopes = []string{"api/v2"} }), false)
			return err
		}},
		{"no scopes", "scope", "", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.Scopes = nil }), false)
			return err
		}},
		{"scope twice", "scope", "once", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.Scopes = []string{"api", "api"} }), false)
			return err
		}},
		{"empty scope in gate", "scope", "", func() error { r := okGate; r.Scopes = []string{""}; return gate(r) }},
		{"bad sha", "sha", "", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.Sha = "not a sha" }), false)
			return err
		}},
		{"abbreviated sha", "sha", "git rev-parse HEAD", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.Sha = in.Sha[:7] }), false)
			return err
		}},
		{"uppercase sha", "sha", "40 hex digits", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.Sha = strings.ToUpper(in.Sha) }), false)
			return err
		}},
		{"abbreviated parent", "before", "full sha", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.Before = sha("a", 1)[:7] }), false)
			return err
		}},
		{"abbreviated approval", "sha", "40 hex digits", func() error {
			return a.Approve(h.ctx, authority.Approval{Environment: "staging", Scopes: []string{"api"}, Sha: sha("a", 1)[:7], Deployment: 7})
		}},
		{"abbreviated report", "sha", "40 hex digits", func() error {
			_, err := a.Report(h.ctx, authority.Report{ID: "delivery-7", Environment: "staging", Scopes: []string{"api"}, Sha: sha("a", 1)[:7], Deployment: 7, Success: true})
			return err
		}},
		{"no intent id", "intent-id", "", func() error {
			_, err := a.Accept(h.ctx, with(func(in *authority.Intent) { in.ID = "" }), false)
			return err
		}},
		{"unknown environment in claim", "environment", "accepted", func() error { _, err := a.Claim(h.ctx, "prod", 1, []string{"api"}); return err }},
		{"unknown environment in gate", "environment", "accepted", func() error { r := okGate; r.Environment = "prod"; return gate(r) }},
		{"unknown environment in status", "environment", "prod", func() error { _, err := a.Status(h.ctx, "prod"); return err }},
		{"unknown environment in policy", "environment", "accepted", func() error {
			_, err := a.SetPolicy(h.ctx, "prod", authority.PolicyQueue, "octocat")
			return err
		}},
		{"generation 0", "generation", "1 to 2", func() error { r := okGate; r.Generation = 0; return gate(r) }},
		{"negative generation", "generation", "1 to 2", func() error { _, err := a.Claim(h.ctx, "staging", -1, nil); return err }},
		{"generation beyond desired", "generation", "1 to 2", func() error { _, err := a.Claim(h.ctx, "staging", desired+1, nil); return err }},
		{"generation beyond desired in complete", "generation", "1 to 2", func() error {
			return complete(authority.Completion{Environment: "staging", Generation: desired + 7, Scopes: []string{"api"}, Outcome: authority.OutcomeLost})
		}},
		{"bad phase", "phase", "deploy", func() error { r := okGate; r.Phase = "Deploy!"; return gate(r) }},
		{"no holder for a lease", "holder", "", func() error { r := okGate; r.Holder = ""; return gate(r) }},
		{"success without a token", "token", "lease", func() error {
			return complete(authority.Completion{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Outcome: authority.OutcomeSuccess})
		}},
		{"failure without attempts", "attempt", "max-attempts", func() error {
			return complete(authority.Completion{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Outcome: authority.OutcomeFailure})
		}},
		{"unknown outcome", "outcome", "success", func() error {
			return complete(authority.Completion{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Outcome: "ok"})
		}},
		{"unlock without a reason", "reason", "", func() error { _, err := a.Unlock(h.ctx, "staging/api", "", "octocat"); return err }},
		{"lease without a TTL", "lease-ttl", "", func() error { _, err := a.Acquire(h.ctx, "refresh", "host-1", "refresh", 0); return err }},
		{"lease without a name", "lease", "", func() error { _, err := a.Acquire(h.ctx, "", "host-1", "refresh", testTTL); return err }},
	}
	before := h.doc(authority.EnvKey("staging"))
	_, puts := h.store.requests()
	for _, c := range cases {
		err := c.call()
		var in *authority.InputError
		if !errors.Is(err, authority.ErrInvalidInput) || !errors.As(err, &in) {
			t.Errorf("%s: %v; want an *InputError matching ErrInvalidInput", c.name, err)
			continue
		}
		msg := err.Error()
		if in.Fix == "" || !strings.Contains(msg, in.Fix) || !strings.Contains(msg, c.field) || !strings.Contains(msg, c.mention) {
			t.Errorf("%s: message %q; want it to name %q and say what to fix (mentioning %q)", c.name, msg, c.field, c.mention)
		}
	}
	if _, after := h.store.requests(); after != puts {
		t.Errorf("refused input wrote %d times; want no write", after-puts)
	}
	if d := h.doc(authority.EnvKey("staging")); d.Rev != before.Rev {
		t.Errorf("refused input changed staging: revision %d, was %d", d.Rev, before.Rev)
	}
	for _, env := range []string{"prod", "-staging"} {
		if _, err := h.store.Get(h.ctx, authority.EnvKey(env)); !errors.Is(err, authority.ErrNotFound) {
			t.Errorf("refused input about %q created a document: %v", env, err)
		}
	}
}
