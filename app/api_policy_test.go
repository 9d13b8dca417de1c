package app

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

// apiPolicyConfig: staging queues; production is latest-wins with barrier-paths in api.
const apiPolicyConfig = `environments:
  staging:
    policy: queue
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

func newPolicyAPIHarness(t *testing.T, limit int) *apiHarness {
	t.Helper()
	iss := oidctest.NewIssuer(t)
	h := newLimitedHarness(t, apiPolicyConfig, limit, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: iss.URL, Clock: o.Authority})
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = v
	})
	return &apiHarness{harness: h, iss: iss}
}

// waitBody is the locked body of a deploy gate at gen, without the message and the retry time.
func (h *apiHarness) waitBody(t *testing.T, tok, env string, gen int64, holder string) (int, apiclient.ErrorBody) {
	t.Helper()
	a := h.call(t, "POST", "/v1/environments/"+env+"/gate", tok,
		apiclient.GateRequest{Generation: gen, Scopes: []string{"api"}, Phase: "deploy", Holder: holder, LeaseTTLMillis: 60_000})
	got := a.errorBody(t)
	if got.Message == "" || got.RetryAfter < 1 {
		t.Errorf("locked body %+v: want a message and a retry time", got)
	}
	got.Message, got.RetryAfter = "", 0
	if got.Holder == "" {
		got.Purpose = "" // a released lease keeps its last purpose; nobody holds it
	}
	return a.status, got
}

// A pass that waits its turn is told where it stands in the 409 body: how many are ahead and which
// commit goes first (policy queue), the barrier it waits for, or that a failure blocks the scope.
func TestAPIWaitBodySaysWhereThePassStands(t *testing.T) {
	t.Parallel()
	h := newPolicyAPIHarness(t, 100)
	tok := h.token(t, "Codertocat/Hello-World")
	claim := func(env, id string, c byte, edit func(*authority.Intent)) {
		t.Helper()
		req := intent(id, c, "api")
		if edit != nil {
			edit(&req.Intent)
		}
		if a := h.call(t, "POST", "/v1/environments/"+env+"/claim", tok, req); a.status != http.StatusOK {
			t.Fatalf("claim %s in %s: %d %s", id, env, a.status, a.body)
		}
	}

	claim("staging", "run-1", 'a', nil)
	claim("staging", "run-2", 'b', nil)
	claim("staging", "run-3", 'c', nil)
	status, got := h.waitBody(t, tok, "staging", 3, "run-3")
	want := apiclient.ErrorBody{Error: apiclient.CodeLocked, Wait: authority.ReasonQueued, Resource: "staging/api", Generation: 1, Ahead: 2, HeadSha: strings.Repeat("a", 40)}
	if diff := cmp.Diff(want, got); status != http.StatusConflict || diff != "" {
		t.Errorf("queued: %d (-want +got):\n%s", status, diff)
	}

	// A barrier is the configuration's barrier-paths matched by what GitHub says changed, never a
	// claim's word: this one is accepted as the App accepts a push touching migrations/**.
	if _, err := h.auth.Accept(context.Background(), authority.Intent{ID: "push-4", Environment: "production", Scopes: []string{"api"},
		Sha: strings.Repeat("d", 40), Ref: "refs/heads/master", Barrier: []string{"api"}}, false); err != nil {
		t.Fatal(err)
	}
	claim("production", "run-5", 'e', nil)
	status, got = h.waitBody(t, tok, "production", 2, "run-5")
	want = apiclient.ErrorBody{Error: apiclient.CodeLocked, Wait: authority.ReasonBarrier, Resource: "production/api", Generation: 1, Ahead: 1,
		HeadSha: strings.Repeat("d", 40), Barrier: strings.Repeat("d", 40)}
	if diff := cmp.Diff(want, got); status != http.StatusConflict || diff != "" {
		t.Errorf("behind a barrier: %d (-want +got):\n%s", status, diff)
	}

	// staging's head fails on its last attempt: it blocks the two behind it.
	deployHeadOutcome(t, h.harness, "staging", "api", authority.OutcomeFailure)
	status, got = h.waitBody(t, tok, "staging", 3, "run-3")
	want = apiclient.ErrorBody{Error: apiclient.CodeLocked, Wait: authority.ReasonBlocked, Resource: "staging/api", Generation: 1, Ahead: 2, HeadSha: strings.Repeat("a", 40), Blocked: true}
	if diff := cmp.Diff(want, got); status != http.StatusConflict || diff != "" {
		t.Errorf("blocked: %d (-want +got):\n%s", status, diff)
	}
}

// A workload may not switch an environment's policy: a claim that asks for latest in an
// environment the trusted configuration queues is accepted under queue, superseding nothing.
func TestAPIClaimTakesThePolicyOfTheConfiguration(t *testing.T) {
	t.Parallel()
	h := newPolicyAPIHarness(t, 100)
	tok := h.token(t, "Codertocat/Hello-World")
	for i, c := range []byte{'a', 'b'} {
		req := intent("run-"+string(c), c, "api")
		req.Intent.Policy = authority.PolicyLatest
		if a := h.call(t, "POST", "/v1/environments/staging/claim", tok, req); a.status != http.StatusOK {
			t.Fatalf("claim %d: %d %s", i, a.status, a.body)
		}
	}
	e, err := h.auth.Status(context.Background(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if p := e.PolicyOrDefault(); p != authority.PolicyQueue {
		t.Errorf("staging's policy is %s after claims asking for latest; want queue, the configuration's", p)
	}
	if diff := cmp.Diff([]string{strings.Repeat("a", 40), strings.Repeat("b", 40)}, entryShas(e.Scopes["api"])); diff != "" {
		t.Errorf("staging/api pending (-want +got):\n%s", diff)
	}
}

// A claim beyond a full queue is refused with its own code: 429 queue_full, naming the scope and
// the bound; nothing is written.
func TestAPIQueueFull(t *testing.T) {
	t.Parallel()
	h := newPolicyAPIHarness(t, 1)
	tok := h.token(t, "Codertocat/Hello-World")
	if a := h.call(t, "POST", "/v1/environments/staging/claim", tok, intent("run-1", 'a', "api")); a.status != http.StatusOK {
		t.Fatalf("first claim: %d %s", a.status, a.body)
	}
	h.clock.Advance(time.Second)
	a := h.call(t, "POST", "/v1/environments/staging/claim", tok, intent("run-2", 'b', "api"))
	got := a.errorBody(t)
	if a.status != http.StatusTooManyRequests || got.Error != apiclient.CodeQueueFull || got.Scope != "api" || got.Pending != 1 || got.Limit != 1 ||
		!strings.Contains(got.Message, "this one was refused, nothing was written") {
		t.Errorf("second claim: %d %+v; want 429 queue_full for api, 1 of 1", a.status, got)
	}
	if e, _ := h.auth.Status(context.Background(), "staging"); e.Desired != 1 {
		t.Errorf("desired generation %d after the refusal, want 1", e.Desired)
	}
}

// A workload may not let its commits skip the environments they must be live in first: a claim in
// production that asks for no requirement is accepted under the trusted configuration's (staging),
// and its pass waits at the deploy gate until its commit is live there.
func TestAPIClaimTakesTheRequirementOfTheConfiguration(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	h := newLimitedHarness(t, strings.Replace(promotionConfig, "%s", "", 1), 100, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: iss.URL, Clock: o.Authority})
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = v
	})
	ah := &apiHarness{harness: h, iss: iss}
	tok := ah.token(t, "Codertocat/Hello-World")
	req := intent("run-1", 'a', "api")
	req.Intent.Requires = &authority.Requirements{} // requires nothing
	if a := ah.call(t, "POST", "/v1/environments/production/claim", tok, req); a.status != http.StatusOK {
		t.Fatalf("claim: %d %s", a.status, a.body)
	}
	e, err := h.auth.Status(context.Background(), "production")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&authority.Requirements{Environments: []string{"staging"}}, e.Requires); diff != "" {
		t.Errorf("production's requirement after a claim asking for none (-want +got):\n%s", diff)
	}
	status, got := ah.waitBody(t, tok, "production", 1, "run-1")
	want := &authority.PromotionWait{Environment: "staging", Sha: strings.Repeat("a", 40)}
	if diff := cmp.Diff(want, got.Promotion); status != http.StatusConflict || diff != "" {
		t.Errorf("production's deploy gate: %d %+v (-want +got promotion):\n%s", status, got, diff)
	}
}

// An origin names the installation and repository the App acts as when it starts work again or asks
// GitHub about commits: a workload's claim cannot choose one.
func TestAPIClaimCannotChooseAnOrigin(t *testing.T) {
	t.Parallel()
	h := newPolicyAPIHarness(t, 100)
	req := intent("run-a", 'a', "api")
	req.Intent.Origin = core.OriginFor(99, "acme/secrets", "main")
	if a := h.call(t, "POST", "/v1/environments/staging/claim", h.token(t, "Codertocat/Hello-World"), req); a.status != http.StatusOK {
		t.Fatalf("claim: %d %s", a.status, a.body)
	}
	e, err := h.auth.Status(context.Background(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if m := e.Scopes["api"].Mailbox; m == nil || m.Origin != "" {
		t.Fatalf("pending after a claim naming an origin: %+v; want no origin recorded", m)
	}
}
