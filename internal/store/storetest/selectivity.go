package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// Guarantee 9: a push claims and deploys only the scopes sourced from its repository; a redeploy of
// one scope leaves the others' live sha, generation, run and time exactly as they were.
func selectivityCases() []testCase {
	return []testCase{
		{"Redeploy", testSelectiveRedeploy},
		{"PushClaimsItsScopes", testPushClaimsItsScopes},
	}
}

func testSelectiveRedeploy(t *testing.T, h *harness) {
	a := h.process()
	scopes := []string{"api", "web", "worker"}
	for i, s := range scopes {
		in := push("staging", fmt.Sprintf("push-%s", s), sha(string(rune('a'+i)), 1), s)
		in.Source = "example/" + s
		res := h.accept(a, in, true)
		g := h.gate(a, "staging", res.Generation, fmt.Sprintf("run-%d", i), s)
		h.complete(a, g, authority.OutcomeSuccess, fmt.Sprintf("run-%d", i))
		h.clock.Advance(time.Duration(i+1) * time.Minute)
	}
	// api moves on, then is redeployed at its first commit.
	h.deploy(a, "staging", h.accept(a, push("staging", "push-api-2", sha("a", 2), "api"), false).Generation, "run-9", "run-9", "api")
	h.clock.Advance(time.Hour)
	before := h.env("staging")

	redeploy := authority.Intent{ID: "comment-redeploy-api", Environment: "staging", Scopes: []string{"api"}, Sha: sha("a", 1),
		Ref: "refs/heads/main", Source: "redeploy", Actor: "octocat", Redeploy: true}
	res := h.accept(h.process(), redeploy, true)
	if len(res.Accepted) != 1 || res.Claim == nil || !slices.Equal(res.Claim.Scopes(), []string{"api"}) {
		t.Fatalf("redeploy of api: %+v; want api accepted and claimed, nothing else", res)
	}
	b := h.process()
	g := h.gate(b, "staging", res.Generation, "run-redeploy", "api")
	h.complete(b, g, authority.OutcomeSuccess, "run-redeploy")

	after := h.env("staging")
	if l := after.Scopes["api"].Live; l.Sha != sha("a", 1) || l.Generation != res.Generation || l.Run != "run-redeploy" || !l.At.Equal(h.clock.Now()) {
		t.Fatalf("api live %+v; want the redeployed commit at generation %d by run-redeploy", l, res.Generation)
	}
	for _, s := range []string{"web", "worker"} {
		if diff := cmp.Diff(before.Scopes[s], after.Scopes[s]); diff != "" {
			t.Fatalf("a redeploy of api changed %s (-before +after):\n%s", s, diff)
		}
	}
}

// testPushClaimsItsScopes: a push from the web repository accepts and claims web alone, and its
// pass deploys web alone, even when claiming "everything pending".
func testPushClaimsItsScopes(t *testing.T, h *harness) {
	a := h.process()
	for i, s := range []string{"api", "web"} {
		res := h.accept(a, push("staging", "first-"+s, sha(string(rune('a'+i)), 0), s), false)
		h.deploy(a, "staging", res.Generation, "run-0", "run-0", s)
	}
	before := h.env("staging")
	in := push("staging", "push-web", sha("w", 1), "web")
	in.Source = "example/web"
	res := h.accept(a, in, true)
	if !slices.Equal(res.Accepted, []string{"web"}) || !slices.Equal(res.Claim.Scopes(), []string{"web"}) {
		t.Fatalf("push to web: %+v; want web alone", res)
	}
	all, err := a.Claim(h.ctx, "staging", res.Generation, nil)
	if err != nil || !slices.Equal(all.Scopes(), []string{"web"}) {
		t.Fatalf("claim everything pending: %+v, %v; want web alone", all, err)
	}
	g := h.gate(a, "staging", res.Generation, "run-1", all.Scopes()...)
	h.complete(a, g, authority.OutcomeSuccess, "run-1")
	after := h.env("staging")
	if diff := cmp.Diff(before.Scopes["api"], after.Scopes["api"]); diff != "" {
		t.Fatalf("a push to web changed api (-before +after):\n%s", diff)
	}
	if l := after.Scopes["web"].Live; l.Sha != sha("w", 1) || !strings.HasPrefix(l.Run, "run-1") {
		t.Fatalf("web live %+v; want the pushed commit", l)
	}
}
