// Package oidctest is a fake OIDC issuer for tests: OIDC discovery and a JWKS served on 127.0.0.1,
// RS256 tokens signed with generated keys, and a fake of the Actions runner's token endpoint
// (ACTIONS_ID_TOKEN_REQUEST_URL) that hands out the issuer's tokens.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// Issuer is a fake OIDC issuer. Its URL is the issuer (iss).
type Issuer struct {
	URL string

	mu   sync.Mutex
	keys map[string]*rsa.PrivateKey // published keys by kid
	kid  string                     // the signing key
	seq  int

	// JWKSFetches counts requests for the key set.
	JWKSFetches atomic.Int64
}

// NewIssuer starts an issuer with one key; the server stops when the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	iss := &Issuer{keys: map[string]*rsa.PrivateKey{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"issuer": iss.URL, "jwks_uri": iss.URL + "/.well-known/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("GET /.well-known/jwks", func(w http.ResponseWriter, _ *http.Request) {
		iss.JWKSFetches.Add(1)
		writeJSON(w, iss.jwks())
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	iss.URL = srv.URL
	iss.Rotate(t)
	return iss
}

// NewKey generates an RSA key.
func NewKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// Rotate publishes a new key and signs with it from now on; it returns the new kid. Earlier keys
// stay published.
func (i *Issuer) Rotate(t testing.TB) string {
	t.Helper()
	k := NewKey(t)
	i.mu.Lock()
	defer i.mu.Unlock()
	i.seq++
	i.kid = fmt.Sprintf("key-%d", i.seq)
	i.keys[i.kid] = k
	return i.kid
}

// Claims are the claims of a valid token for repo at now, as GitHub Actions issues them.
func (i *Issuer) Claims(repo, audience string, now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss": i.URL, "aud": audience, "sub": "repo:" + repo + ":ref:refs/heads/master",
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"repository": repo, "repository_owner": ownerOf(repo), "actor": "Codertocat",
		"ref": "refs/heads/master", "run_id": "101", "run_attempt": "1", "workflow": "deploy",
	}
}

// Sign signs claims with the current key.
func (i *Issuer) Sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	i.mu.Lock()
	kid, key := i.kid, i.keys[i.kid]
	i.mu.Unlock()
	return SignWith(t, kid, key, claims)
}

// SignWith signs claims with any key under any kid (for unknown keys and bad signatures).
func SignWith(t testing.TB, kid string, key *rsa.PrivateKey, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (i *Issuer) jwks() map[string]any {
	i.mu.Lock()
	defer i.mu.Unlock()
	keys := []map[string]string{}
	for kid, k := range i.keys {
		keys = append(keys, map[string]string{"kty": "RSA", "alg": "RS256", "use": "sig", "kid": kid,
			"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
	}
	return map[string]any{"keys": keys}
}

// TokenEndpoint fakes the runner's ACTIONS_ID_TOKEN_REQUEST_URL: it checks the request token and
// answers {"value": TOKEN} with claims(audience) signed by the issuer. It returns the URL and the
// request token to put in ACTIONS_ID_TOKEN_REQUEST_TOKEN, and counts the tokens issued.
func (i *Issuer) TokenEndpoint(t testing.TB, claims func(audience string) jwt.MapClaims) (url, bearer string, issued *atomic.Int64) {
	t.Helper()
	bearer = "runner-request-token"
	issued = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+bearer {
			http.Error(w, `{"message":"bad request token"}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Query().Get("api-version") != "2.0" {
			http.Error(w, `{"message":"api-version missing"}`, http.StatusBadRequest)
			return
		}
		issued.Add(1)
		writeJSON(w, map[string]any{"count": 1, "value": i.Sign(t, claims(r.URL.Query().Get("audience")))})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/_apis/pipelines/workflows/101/idtoken?api-version=2.0", bearer, issued
}

func ownerOf(repo string) string {
	for j := range repo {
		if repo[j] == '/' {
			return repo[:j]
		}
	}
	return repo
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
