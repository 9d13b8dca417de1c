package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

var tokenNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func newVerifier(t *testing.T, iss *oidctest.Issuer, clock *storetest.Clock) *OIDCVerifier {
	t.Helper()
	v, err := NewOIDCVerifier(OIDCOptions{Issuer: iss.URL, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestOIDCVerify: a token is accepted only when signed by a published key of the issuer, for the
// audience latestwins, within its validity (a minute of leeway), with a repository claim.
func TestOIDCVerify(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	stranger := oidctest.NewKey(t)
	valid := func() jwt.MapClaims { return iss.Claims("Codertocat/Hello-World", "latestwins", tokenNow) }
	with := func(k string, v any) string {
		c := valid()
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return iss.Sign(t, c)
	}
	tests := []struct {
		name  string
		token string
		want  string // the reason's start; "" accepts
	}{
		{"valid", iss.Sign(t, valid()), ""},
		{"audience in a list", with("aud", []string{"sts.amazonaws.com", "latestwins"}), ""},
		{"expired within the leeway", with("exp", tokenNow.Add(-30*time.Second).Unix()), ""},
		{"wrong audience", with("aud", "sts.amazonaws.com"), `audience ["sts.amazonaws.com"] is not "latestwins"`},
		{"expired", with("exp", tokenNow.Add(-2*time.Minute).Unix()), "expired at 2026-11-29T11:58:00Z"},
		{"no expiry", with("exp", nil), "the token has no expiry"},
		{"not yet valid", with("nbf", tokenNow.Add(5*time.Minute).Unix()), "not valid before"},
		{"issued in the future", with("iat", tokenNow.Add(5*time.Minute).Unix()), "issued in the future"},
		{"wrong issuer", with("iss", "https://token.actions.githubusercontent.com"), `issuer "https://token.actions.githubusercontent.com" is not`},
		{"no repository", with("repository", nil), "the token has no repository claim"},
		{"unknown kid", oidctest.SignWith(t, "key-99", stranger, valid()), `unknown key "key-99"`},
		{"bad signature", oidctest.SignWith(t, "key-1", stranger, valid()), "bad signature"},
		{"no kid", oidctest.SignWith(t, "", stranger, valid()), "the token names no key"},
		{"HS256", hs256(t, valid()), "signing method HS256 is not RS256"},
		{"alg none", unsigned(valid()), "signing method none is not RS256"},
		{"ES256", es256(t, valid()), "signing method ES256 is not RS256"},
		{"not a JWT", "not.a.jwt", "malformed token"},
		{"JSON serialization", flattened(iss.Sign(t, valid())), "malformed token"},
		{"audience not a string", with("aud", 7), "malformed token"},
		{"run id not a string", with("run_id", 101), "malformed token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := newVerifier(t, iss, storetest.NewClock(tokenNow))
			wl, err := v.Verify(context.Background(), tt.token)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				want := &Workload{Repository: "Codertocat/Hello-World", Actor: "Codertocat", Ref: "refs/heads/master", RunID: "101",
					RunAttempt: "1", Subject: "repo:Codertocat/Hello-World:ref:refs/heads/master"}
				if diff := cmp.Diff(want, wl); diff != "" {
					t.Errorf("workload (-want +got):\n%s", diff)
				}
				return
			}
			var te *TokenError
			if !errors.As(err, &te) || !errors.Is(err, ErrTokenRejected) {
				t.Fatalf("err = %v, want a *TokenError", err)
			}
			if !strings.HasPrefix(te.Reason, tt.want) {
				t.Errorf("reason %q, want it to start with %q", te.Reason, tt.want)
			}
		})
	}
}

func hs256(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	tok.Header["kid"] = "key-1"
	s, err := tok.SignedString([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOIDCKeysAreCachedAndRefreshed: keys are fetched once, fetched again for a kid they do not
// hold (a rotation) but not more than once per 10 s, and again when the cache ages out.
func TestOIDCKeysAreCachedAndRefreshed(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	clock := storetest.NewClock(tokenNow)
	v := newVerifier(t, iss, clock)
	verify := func() error {
		_, err := v.Verify(context.Background(), iss.Sign(t, iss.Claims("Codertocat/Hello-World", "latestwins", clock.Now())))
		return err
	}
	steps := []struct {
		name    string
		before  func()
		fetches int64
		err     bool
	}{
		{"first token fetches", nil, 1, false},
		{"second uses the cache", nil, 1, false},
		{"a rotation within 10 s is refused without a fetch", func() { iss.Rotate(t) }, 1, true},
		{"after 10 s an unknown kid fetches again", func() { clock.Advance(11 * time.Second) }, 2, false},
		{"an hour later the cache is refreshed", func() { clock.Advance(time.Hour) }, 3, false},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		err := verify()
		if (err != nil) != s.err {
			t.Fatalf("%s: err = %v", s.name, err)
		}
		if got := iss.JWKSFetches.Load(); got != s.fetches {
			t.Errorf("%s: %d key set fetches, want %d", s.name, got, s.fetches)
		}
	}
}

// TestOIDCIssuerUnreachable: a failed key fetch is not a bad token (the API answers 503, not 401).
func TestOIDCIssuerUnreachable(t *testing.T) {
	t.Parallel()
	iss := oidctest.NewIssuer(t)
	tok := iss.Sign(t, iss.Claims("Codertocat/Hello-World", "latestwins", tokenNow))
	v, err := NewOIDCVerifier(OIDCOptions{Issuer: "http://127.0.0.1:1", Clock: storetest.NewClock(tokenNow)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(context.Background(), tok)
	if err == nil || errors.Is(err, ErrTokenRejected) || !strings.Contains(err.Error(), "fetch the keys of http://127.0.0.1:1") {
		t.Fatalf("err = %v, want a fetch failure that is not a token rejection", err)
	}
}

func TestOIDCOptions(t *testing.T) {
	t.Parallel()
	_, err := NewOIDCVerifier(OIDCOptions{Issuer: "http://token.example"})
	if err == nil || !strings.Contains(err.Error(), "give the issuer's https URL") {
		t.Errorf("err = %v", err)
	}
}

// unsigned is c as an unsigned token (alg none), the forgery a parser that trusts the header accepts.
func unsigned(c jwt.MapClaims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodNone, c)
	tok.Header["kid"] = "key-1"
	s, _ := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
	return s
}

// flattened is a compact token in the flattened JSON serialization, which tokens never use.
func flattened(compact string) string {
	p := strings.Split(compact, ".")
	return fmt.Sprintf(`{"protected":%q,"payload":%q,"signature":%q}`, p[0], p[1], p[2])
}

func es256(t *testing.T, c jwt.MapClaims) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, c)
	tok.Header["kid"] = "key-1"
	s, err := tok.SignedString(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// keyServer is an issuer on 127.0.0.1 whose discovery document and key set the test writes.
type keyServer struct {
	URL       string
	down      atomic.Bool  // every answer is 503
	discovery atomic.Value // func(url string) any
	jwks      atomic.Value // func() any
	fetches   atomic.Int64 // key set requests
}

func newKeyServer(t *testing.T, key *rsa.PrivateKey) *keyServer {
	t.Helper()
	ks := &keyServer{}
	ks.discovery.Store(func(url string) any { return map[string]string{"issuer": url, "jwks_uri": url + "/keys"} })
	ks.jwks.Store(func() any { return map[string]any{"keys": []any{rsaJWK("key-1", "sig", key)}} })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ks.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var body any
		switch r.URL.Path {
		case "/.well-known/openid-configuration":
			body = ks.discovery.Load().(func(string) any)(ks.URL)
		case "/keys":
			ks.fetches.Add(1)
			body = ks.jwks.Load().(func() any)()
		default:
			http.NotFound(w, r)
			return
		}
		if s, ok := body.(string); ok {
			_, _ = io.WriteString(w, s)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(srv.Close)
	ks.URL = srv.URL
	return ks
}

func rsaJWK(kid, use string, k *rsa.PrivateKey) map[string]string {
	return map[string]string{"kty": "RSA", "kid": kid, "use": use, "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())}
}

func (ks *keyServer) claims() jwt.MapClaims {
	return jwt.MapClaims{"iss": ks.URL, "aud": "latestwins", "sub": "repo:Codertocat/Hello-World:ref:refs/heads/master",
		"iat": tokenNow.Unix(), "exp": tokenNow.Add(5 * time.Minute).Unix(), "repository": "Codertocat/Hello-World"}
}

// TestOIDCBrokenIssuer: an issuer whose discovery or key set cannot be used fails the check (503),
// it does not reject the token (401).
func TestOIDCBrokenIssuer(t *testing.T) {
	t.Parallel()
	key := oidctest.NewKey(t)
	tests := []struct {
		name      string
		discovery func(url string) any
		jwks      func() any
		says      string
	}{
		{"discovery names another issuer", func(string) any {
			return map[string]string{"issuer": DefaultOIDCIssuer, "jwks_uri": DefaultOIDCIssuer + "/keys"}
		}, nil, DefaultOIDCIssuer},
		{"discovery names no key set", func(url string) any { return map[string]string{"issuer": url} }, nil, "fetch the keys of"},
		{"discovery is not JSON", func(string) any { return "<html>" }, nil, "fetch the keys of"},
		{"key set is not JSON", nil, func() any { return "<html>" }, "fetch the keys of"},
		{"key set holds no RSA signing key", nil, func() any {
			return map[string]any{"keys": []any{rsaJWK("key-1", "enc", key), map[string]string{"kty": "EC", "kid": "key-2", "crv": "P-256"}}}
		}, "fetch the keys of"},
		{"key set over 1 MiB", nil, func() any {
			return map[string]any{"keys": []any{rsaJWK("key-1", "sig", key)}, "pad": strings.Repeat("x", 1<<20)}
		}, "fetch the keys of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ks := newKeyServer(t, key)
			if tt.discovery != nil {
				ks.discovery.Store(tt.discovery)
			}
			if tt.jwks != nil {
				ks.jwks.Store(tt.jwks)
			}
			v, err := NewOIDCVerifier(OIDCOptions{Issuer: ks.URL, Clock: storetest.NewClock(tokenNow)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Verify(context.Background(), oidctest.SignWith(t, "key-1", key, ks.claims()))
			if err == nil || errors.Is(err, ErrTokenRejected) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("err = %v, want a failure to check saying %q that is not a token rejection", err, tt.says)
			}
		})
	}
}

// TestOIDCKeySetEntries: keys that are not RSA signing keys with a kid are skipped, and the others
// still verify.
func TestOIDCKeySetEntries(t *testing.T) {
	t.Parallel()
	key, other := oidctest.NewKey(t), oidctest.NewKey(t)
	ks := newKeyServer(t, key)
	ks.jwks.Store(func() any {
		return map[string]any{"keys": []any{
			map[string]string{"kty": "OKP", "kid": "key-ed448", "crv": "Ed448", "x": "AAAA"},
			map[string]string{"kty": "oct", "kid": "key-hmac", "k": base64.RawURLEncoding.EncodeToString([]byte("secret"))},
			map[string]string{"kty": "RSA", "kid": "key-bad", "n": "!!", "e": "AQAB"},
			rsaJWK("", "sig", other),
			rsaJWK("key-enc", "enc", other),
			rsaJWK("key-1", "sig", key),
			rsaJWK("key-nouse", "", other),
		}}
	})
	v, err := NewOIDCVerifier(OIDCOptions{Issuer: ks.URL, Clock: storetest.NewClock(tokenNow)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		kid  string
		key  *rsa.PrivateKey
		want string // the reason's start; "" accepts
	}{
		{"key-1", key, ""},
		{"key-nouse", other, ""},
		{"key-enc", other, `unknown key "key-enc"`},
		{"key-bad", other, `unknown key "key-bad"`},
	} {
		_, err := v.Verify(context.Background(), oidctest.SignWith(t, tt.kid, tt.key, ks.claims()))
		var te *TokenError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.kid, err)
		case tt.want != "" && (!errors.As(err, &te) || !strings.HasPrefix(te.Reason, tt.want)):
			t.Errorf("%s: err = %v, want a rejection saying %q", tt.kid, err, tt.want)
		}
	}
}

// TestOIDCStaleKeys: while the issuer is unreachable, the keys fetched last still verify after
// they age out; an unknown kid is then a failure to check, not a rejection.
func TestOIDCStaleKeys(t *testing.T) {
	t.Parallel()
	key := oidctest.NewKey(t)
	ks := newKeyServer(t, key)
	clock := storetest.NewClock(tokenNow)
	v, err := NewOIDCVerifier(OIDCOptions{Issuer: ks.URL, Clock: clock, KeysTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tok := oidctest.SignWith(t, "key-1", key, ks.claims())
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("first token: %v", err)
	}
	ks.down.Store(true)
	clock.Advance(2 * time.Minute)
	c := ks.claims()
	c["exp"] = clock.Now().Add(5 * time.Minute).Unix()
	if _, err := v.Verify(context.Background(), oidctest.SignWith(t, "key-1", key, c)); err != nil {
		t.Errorf("a stale key while the issuer is down: %v", err)
	}
	clock.Advance(time.Minute)
	_, err = v.Verify(context.Background(), oidctest.SignWith(t, "key-2", key, c))
	if err == nil || errors.Is(err, ErrTokenRejected) || !strings.Contains(err.Error(), "fetch the keys of") {
		t.Errorf("an unknown kid while the issuer is down: err = %v, want a failure to check", err)
	}
	if got := ks.fetches.Load(); got != 1 {
		t.Errorf("%d key set fetches answered, want 1", got)
	}
}

// TestOIDCSignedNonsense: a well signed token whose claims are not a JSON object is malformed.
func TestOIDCSignedNonsense(t *testing.T) {
	t.Parallel()
	key := oidctest.NewKey(t)
	ks := newKeyServer(t, key)
	v, err := NewOIDCVerifier(OIDCOptions{Issuer: ks.URL, Clock: storetest.NewClock(tokenNow)})
	if err != nil {
		t.Fatal(err)
	}
	for _, payload := range []string{"{", "[]", `"latestwins"`} {
		enc := base64.RawURLEncoding.EncodeToString
		signing := enc([]byte(`{"alg":"RS256","kid":"key-1","typ":"JWT"}`)) + "." + enc([]byte(payload))
		sig, err := jwt.SigningMethodRS256.Sign(signing, key)
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(context.Background(), signing+"."+sig)
		var te *TokenError
		if !errors.As(err, &te) || te.Reason != "malformed token" {
			t.Errorf("claims %s: err = %v, want a malformed token", payload, err)
		}
	}
}

// TestOIDCForgeriesDoNotFetch: tokens that arrive together share one key set fetch, and neither
// bad signatures on a known kid nor a stream of forged kids make the verifier fetch again.
func TestOIDCForgeriesDoNotFetch(t *testing.T) {
	t.Parallel()
	key, stranger := oidctest.NewKey(t), oidctest.NewKey(t)
	ks := newKeyServer(t, key)
	clock := storetest.NewClock(tokenNow)
	v, err := NewOIDCVerifier(OIDCOptions{Issuer: ks.URL, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	tok := oidctest.SignWith(t, "key-1", key, ks.claims())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			if _, err := v.Verify(context.Background(), tok); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent first tokens: %v", err)
	}
	for i := range 5 {
		clock.Advance(time.Second)
		if _, err := v.Verify(context.Background(), oidctest.SignWith(t, "key-1", stranger, ks.claims())); !errors.Is(err, ErrTokenRejected) {
			t.Errorf("bad signature: err = %v", err)
		}
		if _, err := v.Verify(context.Background(), oidctest.SignWith(t, fmt.Sprintf("forged-%d", i), stranger, ks.claims())); !errors.Is(err, ErrTokenRejected) {
			t.Errorf("forged kid: err = %v", err)
		}
	}
	if got := ks.fetches.Load(); got != 1 {
		t.Errorf("%d key set fetches, want 1", got)
	}
}
