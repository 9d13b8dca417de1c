package githubapp_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// appKey is a new App private key, and its PEM.
func appKey(t *testing.T) (*rsa.PrivateKey, []byte) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
}

// ForRepo asks GitHub as the App (its JWT), once per repository per InstallationTTL, whatever the
// spelling of the repository's name.
func TestForRepoAsksAsTheAppAndCaches(t *testing.T) {
	t.Parallel()
	key, keyPEM := appKey(t)
	gh := githubtest.New(t)
	inst := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/installation", http.StatusOK, "")
	inst["id"] = 4242
	found := gh.On("GET", "/repos/Codertocat/Hello-World/installation", http.StatusOK, inst).Times(2)

	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	installations, err := githubapp.NewInstallations(42, keyPEM, gh.URL, githubapp.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []int64
	for _, step := range []struct {
		advance     time.Duration
		owner, repo string
	}{
		{0, "Codertocat", "Hello-World"},
		{time.Minute, "codertocat", "hello-world"},                                           // cached: names are case-insensitive
		{githubapp.InstallationTTL - time.Minute - time.Second, "Codertocat", "Hello-World"}, // still cached
		{time.Second, "Codertocat", "Hello-World"},                                           // expired: asked again
	} {
		now = now.Add(step.advance)
		id, err := installations.ForRepo(ctx, step.owner, step.repo)
		if err != nil {
			t.Fatalf("ForRepo(%s/%s): %v", step.owner, step.repo, err)
		}
		got = append(got, id)
	}
	if diff := cmp.Diff([]int64{4242, 4242, 4242, 4242}, got); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	for _, r := range found.Requests() {
		claims := &jwt.RegisteredClaims{}
		_, err := jwt.ParseWithClaims(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), claims,
			func(*jwt.Token) (any, error) { return &key.PublicKey, nil })
		if err != nil || claims.Issuer != "42" {
			t.Errorf("Authorization is not the App's JWT (iss 42): %v, iss %q", err, claims.Issuer)
		}
	}
}

// A repository without the App is a typed not-found error that says what to do, remembered for
// NotInstalledTTL so that installing the App takes effect soon after.
func TestForRepoNotInstalled(t *testing.T) {
	t.Parallel()
	_, keyPEM := appKey(t)
	gh := githubtest.New(t)
	gh.On("GET", "/repos/acme/web/installation", http.StatusNotFound,
		`{"message":"Not Found","documentation_url":"https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app"}`).Times(2)

	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	installations, err := githubapp.NewInstallations(42, keyPEM, gh.URL, githubapp.WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	for _, advance := range []time.Duration{0, githubapp.NotInstalledTTL - time.Second, time.Second} {
		now = now.Add(advance)
		id, err := installations.ForRepo(context.Background(), "acme", "web")
		var notInstalled *githubapp.NotInstalledError
		if id != 0 || !errors.As(err, &notInstalled) || !errors.Is(err, githubapp.ErrNotInstalled) || !errors.Is(err, githubapp.ErrNotFound) {
			t.Fatalf("after %s: id %d, err %v; want a *NotInstalledError", advance, id, err)
		}
		if want := "the GitHub App is not installed on acme/web (or the repository does not exist): install the App on the repository"; err.Error() != want {
			t.Errorf("message %q, want %q", err, want)
		}
	}
	if n := len(gh.Requests()); n != 2 {
		t.Errorf("%d requests for three lookups over a minute, want 2", n)
	}
}

// Failures other than not-installed are returned as they are (a rate limit typed) and not cached.
func TestForRepoFailuresAreNotCached(t *testing.T) {
	t.Parallel()
	_, keyPEM := appKey(t)
	gh := githubtest.New(t)
	gh.On("GET", "/repos/acme/web/installation", http.StatusTooManyRequests, `{"message":"You have exceeded a secondary rate limit"}`).
		Header("Retry-After", "30")
	inst := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/installation", http.StatusOK, "")
	inst["id"] = 7
	gh.On("GET", "/repos/acme/web/installation", http.StatusOK, inst)

	installations, err := githubapp.NewInstallations(42, keyPEM, gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = installations.ForRepo(context.Background(), "acme", "web")
	var limited *githubapp.RateLimitedError
	if !errors.As(err, &limited) || limited.RetryAfter != 30*time.Second {
		t.Fatalf("err = %v, want a *RateLimitedError retrying after 30s", err)
	}
	if id, err := installations.ForRepo(context.Background(), "acme", "web"); err != nil || id != 7 {
		t.Errorf("second lookup: %d, %v; want 7 from a new request", id, err)
	}
	if _, err := installations.ForRepo(context.Background(), "", "web"); err == nil || !strings.Contains(err.Error(), "owner is empty") {
		t.Errorf("empty owner: %v", err)
	}
}
