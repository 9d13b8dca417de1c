package app

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// promotionConfig: production takes a commit only once it is live in staging.
const promotionConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
  production:
    requires: [staging]%s
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
`

// newPromotionHarness is the App on the strict fake, its Authority asking the fake's compare API
// through the App's PromotionCompare, as serve and Lambda wire it.
func newPromotionHarness(t *testing.T, ancestor bool) (*harness, *githubtest.Server) {
	t.Helper()
	gh, inst := newGitHub(t)
	commits := &ghadapter.Commits{Installations: inst}
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	auth := authority.New(memory.New(), authority.WithClock(clock), authority.WithPromotionComparer(&core.PromotionCompare{Commits: commits}))
	extra := ""
	if ancestor {
		extra = "\n    requires-ancestor: true"
	}
	h := newHarness(t, strings.Replace(promotionConfig, "%s", extra, 1), withGitHub(inst), func(o *Options) {
		o.Authority, o.Commits = auth, commits
	})
	h.auth, h.clock = auth, clock
	stubDispatch(t, gh, "deploy.yml").Times(2) // staging's and production's
	return h, gh
}

// deployNow runs the pass at gen in env through its deploy gate to success; a refusal is returned.
func deployNow(t *testing.T, h *harness, env string, gen int64) error {
	t.Helper()
	ctx := t.Context()
	if _, err := h.auth.Claim(ctx, env, gen, []string{"api"}); err != nil {
		t.Fatal(err)
	}
	g, err := h.auth.Gate(ctx, authority.GateRequest{Environment: env, Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: env + "-run", LeaseTTL: time.Minute})
	if err != nil {
		return err
	}
	_, err = h.auth.Complete(ctx, authority.Completion{Environment: env, Generation: gen, Scopes: []string{"api"}, Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeSuccess})
	return err
}

// A push selects staging and production; production's pass waits at its deploy gate, told why,
// until staging has the commit live; then it deploys.
func TestProductionPushWaitsForStaging(t *testing.T) {
	t.Parallel()
	h, _ := newPromotionHarness(t, false)
	rec := h.post(t, "push", "d-push", fixture(t, "push.json"))
	if rec.Code != http.StatusOK {
		t.Fatalf("push: %d %s", rec.Code, rec.Body)
	}
	res := decodeResult(t, rec)
	staging, prod := intentOf(t, res, "staging"), intentOf(t, res, "production")
	if len(res.Dispatched) != 2 {
		t.Fatalf("dispatched %+v; want staging's and production's workflows", res.Dispatched)
	}

	err := deployNow(t, h, "production", prod.Generation)
	var held *authority.HeldError
	const want = "waiting for staging: 6113728 is not live there yet"
	if !errors.As(err, &held) || held.Promotion == nil || authority.WaitText(held) != want {
		t.Fatalf("production's deploy before staging has the commit: %v; want a wait saying %q", err, want)
	}
	if err := deployNow(t, h, "staging", staging.Generation); err != nil {
		t.Fatalf("staging's deploy: %v", err)
	}
	if err := deployNow(t, h, "production", prod.Generation); err != nil {
		t.Fatalf("production's deploy once staging has the commit live: %v", err)
	}
}

// With requires-ancestor, a descendant live in staging lets production's commit go, as GitHub's
// compare API (the strict fake) says; a commit that is not one does not.
func TestProductionTakesAnAncestorOfStagingsCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status string
		passes bool
	}{{"ahead", true}, {"diverged", false}} {
		t.Run(tc.status, func(t *testing.T) {
			t.Parallel()
			h, gh := newPromotionHarness(t, true)
			rec := h.post(t, "push", "d-push", fixture(t, "push.json"))
			prod := intentOf(t, decodeResult(t, rec), "production")
			x := "6113728f27ae82c7b1a177c8d03f9e96e0adf246"
			y := strings.Repeat("b", 40) // pushed on top of x, deployed in staging
			in := authority.Intent{ID: "stage-y", Environment: "staging", Scopes: []string{"api"}, Sha: y, Ref: "refs/heads/master", Before: x}
			sres, err := h.auth.Accept(t.Context(), in, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := deployNow(t, h, "staging", sres.Generation); err != nil {
				t.Fatal(err)
			}
			answer := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/compare/{basehead}", http.StatusOK, "")
			answer["status"] = tc.status
			compare := gh.On("GET", fixtureRepo+"/compare/"+x+"..."+y, http.StatusOK, answer)
			err = deployNow(t, h, "production", prod.Generation)
			if len(compare.Requests()) != 1 {
				t.Fatalf("compare asked %d times; want once", len(compare.Requests()))
			}
			if tc.passes != (err == nil) {
				t.Fatalf("production's deploy with %s in staging (%s): %v", y[:7], tc.status, err)
			}
		})
	}
}
