package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

// TestServeDevTokens: `serve --dev-tokens` on loopback runs a development issuer whose tokens the
// /v1 API accepts, so that the API mode can be tried on one machine: a token of the configured
// repository claims through `--api`, one of another repository is refused, and the flag is refused
// on any address but loopback.
func TestServeDevTokens(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeServeConfig(t, dir, serveConfig)
	h := newHarness(t)
	h.vars["LATESTWINS_WEBHOOK_SECRET"] = serveSecret
	if o := h.run(context.Background(), "serve", "--dev-tokens", "--addr", "0.0.0.0:0", "--config", cfg); o.code != ExitUsage || !strings.Contains(o.stderr, "loopback") {
		t.Fatalf("--dev-tokens on 0.0.0.0: exit %d %q; want 2 saying loopback only", o.code, o.stderr)
	}

	bin := filepath.Join(dir, "latestwins")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/latestwins/latestwins/cmd/latestwins").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "--dev-tokens", "--addr", "127.0.0.1:0", "--config", cfg, "--store", "bolt://"+filepath.Join(dir, "lw.db"))
	cmd.Env = append(os.Environ(), "LATESTWINS_WEBHOOK_SECRET="+serveSecret, "LATESTWINS_APP_ID=", "LATESTWINS_APP_PRIVATE_KEY=")
	cmd.WaitDelay = 5 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGINT); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stderr)
	var api, issuer string
	for (api == "" || issuer == "") && lines.Scan() {
		line := lines.Text()
		if _, rest, ok := strings.Cut(line, "listening on "); ok {
			api, _, _ = strings.Cut(rest, " ")
		}
		if _, rest, ok := strings.Cut(line, "curl -s '"); ok {
			issuer, _, _ = strings.Cut(rest, "/token?")
		}
	}
	go func() { _, _ = io.Copy(io.Discard, stderr) }()
	if !strings.HasPrefix(api, "http://127.0.0.1:") || !strings.HasPrefix(issuer, "http://127.0.0.1:") {
		t.Fatalf("serve did not say where it listens (%q) and where its tokens are (%q)", api, issuer)
	}
	token := func(repo string) string {
		resp, err := http.Get(issuer + "/token?repository=" + repo)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("token for %s: %d %s", repo, resp.StatusCode, b)
		}
		return strings.TrimSpace(string(b))
	}
	claim := func(tok string) outcome {
		var out, errb syncbuf.Buffer
		vars := map[string]string{}
		pio := IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }}
		code := Main(ctx, []string{"claim", "--api", api, "--api-token", tok, "--environment", "staging", "--scopes", "api",
			"--sha", fixtureSha, "--intent-id", "dev-" + tok[len(tok)-8:]}, pio)
		return outcome{code: code, stdout: out.String(), stderr: errb.String()}
	}
	if o := claim(token("Codertocat/Hello-World")); o.code != ExitOK || !strings.Contains(o.stdout, "generation 1") {
		t.Fatalf("claim with a development token of the configured repository: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	if o := claim(token("acme/other")); o.code != ExitUsage && o.code != ExitError {
		t.Fatalf("claim with a token of another repository: exit %d\n%s%s; want it refused", o.code, o.stdout, o.stderr)
	} else if !strings.Contains(o.stderr, "acme/other may not act on staging") {
		t.Fatalf("claim with a token of another repository: %q; want the API's refusal", o.stderr)
	}
}
