package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

// apiHarness is the App with its API on a fake issuer, and tokens of a repository.
type apiHarness struct {
	*harness
	iss *oidctest.Issuer
}

func newAPIHarness(t *testing.T) *apiHarness {
	t.Helper()
	iss := oidctest.NewIssuer(t)
	h := newHarness(t, testConfig, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: iss.URL, Clock: o.Authority})
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = v
	})
	return &apiHarness{harness: h, iss: iss}
}

// token is a valid token of repo now.
func (h *apiHarness) token(t *testing.T, repo string) string {
	t.Helper()
	return h.iss.Sign(t, h.iss.Claims(repo, "latestwins", h.clock.Now()))
}

type apiAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a apiAnswer) errorBody(t *testing.T) apiclient.ErrorBody {
	t.Helper()
	var e apiclient.ErrorBody
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("answer %d %q: %v", a.status, a.body, err)
	}
	return e
}

// call sends body (JSON-encoded unless it is a string) to path with token.
func (h *apiHarness) call(t *testing.T, method, path, token string, body any) apiAnswer {
	t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	r := httptest.NewRequest(method, path, rd)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.app.ServeHTTP(w, r)
	return apiAnswer{status: w.Code, header: w.Header(), body: w.Body.Bytes()}
}

func intent(id string, c byte, scopes ...string) apiclient.ClaimRequest {
	return apiclient.ClaimRequest{Intent: authority.Intent{ID: id, Scopes: scopes, Sha: strings.Repeat(string(c), 40), Ref: "refs/heads/master"}}
}

// TestAPILockedAndSuperseded: the two refusals a pass waits on or stops at, in their HTTP shapes.
// A deploys under a lease; B, newer, claims and finds the lease held (409 locked, Retry-After);
// A's next gate is refused as superseded by B (409 superseded, by generation and sha).
func TestAPILockedAndSuperseded(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	tok := h.token(t, "Codertocat/Hello-World")
	const base = "/v1/environments/staging/"
	if a := h.call(t, "POST", base+"claim", tok, intent("run-1", 'a', "api")); a.status != http.StatusOK {
		t.Fatalf("A claim: %d %s", a.status, a.body)
	}
	gate := apiclient.GateRequest{Generation: 1, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1", LeaseTTLMillis: 120_000}
	a := h.call(t, "POST", base+"gate", tok, gate)
	var g authority.Grant
	if err := json.Unmarshal(a.body, &g); a.status != http.StatusOK || err != nil || g.Tokens["api"] != 1 {
		t.Fatalf("A gate: %d %s", a.status, a.body)
	}
	if a := h.call(t, "POST", base+"claim", tok, intent("run-2", 'b', "api")); a.status != http.StatusOK {
		t.Fatalf("B claim: %d %s", a.status, a.body)
	}
	h.clock.Advance(20 * time.Second)

	a = h.call(t, "POST", base+"gate", tok, apiclient.GateRequest{Generation: 2, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-2", LeaseTTLMillis: 120_000})
	want := apiclient.ErrorBody{Error: "locked", Wait: authority.ReasonLocked, RetryAfter: 105, Resource: "staging/api", Holder: "gha:Codertocat/Hello-World/101/1/run-1", Purpose: "deploy",
		Generation: 1, ExpiresAt: h.clock.Now().Add(100 * time.Second)}
	got := a.errorBody(t)
	got.Message = ""
	if a.status != http.StatusConflict || a.header.Get("Retry-After") != "105" {
		t.Errorf("locked: status %d, Retry-After %q; want 409 and 105", a.status, a.header.Get("Retry-After"))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("locked body (-want +got):\n%s", diff)
	}

	a = h.call(t, "POST", base+"gate", tok, apiclient.GateRequest{Generation: 1, Scopes: []string{"api"}, Phase: "publish"})
	got = a.errorBody(t)
	if a.status != http.StatusConflict || !strings.Contains(got.Message, "superseded by generation 2 (bbbbbbb)") {
		t.Errorf("superseded: %d %s", a.status, a.body)
	}
	got.Message = ""
	if diff := cmp.Diff(apiclient.ErrorBody{Error: "superseded", Scope: "api", Generation: 1, By: 2, BySha: strings.Repeat("b", 40)}, got); diff != "" {
		t.Errorf("superseded body (-want +got):\n%s", diff)
	}

	g.Tokens["api"] = 7
	a = h.call(t, "POST", base+"renew", tok, apiclient.RenewRequest{Grant: g, LeaseTTLMillis: 120_000})
	if got := a.errorBody(t); a.status != http.StatusConflict || got.Error != "lease_lost" || got.Token != 7 || got.Current != 1 {
		t.Errorf("renew with a stale token: %d %s", a.status, a.body)
	}
}

// TestAPIRefusals: every bad request gets its status and a stable code, with a message that says
// what to fix.
func TestAPIRefusals(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	good := h.token(t, "Codertocat/Hello-World")
	wrongAud := h.iss.Sign(t, func() jwt.MapClaims {
		c := h.iss.Claims("Codertocat/Hello-World", "sts.amazonaws.com", h.clock.Now())
		return c
	}())
	tests := []struct {
		name, method, path, token string
		body                      any
		status                    int
		code, says                string
	}{
		{"no token", "POST", "/v1/environments/staging/claim", "", intent("i", 'a', "api"), 401, "unauthorized", "no bearer token"},
		{"wrong audience", "POST", "/v1/environments/staging/claim", wrongAud, intent("i", 'a', "api"), 401, "unauthorized", `audience ["sts.amazonaws.com"] is not "latestwins"`},
		{"repository not allowed", "POST", "/v1/environments/staging/claim", h.token(t, "acme/other"), intent("i", 'a', "api"), 403, "forbidden",
			"acme/other may not act on staging: none of its scopes is built from that repository"},
		{"scope of another repository", "POST", "/v1/environments/staging/claim", good, intent("i", 'a', "api", "web"), 403, "forbidden",
			"Codertocat/Hello-World may not act on web of staging: they are not built from it (its scopes there: api, docs)"},
		{"unknown environment", "GET", "/v1/environments/prod/status", good, nil, 403, "forbidden", "the configuration defines no such environment"},
		{"bad environment", "GET", "/v1/environments/-x/status", good, nil, 400, "invalid", "environment"},
		{"bad phase", "POST", "/v1/environments/staging/gate", good, apiclient.GateRequest{Generation: 1, Scopes: []string{"api"}, Phase: "Deploy!"}, 400, "invalid",
			`invalid phase "Deploy!": use a lowercase phase name`},
		{"not JSON", "POST", "/v1/environments/staging/claim", good, "{", 400, "invalid", "send a JSON object of the endpoint's shape"},
		{"unknown field", "POST", "/v1/environments/staging/gate", good, `{"generation":1,"ttl":5}`, 400, "invalid", `unknown field "ttl"`},
		{"body over the cap", "POST", "/v1/environments/staging/claim", good, `{"intent":{"id":"` + strings.Repeat("x", apiclient.MaxBodyBytes) + `"}}`, 400, "invalid", "send at most 1048576 bytes"},
		{"another environment in the body", "POST", "/v1/environments/staging/claim", good,
			apiclient.ClaimRequest{Intent: authority.Intent{ID: "i", Environment: "prod", Scopes: []string{"api"}, Sha: strings.Repeat("a", 40)}}, 400, "invalid", "another environment than the path"},
		{"unknown verb", "POST", "/v1/environments/staging/deploy", good, nil, 404, "not_found", "no such endpoint"},
		{"status by POST", "POST", "/v1/environments/staging/status", good, nil, 405, "invalid", "status takes GET"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := h.call(t, tt.method, tt.path, tt.token, tt.body)
			got := a.errorBody(t)
			if a.status != tt.status || got.Error != tt.code || !strings.Contains(got.Message, tt.says) {
				t.Errorf("got %d %s, want %d %s saying %q", a.status, a.body, tt.status, tt.code, tt.says)
			}
			if tt.status == 401 && a.header.Get("WWW-Authenticate") == "" {
				t.Errorf("a 401 without WWW-Authenticate")
			}
		})
	}
}

// TestAPIMissingTokenNamesTheAudience: the 401 for a request without a token names the audience
// this App requires, so a workflow asking for the default one learns what to ask for instead.
func TestAPIMissingTokenNamesTheAudience(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Audience: "deploys", Clock: o.Authority})
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = v
	})
	r := httptest.NewRequest(http.MethodGet, "/v1/environments/staging/status", nil)
	rec := h.do(r)
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "(audience deploys)") {
		t.Errorf("no token: %d %s; want 401 naming the audience deploys", rec.Code, rec.Body)
	}
}

// TestAPIUnavailable: an issuer the App cannot reach is 503 unavailable (retryable), never 401.
func TestAPIUnavailable(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	h := newHarness(t, testConfig, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: "http://127.0.0.1:1", Clock: o.Authority})
		if err != nil {
			t.Fatal(err)
		}
		o.Tokens = v
	})
	ah := &apiHarness{harness: h, iss: iss}
	a := ah.call(t, "GET", "/v1/environments/staging/status", ah.token(t, "Codertocat/Hello-World"), nil)
	if got := a.errorBody(t); a.status != http.StatusServiceUnavailable || got.Error != "unavailable" {
		t.Errorf("got %d %s, want 503 unavailable", a.status, a.body)
	}
}

// TestAPIPreviewEnvironment: an environment name with a slash travels escaped as one segment, or
// not, and status answers the store's state.
func TestAPIPreviewEnvironment(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	tok := h.token(t, "Codertocat/Hello-World")
	if a := h.call(t, "POST", "/v1/environments/preview%2Fpr-7/claim", tok, intent("pr-7-run", 'a', "api")); a.status != http.StatusOK {
		t.Fatalf("claim: %d %s", a.status, a.body)
	}
	a := h.call(t, "GET", "/v1/environments/preview/pr-7/status", tok, nil)
	var st apiclient.StatusResponse
	if err := json.Unmarshal(a.body, &st); a.status != http.StatusOK || err != nil {
		t.Fatalf("status: %d %s", a.status, a.body)
	}
	if st.Env.Name != "preview/pr-7" || st.Env.Desired != 1 || st.Env.Scopes["api"].Owner != 1 || !st.Now.Equal(h.clock.Now()) {
		t.Errorf("status: %+v", st)
	}
}

// TestAPIHolderFromToken: the lease holder comes from the verified token (repository, run, run
// attempt), never from the body. Another run of the same repository that sends the holder name and
// tokens of a run holding the lease can neither renew, release nor complete it.
func TestAPIHolderFromToken(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	runToken := func(runID string) string {
		c := h.iss.Claims("Codertocat/Hello-World", "latestwins", h.clock.Now())
		c["run_id"] = runID
		return h.iss.Sign(t, c)
	}
	first, other := runToken("101"), runToken("202")
	const base = "/v1/environments/staging/"
	if a := h.call(t, "POST", base+"claim", first, intent("run-101", 'a', "api")); a.status != http.StatusOK {
		t.Fatalf("claim: %d %s", a.status, a.body)
	}
	a := h.call(t, "POST", base+"gate", first, apiclient.GateRequest{Generation: 1, Scopes: []string{"api"}, Phase: "deploy",
		Holder: "gha:Somebody/Else/999/1/deploy", LeaseTTLMillis: 120_000})
	var g authority.Grant
	if err := json.Unmarshal(a.body, &g); a.status != http.StatusOK || err != nil {
		t.Fatalf("gate: %d %s", a.status, a.body)
	}
	if g.Holder != "gha:Codertocat/Hello-World/101/1/deploy" {
		t.Fatalf("granted to %q; want the holder of the token's run attempt, with the job the client named", g.Holder)
	}
	before, err := h.auth.Status(t.Context(), "staging")
	if err != nil {
		t.Fatal(err)
	}

	// Run 202 sends run 101's grant, holder name and tokens included.
	if a := h.call(t, "POST", base+"renew", other, apiclient.RenewRequest{Grant: g, LeaseTTLMillis: 120_000}); a.status != http.StatusConflict || a.errorBody(t).Error != "lease_lost" {
		t.Errorf("renew by another run: %d %s; want 409 lease_lost", a.status, a.body)
	}
	if a := h.call(t, "POST", base+"release", other, apiclient.ReleaseRequest{Grant: g}); a.status != http.StatusConflict || a.errorBody(t).Error != "lease_lost" {
		t.Errorf("release by another run: %d %s; want 409 lease_lost", a.status, a.body)
	}
	c := apiclient.CompleteRequest{Completion: authority.Completion{Generation: 1, Scopes: []string{"api"}, Holder: g.Holder, Tokens: g.Tokens,
		Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3}}
	if a := h.call(t, "POST", base+"complete", other, c); a.status != http.StatusConflict || a.errorBody(t).Error != "lease_lost" {
		t.Errorf("complete by another run: %d %s; want 409 lease_lost", a.status, a.body)
	}
	after, err := h.auth.Status(t.Context(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before.Scopes, after.Scopes); diff != "" {
		t.Fatalf("another run's calls changed the environment (-before +after):\n%s", diff)
	}
	// The run that holds it completes.
	if a := h.call(t, "POST", base+"complete", first, c); a.status != http.StatusOK {
		t.Fatalf("complete by the holder: %d %s", a.status, a.body)
	}
}

// TestAPIHistoryPages: the timeline pages through the API from the newest event back to the first.
func TestAPIHistoryPages(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	tok := h.token(t, "Codertocat/Hello-World")
	const base = "/v1/environments/staging/"
	for i := range 12 {
		if a := h.call(t, "POST", base+"claim", tok, intent(fmt.Sprintf("run-%d", i), "0123456789ab"[i], "api")); a.status != http.StatusOK {
			t.Fatalf("claim: %d %s", a.status, a.body)
		}
	}
	var seqs []int64
	before := int64(0)
	for {
		a := h.call(t, "GET", fmt.Sprintf("%shistory?before=%d&limit=5", base, before), tok, nil)
		var page authority.HistoryPage
		if err := json.Unmarshal(a.body, &page); a.status != http.StatusOK || err != nil || len(page.Events) > 5 {
			t.Fatalf("history before %d: %d %s", before, a.status, a.body)
		}
		for i := len(page.Events) - 1; i >= 0; i-- {
			seqs = append(seqs, page.Events[i].Seq)
		}
		if page.Before == 0 {
			break
		}
		before = page.Before
	}
	for i, s := range seqs {
		if s != int64(len(seqs)-i) {
			t.Fatalf("paged %v; want every event once, newest first", seqs)
		}
	}
	if a := h.call(t, "GET", base+"history?limit=0", tok, nil); a.status != http.StatusBadRequest {
		t.Fatalf("limit 0: %d %s; want 400", a.status, a.body)
	}
}

// TestAPIEnterOnlyWithAnIntent: a claim of a generation accepted before that asks to enter the
// deploy phase is refused (400, field enter), rather than claimed with the request dropped.
func TestAPIEnterOnlyWithAnIntent(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	tok := h.token(t, "Codertocat/Hello-World")
	const base = "/v1/environments/staging/"
	if a := h.call(t, "POST", base+"claim", tok, intent("run-1", 'a', "api")); a.status != http.StatusOK {
		t.Fatalf("claim: %d %s", a.status, a.body)
	}
	a := h.call(t, "POST", base+"claim", tok, apiclient.ClaimRequest{Generation: 1, Scopes: []string{"api"},
		Enter: &apiclient.EnterRequest{LeaseTTLMillis: 60000}})
	if e := a.errorBody(t); a.status != http.StatusBadRequest || e.Error != apiclient.CodeInvalid || e.Field != "enter" {
		t.Fatalf("a claim of a generation asking to enter: %d %s; want 400 invalid, field enter", a.status, a.body)
	}
}
