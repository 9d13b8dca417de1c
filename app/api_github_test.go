package app

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

// newCredentialedAPI is the App as serve and Lambda build it with App credentials: each
// repository's configuration read from GitHub (the strict fake) as its installation, which the API
// finds through GET /repos/{owner}/{repo}/installation.
func newCredentialedAPI(t *testing.T) (*apiHarness, *githubtest.Server) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	gh := githubtest.New(t)
	inst, err := githubapp.NewInstallations(42, keyPEM, gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	src, auth, clock := newConfigSource(t, inst)
	iss := oidctest.NewIssuer(t)
	h := newHarness(t, testConfig, func(o *Options) {
		v, err := NewOIDCVerifier(OIDCOptions{Issuer: iss.URL, Clock: auth})
		if err != nil {
			t.Fatal(err)
		}
		o.Authority, o.Config, o.Tokens = auth, src, v
	})
	h.auth, h.clock = auth, clock
	return &apiHarness{harness: h, iss: iss}, gh
}

// TestAPIWithAppCredentials: with App credentials the API finds the installation of the token's
// repository, reads the repository's configuration as that installation, and answers; lookups and
// the configuration are cached, so a second call makes no GitHub request.
func TestAPIWithAppCredentials(t *testing.T) {
	t.Parallel()
	h, gh := newCredentialedAPI(t)
	installation := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/installation", http.StatusOK, "")
	installation["id"] = 99
	gh.On("GET", fixtureRepo+"/installation", http.StatusOK, installation)
	token := githubtest.Example(t, "POST", "/app/installations/{installation_id}/access_tokens", http.StatusCreated, "")
	token["token"] = "ghs_ninetynine"
	token["expires_at"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	gh.On("POST", "/app/installations/99/access_tokens", http.StatusCreated, token)
	stubConfig(t, gh, testConfig)

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
		"GET /repos/Codertocat/Hello-World/installation Bearer (the App's JWT)",
		"POST /app/installations/99/access_tokens Bearer (the App's JWT)",
		"GET /repos/Codertocat/Hello-World/contents/.github/latestwins.yml token ghs_ninetynine",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GitHub requests (-want +got):\n%s", diff)
	}
}

// TestAPIAppNotInstalled: a token of a repository the App is not installed on is 403 with what to
// do, and nothing is read or written.
func TestAPIAppNotInstalled(t *testing.T) {
	t.Parallel()
	h, gh := newCredentialedAPI(t)
	gh.On("GET", "/repos/acme/web/installation", http.StatusNotFound, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)

	a := h.call(t, "POST", "/v1/environments/staging/claim", h.token(t, "acme/web"), intent("run-1", 'a', "web"))
	got := a.errorBody(t)
	want := apiclient.ErrorBody{Error: apiclient.CodeForbidden, Message: "acme/web may not use the latestwins API: the latestwins GitHub App is not installed on it, " +
		"so its .github/latestwins.yml cannot be read; install the App on acme/web (the App's page on GitHub, Configure)"}
	if diff := cmp.Diff(want, got); a.status != http.StatusForbidden || diff != "" {
		t.Errorf("status %d, body (-want +got):\n%s", a.status, diff)
	}
	if _, err := h.auth.Status(t.Context(), "staging"); !errors.Is(err, authority.ErrInvalidInput) {
		t.Errorf("staging has state after a refused claim: %v", err)
	}
}

// TestAPIRateLimitedLookupIs503: GitHub's rate limit on the lookup is 503 with its Retry-After.
func TestAPIRateLimitedLookupIs503(t *testing.T) {
	t.Parallel()
	h, gh := newCredentialedAPI(t)
	gh.On("GET", fixtureRepo+"/installation", http.StatusTooManyRequests, `{"message":"You have exceeded a secondary rate limit"}`).Header("Retry-After", "42")

	a := h.call(t, "GET", "/v1/environments/staging/status", h.token(t, "Codertocat/Hello-World"), nil)
	if got := a.errorBody(t); a.status != http.StatusServiceUnavailable || got.Error != apiclient.CodeUnavailable || got.RetryAfter != 42 ||
		a.header.Get("Retry-After") != "42" {
		t.Errorf("got %d Retry-After %q %s; want 503 unavailable retrying after 42", a.status, a.header.Get("Retry-After"), a.body)
	}
}
