package cli

import (
	"context"
	"strings"
	"testing"
)

// --approvals holds a commit until people approve it with `latestwins approve`: the waiting run
// says so and how to approve, the approval by another person lets it go, a repeat changes nothing,
// and --approvals 0 removes the gate.
func TestApproveFromTheCommandLine(t *testing.T) {
	h := newHarness(t)
	const a, b = "aaaa111000000000000000000000000000000000", "bbbb222000000000000000000000000000000000"
	held := h.held("run", "--environment", "prod", "--scopes", "api", "--sha", a, "--intent-id", "a", "--actor", "pusher",
		"--approvals", "2", "--pusher-may-approve", "false", "--wait", "0s", "--", "true")
	if !strings.Contains(held.stderr, "waiting for approval: 0 of 2 (latestwins approve prod --sha aaaa111, or comment /latestwins approve prod aaaa111)") {
		t.Fatalf("a run waiting for approval said:\n%s", held.stderr)
	}

	h.must(ExitUsage, "approve", "prod", "--sha", "aaaa111")                                        // no actor
	h.must(ExitUsage, "approve", "--sha", "aaaa111", "--actor", "alice")                            // no environment
	h.must(ExitUsage, "approve", "prod", "--sha", "aaaa111", "--actor", "not a login")              // not a person's login
	h.must(ExitUsage, "approve", "prod", "--sha", "aaaa111", "--actor", "alice", "--scopes", "web") // no such scope
	if o := h.must(ExitUsage, "approve", "prod", "--sha", "cccc333", "--actor", "alice"); !strings.Contains(o.stderr, "cccc333 is not pending in prod; pending there: aaaa111 in api (generation 1)") {
		t.Errorf("approving what is not pending said:\n%s", o.stderr)
	}
	h.vars["LATESTWINS_API"] = "https://latestwins.example.com"
	if o := h.must(ExitUsage, "approve", "prod", "--sha", "aaaa111", "--actor", "alice"); !strings.Contains(o.stderr, "the App's API takes no approvals: approvals come from people, not workflow tokens") {
		t.Errorf("approving through the API said:\n%s", o.stderr)
	}
	delete(h.vars, "LATESTWINS_API")

	if o := h.must(ExitOK, "approve", "prod", "--sha", "aaaa111", "--actor", "pusher"); !strings.Contains(o.stdout, "pusher pushed it, and the pusher's own approval does not count here; 0 of 2 approvals: 2 more needed") {
		t.Errorf("the pusher's approval said:\n%s", o.stdout)
	}
	if o := h.must(ExitOK, "approve", "prod", "--sha", a, "--actor", "alice"); !strings.Contains(o.stdout, "prod/api: alice approved aaaa111 (generation 1); 1 of 2 approvals (alice): 1 more needed") {
		t.Errorf("the first approval said:\n%s", o.stdout)
	}
	if o := h.must(ExitOK, "approve", "prod", "--sha", "aaaa111", "--actor", "alice"); !strings.Contains(o.stdout, "alice had approved aaaa111 (generation 1) already; nothing changed; 1 of 2 approvals") {
		t.Errorf("a repeat said:\n%s", o.stdout)
	}
	st := h.must(ExitOK, "status", "prod")
	if !strings.Contains(st.stdout, "waiting for approval: 1 of 2, approved by alice (latestwins approve prod --sha aaaa111") {
		t.Errorf("status does not show who approved:\n%s", st.stdout)
	}
	if o := h.must(ExitOK, "approve", "prod", "--sha", "aaaa111", "--actor", "bob", "--scopes", "api"); !strings.Contains(o.stdout, "2 of 2 approvals (alice, bob): it may deploy") {
		t.Errorf("the second approval said:\n%s", o.stdout)
	}
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", a, "--intent-id", "a", "--actor", "pusher", "--", "true")
	hist := h.must(ExitOK, "history", "prod")
	for _, want := range []string{"aaaa111 (generation 1) approved by alice through the command line (latestwins approve): 1 of 2 approvals",
		"approved by bob", "Gates changed from none to approvals 2 (not the pusher)"} {
		if !strings.Contains(hist.stdout, want) {
			t.Errorf("history does not say %q:\n%s", want, hist.stdout)
		}
	}

	// The next commit needs its own approvals, until the gate is removed.
	if o := h.held("run", "--environment", "prod", "--scopes", "api", "--sha", b, "--intent-id", "b", "--wait", "0s", "--", "true"); !strings.Contains(o.stderr, "waiting for approval: 0 of 2") {
		t.Errorf("the next commit's run said:\n%s", o.stderr)
	}
	h.must(ExitOK, "run", "--environment", "prod", "--scopes", "api", "--sha", b, "--intent-id", "b-again", "--approvals", "0", "--", "true")
	if m := h.status("prod"); scopeField(m, "api", "live").(map[string]any)["sha"] != b {
		t.Fatalf("after --approvals 0: %v", m)
	}
}

// held runs a command that must end held at the gate: it deployed nothing and it is no error of
// the program or its input (the exit code of a hold, locked or lasting).
func (h *harness) held(args ...string) outcome {
	h.t.Helper()
	o := h.run(context.Background(), args...)
	if o.code == ExitOK || o.code == ExitError || o.code == ExitUsage {
		h.t.Fatalf("latestwins %s: exit %d, want it held\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), o.code, o.stdout, o.stderr)
	}
	return o
}

// The flags of the approvals gate refuse what no rule could be.
func TestApprovalsFlag(t *testing.T) {
	h := newHarness(t)
	run := func(flags ...string) outcome {
		args := append([]string{"claim", "--environment", "prod", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000"}, flags...)
		return h.must(ExitUsage, args...)
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--approvals", "11"}, "--approvals"},
		{[]string{"--approvals", "two"}, "--approvals"},
		{[]string{"--approvers", "alice"}, "give --approvals N with it"},
		{[]string{"--approvals", "1", "--approvers", "bad_login"}, "teams as @org/team-slug"},
		{[]string{"--approvals", "2", "--approvers", "alice"}, "can never come from the 1 approvers"},
		{[]string{"--approvals", "1", "--pusher-may-approve", "maybe"}, "--pusher-may-approve"},
		{[]string{"--approvals", "0", "--approvers", "alice"}, "removes the gate"},
	} {
		if o := run(c.flags...); !strings.Contains(o.stderr, c.want) {
			t.Errorf("%v said:\n%s\nwant %q", c.flags, o.stderr, c.want)
		}
	}
	o := h.must(ExitOK, "claim", "--environment", "prod", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000",
		"--approvals", "1", "--approvers", "alice,@acme/sre")
	_ = o
	if hist := h.must(ExitOK, "history", "prod"); !strings.Contains(hist.stdout, "Gates changed from none to approvals 1 by alice, @acme/sre") {
		t.Errorf("history:\n%s", hist.stdout)
	}
}
