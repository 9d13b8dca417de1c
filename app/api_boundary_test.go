package app

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

// What a claim over the API says about itself beyond the work it names (the commit, its branch,
// the scopes) is ignored: the App takes the actor from the token, and the order and barriers from
// GitHub and the trusted configuration (docs/api.md).

// claimAnswer is a claim's answer over the API.
func (h *apiHarness) claimAnswer(t *testing.T, env, tok string, req any) authority.AcceptResult {
	t.Helper()
	a := h.call(t, "POST", "/v1/environments/"+env+"/claim", tok, req)
	var res authority.AcceptResult
	if err := json.Unmarshal(a.body, &res); a.status != http.StatusOK || err != nil {
		t.Fatalf("claim in %s: %d %s", env, a.status, a.body)
	}
	return res
}

func (h *apiHarness) scope(t *testing.T, env, scope string) *authority.Scope {
	t.Helper()
	e, err := h.auth.Status(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return e.Scopes[scope]
}

// TestAPIClaimTakesNoOrderingFacts: a claim whose body says it was pushed in 2100 (and names a
// parent, and asks for a redeploy) does not pin the scope: a later claim with a real push time
// replaces it, and deploys.
func TestAPIClaimTakesNoOrderingFacts(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	tok := h.token(t, "Codertocat/Hello-World")
	pinning := intent("run-1", 'f', "api")
	pinning.Intent.Order = authority.Order{PushedAt: time.Unix(year2100, 0).UTC(), CommittedAt: time.Unix(year2100, 0).UTC()}
	if res := h.claimAnswer(t, "staging", tok, pinning); len(res.Accepted) != 1 {
		t.Fatalf("claim from 2100: %+v; want it accepted, its facts ignored", res)
	}
	if m := h.scope(t, "staging", "api").Mailbox; !m.Order.PushedAt.IsZero() || !m.Order.CommittedAt.IsZero() {
		t.Fatalf("pending %+v; want no ordering facts recorded from the body", m)
	}

	now := h.clock.Now().Add(-time.Second)
	real := intent("run-2", 'a', "api")
	real.Intent.Order = authority.Order{PushedAt: now, CommittedAt: now}
	res := h.claimAnswer(t, "staging", tok, real)
	if len(res.Stale) != 0 || res.Claim == nil || len(res.Claim.Scopes()) != 1 {
		t.Fatalf("a real claim after the one from 2100: %+v; want it claimed, not arrived out of order", res)
	}
	deployOverAPI(t, h, tok, "staging", res.Generation)
	if l := h.scope(t, "staging", "api").Live; l == nil || l.Sha != strings.Repeat("a", 40) {
		t.Fatalf("live %+v; want the later claim deployed", l)
	}

	// A parent and a redeploy are ordering facts too: an older commit claiming to be pushed on top
	// of the live one, or to be a redeploy, is still taken as it arrives, the live one untouched.
	older := intent("run-3", 'b', "api")
	older.Intent.Before, older.Intent.Redeploy = strings.Repeat("a", 40), true
	h.claimAnswer(t, "staging", tok, older)
	if m := h.scope(t, "staging", "api").Mailbox; m.Before != "" {
		t.Fatalf("pending %+v; want no parent recorded from the body", m)
	}
}

// deployOverAPI gates and completes the deploy of gen in env's api.
func deployOverAPI(t *testing.T, h *apiHarness, tok, env string, gen int64) {
	t.Helper()
	a := h.call(t, "POST", "/v1/environments/"+env+"/gate", tok, map[string]any{"generation": gen, "scopes": []string{"api"}, "phase": "deploy", "holder": "deploy", "lease_ttl_ms": 60_000})
	var g authority.Grant
	if err := json.Unmarshal(a.body, &g); a.status != http.StatusOK || err != nil {
		t.Fatalf("gate: %d %s", a.status, a.body)
	}
	c := map[string]any{"completion": map[string]any{"generation": gen, "scopes": []string{"api"}, "holder": "deploy", "tokens": g.Tokens, "outcome": "success"}}
	if a := h.call(t, "POST", "/v1/environments/"+env+"/complete", tok, c); a.status != http.StatusOK {
		t.Fatalf("complete: %d %s", a.status, a.body)
	}
}

// TestAPIClaimCannotMakeABarrier: a claim naming itself a barrier in a scope without barrier-paths
// is none: a later claim supersedes it instead of waiting behind it.
func TestAPIClaimCannotMakeABarrier(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	tok := h.token(t, "Codertocat/Hello-World")
	req := intent("run-1", 'a', "api")
	req.Intent.Barrier = []string{"api"}
	if res := h.claimAnswer(t, "staging", tok, req); len(res.Ahead) != 0 {
		t.Fatalf("claim: %+v", res)
	}
	if m := h.scope(t, "staging", "api").Mailbox; m.Barrier {
		t.Fatalf("pending %+v; want no barrier: staging's api has no barrier-paths", m)
	}
	res := h.claimAnswer(t, "staging", tok, intent("run-2", 'b', "api"))
	if sc := h.scope(t, "staging", "api"); len(res.Ahead) != 0 || sc.Mailbox.Sha != strings.Repeat("b", 40) || len(sc.Queue) != 0 {
		t.Fatalf("a later claim: %+v, pending %+v behind %d; want it to supersede the first", res, sc.Mailbox, len(sc.Queue))
	}
}

// TestAPIClaimActorIsTheTokens: the audit trail records the token's actor, not the one the body
// names.
func TestAPIClaimActorIsTheTokens(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	claims := h.iss.Claims("Codertocat/Hello-World", "latestwins", h.clock.Now())
	claims["actor"] = "octocat"
	req := intent("run-1", 'a', "api")
	req.Intent.Actor = "mallory"
	h.claimAnswer(t, "staging", h.iss.Sign(t, claims), req)
	e, err := h.auth.Status(context.Background(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if m := e.Scopes["api"].Mailbox; m.Actor != "octocat" {
		t.Errorf("pending %+v; want the token's actor octocat", m)
	}
	var accepted []string
	for _, ev := range e.Events {
		if ev.Kind == authority.EventAccepted {
			accepted = append(accepted, ev.Message)
		}
		if strings.Contains(ev.Message, "mallory") {
			t.Errorf("event %q names the body's actor", ev.Message)
		}
	}
	if len(accepted) != 1 || !strings.Contains(accepted[0], "by octocat") {
		t.Errorf("accepted events %q; want one by octocat", accepted)
	}
}

// TestAPIClaimDefaultsToTheTokensCommit: a claim that names no commit or branch claims the run's,
// from the token.
func TestAPIClaimDefaultsToTheTokensCommit(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	claims := h.iss.Claims("Codertocat/Hello-World", "latestwins", h.clock.Now())
	claims["sha"] = strings.Repeat("c", 40)
	req := intent("run-1", 'a', "api")
	req.Intent.Sha, req.Intent.Ref = "", ""
	h.claimAnswer(t, "staging", h.iss.Sign(t, claims), req)
	if m := h.scope(t, "staging", "api").Mailbox; m.Sha != strings.Repeat("c", 40) || m.Ref != "refs/heads/master" {
		t.Fatalf("pending %+v; want the token's sha and ref", m)
	}
}

// boundaryConfig: staging's api has no barrier-paths, production's has.
const boundaryConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
  production:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        barrier-paths: [migrations/**]
`

// newGitHubAPI is the API with App credentials, the trusted file boundaryConfig, and the App
// installed on Codertocat/Hello-World (installation 1), which it asks about commits.
func newGitHubAPI(t *testing.T) (*apiHarness, *githubtest.Server) {
	t.Helper()
	as := newAppSource(t)
	stubTrusted(t, as.gh, "Codertocat", boundaryConfig)
	iss := oidctest.NewIssuer(t)
	h := newHarness(t, boundaryConfig, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: iss.URL, Clock: as.auth})
		if err != nil {
			t.Fatal(err)
		}
		o.Authority, o.Config, o.Tokens = as.auth, as.src, v
		o.Commits, o.Installations = &ghadapter.Commits{Installations: as.inst}, ghadapter.Finder{Installations: as.inst}
	})
	h.auth, h.clock = as.auth, as.clock
	installation := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/installation", http.StatusOK, "")
	installation["id"] = 1
	as.gh.On("GET", fixtureRepo+"/installation", http.StatusOK, installation)
	token := githubtest.Example(t, "POST", "/app/installations/{installation_id}/access_tokens", http.StatusCreated, "")
	token["token"], token["expires_at"] = "ghs_one", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	as.gh.On("POST", "/app/installations/1/access_tokens", http.StatusCreated, token)
	return &apiHarness{harness: h, iss: iss}, as.gh
}

// stubCompare answers GitHub's compare of base...head in Codertocat/Hello-World with status and,
// changing files, the files.
func stubCompare(t *testing.T, gh *githubtest.Server, base, head, status string, files ...string) *githubtest.Stub {
	t.Helper()
	answer := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/compare/{basehead}", http.StatusOK, "")
	answer["status"] = status
	example := answer["files"].([]any)[0].(map[string]any)
	listed := []any{}
	for _, f := range files {
		entry := map[string]any{}
		for k, v := range example {
			entry[k] = v
		}
		entry["filename"], entry["status"] = f, "modified"
		listed = append(listed, entry)
	}
	answer["files"] = listed
	return gh.On("GET", fixtureRepo+"/compare/"+base+"..."+head, http.StatusOK, answer)
}

// TestAPIClaimIsOrderedByGitHub: with App credentials, a claim is ordered by GitHub's compare API
// against the scope's live commit, whatever branch the claim names: a commit the live one builds
// on (behind) is recorded as arrived out of order, and the live one stays; a newer one (ahead) is
// claimed, whatever push time its body gives, and so is the one after it.
func TestAPIClaimIsOrderedByGitHub(t *testing.T) {
	t.Parallel()
	h, gh := newGitHubAPI(t)
	tok := h.token(t, "Codertocat/Hello-World")
	live, old, other, next, last := strings.Repeat("a", 40), strings.Repeat("0", 40), strings.Repeat("1", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	res := h.claimAnswer(t, "staging", tok, intent("run-1", 'a', "api"))
	deployOverAPI(t, h, tok, "staging", res.Generation)

	stubCompare(t, gh, live, old, "behind")
	if res := h.claimAnswer(t, "staging", tok, intent("run-2", '0', "api")); res.Stale["api"] != 1 || len(res.Accepted) != 0 {
		t.Fatalf("a commit behind the live one: %+v; want it arrived out of order", res)
	}
	stubCompare(t, gh, live, other, "behind")
	elsewhere := intent("run-3", '1', "api")
	elsewhere.Intent.Ref = "refs/heads/elsewhere"
	if res := h.claimAnswer(t, "staging", tok, elsewhere); res.Stale["api"] != 1 {
		t.Fatalf("a commit behind the live one, named on another branch: %+v; want it arrived out of order", res)
	}
	sc := h.scope(t, "staging", "api")
	if sc.Live.Sha != live || sc.Mailbox != nil {
		t.Fatalf("live %+v, pending %+v; want the live commit alone", sc.Live, sc.Mailbox)
	}

	stubCompare(t, gh, live, next, "ahead")
	pinning := intent("run-4", 'b', "api")
	pinning.Intent.Order.PushedAt = time.Unix(year2100, 0).UTC()
	if res := h.claimAnswer(t, "staging", tok, pinning); len(res.Stale) != 0 || res.Claim == nil || len(res.Claim.Scopes()) != 1 {
		t.Fatalf("a commit ahead of the live one: %+v; want it claimed", res)
	}
	stubCompare(t, gh, live, last, "ahead")
	stubCompare(t, gh, next, last, "ahead")
	after := intent("run-5", 'c', "api")
	after.Intent.Order.PushedAt = h.clock.Now()
	if res := h.claimAnswer(t, "staging", tok, after); len(res.Stale) != 0 || res.Claim == nil || len(res.Claim.Scopes()) != 1 {
		t.Fatalf("the commit after it: %+v; want it claimed, its predecessor's push time ignored", res)
	}
}

// TestAPIClaimBarriersAreTheConfigurations: with App credentials, a claim is a barrier where the
// trusted configuration's barrier-paths match the files GitHub says changed since the scope's
// live commit (or where nothing is live yet to compare with), and nowhere else, whatever its body
// says.
func TestAPIClaimBarriersAreTheConfigurations(t *testing.T) {
	t.Parallel()
	h, gh := newGitHubAPI(t)
	tok := h.token(t, "Codertocat/Hello-World")
	live, migration, docs := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)

	res := h.claimAnswer(t, "production", tok, intent("run-1", 'a', "api"))
	if m := h.scope(t, "production", "api").Mailbox; !m.Barrier {
		t.Fatalf("a first commit, nothing live to compare with: %+v; want a barrier (changes unknown)", m)
	}
	deployOverAPI(t, h, tok, "production", res.Generation)

	stubCompare(t, gh, live, migration, "ahead", "migrations/001_init.sql")
	h.claimAnswer(t, "production", tok, intent("run-2", 'b', "api"))
	if m := h.scope(t, "production", "api").Mailbox; m.Sha != migration || !m.Barrier {
		t.Fatalf("pending %+v; want the commit touching migrations/** a barrier", m)
	}
	stubCompare(t, gh, live, docs, "ahead", "README.md")
	stubCompare(t, gh, migration, docs, "ahead", "README.md")
	req := intent("run-3", 'c', "api")
	req.Intent.Barrier = []string{"api"}
	if res := h.claimAnswer(t, "production", tok, req); res.Ahead["api"] != 1 {
		t.Fatalf("claim behind the barrier: %+v; want it to wait behind it", res)
	}
	if q := h.scope(t, "production", "api").Queue; len(q) != 1 || q[0].Sha != docs || q[0].Barrier {
		t.Fatalf("queue %+v; want the commit touching README.md waiting, no barrier", q)
	}

	// staging's api has no barrier-paths: nothing to ask GitHub, no barrier.
	req = intent("run-4", 'd', "api")
	req.Intent.Barrier = []string{"api"}
	h.claimAnswer(t, "staging", tok, req)
	if m := h.scope(t, "staging", "api").Mailbox; m.Barrier {
		t.Fatalf("pending %+v; want no barrier where the configuration names no barrier-paths", m)
	}
}
