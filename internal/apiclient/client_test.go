package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/internal/testutil/oidctest"
)

const cfg = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
      web:
        repository: acme/web
        branch: master
`

// newClient is a client of app.New on 127.0.0.1 with a fake clock, authenticated through a fake
// runner token endpoint; it returns the clock and the count of tokens the runner issued.
func newClient(t *testing.T) (*apiclient.Client, *storetest.Clock, func() int64) {
	t.Helper()
	return newClientOf(t, cfg)
}

// newClientOf is newClient with the configuration yml and an Authority built with opts.
func newClientOf(t *testing.T, yml string, opts ...authority.Option) (*apiclient.Client, *storetest.Clock, func() int64) {
	t.Helper()
	c, _, clock, issued := serveAPI(t, yml, 0, nil, nil, opts...)
	return c, clock, issued
}

// serveAPI is newClientOf with the App's long poll set to longPoll (ended by closing stopping),
// the client sending through hc (nil: the default), and the Authority returned too.
func serveAPI(t testing.TB, yml string, longPoll time.Duration, hc *http.Client, stopping <-chan struct{}, opts ...authority.Option) (*apiclient.Client, *authority.Authority, *storetest.Clock, func() int64) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "latestwins.yml")
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Now())
	auth := authority.New(memory.New(), append([]authority.Option{authority.WithClock(clock)}, opts...)...)
	iss := oidctest.NewIssuer(t)
	v, err := app.NewOIDCVerifier(app.OIDCOptions{Issuer: iss.URL, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(app.Options{Secret: []byte("s"), Authority: auth, Config: &app.FileConfig{Path: path}, Tokens: v, LongPoll: longPoll, Stopping: stopping})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	u, bearer, issued := iss.TokenEndpoint(t, func(aud string) jwt.MapClaims { return iss.Claims("Codertocat/Hello-World", aud, clock.Now()) })
	env := map[string]string{"ACTIONS_ID_TOKEN_REQUEST_URL": u, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": bearer}
	tokens, err := apiclient.NewActionsToken(func(k string) string { return env[k] }, apiclient.Audience, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := apiclient.New(srv.URL+"/", tokens, hc)
	if err != nil {
		t.Fatal(err)
	}
	return c, auth, clock, issued.Load
}

// TestRefusalsComeBackTyped: the client turns each refusal back into the authority's typed error,
// with its data, so that the verbs act on them as they do on a local store.
func TestRefusalsComeBackTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, clock, issued := newClient(t)
	claim := func(id string, ch byte) *authority.AcceptResult {
		res, err := c.Claim(ctx, authority.Intent{ID: id, Environment: "staging", Scopes: []string{"api"}, Sha: strings.Repeat(string(ch), 40)})
		if err != nil {
			t.Fatalf("claim %s: %v", id, err)
		}
		return res
	}
	if res := claim("a", 'a'); res.Generation != 1 || res.Claim == nil || !cmp.Equal(res.Claim.Scopes(), []string{"api"}) {
		t.Fatalf("claim: %+v", res)
	}
	g, err := c.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Phase: "deploy", Holder: "a", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Renew(ctx, g, time.Minute); err != nil {
		t.Fatalf("renew: %v", err)
	}
	claim("b", 'b')

	_, err = c.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: 2, Scopes: []string{"api"}, Phase: "deploy", Holder: "b", LeaseTTL: time.Minute})
	var held *authority.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("gate of b: %v, want *HeldError", err)
	}
	want := &authority.HeldError{Reason: authority.ReasonLocked, Resource: "staging/api", Holder: "gha:Codertocat/Hello-World/101/1/a", Purpose: "deploy", Generation: 1, ExpiresAt: held.ExpiresAt, RetryAfter: 65 * time.Second}
	if diff := cmp.Diff(want, held); diff != "" || !held.ExpiresAt.Equal(clock.Now().Add(time.Minute)) {
		t.Errorf("held (-want +got):\n%s (expires %s)", diff, held.ExpiresAt)
	}

	_, err = c.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Phase: "publish"})
	var sup *authority.SupersededError
	if !errors.As(err, &sup) || !errors.Is(err, authority.ErrSuperseded) {
		t.Fatalf("gate of a: %v, want *SupersededError", err)
	}
	if diff := cmp.Diff(&authority.SupersededError{Environment: "staging", Scope: "api", Generation: 1, By: 2, BySha: strings.Repeat("b", 40)}, sup); diff != "" {
		t.Errorf("superseded (-want +got):\n%s", diff)
	}

	stale := *g
	stale.Tokens = map[string]int64{"api": 9}
	var lost *authority.LostError
	if err := c.Renew(ctx, &stale, time.Minute); !errors.As(err, &lost) || lost.Token != 9 || lost.Current != 1 {
		t.Errorf("renew of a stale grant: %v, want *LostError", err)
	}

	_, err = c.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Phase: "Deploy!"})
	var input *authority.InputError
	if !errors.As(err, &input) || input.Field != "phase" || input.Value != "Deploy!" {
		t.Errorf("bad phase: %v, want *InputError on phase", err)
	}

	_, err = c.Claim(ctx, authority.Intent{ID: "w", Environment: "staging", Scopes: []string{"web"}, Sha: strings.Repeat("c", 40)})
	var apiErr *apiclient.Error
	if !errors.As(err, &apiErr) || apiErr.Status != 403 || !errors.Is(err, authority.ErrInvalidInput) {
		t.Errorf("claim of another repository's scope: %v, want a 403 that is bad configuration", err)
	}

	if err := c.Release(ctx, g); err != nil {
		t.Errorf("release: %v", err)
	}
	e, err := c.Status(ctx, "staging")
	if err != nil || e.Desired != 2 || e.Scopes["api"].Lease.Holder != "" {
		t.Errorf("status: %v %+v", err, e)
	}
	if n := issued(); n != 1 {
		t.Errorf("the runner issued %d tokens, want 1 (kept until a minute before expiry)", n)
	}
}

// TestQueueRefusalsComeBackTyped: a pass waiting in a queue gets back a *HeldError that says where
// it stands (so the Action words it "queued: 1 ahead of this commit"), and a claim beyond a full
// queue a *QueueFullError, which the command line exits 9 for.
func TestQueueRefusalsComeBackTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, _, _ := newClientOf(t, strings.Replace(cfg, "  staging:\n", "  staging:\n    policy: queue\n", 1), authority.WithQueueLimit(2))
	for _, ch := range []byte{'a', 'b'} {
		if _, err := c.Claim(ctx, authority.Intent{ID: string(ch), Environment: "staging", Scopes: []string{"api"}, Sha: strings.Repeat(string(ch), 40)}); err != nil {
			t.Fatalf("claim %c: %v", ch, err)
		}
	}
	_, err := c.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: 2, Scopes: []string{"api"}, Phase: "deploy", Holder: "b", LeaseTTL: time.Minute})
	var held *authority.HeldError
	if !errors.As(err, &held) || !errors.Is(err, authority.ErrLeaseHeld) {
		t.Fatalf("gate of b: %v, want *HeldError", err)
	}
	if held.Ahead != 1 || held.HeadSha != strings.Repeat("a", 40) || held.Generation != 1 || held.Blocked || held.Barrier != "" {
		t.Errorf("held %+v, want 1 ahead, head a at generation 1", held)
	}
	if got := authority.WaitText(held); got != "queued: 1 ahead of this commit" {
		t.Errorf("wait text %q", got)
	}

	_, err = c.Claim(ctx, authority.Intent{ID: "c", Environment: "staging", Scopes: []string{"api"}, Sha: strings.Repeat("c", 40)})
	var full *authority.QueueFullError
	if !errors.As(err, &full) || !errors.Is(err, authority.ErrQueueFull) {
		t.Fatalf("claim of c: %v, want *QueueFullError", err)
	}
	if diff := cmp.Diff(&authority.QueueFullError{Environment: "staging", Scope: "api", Pending: 2, Limit: 2}, full); diff != "" {
		t.Errorf("queue full (-want +got):\n%s", diff)
	}
}

func TestNewSaysWhatToFix(t *testing.T) {
	t.Parallel()
	tokens := staticToken("t")
	tests := []struct{ url, says string }{
		{"latestwins.example.com", "give the App's base URL"},
		{"ftp://latestwins.example.com", "give the App's base URL"},
		{"http://latestwins.example.com", "use https"},
	}
	for _, tt := range tests {
		_, err := apiclient.New(tt.url, tokens, nil)
		if !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("New(%q) = %v, want it to say %q", tt.url, err, tt.says)
		}
	}
	for _, ok := range []string{"https://latestwins.example.com", "http://127.0.0.1:8080/", "http://localhost:8080"} {
		if _, err := apiclient.New(ok, tokens, nil); err != nil {
			t.Errorf("New(%q): %v", ok, err)
		}
	}
	_, err := apiclient.NewActionsToken(func(string) string { return "" }, "", nil)
	if !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), "permissions: id-token: write") {
		t.Errorf("NewActionsToken without the runner's variables: %v", err)
	}
}

type staticToken string

func (s staticToken) Token(context.Context) (string, error) { return string(s), nil }

// A token given by hand is sent without surrounding white space; an empty one says what to give.
func TestStaticToken(t *testing.T) {
	t.Parallel()
	tok, err := apiclient.StaticToken(" eyJ.x.y\n").Token(context.Background())
	if err != nil || tok != "eyJ.x.y" {
		t.Errorf("Token() = %q, %v; want eyJ.x.y", tok, err)
	}
	_, err = apiclient.StaticToken(" \n").Token(context.Background())
	var input *authority.InputError
	if !errors.As(err, &input) || input.Field != "api-token" {
		t.Errorf("empty token: %v, want an input error about api-token", err)
	}
}
