package app

import (
	"context"
	"errors"
	"strings"
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
		{"not a JWT", "not.a.jwt", "malformed token"},
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
