package lambda_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/testutil"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
	"github.com/latestwins/latestwins/lambda"
)

func TestMain(m *testing.M) { dynalitetest.Main(m) }

// rieEnvVar names the emulator binary; scripts/test installs it and sets it.
const rieEnvVar = "LATESTWINS_TEST_RIE"

// emulator finds aws-lambda-rie: $LATESTWINS_TEST_RIE, the cache scripts/test installs into, or
// PATH. Without it the test fails under CI and is skipped, saying how to install it, elsewhere.
func emulator(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv(rieEnvVar)}
	if dir, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, filepath.Join(dir, "latestwins", "bin", "aws-lambda-rie"))
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		candidates = append(candidates, p)
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); c != "" && err == nil && !fi.IsDir() {
			return c
		}
	}
	msg := "this test needs the Lambda Runtime Interface Emulator: run the test command (scripts/test), which installs it, or set " + rieEnvVar
	testutil.MissingTool(t, msg)
	return ""
}

// buildBootstrap builds the function's binary as it is deployed (static, without the RPC runtime).
func buildBootstrap(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", out, "./lambda/cmd/bootstrap")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build -tags lambda.norpc ./lambda/cmd/bootstrap: %v\n%s", err, b)
	}
	return out
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startEmulator runs bootstrap under the emulator on loopback and returns its invocation URL.
func startEmulator(t *testing.T, rie, bootstrap string, env []string) string {
	t.Helper()
	var lastErr error
	for range 3 {
		addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr,
			"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", freePort(t)), bootstrap)
		cmd.Env = env
		var logs syncbuf.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		// The emulator starts the function as its child: both go in a process group of their own and
		// are killed together, and Wait stops waiting for the output pipes a leftover child could
		// hold open.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.WaitDelay = 5 * time.Second
		if err := cmd.Start(); err != nil {
			t.Fatalf("start %s: %v", rie, err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stop := func() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if lastErr = waitListening(addr, exited); lastErr == nil {
			t.Cleanup(func() {
				stop()
				if t.Failed() {
					t.Logf("emulator and function output:\n%s", logs.String())
				}
			})
			return "http://" + addr + "/2015-03-31/functions/function/invocations"
		}
		stop()
		lastErr = fmt.Errorf("%w\n%s", lastErr, logs.String())
	}
	t.Fatalf("the emulator did not start: %v", lastErr)
	return ""
}

func waitListening(addr string, exited <-chan error) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("the emulator exited: %v", err)
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s after 10s", addr)
}

func invokeOverHTTP(t *testing.T, url string, payload []byte) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Amz-Function-Error") != "" {
		t.Fatalf("invoke: HTTP %d (function error %q): %s", resp.StatusCode, resp.Header.Get("X-Amz-Function-Error"), b)
	}
	return b
}

// TestBootstrapUnderEmulator runs the built function under the Lambda Runtime Interface Emulator,
// on a DynamoDB-compatible store, and invokes it over HTTP as Lambda would.
func TestBootstrapUnderEmulator(t *testing.T) {
	rie := emulator(t)
	client := dynalitetest.Client(t)
	table := dynalitetest.TableName(t)
	ctx := context.Background()
	if _, err := dynamo.New(client, table).Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	bootstrap := buildBootstrap(t)
	url := startEmulator(t, rie, bootstrap, []string{
		"PATH=" + os.Getenv("PATH"),
		"AWS_LAMBDA_FUNCTION_TIMEOUT=30",
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1",
		lambda.EnvStore + "=dynamodb://" + table + "?region=us-east-1&endpoint=" + dynalitetest.Endpoint(t),
		lambda.EnvConfig + "=" + testdata(t, "lambda", "latestwins.yml"),
		lambda.EnvWebhookSecret + "=" + string(testSecret),
	})

	var res events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(invokeOverHTTP(t, url, fixture(t, "function-url-push.json")), &res); err != nil {
		t.Fatal(err)
	}
	var got app.Result
	if err := json.Unmarshal([]byte(res.Body), &got); err != nil || res.StatusCode != http.StatusOK || got.Outcome != app.OutcomeAccepted {
		t.Fatalf("push: status %d, body %s: want 200 and accepted", res.StatusCode, res.Body)
	}
	env, err := authority.New(dynamo.New(client, table)).Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if m := env.Scopes["api"].Mailbox; m == nil || m.Sha != pushSha || m.Generation != 1 {
		t.Fatalf("the table holds staging/api mailbox %+v, want %s at generation 1", m, pushSha)
	}

	if err := json.Unmarshal(invokeOverHTTP(t, url, fixture(t, "function-url-healthz.json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Body != "ok\n" {
		t.Fatalf("healthz: %d %q", res.StatusCode, res.Body)
	}

	var sweep lambda.SweepResult
	if err := json.Unmarshal(invokeOverHTTP(t, url, fixture(t, "scheduled-sweep.json")), &sweep); err != nil {
		t.Fatal(err)
	}
	if !sweep.DryRun || len(sweep.Redriven) != 0 {
		t.Fatalf("sweep %+v: want a dry run with nothing stalled yet (the push is fresh)", sweep)
	}
}
