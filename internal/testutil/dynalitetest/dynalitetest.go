// Package dynalitetest gives tests a real DynamoDB-compatible server: dynalite on loopback.
//
// The test command (scripts/test) starts one dynalite for the whole run and exports its address as
// LATESTWINS_TEST_DYNAMODB_ENDPOINT. A test binary run without it starts its own dynalite from
// tools/dynalite/node_modules when that is installed. When neither works the test fails under CI
// (see testutil.ToolsRequired), and is skipped with instructions otherwise.
package dynalitetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/latestwins/latestwins/internal/testutil"
)

// EnvVar names the variable that carries a running dynalite's endpoint.
const EnvVar = "LATESTWINS_TEST_DYNAMODB_ENDPOINT"

var (
	once     sync.Once
	endpoint string
	startErr error
	proc     *exec.Cmd
)

// Main runs the tests of a package and stops the dynalite this binary started, if any. Call it
// from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Stop ends the dynalite this process started.
func Stop() {
	if proc != nil && proc.Process != nil {
		_ = proc.Process.Kill()
		_ = proc.Wait()
		proc = nil
	}
}

// Endpoint returns the URL of a reachable dynalite, or ends the test: a failure under CI, a skip
// (saying how to run it) elsewhere (testutil.MissingTool).
func Endpoint(tb testing.TB) string {
	tb.Helper()
	once.Do(func() { endpoint, startErr = find() })
	if startErr != nil {
		msg := fmt.Sprintf("this test needs dynalite: %v. Run the test command (scripts/test), or `npm ci --prefix tools/dynalite`, or set %s", startErr, EnvVar)
		testutil.MissingTool(tb, msg)
	}
	return endpoint
}

// Client returns a DynamoDB client for the dynalite endpoint, with static credentials.
func Client(tb testing.TB) *dynamodb.Client {
	tb.Helper()
	return NewClient(Endpoint(tb), nil)
}

// NewClient returns a client for endpoint; client is the HTTP client to use (nil: the SDK's).
func NewClient(ep string, client aws.HTTPClient) *dynamodb.Client {
	opts := dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(ep),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	}
	if client != nil {
		opts.HTTPClient = client
	}
	return dynamodb.New(opts)
}

// TableName returns a table name unique to this test, so that tests sharing a server never meet.
func TableName(tb testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "lw-test-" + hex.EncodeToString(b[:])
}

func find() (string, error) {
	if ep := os.Getenv(EnvVar); ep != "" {
		if err := waitReady(ep, 5*time.Second); err != nil {
			return "", fmt.Errorf("%s=%s is not answering: %w", EnvVar, ep, err)
		}
		return ep, nil
	}
	bin, err := dynaliteBin()
	if err != nil {
		return "", err
	}
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return "", err
		}
		cmd := exec.Command("node", bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
		if err := cmd.Start(); err != nil {
			return "", fmt.Errorf("start dynalite: %w", err)
		}
		ep := fmt.Sprintf("http://127.0.0.1:%d", port)
		if lastErr = waitReady(ep, 10*time.Second); lastErr == nil {
			proc = cmd
			return ep, nil
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	return "", fmt.Errorf("dynalite did not start: %w", lastErr)
}

// dynaliteBin finds tools/dynalite/node_modules/dynalite/cli.js above the working directory.
func dynaliteBin() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "tools", "dynalite", "node_modules", "dynalite", "cli.js")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s is not set and tools/dynalite/node_modules is not installed", EnvVar)
		}
		dir = parent
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(ep string, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var lastErr error
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ep, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return lastErr
}
