package cli

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/bbolt"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/testutil"
	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

// doctorWorld is a deployed App as doctor meets it: serve's handler on loopback, acting as a GitHub
// App on the strict GitHub fake, with its store.
type doctorWorld struct {
	t      *testing.T
	h      *harness
	gh     *githubtest.Server
	keyPEM string
	url    string
}

// newDoctorWorld starts the App with serve's wiring and args; wrap, when set, stands in front of it.
func newDoctorWorld(t *testing.T, wrap func(http.Handler) http.Handler, args ...string) *doctorWorld {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	w := &doctorWorld{t: t, h: newHarness(t), gh: githubtest.New(t),
		keyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))}
	vars := map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret, "LATESTWINS_STORE": w.h.store, "LATESTWINS_APP_ID": "42",
		"LATESTWINS_APP_PRIVATE_KEY": w.keyPEM, "LATESTWINS_GITHUB_API_URL": w.gh.URL}
	c := &cmdEnv{io: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &syncbuf.Buffer{}, Getenv: func(k string) string { return vars[k] }},
		log: slog.New(slog.DiscardHandler)}
	handler, _, err := c.serveHandler(context.Background(), append([]string{"--sweep-every", "0"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.done)
	if wrap != nil {
		handler = wrap(handler)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

// stubConfig has the fake answer as GitHub does for an App installed on Codertocat/.github whose
// .github/latestwins.yml is body.
func (w *doctorWorld) stubConfig(body string) {
	t := w.t
	ghApp := githubtest.Example(t, "GET", "/app", http.StatusOK, "")
	ghApp["owner"].(map[string]any)["login"] = "Codertocat"
	w.gh.On("GET", "/app", http.StatusOK, ghApp)
	installation := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/installation", http.StatusOK, "")
	installation["id"] = 1
	w.gh.On("GET", "/repos/Codertocat/.github/installation", http.StatusOK, installation)
	token := githubtest.Example(t, "POST", "/app/installations/{installation_id}/access_tokens", http.StatusCreated, "")
	token["token"], token["expires_at"] = "ghs_one", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	w.gh.On("POST", "/app/installations/1/access_tokens", http.StatusCreated, token)
	file := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/contents/{path}", http.StatusOK, "response-if-content-is-a-file")
	file["content"], file["path"] = base64.StdEncoding.EncodeToString([]byte(body)), ".github/latestwins.yml"
	w.gh.On("GET", "/repos/Codertocat/.github/contents/.github/latestwins.yml", http.StatusOK, file)
}

// doctor runs latestwins doctor against the App as its operator would: with the App's secret,
// credentials and store, changed by vars.
func (w *doctorWorld) doctor(vars map[string]string, args ...string) outcome {
	w.t.Helper()
	h := &harness{t: w.t, dir: w.h.dir, store: w.h.store, vars: map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret,
		"LATESTWINS_APP_ID": "42", "LATESTWINS_APP_PRIVATE_KEY": w.keyPEM, "LATESTWINS_GITHUB_API_URL": w.gh.URL}}
	for k, v := range vars {
		h.vars[k] = v
	}
	return h.run(context.Background(), append([]string{"doctor", "--url", w.url}, args...)...)
}

// lines are doctor's lines by check: the status word and the rest.
func lines(t *testing.T, stdout string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			t.Fatalf("doctor line %q: want STATUS CHECK ...", l)
		}
		out[f[1]] = f[0] + " " + strings.Join(f[2:], " ")
	}
	return out
}

func statuses(t *testing.T, stdout string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for check, l := range lines(t, stdout) {
		out[check], _, _ = strings.Cut(l, " ")
	}
	return out
}

// Everything configured as the App is: every check passes, each line saying what it found.
func TestDoctorAllGreen(t *testing.T) {
	t.Parallel()
	w := newDoctorWorld(t, nil)
	w.stubConfig(serveConfig)
	o := w.doctor(nil, "--store", w.h.store)
	if o.code != ExitOK {
		t.Fatalf("doctor: exit %d\n%s\n%s", o.code, o.stdout, o.stderr)
	}
	want := map[string]string{"app": "ok", "webhook-secret": "ok", "webhook-signature": "ok", "installation": "ok",
		"trusted-config": "ok", "store": "ok", "audience": "ok"}
	if d := cmp.Diff(want, statuses(t, o.stdout)); d != "" {
		t.Errorf("doctor (-want +got):\n%s\n%s", d, o.stdout)
	}
	l := lines(t, o.stdout)
	for check, says := range map[string]string{
		"app":               "/healthz answered 200 ok",
		"webhook-secret":    "a ping signed with the webhook secret was taken: 202 Accepted",
		"webhook-signature": "a ping with a wrong signature was refused: 401 Unauthorized",
		"installation":      "the App is installed on Codertocat/.github (installation 1)",
		"trusted-config":    "Codertocat/.github:.github/latestwins.yml parses: environments staging",
		"store":             "is migrated: schema version 2",
		"audience":          `the App requires OIDC audience "latestwins" (the App says so at GET /meta`,
	} {
		if !strings.Contains(l[check], says) {
			t.Errorf("%s: %q does not say %q", check, l[check], says)
		}
	}
	if strings.Contains(o.stdout+o.stderr, serveSecret) || strings.Contains(o.stdout+o.stderr, "PRIVATE KEY") {
		t.Errorf("doctor showed a secret:\n%s\n%s", o.stdout, o.stderr)
	}
}

// --json is the same findings, one object per check, and whether all passed.
func TestDoctorJSON(t *testing.T) {
	t.Parallel()
	w := newDoctorWorld(t, nil)
	o := w.doctor(map[string]string{"LATESTWINS_APP_ID": "", "LATESTWINS_APP_PRIVATE_KEY": "", "LATESTWINS_WEBHOOK_SECRET": "wrong"}, "--json")
	if o.code != ExitError {
		t.Fatalf("doctor --json with a wrong secret: exit %d, want %d\n%s\n%s", o.code, ExitError, o.stdout, o.stderr)
	}
	var got struct {
		OK     bool `json:"ok"`
		Checks []finding
	}
	if err := json.Unmarshal([]byte(o.stdout), &got); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, o.stdout)
	}
	var names, states []string
	for _, f := range got.Checks {
		names, states = append(names, f.Check), append(states, string(f.Status))
		if f.Status == checkFailed && f.Fix == "" {
			t.Errorf("%s failed without saying what to fix: %+v", f.Check, f)
		}
	}
	if d := cmp.Diff([]string{"app", "webhook-secret", "webhook-signature", "installation", "trusted-config", "store", "audience"}, names); d != "" {
		t.Errorf("checks (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"ok", "fail", "ok", "skipped", "skipped", "ok", "ok"}, states); d != "" || got.OK {
		t.Errorf("statuses (-want +got), ok=%v:\n%s\n%s", got.OK, d, o.stdout)
	}
	if !strings.Contains(o.stderr, "latestwins doctor: 1 of 7 checks failed: webhook-secret") {
		t.Errorf("stderr does not name the failed check:\n%s", o.stderr)
	}
}

// A webhook secret other than the App's: the signed ping is refused, and the fix names both places
// the secret must match.
func TestDoctorWrongWebhookSecret(t *testing.T) {
	t.Parallel()
	w := newDoctorWorld(t, nil)
	w.stubConfig(serveConfig)
	o := w.doctor(map[string]string{"LATESTWINS_WEBHOOK_SECRET": "not-the-apps"})
	if o.code != ExitError {
		t.Fatalf("doctor: exit %d, want %d\n%s", o.code, ExitError, o.stdout)
	}
	l := lines(t, o.stdout)
	for _, says := range []string{"FAIL", "refused a ping signed with this webhook secret: 401 Unauthorized",
		"X-Hub-Signature-256 does not match the body", "fix: the App has another secret", "LATESTWINS_WEBHOOK_SECRET", "Webhook secret"} {
		if !strings.Contains(l["webhook-secret"], says) {
			t.Errorf("webhook-secret: %q does not say %q", l["webhook-secret"], says)
		}
	}
	if s := statuses(t, o.stdout); s["webhook-signature"] != "ok" || s["app"] != "ok" || s["installation"] != "ok" {
		t.Errorf("other checks changed:\n%s", o.stdout)
	}
	if strings.Contains(o.stdout+o.stderr, "not-the-apps") {
		t.Errorf("doctor showed the secret:\n%s\n%s", o.stdout, o.stderr)
	}
}

// Whatever answers at --url takes any signature: the forgery check fails, and says why it matters.
func TestDoctorSignaturesNotChecked(t *testing.T) {
	t.Parallel()
	lax := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/webhook" {
				rw.WriteHeader(http.StatusAccepted)
				return
			}
			next.ServeHTTP(rw, r)
		})
	}
	w := newDoctorWorld(t, lax)
	o := w.doctor(map[string]string{"LATESTWINS_APP_ID": "", "LATESTWINS_APP_PRIVATE_KEY": ""})
	l := lines(t, o.stdout)
	if o.code != ExitError || !strings.HasPrefix(l["webhook-signature"], "FAIL a ping with a wrong signature was taken: 202 Accepted") ||
		!strings.Contains(l["webhook-signature"], "checks no webhook signatures") {
		t.Errorf("doctor against an App that checks no signatures: exit %d\n%s", o.code, o.stdout)
	}
}

// The App is not installed on the repository of the trusted file: the installation check says
// where to install it, and the file is not read.
func TestDoctorNotInstalled(t *testing.T) {
	t.Parallel()
	w := newDoctorWorld(t, nil)
	w.gh.On("GET", "/repos/acme/platform/installation", http.StatusNotFound,
		`{"message":"Not Found","documentation_url":"https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app"}`)
	o := w.doctor(nil, "--config-repo", "acme/platform")
	if o.code != ExitError {
		t.Fatalf("doctor: exit %d, want %d\n%s", o.code, ExitError, o.stdout)
	}
	l := lines(t, o.stdout)
	if want := "FAIL the App is not installed on acme/platform (or there is no such repository), where the trusted configuration is read; " +
		"fix: install the App on acme/platform (the App's page on GitHub, Install App or Configure), or give --config-repo the repository serve is given"; l["installation"] != want {
		t.Errorf("installation:\n got %q\nwant %q", l["installation"], want)
	}
	if l["trusted-config"] != "skipped (the App's installation on the trusted configuration's repository was not found)" {
		t.Errorf("trusted-config: %q", l["trusted-config"])
	}
}

// A trusted file that does not parse: the check quotes the parser, which names the line and what
// is allowed there.
func TestDoctorTrustedFileInvalid(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ body, says string }{
		"invalid YAML": {"environments:\n  staging: [\n", "line"},
		"unknown key": {"environments:\n  staging:\n    polcy: latest\n    scopes:\n      api: {repository: Codertocat/Hello-World, branch: master, workflow: deploy.yml}\n",
			`line 3: unknown key "polcy" in environment "staging"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newDoctorWorld(t, nil)
			w.stubConfig(c.body)
			o := w.doctor(nil)
			l := lines(t, o.stdout)
			if o.code != ExitError || !strings.HasPrefix(l["trusted-config"], "FAIL the trusted file Codertocat/.github:.github/latestwins.yml") ||
				!strings.Contains(l["trusted-config"], c.says) || !strings.Contains(l["trusted-config"], "fix: correct Codertocat/.github:.github/latestwins.yml") {
				t.Errorf("doctor: exit %d; trusted-config %q, want it to fail saying %q\n%s", o.code, l["trusted-config"], c.says, o.stdout)
			}
			if statuses(t, o.stdout)["installation"] != "ok" {
				t.Errorf("installation: %q", l["installation"])
			}
		})
	}
}

// A bolt file of the first schema needs migrate; a path with no store at all is one migrate would
// create.
func TestDoctorBoltNotMigrated(t *testing.T) {
	t.Parallel()
	w := newDoctorWorld(t, nil)
	old := filepath.Join(w.h.dir, "old.db")
	db, err := bbolt.Open(old, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range []string{"docs", "pending", "meta"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("meta")).Put([]byte("schema"), []byte("1"))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	for store, says := range map[string]string{
		"bolt://" + old: "schema version 1, this latestwins writes 2",
		"bolt://" + filepath.Join(w.h.dir, "never.db"): "no store at bolt://",
	} {
		o := w.doctor(map[string]string{"LATESTWINS_APP_ID": "", "LATESTWINS_APP_PRIVATE_KEY": ""}, "--store", store)
		l := lines(t, o.stdout)
		if o.code != ExitError || !strings.HasPrefix(l["store"], "FAIL") || !strings.Contains(l["store"], says) ||
			!strings.Contains(l["store"], "fix: run latestwins migrate --store '"+store+"'") {
			t.Errorf("doctor --store %s: exit %d; store %q, want a failure saying %q and to migrate", store, o.code, l["store"], says)
		}
	}
}

// A store on git refs is checked by reading its refs; one that cannot be opened says what to fix.
func TestDoctorGitStore(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		testutil.MissingTool(t, "git is not on the PATH: a git+file:// store runs git's upload-pack")
	}
	w := newDoctorWorld(t, nil)
	repo := filepath.Join(w.h.dir, "state.git")
	if out, err := exec.Command("git", "init", "--bare", "-q", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	noApp := map[string]string{"LATESTWINS_APP_ID": "", "LATESTWINS_APP_PRIVATE_KEY": ""}
	o := w.doctor(noApp, "--store", "git+file://"+repo)
	if l := lines(t, o.stdout); !strings.HasPrefix(l["store"], "ok") || !strings.Contains(l["store"], "0 environments under refs/latestwins/") {
		t.Errorf("doctor on an empty git store: store %q, want ok with 0 environments", l["store"])
	}
	o = w.doctor(noApp, "--store", "github://octo-org/state")
	if l := lines(t, o.stdout); o.code != ExitError || !strings.HasPrefix(l["store"], "FAIL") || !strings.Contains(l["store"], "LATESTWINS_GIT_TOKEN") ||
		!strings.Contains(l["store"], "fix: check the repository in the store URL, and the token") {
		t.Errorf("doctor on github:// without a token: exit %d; store %q, want a failure saying which token to set", o.code, l["store"])
	}
}

// The App requires another audience than the workflows ask for: the App says which at GET /meta.
// An App that does not say is compared with serve's own settings, and the line says so.
func TestDoctorAudienceMismatch(t *testing.T) {
	t.Parallel()
	noMeta := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.URL.Path == app.MetaPath {
				http.NotFound(rw, r)
				return
			}
			next.ServeHTTP(rw, r)
		})
	}
	creds := map[string]string{"LATESTWINS_APP_ID": "", "LATESTWINS_APP_PRIVATE_KEY": ""}
	t.Run("the App says", func(t *testing.T) {
		t.Parallel()
		w := newDoctorWorld(t, nil, "--oidc-audience", "lw-prod")
		o := w.doctor(creds)
		l := lines(t, o.stdout)
		want := `FAIL the App requires OIDC audience "lw-prod" (the App says so at GET /meta, for tokens of https://token.actions.githubusercontent.com), ` +
			`the workflows ask for "latestwins"; fix: set the App's LATESTWINS_OIDC_AUDIENCE (serve --oidc-audience) to "latestwins", or unset it`
		if o.code != ExitError || !strings.HasPrefix(l["audience"], want) {
			t.Errorf("doctor: exit %d; audience:\n got %q\nwant %q...", o.code, l["audience"], want)
		}
		if o := w.doctor(creds, "--audience", "lw-prod"); o.code != ExitOK {
			t.Errorf("doctor --audience lw-prod: exit %d\n%s", o.code, o.stdout)
		}
	})
	t.Run("checked here", func(t *testing.T) {
		t.Parallel()
		w := newDoctorWorld(t, noMeta, "--oidc-audience", "lw-prod")
		o := w.doctor(map[string]string{"LATESTWINS_APP_ID": "", "LATESTWINS_APP_PRIVATE_KEY": "", "LATESTWINS_OIDC_AUDIENCE": "lw-prod"})
		l := lines(t, o.stdout)
		if o.code != ExitError || !strings.Contains(l["audience"], `requires OIDC audience "lw-prod" (as --oidc-audience / LATESTWINS_OIDC_AUDIENCE here say: the App does not say it`) {
			t.Errorf("doctor: exit %d; audience %q", o.code, l["audience"])
		}
	})
}

// Without the App at --url, the App's checks fail or are skipped and say why; bad flags are one
// line and exit 2; help shows no secret.
func TestDoctorFlagsAndNoApp(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	srv := httptest.NewServer(http.NotFoundHandler())
	closed := srv.URL
	srv.Close()
	o := h.run(context.Background(), "doctor", "--url", closed)
	l := lines(t, o.stdout)
	if o.code != ExitError || !strings.HasPrefix(l["app"], "FAIL GET "+closed+"/healthz") || !strings.Contains(l["app"], "fix: check --url") ||
		l["webhook-secret"] != "skipped (the App does not answer)" {
		t.Errorf("doctor against a closed port: exit %d\n%s", o.code, o.stdout)
	}
	for _, args := range [][]string{{}, {"--url", "ftp://127.0.0.1"}, {"--url", closed, "--config-repo", "nope"}, {"--url", closed, "--bogus"},
		{"--url", closed, "--store", "s3://x"}, {"--url", closed, "--app-id", "42"}} {
		o := h.run(context.Background(), append([]string{"doctor"}, args...)...)
		if o.code != ExitUsage || o.stdout != "" || strings.Count(strings.TrimSpace(o.stderr), "\n") != 0 {
			t.Errorf("doctor %v: exit %d, want %d and one line\nstdout:\n%s\nstderr:\n%s", args, o.code, ExitUsage, o.stdout, o.stderr)
		}
	}
	if o := h.run(context.Background(), "doctor", "--bogus"); !strings.Contains(o.stderr, "latestwins doctor -h") {
		t.Errorf("a flag error does not say where help is: %s", o.stderr)
	}
	h.vars["LATESTWINS_WEBHOOK_SECRET"] = "hush-hush"
	o = h.run(context.Background(), "doctor", "-h")
	if o.code != ExitOK || !strings.Contains(o.stderr, "-webhook-secret") || strings.Contains(o.stderr, "hush-hush") {
		t.Errorf("doctor -h: exit %d\n%s", o.code, o.stderr)
	}
}
