package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

// promoteConfig: production requires staging; api is built from the fixtures' repository, web from
// another one.
const promoteConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
      web:
        repository: acme/web
        branch: main
        workflow: web.yml
  production:
    requires: [staging]
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
      web:
        repository: acme/web
        branch: main
        workflow: web.yml
`

// /latestwins promote against the strict fake GitHub: write permission is checked, the commit live
// in staging is accepted in production as a new generation, and the scope's workflow is dispatched
// at once for it, with the origin the sweep re-drives; only scopes the repository feeds.
func TestPromoteCommand(t *testing.T) {
	t.Parallel()
	const (
		react  = "POST " + fixtureRepo + "/issues/comments/492700400/reactions"
		perm   = "GET " + fixtureRepo + "/collaborators/Codertocat/permission"
		deploy = "POST " + fixtureRepo + "/actions/workflows/deploy.yml/dispatches"
		reply  = "POST " + fixtureRepo + "/issues/1/comments"
	)
	repo := core.RepoRef{Owner: "Codertocat", Name: "Hello-World"}
	tests := []struct {
		name       string
		body       string
		permission string
		dispatch   bool
		outcome    core.Outcome
		calls      []string
		reply      []string
		dispatched []core.DispatchRequest
		promoted   string // the scope whose production pending commit is shaB afterwards
	}{
		{
			name: "every environment with requires that the repository feeds", body: "/latestwins promote api",
			permission: "write", dispatch: true, outcome: core.OutcomePromoted,
			calls: []string{react, perm, deploy, reply},
			reply: []string{"Promoted bbbbbbb, live in staging/api, to production/api at generation 1.",
				"Dispatched deploy.yml on master in Codertocat/Hello-World (scopes api, generation 1)."},
			dispatched: []core.DispatchRequest{{Installation: fixtureInstallID, Repo: repo, Workflow: "deploy.yml", Ref: "master",
				Inputs: map[string]string{"environment": "production", "generation": "1", "scopes": "api"}}},
			promoted: "api",
		},
		{
			name: "the environment named", body: "/latestwins promote production/api",
			permission: "admin", dispatch: true, outcome: core.OutcomePromoted,
			calls: []string{react, perm, deploy, reply},
			reply: []string{"Promoted bbbbbbb, live in staging/api, to production/api at generation 1."},
			dispatched: []core.DispatchRequest{{Installation: fixtureInstallID, Repo: repo, Workflow: "deploy.yml", Ref: "master",
				Inputs: map[string]string{"environment": "production", "generation": "1", "scopes": "api"}}},
			promoted: "api",
		},
		{
			name: "a scope another repository feeds is refused", body: "/latestwins promote web",
			permission: "write", outcome: core.OutcomeNoScopes,
			calls: []string{react, perm, reply},
			reply: []string{"No environment of .github/latestwins.yml that requires another builds `\"web\"` from Codertocat/Hello-World"},
		},
		{
			name: "a scope another repository feeds, named with its environment, is refused", body: "/latestwins promote production/web",
			permission: "write", outcome: core.OutcomeNoScopes,
			calls: []string{react, perm, reply},
			reply: []string{"production/`\"web\"` is not built from Codertocat/Hello-World"},
		},
		{
			name: "an environment that requires nothing", body: "/latestwins promote staging/api",
			permission: "write", outcome: core.OutcomePromoted,
			calls: []string{react, perm, reply},
			reply: []string{"staging requires no environment in .github/latestwins.yml, so there is nothing to promote from"},
		},
		{
			name: "without write permission nothing is promoted", body: "/latestwins promote api",
			permission: "read", outcome: core.OutcomeRefused,
			calls: []string{react, perm, reply},
			reply: []string{"`\"Codertocat\"` cannot run `/latestwins promote`: it needs write permission on Codertocat/Hello-World."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			h := newHarness(t, promoteConfig, withGitHub(inst))
			deployedRef(t, h, "staging", "a", shaA, "refs/heads/master", "api", "web")
			deployedRef(t, h, "staging", "b", shaB, "refs/heads/master", "api", "web")
			dispatch := ""
			if tt.dispatch {
				dispatch = "deploy.yml"
			}
			runCommand(t, h, gh, "d-promote", tt.body, tt.permission, dispatch,
				commandWant{outcome: tt.outcome, calls: tt.calls, reply: tt.reply, dispatched: tt.dispatched})
			e, err := h.auth.Status(context.Background(), "production")
			if tt.promoted == "" {
				if err == nil {
					t.Errorf("production accepted generation %d; want nothing", e.Desired)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := e.Scopes[tt.promoted].Mailbox
			wantOrigin := core.OriginFor(fixtureInstallID, "Codertocat/Hello-World", "master")
			if m == nil || m.Sha != shaB || m.Origin != wantOrigin || m.Actor != "Codertocat" {
				t.Errorf("production/%s pending %+v; want %s asked by Codertocat with origin %s", tt.promoted, m, shaB, wantOrigin)
			}
			if err := deployNow(t, h, "production", m.Generation); err != nil {
				t.Errorf("the promoted commit's deploy gate: %v", err)
			}
		})
	}
}

// A re-delivered promote comment promotes once: the same generation, one dispatch, and a reply
// that says it was carried out before. Promoting again would supersede the deploy the first one
// started and dispatch a second run.
func TestRedeliveredPromotePromotesOnce(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubReaction(t, gh).Times(2)
	stubPermission(gh, "Codertocat", "write").Times(2)
	disp := stubDispatch(t, gh, "deploy.yml")
	st := stubReply(t, gh).Times(2)
	h := newHarness(t, promoteConfig, withGitHub(inst))
	deployedRef(t, h, "staging", "a", shaA, "refs/heads/master", "api")
	body := commentFixture(t, withBody("/latestwins promote production/api"))
	for i := range 2 {
		if w := h.post(t, "issue_comment", "d-once", body); w.Code != http.StatusOK {
			t.Fatalf("delivery %d: %d %s", i+1, w.Code, w.Body)
		}
	}
	if n := len(disp.Requests()); n != 1 {
		t.Errorf("%d dispatches, want 1", n)
	}
	e, err := h.auth.Status(context.Background(), "production")
	if err != nil {
		t.Fatal(err)
	}
	if e.Desired != 1 {
		t.Errorf("production's desired generation %d; want the one promotion", e.Desired)
	}
	reqs := st.Requests()
	m, _ := reqs[len(reqs)-1].Body.(map[string]any)
	if last, _ := m["body"].(string); !strings.Contains(last, "production/api: this command was carried out before (delivery d-once): the promotion is generation 1.") {
		t.Errorf("reply to the re-delivery %q", last)
	}
}

// POST /v1/environments/ENV/promote acts only on scopes the token's repository feeds, and only
// from an environment ENV requires; it dispatches the scope's workflow for the new generation.
func TestAPIPromote(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	h := newLimitedHarness(t, promoteConfig, 100, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: iss.URL, Clock: o.Authority})
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = v
	})
	ah := &apiHarness{harness: h, iss: iss}
	deployedRef(t, h, "staging", "a", shaA, "refs/heads/master", "api", "web")
	tok := ah.token(t, "Codertocat/Hello-World")
	const path = "/v1/environments/production/promote"
	if a := ah.call(t, "POST", path, tok, apiclient.PromoteRequest{Scope: "web"}); a.status != http.StatusForbidden {
		t.Errorf("promote of a scope another repository feeds: %d %s; want 403", a.status, a.body)
	}
	if a := ah.call(t, "POST", path, tok, apiclient.PromoteRequest{Scope: "api", From: "preview"}); a.status != http.StatusBadRequest ||
		a.errorBody(t).Field != "from" {
		t.Errorf("promote from an environment production does not require: %d %s; want 400 on from", a.status, a.body)
	}
	a := ah.call(t, "POST", path, tok, apiclient.PromoteRequest{Scope: "api", Request: "r1"})
	var got apiclient.PromoteResponse
	if err := json.Unmarshal(a.body, &got); err != nil || a.status != http.StatusOK {
		t.Fatalf("promote: %d %s", a.status, a.body)
	}
	if diff := cmp.Diff(apiclient.PromoteResponse{From: "staging", Generation: 1, Sha: shaA,
		Dispatched: []apiclient.Dispatch{{Repository: "Codertocat/Hello-World", Workflow: "deploy.yml", Ref: "master"}}}, got); diff != "" {
		t.Errorf("promote (-want +got):\n%s", diff)
	}
	if err := deployNow(t, h, "production", 1); err != nil {
		t.Errorf("the promoted commit's deploy gate: %v", err)
	}
}

// overviewConfig: staging and production (which requires staging) are fed by the fixtures'
// repository; marketing only by another one.
const overviewConfig = promoteConfig + `  marketing:
    scopes:
      site:
        repository: acme/web
        branch: main
        workflow: site.yml
`

// GET /v1/environments is what is live where across the environments the token's repository
// feeds, with how far each is behind and what it waits for; an environment it does not feed is
// left out, and a repository that feeds none is refused.
func TestAPIEnvironmentsOverview(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	h := newLimitedHarness(t, overviewConfig, 100, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: iss.URL, Clock: o.Authority})
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = v
	})
	ah := &apiHarness{harness: h, iss: iss}
	deployedRef(t, h, "staging", "a", shaA, "refs/heads/master", "api")
	deployedRef(t, h, "marketing", "m", shaC, "refs/heads/main", "site")
	if _, err := h.auth.Accept(context.Background(), authority.Intent{ID: "p", Environment: "production", Scopes: []string{"api"}, Sha: shaB,
		Ref: "refs/heads/master", Requires: &authority.Requirements{Environments: []string{"staging"}}}, false); err != nil {
		t.Fatal(err)
	}
	a := ah.call(t, "GET", "/v1/environments", ah.token(t, "Codertocat/Hello-World"), nil)
	var got apiclient.OverviewResponse
	if err := json.Unmarshal(a.body, &got); err != nil || a.status != http.StatusOK || got.Overview == nil {
		t.Fatalf("GET /v1/environments: %d %s", a.status, a.body)
	}
	o := got.Overview
	if diff := cmp.Diff([]string{"production", "staging"}, o.Environments); diff != "" {
		t.Errorf("environments (-want +got):\n%s", diff)
	}
	if len(o.Scopes) != 1 || o.Scopes[0].Scope != "api" || len(o.Scopes[0].Places) != 2 {
		t.Fatalf("scopes %+v; want api in production and staging", o.Scopes)
	}
	prod, staging := o.Scopes[0].Places[0], o.Scopes[0].Places[1]
	if prod.Live != nil || prod.Behind != 1 || prod.Newest != shaB || prod.Waiting != "waiting for staging: bbbbbbb is not live there yet (aaaaaaa is)" {
		t.Errorf("production/api %+v; want nothing live, 1 behind at %s, waiting for staging", prod, shaB)
	}
	if staging.Live == nil || staging.Live.Sha != shaA || staging.Behind != 0 {
		t.Errorf("staging/api %+v; want %s live, up to date", staging, shaA)
	}
	if a := ah.call(t, "GET", "/v1/environments", ah.token(t, "acme/other"), nil); a.status != http.StatusForbidden {
		t.Errorf("a repository that feeds nothing: %d %s; want 403", a.status, a.body)
	}
}
