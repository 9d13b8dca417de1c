package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// pageWriter is the command's stderr: it keeps what is written and hands over the local page's URL.
type pageWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	page chan string
	sent bool
}

var openLine = regexp.MustCompile(`Open (http://127\.0\.0\.1:[0-9]+/) in a browser`)

func (w *pageWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := openLine.FindSubmatch(w.buf.Bytes()); m != nil && !w.sent {
		w.sent = true
		w.page <- string(m[1])
	}
	return len(p), nil
}

func (w *pageWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// runAppCreate runs `latestwins app create ARGS` against a fake GitHub, plays the browser and
// GitHub's redirect, and returns the exit code, stdout and stderr.
func runAppCreate(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	gh := githubtest.New(t)
	answer := githubtest.Example(t, http.MethodPost, "/app-manifests/{code}/conversions", http.StatusCreated, "")
	answer["id"], answer["slug"], answer["html_url"] = 99, "latestwins-test", "https://github.com/apps/latestwins-test"
	answer["webhook_secret"], answer["pem"] = "whsec", "-----BEGIN RSA PRIVATE KEY-----\nKEY\n-----END RSA PRIVATE KEY-----\n"
	gh.On(http.MethodPost, "/app-manifests/{code}/conversions", http.StatusCreated, answer)

	stderr := &pageWriter{page: make(chan string, 1)}
	var stdout bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Main(context.Background(), append([]string{"app", "create", "--api-url", gh.URL, "--github-url", "http://127.0.0.1:9"}, args...),
			IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: stderr, Getenv: func(string) string { return "" }})
	}()
	var page string
	select {
	case page = <-stderr.page:
	case c := <-code:
		t.Fatalf("app create exited %d before serving its page: %s", c, stderr.String())
	}
	resp, err := http.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	action := regexp.MustCompile(`action="([^"]+)"`).FindSubmatch(body)
	manifest := regexp.MustCompile(`name="manifest" value="([^"]+)"`).FindSubmatch(body)
	if action == nil || manifest == nil {
		t.Fatalf("no manifest form on the page: %s", body)
	}
	u, err := url.Parse(html.UnescapeString(string(action[1])))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		RedirectURL string `json:"redirect_url"`
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(string(manifest[1]))), &m); err != nil {
		t.Fatal(err)
	}
	cb, err := http.Get(m.RedirectURL + "?" + url.Values{"code": {"c0de"}, "state": {u.Query().Get("state")}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	cb.Body.Close()
	return <-code, stdout.String(), stderr.String()
}

func TestAppCreateWritesCredentials(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "app.json")
	code, stdout, stderr := runAppCreate(t, "--out", out, "--url", "https://lw.example.com")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	info, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", out, info.Mode().Perm())
	}
	var creds struct {
		AppID         int64  `json:"app_id"`
		WebhookSecret string `json:"webhook_secret"`
		PrivateKey    string `json:"private_key"`
	}
	b, _ := os.ReadFile(out)
	if err := json.Unmarshal(b, &creds); err != nil || creds.AppID != 99 || creds.WebhookSecret != "whsec" || !strings.Contains(creds.PrivateKey, "KEY") {
		t.Errorf("credentials file %s: %+v %v", b, creds, err)
	}
	if stdout != "" || !strings.Contains(stderr, "https://github.com/apps/latestwins-test/installations/new") {
		t.Errorf("stdout %q, stderr %q: want the install link on stderr and nothing on stdout", stdout, stderr)
	}
}

func TestAppCreatePrintsSSMCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, stdout, stderr := runAppCreate(t, "--ssm", "--out", filepath.Join(dir, "unused.json"))
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "aws ssm put-parameter --overwrite --type SecureString --name '/latestwins/webhook-secret' --value='whsec'") ||
		!strings.Contains(stdout, "--name '/latestwins/app-private-key' --value='-----BEGIN RSA PRIVATE KEY-----") {
		t.Errorf("stdout:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(dir, "unused.json")); err == nil {
		t.Error("--ssm also wrote the credentials file")
	}
	if !strings.Contains(stderr, "webhook is inactive") {
		t.Errorf("without --url the user must be told the webhook is inactive: %s", stderr)
	}
}

func TestAppCreateUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"app"}, {"app", "delete"}, {"app", "create", "extra"}, {"app", "create", "--url", "http://plain.example"}, {"app", "create", "--listen", "0.0.0.0:0"}} {
		var stderr bytes.Buffer
		code := Main(context.Background(), args, IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }})
		if code == ExitOK {
			t.Errorf("%v: exit 0", args)
		}
	}
}
