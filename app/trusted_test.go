package app

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app/internal/configsource"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// orgConfig is Codertocat's trusted file: staging is fed by Hello-World, production only by
// Releases, and a repository may choose its own workflow in staging.
const orgConfig = `environments:
  staging:
    allowed-overrides: [workflow]
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
  production:
    scopes:
      api:
        repository: Codertocat/Releases
        branch: master
        workflow: deploy.yml
`

// appSource is the App's configuration source as serve and the Lambda build it from App
// credentials alone, on the strict fake: the trusted file in the .github repository of the account
// that owns the App, each repository's own file read as the delivery's installation.
type appSource struct {
	gh    *githubtest.Server
	inst  *githubapp.Installations
	src   *configsource.Trusted
	auth  *authority.Authority
	clock *storetest.Clock
}

func newAppSource(t *testing.T) *appSource {
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
	files, auth, clock := newConfigSource(t, inst)
	src, err := configsource.NewTrusted(configsource.TrustedOptions{Files: files, Installations: ghadapter.Finder{Installations: inst}, AppOwner: inst.AppOwner})
	if err != nil {
		t.Fatal(err)
	}
	return &appSource{gh: gh, inst: inst, src: src, auth: auth, clock: clock}
}

// newTrustedHarness is the App as serve builds it from App credentials alone: the trusted file is
// orgConfig in Codertocat/.github (Codertocat owns the App), and each repository's own file is
// read as the delivery's installation (1, in GitHub's example payloads).
func newTrustedHarness(t *testing.T) (*harness, *githubtest.Server) {
	t.Helper()
	return newTrustedHarnessWith(t, orgConfig, true)
}

// newTrustedHarnessWith is newTrustedHarness with trusted as the trusted file; ownRead says whether
// the delivery's installation reads the repository's own file (and so gets a token).
func newTrustedHarnessWith(t *testing.T, trusted string, ownRead bool) (*harness, *githubtest.Server) {
	t.Helper()
	as := newAppSource(t)
	stubTrusted(t, as.gh, "Codertocat", trusted)
	h := newHarness(t, trusted, func(o *Options) { o.Authority, o.Config = as.auth, as.src })
	h.auth, h.clock = as.auth, as.clock
	if !ownRead {
		return h, as.gh
	}
	token := githubtest.Example(t, "POST", "/app/installations/{installation_id}/access_tokens", http.StatusCreated, "")
	token["token"] = "ghs_one"
	token["expires_at"] = time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	as.gh.On("POST", "/app/installations/1/access_tokens", http.StatusCreated, token)
	return h, as.gh
}

// A repository's own file in the per-repository form of earlier versions, naming production, feeds
// nothing: the delivery is refused with a message naming the trusted file, and no environment has
// state.
func TestOwnFileNamingProductionFeedsNothing(t *testing.T) {
	t.Parallel()
	h, gh := newTrustedHarness(t)
	stubConfig(t, gh, "environments:\n  production:\n    scopes:\n      api:\n        repository: Codertocat/Hello-World\n        branch: master\n        workflow: deploy.yml\n")
	rec := h.post(t, "push", "d-push", fixture(t, "push.json"))
	body := rec.Body.String()
	for _, want := range []string{
		`Codertocat/Hello-World's .github/latestwins.yml is refused`,
		`scope \"api\" of environment \"production\" is built from Codertocat/Releases, not Codertocat/Hello-World`,
		"the trusted file Codertocat/.github:.github/latestwins.yml",
	} {
		if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(body, want) {
			t.Errorf("push: %d %s; want 422 saying %q", rec.Code, body, want)
		}
	}
	for _, env := range []string{"production", "staging"} {
		if _, err := h.auth.Status(t.Context(), env); !errors.Is(err, authority.ErrInvalidInput) {
			t.Errorf("%s has state after a refused delivery: %v", env, err)
		}
	}
	if n := len(h.disp.requests()); n != 0 {
		t.Errorf("%d dispatches after a refused delivery", n)
	}
}

// An environment fed only by Releases takes nothing from Hello-World's push, while the scope the
// trusted file gives Hello-World is fed, with the workflow its own file chose where the trusted file
// allows it.
func TestPushFeedsOnlyWhatTheTrustedFileGives(t *testing.T) {
	t.Parallel()
	h, gh := newTrustedHarness(t)
	stubConfig(t, gh, "environments:\n  staging:\n    scopes:\n      api:\n        workflow: deploy-api.yml\n")
	if rec := h.post(t, "push", "d-push", fixture(t, "push.json")); rec.Code != http.StatusOK {
		t.Fatalf("push: %d %s", rec.Code, rec.Body)
	}
	if _, err := h.auth.Status(t.Context(), "production"); !errors.Is(err, authority.ErrInvalidInput) {
		t.Errorf("production has state after Hello-World's push: %v", err)
	}
	if got, err := h.auth.Intents(t.Context(), "staging", []string{"d-push"}); err != nil || len(got) != 1 {
		t.Errorf("staging intent d-push: %v, %v; want it recorded", got, err)
	}
	reqs := h.disp.requests()
	if len(reqs) != 1 || reqs[0].Workflow != "deploy-api.yml" || reqs[0].Inputs["environment"] != "staging" {
		t.Errorf("dispatches %+v; want deploy-api.yml for staging", reqs)
	}
}

// Without a file of its own, a repository gets exactly what the trusted file says.
func TestOwnFileIsOptional(t *testing.T) {
	t.Parallel()
	h, gh := newTrustedHarness(t)
	gh.On("GET", fixtureRepo+"/contents/.github/latestwins.yml", http.StatusNotFound, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`)
	if rec := h.post(t, "push", "d-push", fixture(t, "push.json")); rec.Code != http.StatusOK {
		t.Fatalf("push: %d %s", rec.Code, rec.Body)
	}
	if reqs := h.disp.requests(); len(reqs) != 1 || reqs[0].Workflow != "deploy.yml" {
		t.Errorf("dispatches %+v; want the trusted file's deploy.yml", reqs)
	}
}

// With no trusted file in the App owner's .github repository, nothing is accepted and the answer
// says where to add one.
func TestMissingTrustedFileAcceptsNothing(t *testing.T) {
	t.Parallel()
	as := newAppSource(t)
	stubTrusted(t, as.gh, "Codertocat", "")
	auth, src := as.auth, as.src
	h := newHarness(t, orgConfig, func(o *Options) { o.Authority, o.Config = auth, src })
	rec := h.post(t, "push", "d-push", fixture(t, "push.json"))
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "Codertocat/.github has no .github/latestwins.yml at the default branch: environments are defined there") {
		t.Errorf("push: %d %s; want 422 saying Codertocat/.github has no trusted file", rec.Code, rec.Body)
	}
}

// Where the trusted file lets a repository set nothing, its own file is never read: a file left from
// the per-repository form is ignored, not an error, and GitHub is not asked for it (the strict fake
// fails any request it has no stub for).
func TestOwnFileNotReadWhereNothingMayBeOverridden(t *testing.T) {
	t.Parallel()
	h, _ := newTrustedHarnessWith(t, strings.Replace(orgConfig, "    allowed-overrides: [workflow]\n", "", 1), false)
	if rec := h.post(t, "push", "d-push", fixture(t, "push.json")); rec.Code != http.StatusOK {
		t.Fatalf("push: %d %s", rec.Code, rec.Body)
	}
	if reqs := h.disp.requests(); len(reqs) != 1 || reqs[0].Workflow != "deploy.yml" {
		t.Errorf("dispatches %+v; want the trusted file's deploy.yml", reqs)
	}
}
