package app

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// The status page shows what the other renderings show of a queue: the policy, each waiting
// commit's place as its pass is told it, the barrier it waits for, and a failed head that blocks,
// with its error; text from the store is escaped.
func TestStatusPageShowsPlaces(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	ctx := t.Context()
	const (
		sha1 = "abc1234aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		sha2 = "bbb2222bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
		sha3 = "ccc3333ccccccccccccccccccccccccccccccccc"
	)
	accept := func(env, id, sha string, policy authority.Policy, barrier bool) int64 {
		t.Helper()
		in := authority.Intent{ID: id, Environment: env, Scopes: []string{"api"}, Sha: sha, Ref: "refs/heads/main", Source: "push", Actor: "octocat", Policy: policy}
		if barrier {
			in.Barrier = []string{"api"}
		}
		res, err := h.auth.Accept(ctx, in, true)
		if err != nil {
			t.Fatal(err)
		}
		return res.Generation
	}
	gate := func(env string, gen int64, holder string) *authority.Grant {
		t.Helper()
		g, err := h.auth.Gate(ctx, authority.GateRequest{Environment: env, Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: holder, LeaseTTL: 2 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	page := func() string {
		t.Helper()
		r, _ := http.NewRequest("GET", "/", nil)
		rec := h.do(r)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /: %d %s", rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	check := func(section string, want, wantNot []string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(section, w) {
				t.Errorf("status page lacks %q:\n%s", w, section)
			}
		}
		for _, w := range wantNot {
			if strings.Contains(section, w) {
				t.Errorf("status page shows %q:\n%s", w, section)
			}
		}
	}

	// staging, policy queue: three commits on api, the head deploying.
	g1 := gate("staging", accept("staging", "q1", sha1, authority.PolicyQueue, false), "run-<1>")
	accept("staging", "q2", sha2, authority.PolicyQueue, true)
	accept("staging", "q3", sha3, authority.PolicyQueue, false)
	// migrate, policy latest: barrier abc1234 deploying, the newest commit waiting for it.
	gate("migrate", accept("migrate", "m1", sha1, "", true), "run-m1")
	accept("migrate", "m2", sha2, "", false)
	h.clock.Advance(30 * time.Second)

	p := page()
	check(envSection(t, p, "staging"), []string{
		`<p class="policy">Policy: <strong>queue</strong></p>`,
		`abc1234 (generation 1)<ol start="2"><li>bbb2222 (generation 2, barrier), queued: 1 ahead of this commit</li><li>ccc3333 (generation 3), queued: 2 ahead of this commit</li></ol>`,
		`held by run-&lt;1&gt; for deploy, token 1, 1m30s left`,
	}, []string{"blocked", "waiting for barrier"})
	check(envSection(t, p, "migrate"), []string{
		`abc1234 (generation 1), barrier<ol start="2"><li>bbb2222 (generation 2), waiting for barrier abc1234</li></ol>`,
	}, []string{`class="policy"`, "queued:"})

	// The head fails terminally: under policy queue it blocks the scope until someone decides.
	if _, err := h.auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: g1.Generation, Scopes: []string{"api"}, Holder: g1.Holder,
		Tokens: g1.Tokens, Outcome: authority.OutcomeFailure, Attempt: 3, MaxAttempts: 3, Message: "migration <42> failed"}); err != nil {
		t.Fatal(err)
	}
	check(envSection(t, page(), "staging"), []string{
		`<span class="error">blocked: generation 1 (abc1234) failed terminally; waiting for a decision (skip or retry); error: migration &lt;42&gt; failed</span>`,
		`<td>free</td>`,
	}, []string{"<42>"})
	if _, err := h.auth.Decide(ctx, authority.Decision{Environment: "staging", Scope: "api", Action: authority.DecideSkip, Reason: "by hand", Actor: "octocat"}); err != nil {
		t.Fatal(err)
	}
	check(envSection(t, page(), "staging"), []string{
		`bbb2222 (generation 2), barrier<ol start="2"><li>ccc3333 (generation 3), queued: 1 ahead of this commit</li></ol>`,
	}, []string{"blocked", "abc1234 (generation 1)"})
}

// envSection is the page's section of one environment, up to its timeline (whose messages are
// the events' own words).
func envSection(t *testing.T, page, env string) string {
	t.Helper()
	_, after, ok := strings.Cut(page, `<section id="env-`+env+`">`)
	if !ok {
		t.Fatalf("the page has no section for %s:\n%s", env, page)
	}
	in, _, ok := strings.Cut(after, "<h3>Recent timeline</h3>")
	if !ok {
		t.Fatalf("the section of %s has no timeline:\n%s", env, after)
	}
	return in
}
