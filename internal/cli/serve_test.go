package cli

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/metrics/metricstest"
	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

const serveSecret = "serve-test-secret"

const serveConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
`

const fixtureSha = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"

func writeServeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	p := filepath.Join(dir, "latestwins.yml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func pushFixture(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "webhooks", "push.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func signedPush(t *testing.T, url, id string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/webhook", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, []byte(serveSecret))
	m.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestServeRefusesBadSettings(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := writeServeConfig(t, h.dir, serveConfig)
	tests := []struct {
		name string
		vars map[string]string
		args []string
		want string
	}{
		{"no secret", nil, []string{"--config", cfg}, "no webhook secret: set LATESTWINS_WEBHOOK_SECRET"},
		{"no config", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s"}, nil, "no configuration: give --config PATH"},
		{"invalid config", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s"}, []string{"--config", writeServeConfig(t, t.TempDir(), "environments: {}\n")},
			"line 1: environments is empty"},
		{"app id without key", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s", "LATESTWINS_APP_ID": "12"}, []string{"--config", cfg},
			"LATESTWINS_APP_ID is set but LATESTWINS_APP_PRIVATE_KEY is not"},
		{"key that is no key", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s", "LATESTWINS_APP_ID": "12", "LATESTWINS_APP_PRIVATE_KEY": "-----BEGIN nonsense"},
			[]string{"--config", cfg}, "LATESTWINS_APP_PRIVATE_KEY: "},
		{"bad api url", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s"}, []string{"--config", cfg, "--github-api-url", "ftp://x"}, "--github-api-url \"ftp://x\""},
		{"bad oidc issuer", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s", "LATESTWINS_OIDC_ISSUER": "token.actions.githubusercontent.com"}, []string{"--config", cfg},
			"--oidc-issuer: invalid OIDC issuer"},
		{"bad max body", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s", "LATESTWINS_MAX_BODY": "ten"}, []string{"--config", cfg}, "LATESTWINS_MAX_BODY=\"ten\""},
		{"unknown status page mode", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s"}, []string{"--config", cfg, "--status-page", "public"}, "--status-page \"public\""},
		{"github status page without its settings", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s", "LATESTWINS_STATUS_PAGE": "github"}, []string{"--config", cfg},
			"--status-page github needs LATESTWINS_PUBLIC_URL, LATESTWINS_APP_CLIENT_ID, LATESTWINS_APP_CLIENT_SECRET, LATESTWINS_SESSION_KEY"},
		{"github status page with a short session key", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s", "LATESTWINS_STATUS_PAGE": "github",
			"LATESTWINS_PUBLIC_URL": "https://x.example", "LATESTWINS_APP_CLIENT_ID": "c", "LATESTWINS_APP_CLIENT_SECRET": "s", "LATESTWINS_SESSION_KEY": "short"},
			[]string{"--config", cfg}, "LATESTWINS_SESSION_KEY has 5 bytes: give at least 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			for k, v := range tt.vars {
				h.vars[k] = v
			}
			o := h.run(context.Background(), append([]string{"serve"}, tt.args...)...)
			if o.code != ExitUsage || !strings.Contains(o.stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", o.code, o.stderr, ExitUsage, tt.want)
			}
		})
	}
}

// The status page, served by serve's handler in-process, shows what the store holds.
func TestServeStatusPage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := writeServeConfig(t, h.dir, serveConfig)
	var stderr syncbuf.Buffer
	vars := map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret, "LATESTWINS_STORE": h.store}
	c := &cmdEnv{io: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return vars[k] }},
		log: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	handler, _, err := c.serveHandler(ctx, []string{"--config", cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.done()
	if !strings.Contains(stderr.String(), "nothing is published to GitHub") {
		t.Errorf("serve did not say it will not publish:\n%s", stderr.String())
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()

	resp := signedPush(t, srv.URL, "delivery-1", pushFixture(t))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("push: %d", resp.StatusCode)
	}
	// A run deploys generation 1 and a second pass holds the lease.
	auth, closeFn := h.authority()
	defer closeFn()
	if _, err := auth.Claim(ctx, "staging", 1, []string{"api"}); err != nil {
		t.Fatal(err)
	}
	g, err := auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-1", LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Complete(ctx, authority.Completion{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Outcome: authority.OutcomeSuccess, Tokens: g.Tokens, Holder: "run-1"}); err != nil {
		t.Fatal(err)
	}
	next, err := auth.Accept(ctx, authority.Intent{ID: "next", Environment: "staging", Scopes: []string{"api"}, Sha: "bbbb222000000000000000000000000000000000"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := auth.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: next.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-2", LeaseTTL: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}

	page, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer page.Body.Close()
	if !strings.Contains(stderr.String(), "status page: open to anyone who can reach this address") {
		t.Errorf("serve on loopback did not say its status page is open:\n%s", stderr.String())
	}
	body, _ := io.ReadAll(page.Body)
	for _, want := range []string{"<h2>staging</h2>", `<code title="` + fixtureSha + `">6113728</code>`, "held by run-2 for deploy, token 2"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("status page lacks %q:\n%s", want, body)
		}
	}
}

// latestwins serve as a process on a free loopback port takes a signed push, then stops on SIGINT.
func TestServeProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "latestwins")
	build := exec.Command("go", "build", "-o", bin, "github.com/latestwins/latestwins/cmd/latestwins")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cfg := writeServeConfig(t, dir, serveConfig)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--config", cfg, "--store", "bolt://"+filepath.Join(dir, "lw.db"))
	cmd.Env = append(os.Environ(), "LATESTWINS_WEBHOOK_SECRET="+serveSecret, "LATESTWINS_APP_ID=", "LATESTWINS_APP_PRIVATE_KEY=")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	var url, metricsURL string
	var log []string
	for (url == "" || metricsURL == "") && lines.Scan() {
		log = append(log, lines.Text())
		if _, rest, ok := strings.Cut(lines.Text(), "listening on "); ok {
			url, _, _ = strings.Cut(rest, " ")
		}
		if _, rest, ok := strings.Cut(lines.Text(), "metrics on "); ok {
			metricsURL = strings.TrimSpace(rest)
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasPrefix(metricsURL, "http://127.0.0.1:") || strings.HasPrefix(metricsURL, url) {
		t.Fatalf("no loopback listening lines for the App and its metrics, on two listeners, in:\n%s", strings.Join(log, "\n"))
	}
	rest := make(chan []string, 1)
	go func() {
		var more []string
		for lines.Scan() {
			more = append(more, lines.Text())
		}
		rest <- more
	}()

	resp := signedPush(t, url, "process-delivery", pushFixture(t))
	var res struct {
		Outcome string `json:"outcome"`
		Intents []struct {
			Environment string `json:"environment"`
			Generation  int64  `json:"generation"`
		} `json:"intents"`
	}
	err = json.NewDecoder(resp.Body).Decode(&res)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || res.Outcome != "accepted" || len(res.Intents) != 1 || res.Intents[0].Generation != 1 {
		t.Errorf("push to the process: %d %+v %v", resp.StatusCode, res, err)
	}

	// The metrics listener counts the delivery and reports the scope it made wait.
	fams := metricstest.Get(t, metricsURL)
	if v, _ := fams.Value("latestwins_deliveries_total", "event", "push", "outcome", "accepted"); v != 1 {
		t.Errorf("deliveries of push accepted: %v, want 1", v)
	}
	if _, ok := fams.Value("latestwins_scope_behind_seconds", "environment", "staging", "scope", "api"); !ok {
		t.Errorf("no behind figure for staging/api (the push is pending)")
	}
	if v, _ := fams.Value("latestwins_store_requests_total", "op", "put", "result", "ok"); v < 1 {
		t.Errorf("store writes counted: %v, want the accept's", v)
	}
	if resp, err := http.Get(url + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("the App's own listener serves /metrics: the figures name every environment and scope")
		}
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	more := <-rest
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve did not stop cleanly on SIGINT: %v\n%s", err, strings.Join(append(log, more...), "\n"))
	}
	all := strings.Join(append(log, more...), "\n")
	for _, want := range []string{"nothing is published to GitHub", `"msg":"dispatch skipped: no App credentials, not publishing to GitHub"`, "latestwins serve: stopped"} {
		if !strings.Contains(all, want) {
			t.Errorf("serve's log lacks %q:\n%s", want, all)
		}
	}
}

// With App credentials and no --config, serve reads the trusted file from the App owner's .github
// repository as the App's installation there, and dispatches the workflow as the delivery's: every
// call on the strict fake.
func TestServeWithAppCredentialsReadsConfigAndDispatches(t *testing.T) {
	t.Parallel()
	keyPEM, gh := appKeyAndGitHub(t)
	// The trusted file is in the .github repository of the App's owner; it allows no overrides, so
	// Hello-World's own file is not read.
	ghApp := githubtest.Example(t, "GET", "/app", http.StatusOK, "")
	ghApp["owner"].(map[string]any)["login"] = "Codertocat"
	gh.On("GET", "/app", http.StatusOK, ghApp)
	installation := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/installation", http.StatusOK, "")
	installation["id"] = 1
	gh.On("GET", "/repos/Codertocat/.github/installation", http.StatusOK, installation)
	file := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/contents/{path}", http.StatusOK, "response-if-content-is-a-file")
	file["content"], file["path"] = base64.StdEncoding.EncodeToString([]byte(serveConfig)), ".github/latestwins.yml"
	gh.On("GET", "/repos/Codertocat/.github/contents/.github/latestwins.yml", http.StatusOK, file)
	gh.On("POST", "/repos/Codertocat/Hello-World/actions/workflows/deploy.yml/dispatches", http.StatusOK,
		githubtest.Example(t, "POST", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches", http.StatusOK, ""))

	h := newHarness(t)
	var stderr syncbuf.Buffer
	vars := map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret, "LATESTWINS_STORE": h.store, "LATESTWINS_APP_ID": "42",
		"LATESTWINS_APP_PRIVATE_KEY": string(keyPEM), "LATESTWINS_GITHUB_API_URL": gh.URL}
	c := &cmdEnv{io: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return vars[k] }},
		log: slog.New(slog.DiscardHandler)}
	handler, _, err := c.serveHandler(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.done()
	if want := "acting as GitHub App 42 on " + gh.URL + "/: dispatching workflows and answering comment commands; trusted configuration from the App owner's .github repository"; !strings.Contains(stderr.String(), want) {
		t.Errorf("serve did not say %q:\n%s", want, stderr.String())
	}
	srv := httptest.NewServer(handler)
	defer srv.Close()
	resp := signedPush(t, srv.URL, "delivery-1", pushFixture(t))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"outcome":"accepted"`) {
		t.Fatalf("push: %d %s", resp.StatusCode, body)
	}
	var got []string
	for _, r := range gh.Requests() {
		got = append(got, r.Method+" "+r.Path)
	}
	want := []string{
		"GET /app",
		"GET /repos/Codertocat/.github/installation",
		"POST /app/installations/1/access_tokens",
		"GET /repos/Codertocat/.github/contents/.github/latestwins.yml",
		"POST /repos/Codertocat/Hello-World/actions/workflows/deploy.yml/dispatches",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("GitHub requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// serve on every interface keeps its status page off unless told otherwise; the rest is unchanged.
func TestServeStatusPageOffOffLoopback(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := writeServeConfig(t, h.dir, serveConfig)
	var stderr syncbuf.Buffer
	vars := map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret, "LATESTWINS_STORE": h.store}
	c := &cmdEnv{io: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return vars[k] }},
		log: slog.New(slog.DiscardHandler)}
	// Not listened on: only the handler is built, and served on loopback by the test.
	handler, _, err := c.serveHandler(context.Background(), []string{"--config", cfg, "--addr", ":8080"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.done()
	srv := httptest.NewServer(handler)
	defer srv.Close()
	for path, want := range map[string]int{"/": http.StatusNotFound, "/healthz": http.StatusOK} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d %s, want %d", path, resp.StatusCode, body, want)
		}
		if path == "/" && !strings.Contains(string(body), "LATESTWINS_STATUS_PAGE") {
			t.Errorf("the page that is off does not say how to turn it on: %s", body)
		}
	}
	if !strings.Contains(stderr.String(), "status page: off") {
		t.Errorf("serve did not say its status page is off:\n%s", stderr.String())
	}
}

// A push GitHub failed to deliver while serve was down is accepted when serve starts again: read
// back from the App's delivery log (as the App) and handled as a live delivery, its workflow
// dispatched once; the next run replays nothing.
func TestServeReplaysMissedDeliveriesOnStart(t *testing.T) {
	t.Parallel()
	keyPEM, gh := appKeyAndGitHub(t)
	gh.On("POST", "/repos/Codertocat/Hello-World/actions/workflows/deploy.yml/dispatches", http.StatusOK,
		githubtest.Example(t, "POST", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches", http.StatusOK, ""))
	missed := gh.DeliveryLog().Add(githubtest.LoggedDelivery{GUID: "missed-while-down", DeliveredAt: time.Now().Add(-10 * time.Minute),
		Event: "push", StatusCode: http.StatusBadGateway, Payload: pushFixture(t)})

	h := newHarness(t)
	var stderr syncbuf.Buffer
	vars := map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret, "LATESTWINS_STORE": h.store, "LATESTWINS_APP_ID": "42",
		"LATESTWINS_APP_PRIVATE_KEY": string(keyPEM), "LATESTWINS_GITHUB_API_URL": gh.URL}
	c := &cmdEnv{io: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(k string) string { return vars[k] }},
		log: slog.New(slog.DiscardHandler)}
	_, ss, err := c.serveHandler(context.Background(), []string{"--config", writeServeConfig(t, t.TempDir(), serveConfig)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.done()
	rep := c.heal(t.Context(), ss)
	if rep == nil || len(rep.Replayed) != 1 || rep.Replayed[0].GUID != missed.GUID || rep.Replayed[0].Outcome != "accepted" {
		t.Fatalf("on start: %+v, want the missed push replayed and accepted", rep)
	}
	if rep = c.heal(t.Context(), ss); len(rep.Replayed) != 0 {
		t.Fatalf("the next run replayed %+v, want nothing", rep.Replayed)
	}
	if missed.Fetches(gh.DeliveryLog()) != 1 {
		t.Fatalf("the missed push's payload was read %d times, want once", missed.Fetches(gh.DeliveryLog()))
	}
}

// --heal-deliveries=false turns the replay off.
func TestServeHealDeliveriesOff(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	h := newHarness(t)
	vars := map[string]string{"LATESTWINS_WEBHOOK_SECRET": serveSecret, "LATESTWINS_STORE": h.store, "LATESTWINS_APP_ID": "42",
		"LATESTWINS_APP_PRIVATE_KEY": string(keyPEM), "LATESTWINS_GITHUB_API_URL": "http://127.0.0.1:9/", "LATESTWINS_HEAL_DELIVERIES": "false"}
	c := &cmdEnv{io: IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return vars[k] }},
		log: slog.New(slog.DiscardHandler)}
	_, ss, err := c.serveHandler(context.Background(), []string{"--config", writeServeConfig(t, t.TempDir(), serveConfig)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.done()
	if ss.healer != nil || c.heal(t.Context(), ss) != nil {
		t.Fatal("LATESTWINS_HEAL_DELIVERIES=false still replays")
	}
}

// appKeyAndGitHub makes an App private key (PEM) and the strict GitHub fake, which gives
// installation 1 a token.
func appKeyAndGitHub(t *testing.T) ([]byte, *githubtest.Server) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	gh := githubtest.New(t)
	token := githubtest.Example(t, "POST", "/app/installations/{installation_id}/access_tokens", http.StatusCreated, "")
	token["token"], token["expires_at"] = "ghs_one", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	gh.On("POST", "/app/installations/1/access_tokens", http.StatusCreated, token)
	return keyPEM, gh
}
