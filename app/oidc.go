package app

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v4"

	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
)

// Defaults of the OIDC verifier.
const (
	// DefaultOIDCIssuer issues GitHub Actions' OIDC tokens on github.com.
	DefaultOIDCIssuer = "https://token.actions.githubusercontent.com"
	// DefaultOIDCLeeway is the clock skew allowed on exp, nbf and iat.
	DefaultOIDCLeeway = time.Minute
	// DefaultKeysTTL is how long a fetched key set is used before it is fetched again.
	DefaultKeysTTL = time.Hour
	// minKeyRefetch spaces the fetches an unknown kid causes, so that forged kids cannot flood the issuer.
	minKeyRefetch = 10 * time.Second
	maxKeysBody   = 1 << 20
)

// ErrTokenRejected is the category of *TokenError: the request carries no valid OIDC token (401).
var ErrTokenRejected = errors.New("OIDC token rejected")

// TokenError says why a token was refused.
type TokenError struct{ Reason string }

func (e *TokenError) Error() string { return "OIDC token rejected: " + e.Reason }

// Is matches ErrTokenRejected.
func (e *TokenError) Is(target error) bool { return target == ErrTokenRejected }

// Workload is what a verified token says about the workflow run that presented it.
type Workload struct {
	Repository string // OWNER/NAME
	Actor      string
	Ref        string
	Sha        string // the commit the run is for (GITHUB_SHA)
	RunID      string
	RunAttempt string
	Subject    string
}

// Holder names the lease holder a workload acts as: its repository, run and run attempt from the
// verified token, then the job the client names (the last segment of the holder it sent). Whatever
// a request body says, it can only name a holder of its own run attempt, so one run can never
// renew, complete or free another run's lease by sending that run's holder name.
func (wl *Workload) Holder(sent string) string {
	prefix := fmt.Sprintf("gha:%s/%s/%s/", wl.Repository, wl.RunID, wl.RunAttempt)
	job := strings.TrimPrefix(sent, prefix)
	if i := strings.LastIndex(job, "/"); i >= 0 {
		job = job[i+1:]
	}
	if job == "" {
		job = "api"
	}
	return prefix + job
}

// TokenVerifier checks a bearer token and says which workflow run presented it. An error matching
// ErrTokenRejected is a bad token (401); any other is a failure to check it (503).
type TokenVerifier interface {
	Verify(ctx context.Context, raw string) (*Workload, error)
}

// OIDCOptions configure an OIDCVerifier. Zero values take the defaults.
type OIDCOptions struct {
	Issuer     string        // DefaultOIDCIssuer; GitHub Enterprise Server and tests set their own
	Audience   string        // apiclient.Audience ("latestwins")
	Leeway     time.Duration // DefaultOIDCLeeway
	KeysTTL    time.Duration // DefaultKeysTTL
	HTTPClient *http.Client  // a client with a 10 s timeout
	Clock      authority.Clock
}

// OIDCVerifier verifies RS256 tokens of one issuer against its published keys, found through OIDC
// discovery, cached for KeysTTL and fetched again when a token names an unknown key.
type OIDCVerifier struct {
	issuer   string
	audience string
	leeway   time.Duration
	keysTTL  time.Duration
	hc       *http.Client
	clock    authority.Clock

	fetchMu sync.Mutex // one fetch at a time
	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetched time.Time
}

var _ TokenVerifier = (*OIDCVerifier)(nil)

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// NewOIDCVerifier checks the options. Nothing is fetched until the first token.
func NewOIDCVerifier(o OIDCOptions) (*OIDCVerifier, error) {
	v := &OIDCVerifier{issuer: strings.TrimSuffix(o.Issuer, "/"), audience: o.Audience, leeway: o.Leeway, keysTTL: o.KeysTTL, hc: o.HTTPClient, clock: o.Clock}
	if v.issuer == "" {
		v.issuer = DefaultOIDCIssuer
	}
	if !strings.HasPrefix(v.issuer, "https://") && !strings.HasPrefix(v.issuer, "http://127.0.0.1:") {
		return nil, &authority.InputError{Field: "OIDC issuer", Value: o.Issuer, Fix: "give the issuer's https URL, such as " + DefaultOIDCIssuer}
	}
	if v.audience == "" {
		v.audience = apiclient.Audience
	}
	if v.leeway <= 0 {
		v.leeway = DefaultOIDCLeeway
	}
	if v.keysTTL <= 0 {
		v.keysTTL = DefaultKeysTTL
	}
	if v.hc == nil {
		v.hc = &http.Client{Timeout: 10 * time.Second}
	}
	if v.clock == nil {
		v.clock = wallClock{}
	}
	return v, nil
}

// actionsClaims are the claims of a GitHub Actions OIDC token that the API uses.
type actionsClaims struct {
	Issuer     string           `json:"iss"`
	Audience   jwt.ClaimStrings `json:"aud"`
	Subject    string           `json:"sub"`
	ExpiresAt  *jwt.NumericDate `json:"exp"`
	NotBefore  *jwt.NumericDate `json:"nbf"`
	IssuedAt   *jwt.NumericDate `json:"iat"`
	Repository string           `json:"repository"`
	Actor      string           `json:"actor"`
	Ref        string           `json:"ref"`
	Sha        string           `json:"sha"`
	RunID      string           `json:"run_id"`
	RunAttempt string           `json:"run_attempt"`
}

// Valid is checked by Verify itself, with the verifier's clock and leeway.
func (actionsClaims) Valid() error { return nil }

// Verify checks the token's signature (RS256, a key of the issuer), issuer, audience, times and
// repository claim.
func (v *OIDCVerifier) Verify(ctx context.Context, raw string) (*Workload, error) {
	var keyErr error
	var c actionsClaims
	p := jwt.NewParser(jwt.WithoutClaimsValidation())
	_, err := p.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		if t.Method != jwt.SigningMethodRS256 {
			return nil, &TokenError{Reason: fmt.Sprintf("signing method %v is not RS256", t.Header["alg"])}
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, &TokenError{Reason: "the token names no key (kid)"}
		}
		k, err := v.key(ctx, kid)
		if err != nil {
			keyErr = err
		}
		return k, err
	})
	if keyErr != nil {
		return nil, keyErr
	}
	if err != nil {
		return nil, &TokenError{Reason: tokenReason(err)}
	}
	now := v.clock.Now()
	switch {
	case c.Issuer != v.issuer:
		return nil, &TokenError{Reason: fmt.Sprintf("issuer %q is not %q", c.Issuer, v.issuer)}
	case !slices.Contains(c.Audience, v.audience):
		return nil, &TokenError{Reason: fmt.Sprintf("audience %q is not %q: request the token with audience %s", []string(c.Audience), v.audience, v.audience)}
	case c.ExpiresAt == nil:
		return nil, &TokenError{Reason: "the token has no expiry (exp)"}
	case now.After(c.ExpiresAt.Add(v.leeway)):
		return nil, &TokenError{Reason: fmt.Sprintf("expired at %s", c.ExpiresAt.UTC().Format(time.RFC3339))}
	case c.NotBefore != nil && now.Add(v.leeway).Before(c.NotBefore.Time):
		return nil, &TokenError{Reason: fmt.Sprintf("not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))}
	case c.IssuedAt != nil && now.Add(v.leeway).Before(c.IssuedAt.Time):
		return nil, &TokenError{Reason: fmt.Sprintf("issued in the future (%s)", c.IssuedAt.UTC().Format(time.RFC3339))}
	case c.Repository == "":
		return nil, &TokenError{Reason: "the token has no repository claim"}
	}
	return &Workload{Repository: c.Repository, Actor: c.Actor, Ref: c.Ref, Sha: c.Sha, RunID: c.RunID, RunAttempt: c.RunAttempt, Subject: c.Subject}, nil
}

// tokenReason says why jwt refused a token, without echoing it.
func tokenReason(err error) string {
	var ve *jwt.ValidationError
	if errors.As(err, &ve) {
		var te *TokenError
		switch {
		case errors.As(ve.Inner, &te):
			return te.Reason
		case ve.Errors&jwt.ValidationErrorMalformed != 0:
			return "malformed token"
		case ve.Errors&jwt.ValidationErrorSignatureInvalid != 0:
			return "bad signature"
		case ve.Errors&jwt.ValidationErrorUnverifiable != 0 && ve.Inner != nil:
			return ve.Inner.Error()
		}
	}
	return err.Error()
}

// key returns the issuer's key kid: from the cache while it is fresh, else from a fetch. An unknown
// kid is a *TokenError; a failed fetch is not (the token may be fine).
func (v *OIDCVerifier) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	if k, fresh := v.cached(kid); k != nil && fresh {
		return k, nil
	}
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	k, fresh := v.cached(kid) // another request may have fetched meanwhile
	if k != nil && fresh {
		return k, nil
	}
	v.mu.Lock()
	recent := !v.fetched.IsZero() && v.clock.Now().Sub(v.fetched) < minKeyRefetch
	v.mu.Unlock()
	if k == nil && recent {
		return nil, &TokenError{Reason: fmt.Sprintf("unknown key %q (not in the issuer's key set)", kid)}
	}
	keys, err := v.fetchKeys(ctx)
	if err != nil {
		if k != nil {
			return k, nil // a stale key beats refusing every request while the issuer is unreachable
		}
		return nil, fmt.Errorf("fetch the keys of %s: %w", v.issuer, err)
	}
	v.mu.Lock()
	v.keys, v.fetched = keys, v.clock.Now()
	v.mu.Unlock()
	if k = keys[kid]; k == nil {
		return nil, &TokenError{Reason: fmt.Sprintf("unknown key %q (not in the issuer's key set)", kid)}
	}
	return k, nil
}

func (v *OIDCVerifier) cached(kid string) (*rsa.PublicKey, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keys[kid], v.clock.Now().Sub(v.fetched) < v.keysTTL
}

// fetchKeys reads the discovery document, checks its issuer and reads the key set it points to.
func (v *OIDCVerifier) fetchKeys(ctx context.Context) (map[string]*rsa.PublicKey, error) {
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := v.getJSON(ctx, v.issuer+"/.well-known/openid-configuration", &disc); err != nil {
		return nil, err
	}
	if strings.TrimSuffix(disc.Issuer, "/") != v.issuer || disc.JWKSURI == "" {
		return nil, fmt.Errorf("the discovery document names issuer %q and key set %q; want issuer %q and a key set", disc.Issuer, disc.JWKSURI, v.issuer)
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := v.getJSON(ctx, disc.JWKSURI, &set); err != nil {
		return nil, err
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" || k.Kid == "" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		n, errN := base64.RawURLEncoding.DecodeString(k.N)
		e, errE := base64.RawURLEncoding.DecodeString(k.E)
		if errN != nil || errE != nil || len(e) == 0 || len(e) > 4 {
			continue
		}
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the key set at %s holds no RSA signing key", disc.JWKSURI)
	}
	return keys, nil
}

func (v *OIDCVerifier) getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxKeysBody))
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
