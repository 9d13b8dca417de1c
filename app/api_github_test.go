package app

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/api"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

// newCredentialedAPI is the App as serve and Lambda build it with App credentials and no other
// setting: the trusted file is .github/latestwins.yml of the .github repository of the account
// that owns the App (GET /app), read from GitHub (the strict fake) as the App's installation there,
// which it finds through GET /repos/{owner}/{repo}/installation.
func newCredentialedAPI(t *testing.T) (*apiHarness, *githubtest.Server) {
	t.Helper()
	as := newAppSource(t)
	src, auth, clock := as.src, as.auth, as.clock
	gh := as.gh
	iss := oidctest.NewIssuer(t)
	h := newHarness(t, testConfig, func(o *Options) {
		v, err := api.NewOIDCVerifier(api.OIDCOptions{Issuer: iss.URL, Clock: auth})
		if err != nil {
			t.Fatal(err)
		}
		o.Authority, o.Config, o.Tokens = auth, src, v
	})
	h.auth, h.clock = auth, clock
	return &apiHarness{harness: h, iss: iss}, gh
}

// stubAppOwner answers GET /app: the App belongs to owner.
func stubAppOwner(t *testing.T, gh *githubtest.Server, owner string) {
	t.Helper()
	a := githubtest.Example(t, "GET", "/app", http.StatusOK, "")
	a["owner"].(map[string]any)["login"] = owner
	gh.On("GET", "/app", http.StatusOK, a)
}

// stubTrusted answers, for the trusted repository owner/.github, the App's installation (99, with
// its token) and its .github/latestwins.yml (404 when yaml is empty).
func stubTrusted(t *testing.T, gh *githubtest.Server, owner, yaml string) *githubtest.Stub {
	t.Helper()
	stubAppOwner(t, gh, owner)
	installation := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/installation", http.StatusOK, "")
	installation["id"] = 99
	gh.On("GET", "/repos/"+owner+"/.github/installation", http.StatusOK, installation)
	token := githubtest.Example(t, "POST", "/app/installations/{installation_id}/access_tokens", http.StatusCreated, "")
	token["token"] = "ghs_ninetynine"
	token["expires_at"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	gh.On("POST", "/app/installations/99/access_tokens", http.StatusCreated, token)
	if yaml == "" { // no trusted file
		return gh.On("GET", "/repos/"+owner+"/.github/contents/.github/latestwins.yml", http.StatusNotFound,
			`{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)
	}
	file := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/contents/{path}", http.StatusOK, "response-if-content-is-a-file")
	file["content"] = base64.StdEncoding.EncodeToString([]byte(yaml))
	file["path"] = ".github/latestwins.yml"
	return gh.On("GET", "/repos/"+owner+"/.github/contents/.github/latestwins.yml", http.StatusOK, file)
}

// TestAPIWithAppCredentials: with App credentials the API reads the trusted file from the App
// owner's .github repository, as the App's installation there, and answers for the scopes it gives
// the token's repository; the lookups and the file are cached, so a second call makes no GitHub
// request. The token's repository's own file is not read: it cannot add scopes.
func TestAPIWithAppCredentials(t *testing.T) {
	t.Parallel()
	h, gh := newCredentialedAPI(t)
	stubTrusted(t, gh, "Codertocat", testConfig)

	tok := h.token(t, "Codertocat/Hello-World")
	if a := h.call(t, "POST", "/v1/environments/staging/claim", tok, intent("run-1", 'a', "api")); a.status != http.StatusOK {
		t.Fatalf("claim: %d %s", a.status, a.body)
	}
	a := h.call(t, "GET", "/v1/environments/staging/status", tok, nil)
	var st apiclient.StatusResponse
	if err := json.Unmarshal(a.body, &st); a.status != http.StatusOK || err != nil || st.Env.Scopes["api"].Owner != 1 {
		t.Fatalf("status: %d %s", a.status, a.body)
	}

	var got []string
	for _, r := range gh.Requests() {
		auth := r.Header.Get("Authorization")
		if strings.HasPrefix(auth, "Bearer ") {
			auth = "Bearer (the App's JWT)"
		}
		got = append(got, r.Method+" "+r.Path+" "+auth)
	}
	want := []string{
		"GET /app Bearer (the App's JWT)",
		"GET /repos/Codertocat/.github/installation Bearer (the App's JWT)",
		"POST /app/installations/99/access_tokens Bearer (the App's JWT)",
		"GET /repos/Codertocat/.github/contents/.github/latestwins.yml token ghs_ninetynine",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GitHub requests (-want +got):\n%s", diff)
	}
}

// TestAPIOnlyScopesTheTrustedFileGives: an environment fed only by repository Y refuses X's OIDC
// token, whatever X's own file says, and a repository the trusted file does not name may act on
// nothing; each refusal names the trusted file, and nothing is written.
func TestAPIOnlyScopesTheTrustedFileGives(t *testing.T) {
	t.Parallel()
	h, gh := newCredentialedAPI(t)
	stubTrusted(t, gh, "Codertocat", testConfig+`  production:
    scopes:
      api:
        repository: Codertocat/Releases
        branch: main
`)
	// Nothing of Hello-World is stubbed: the API never reads a repository's own file (it could not
	// add a scope), and the fake fails any request it has no stub for.
	trusted := "Codertocat/.github:.github/latestwins.yml"
	for _, tt := range []struct {
		repo, env, scope, want string
	}{
		{"Codertocat/Hello-World", "production", "api", "Codertocat/Hello-World may not act on production: none of its scopes is built from that repository in " + trusted},
		{"acme/intruder", "staging", "api", "acme/intruder may not act on staging: none of its scopes is built from that repository in " + trusted},
		{"acme/intruder", "qa", "api", "acme/intruder may not act on qa: " + trusted + " defines no such environment"},
		{"acme/web", "staging", "api", "acme/web may not act on api of staging: they are not built from it (its scopes there: web)"},
	} {
		a := h.call(t, "POST", "/v1/environments/"+tt.env+"/claim", h.token(t, tt.repo), intent("run-1", 'a', tt.scope))
		if got := a.errorBody(t); a.status != http.StatusForbidden || got.Error != apiclient.CodeForbidden || !strings.HasPrefix(got.Message, tt.want) {
			t.Errorf("%s claiming %s/%s: %d %+v; want 403 saying %q", tt.repo, tt.env, tt.scope, a.status, got, tt.want)
		}
		if _, err := h.auth.Status(t.Context(), tt.env); !errors.Is(err, authority.ErrInvalidInput) {
			t.Errorf("%s has state after a refused claim: %v", tt.env, err)
		}
	}
	for _, r := range gh.Requests() {
		if strings.HasPrefix(r.Path, "/repos/Codertocat/Hello-World/") {
			t.Errorf("the API read %s: a repository's own file cannot give it scopes", r.Path)
		}
	}
}

// TestAPITrustedRepositoryWithoutTheApp: when the App is not installed on the repository of the
// trusted file, no environment is defined; the answer says where to install it.
func TestAPITrustedRepositoryWithoutTheApp(t *testing.T) {
	t.Parallel()
	h, gh := newCredentialedAPI(t)
	stubAppOwner(t, gh, "Codertocat")
	gh.On("GET", "/repos/Codertocat/.github/installation", http.StatusNotFound, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)

	a := h.call(t, "POST", "/v1/environments/staging/claim", h.token(t, "Codertocat/Hello-World"), intent("run-1", 'a', "api"))
	if got := a.errorBody(t); a.status != http.StatusBadRequest || !strings.Contains(got.Message, "the App is not installed on Codertocat/.github: install it there") {
		t.Errorf("status %d, body %+v; want 400 saying to install the App on Codertocat/.github", a.status, got)
	}
	if _, err := h.auth.Status(t.Context(), "staging"); !errors.Is(err, authority.ErrInvalidInput) {
		t.Errorf("staging has state after a refused claim: %v", err)
	}
}

// TestAPIRateLimitedLookupIs503: GitHub's rate limit on the lookup is 503 with its Retry-After.
func TestAPIRateLimitedLookupIs503(t *testing.T) {
	t.Parallel()
	h, gh := newCredentialedAPI(t)
	stubAppOwner(t, gh, "Codertocat")
	gh.On("GET", "/repos/Codertocat/.github/installation", http.StatusTooManyRequests, `{"message":"You have exceeded a secondary rate limit"}`).Header("Retry-After", "42")

	a := h.call(t, "GET", "/v1/environments/staging/status", h.token(t, "Codertocat/Hello-World"), nil)
	if got := a.errorBody(t); a.status != http.StatusServiceUnavailable || got.Error != apiclient.CodeUnavailable || got.RetryAfter != 42 ||
		a.header.Get("Retry-After") != "42" {
		t.Errorf("got %d Retry-After %q %s; want 503 unavailable retrying after 42", a.status, a.header.Get("Retry-After"), a.body)
	}
}
