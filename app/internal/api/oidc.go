package api

import (
	"cmp"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	josejwt "github.com/go-jose/go-jose/v4/jwt"

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
	return prefix + cmp.Or(job, "api")
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
// discovery, cached for KeysTTL and fetched again when a token names an unknown key. go-oidc checks
// the signature, issuer and audience; the verifier adds the leeway on the token's times, the
// repository claim and the key cache's policy.
type OIDCVerifier struct {
	issuer   string
	audience string
	leeway   time.Duration
	clock    authority.Clock
	keys     *issuerKeys
	ids      *oidc.IDTokenVerifier
}

var _ TokenVerifier = (*OIDCVerifier)(nil)

// Issuer is the issuer whose tokens the verifier accepts.
func (v *OIDCVerifier) Issuer() string { return v.issuer }

// Audience is the audience the verifier requires.
func (v *OIDCVerifier) Audience() string { return v.audience }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// NewOIDCVerifier checks the options. Nothing is fetched until the first token.
func NewOIDCVerifier(o OIDCOptions) (*OIDCVerifier, error) {
	v := &OIDCVerifier{issuer: cmp.Or(strings.TrimSuffix(o.Issuer, "/"), DefaultOIDCIssuer), audience: cmp.Or(o.Audience, apiclient.Audience),
		leeway: o.Leeway, clock: o.Clock}
	if !strings.HasPrefix(v.issuer, "https://") && !strings.HasPrefix(v.issuer, "http://127.0.0.1:") {
		return nil, &authority.InputError{Field: "OIDC issuer", Value: o.Issuer, Fix: "give the issuer's https URL, such as " + DefaultOIDCIssuer}
	}
	if v.leeway <= 0 {
		v.leeway = DefaultOIDCLeeway
	}
	if v.clock == nil {
		v.clock = wallClock{}
	}
	v.keys = &issuerKeys{issuer: v.issuer, ttl: o.KeysTTL, hc: cappedClient(o.HTTPClient), clock: v.clock}
	if v.keys.ttl <= 0 {
		v.keys.ttl = DefaultKeysTTL
	}
	// Expiry is checked by Verify, with the verifier's clock and leeway on exp, nbf and iat alike.
	v.ids = oidc.NewVerifier(v.issuer, v.keys, &oidc.Config{ClientID: v.audience, SupportedSigningAlgs: []string{oidc.RS256}, SkipExpiryCheck: true})
	return v, nil
}

// actionsClaims are the claims of a GitHub Actions OIDC token that the API reads besides those
// go-oidc decodes (iss, sub, aud, exp, iat).
type actionsClaims struct {
	NotBefore  json.Number `json:"nbf"`
	Repository string      `json:"repository"`
	Actor      string      `json:"actor"`
	Ref        string      `json:"ref"`
	Sha        string      `json:"sha"`
	RunID      string      `json:"run_id"`
	RunAttempt string      `json:"run_attempt"`
}

// Verify checks the token's signature (RS256, a key of the issuer), issuer, audience, times and
// repository claim.
func (v *OIDCVerifier) Verify(ctx context.Context, raw string) (*Workload, error) {
	check := &keyCheck{}
	tok, err := v.ids.Verify(context.WithValue(ctx, keyCheckKey{}, check), raw)
	if err != nil {
		return nil, v.refusal(raw, check, err)
	}
	var c actionsClaims
	if err := tok.Claims(&c); err != nil {
		return nil, &TokenError{Reason: "malformed token"}
	}
	var nbf time.Time
	if c.NotBefore != "" {
		f, err := c.NotBefore.Float64()
		if err != nil {
			return nil, &TokenError{Reason: "malformed token"}
		}
		nbf = time.Unix(int64(f), 0)
	}
	now := v.clock.Now()
	switch {
	case tok.Expiry.IsZero():
		return nil, &TokenError{Reason: "the token has no expiry (exp)"}
	case now.After(tok.Expiry.Add(v.leeway)):
		return nil, &TokenError{Reason: fmt.Sprintf("expired at %s", tok.Expiry.UTC().Format(time.RFC3339))}
	case !nbf.IsZero() && now.Add(v.leeway).Before(nbf):
		return nil, &TokenError{Reason: fmt.Sprintf("not valid before %s", nbf.UTC().Format(time.RFC3339))}
	case !tok.IssuedAt.IsZero() && now.Add(v.leeway).Before(tok.IssuedAt):
		return nil, &TokenError{Reason: fmt.Sprintf("issued in the future (%s)", tok.IssuedAt.UTC().Format(time.RFC3339))}
	case c.Repository == "":
		return nil, &TokenError{Reason: "the token has no repository claim"}
	}
	return &Workload{Repository: c.Repository, Actor: c.Actor, Ref: c.Ref, Sha: c.Sha, RunID: c.RunID, RunAttempt: c.RunAttempt, Subject: tok.Subject}, nil
}

// rs256 is the one signing algorithm the verifier accepts.
var rs256 = []jose.SignatureAlgorithm{jose.RS256}

// keyCheck is what the key set found while go-oidc verified a token, whose errors keep only their
// text: why the key set refused it, or the claims whose signature it verified.
type keyCheck struct {
	err     error
	payload []byte
}

type keyCheckKey struct{}

// refusal says why go-oidc refused raw, without echoing it: the key set's refusal or failure to
// fetch keys, else why the token does not parse, else which of its verified claims is wrong.
func (v *OIDCVerifier) refusal(raw string, check *keyCheck, err error) error {
	if check.err != nil {
		return check.err
	}
	if check.payload == nil {
		var alg *jose.ErrUnexpectedSignatureAlgorithm
		if _, perr := jose.ParseSignedCompact(raw, rs256); errors.As(perr, &alg) {
			return &TokenError{Reason: fmt.Sprintf("signing method %s is not RS256", alg.Got)}
		}
		return &TokenError{Reason: "malformed token"}
	}
	var c struct {
		Issuer   string           `json:"iss"`
		Audience josejwt.Audience `json:"aud"`
	}
	if json.Unmarshal(check.payload, &c) != nil {
		return &TokenError{Reason: "malformed token"}
	}
	switch {
	case c.Issuer != v.issuer:
		return &TokenError{Reason: fmt.Sprintf("issuer %q is not %q", c.Issuer, v.issuer)}
	case !c.Audience.Contains(v.audience):
		return &TokenError{Reason: fmt.Sprintf("audience %q is not %q: request the token with audience %s", []string(c.Audience), v.audience, v.audience)}
	}
	return &TokenError{Reason: err.Error()}
}

// issuerKeys is the issuer's key set that go-oidc verifies signatures with. Unlike go-oidc's
// RemoteKeySet it ages its keys out after ttl, fetches again for an unknown kid at most once per
// minKeyRefetch (forged kids and bad signatures cause no fetch), and keeps verifying with the keys
// it has while the issuer is unreachable.
type issuerKeys struct {
	issuer string
	ttl    time.Duration
	hc     *http.Client
	clock  authority.Clock

	fetchMu sync.Mutex // one fetch at a time
	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetched time.Time
}

var _ oidc.KeySet = (*issuerKeys)(nil)

// VerifySignature returns the claims of raw, a compact RS256 JWS signed by a key of the issuer. It
// notes what it found in the keyCheck of ctx, if any.
func (ks *issuerKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	payload, err := ks.verify(ctx, raw)
	if check, ok := ctx.Value(keyCheckKey{}).(*keyCheck); ok {
		check.payload, check.err = payload, err
	}
	return payload, err
}

func (ks *issuerKeys) verify(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, rs256)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, &TokenError{Reason: "malformed token"}
	}
	kid := jws.Signatures[0].Header.KeyID
	if kid == "" {
		return nil, &TokenError{Reason: "the token names no key (kid)"}
	}
	k, err := ks.key(ctx, kid)
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify(k)
	if err != nil {
		return nil, &TokenError{Reason: "bad signature"}
	}
	return payload, nil
}

// key returns the issuer's key kid: from the cache while it is fresh, else from a fetch. An unknown
// kid is a *TokenError; a failed fetch is not (the token may be fine).
func (ks *issuerKeys) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	if k, fresh := ks.cached(kid); k != nil && fresh {
		return k, nil
	}
	ks.fetchMu.Lock()
	defer ks.fetchMu.Unlock()
	k, fresh := ks.cached(kid) // another request may have fetched meanwhile
	if k != nil && fresh {
		return k, nil
	}
	ks.mu.Lock()
	recent := !ks.fetched.IsZero() && ks.clock.Now().Sub(ks.fetched) < minKeyRefetch
	ks.mu.Unlock()
	if k == nil && recent {
		return nil, &TokenError{Reason: fmt.Sprintf("unknown key %q (not in the issuer's key set)", kid)}
	}
	keys, err := ks.fetch(ctx)
	if err != nil {
		if k != nil {
			return k, nil // a stale key beats refusing every request while the issuer is unreachable
		}
		return nil, fmt.Errorf("fetch the keys of %s: %w", ks.issuer, err)
	}
	ks.mu.Lock()
	ks.keys, ks.fetched = keys, ks.clock.Now()
	ks.mu.Unlock()
	if k = keys[kid]; k == nil {
		return nil, &TokenError{Reason: fmt.Sprintf("unknown key %q (not in the issuer's key set)", kid)}
	}
	return k, nil
}

func (ks *issuerKeys) cached(kid string) (*rsa.PublicKey, bool) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.keys[kid], ks.clock.Now().Sub(ks.fetched) < ks.ttl
}

// fetch discovers the issuer (go-oidc reads its discovery document and checks that it names the
// issuer) and reads the RSA signing keys of the key set the document points to.
func (ks *issuerKeys) fetch(ctx context.Context) (map[string]*rsa.PublicKey, error) {
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, ks.hc), ks.issuer)
	if err != nil {
		return nil, fmt.Errorf("discover the issuer: %w", err)
	}
	var disc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := p.Claims(&disc); err != nil {
		return nil, fmt.Errorf("read the discovery document: %w", err)
	}
	if disc.JWKSURI == "" {
		return nil, errors.New("the discovery document names no key set (jwks_uri)")
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := ks.getJSON(ctx, disc.JWKSURI, &set); err != nil {
		return nil, err
	}
	keys := map[string]*rsa.PublicKey{}
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if json.Unmarshal(raw, &k) != nil || k.KeyID == "" || (k.Use != "" && k.Use != "sig") {
			continue // a key of a type, use or shape the verifier cannot use
		}
		if pub, ok := k.Key.(*rsa.PublicKey); ok {
			keys[k.KeyID] = pub
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the key set at %s holds no RSA signing key", disc.JWKSURI)
	}
	return keys, nil
}

func (ks *issuerKeys) getJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ks.hc.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
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

// cappedClient is hc (nil: a client with a 10 s timeout) reading at most maxKeysBody of each answer,
// for the discovery document go-oidc reads as for the key set.
func cappedClient(hc *http.Client) *http.Client {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	c := *hc
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = capBodies{next: next}
	return &c
}

type capBodies struct{ next http.RoundTripper }

func (cb capBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := cb.next.RoundTrip(r)
	if err != nil {
		return nil, err // http.Client wraps it with the request
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, maxKeysBody), resp.Body}
	return resp, nil
}
