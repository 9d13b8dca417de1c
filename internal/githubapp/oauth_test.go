package githubapp_test

import (
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

const (
	clientID     = "Iv1.8a61f9b3a7aba766"
	clientSecret = "a-client-secret"
	callback     = "http://127.0.0.1:8080/signin/callback"
)

// authorize follows the browser's part: GitHub's authorize page redirects to the callback with a
// code and the state; the redirect is returned, not followed.
func authorize(t *testing.T, o *githubapp.OAuth, redirect, state string) url.Values {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(o.AuthorizeURL(redirect, state))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: %s, want a redirect to the callback", resp.Status)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if got := loc.Scheme + "://" + loc.Host + loc.Path; got != callback {
		t.Fatalf("authorize redirected to %s, want the callback %s", got, callback)
	}
	return loc.Query()
}

func TestOAuthWebFlow(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	fake := gh.OAuthApp(clientID, clientSecret, callback)
	token := fake.SignIn("mona")
	o := &githubapp.OAuth{ClientID: clientID, ClientSecret: clientSecret, WebURL: gh.URL, APIURL: gh.URL}
	ctx := t.Context()

	q := authorize(t, o, callback, "state-1")
	if q.Get("state") != "state-1" || q.Get("code") == "" {
		t.Fatalf("callback query %v: want the state given and a code", q)
	}
	got, err := o.Exchange(ctx, q.Get("code"), callback)
	if err != nil || got != token {
		t.Fatalf("Exchange: %q, %v; want mona's token", got, err)
	}
	// A code is single use.
	var oe *githubapp.OAuthError
	if _, err := o.Exchange(ctx, q.Get("code"), callback); !errors.As(err, &oe) || oe.Code != "bad_verification_code" {
		t.Errorf("second Exchange of one code: %v, want bad_verification_code", err)
	}

	q = authorize(t, o, callback, "state-2")
	wrongSecret := *o
	wrongSecret.ClientSecret = "guessed"
	if _, err := wrongSecret.Exchange(ctx, q.Get("code"), callback); !errors.As(err, &oe) || oe.Code != "incorrect_client_credentials" {
		t.Errorf("Exchange with a wrong secret: %v, want incorrect_client_credentials", err)
	}
	if _, err := o.Exchange(ctx, q.Get("code"), "http://127.0.0.1:8080/elsewhere"); !errors.As(err, &oe) || oe.Code != "redirect_uri_mismatch" {
		t.Errorf("Exchange with another redirect_uri: %v, want redirect_uri_mismatch", err)
	}
	// The refused attempts did not use the code up.
	if _, err := o.Exchange(ctx, q.Get("code"), callback); err != nil {
		t.Errorf("Exchange after refused attempts: %v", err)
	}

	// Another redirect_uri than the registered one is sent back to the callback with an error.
	q = authorize(t, o, "http://127.0.0.1:9999/signin/callback", "state-3")
	if q.Get("error") != "redirect_uri_mismatch" || q.Get("code") != "" {
		t.Errorf("authorize with a foreign redirect_uri: %v, want redirect_uri_mismatch and no code", q)
	}
	if issued, exchanged := fake.Codes(); issued != 2 || exchanged != 2 {
		t.Errorf("codes issued/exchanged: %d/%d, want 2/2", issued, exchanged)
	}

	gh.On("GET", "/user", 200, githubtest.User("mona")).ForToken(token)
	if login, err := o.Login(ctx, token); err != nil || login != "mona" {
		t.Errorf("Login: %q, %v", login, err)
	}
}

func TestOAuthRepoAccess(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	o := &githubapp.OAuth{ClientID: clientID, ClientSecret: clientSecret, WebURL: gh.URL, APIURL: gh.URL}
	repo := func(name string, perms map[string]bool) map[string]any {
		return githubtest.Repository(t, "acme", name, perms)
	}
	gh.On("GET", "/repos/acme/api", 200, repo("api", map[string]bool{"admin": false, "push": true, "pull": true})).ForToken("tok")
	gh.On("GET", "/repos/acme/web", 200, repo("web", map[string]bool{"admin": false, "push": false, "pull": true})).ForToken("tok")
	gh.On("GET", "/repos/acme/secret", 404, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}).ForToken("tok")
	gh.On("GET", "/repos/acme/broken", 500, map[string]any{"message": "Server Error"}).ForToken("tok")
	for _, tt := range []struct {
		repo        string
		read, write bool
		err         bool
	}{
		{"api", true, true, false},
		{"web", true, false, false},
		{"secret", false, false, false},
		{"broken", false, false, true},
	} {
		read, write, err := o.RepoAccess(t.Context(), "tok", "acme", tt.repo)
		if read != tt.read || write != tt.write || (err != nil) != tt.err {
			t.Errorf("RepoAccess acme/%s: read %v write %v err %v; want %v %v error %v", tt.repo, read, write, err, tt.read, tt.write, tt.err)
		}
	}
}
