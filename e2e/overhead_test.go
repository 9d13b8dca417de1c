package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// buildLatestwins builds the command as the action's composite step does, into a temporary directory.
func buildLatestwins(tb testing.TB) string {
	tb.Helper()
	requireTool(tb, "go", "", "install Go (https://go.dev/dl/)")
	bin := filepath.Join(tb.TempDir(), "latestwins")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/latestwins")
	cmd.Dir = moduleRoot(tb)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build ./cmd/latestwins: %v\n%s", err, out)
	}
	return bin
}

// stepRunner runs `latestwins action` as one step of a job on a runner: a process with the
// INPUT_* and GITHUB_* variables the composite action gives it.
type stepRunner struct {
	bin   string
	dir   string
	store string
}

// step runs one step of the job runID with the given inputs; it returns the step's wall time and
// outputs, and fails the benchmark when the step fails.
func (s *stepRunner) step(tb testing.TB, runID int, inputs map[string]string) (time.Duration, map[string]string) {
	tb.Helper()
	job := filepath.Join(s.dir, fmt.Sprintf("run-%d", runID))
	if err := os.MkdirAll(job, 0o755); err != nil {
		tb.Fatal(err)
	}
	sha := fmt.Sprintf("%040x", runID)
	output, summary := filepath.Join(job, "output"), filepath.Join(job, "summary")
	for _, f := range []string{output, summary} {
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true",
		"GITHUB_ACTIONS=true", "GITHUB_REPOSITORY=latestwins/bench", "GITHUB_REPOSITORY_OWNER=latestwins",
		fmt.Sprintf("GITHUB_RUN_ID=%d", runID), "GITHUB_RUN_ATTEMPT=1", "GITHUB_JOB=deploy", "GITHUB_ACTOR=bench",
		"GITHUB_EVENT_NAME=push", "GITHUB_SHA=" + sha, "GITHUB_REF=refs/heads/main",
		"GITHUB_SERVER_URL=https://github.com", "GITHUB_API_URL=https://api.github.com",
		"RUNNER_TEMP=" + job, "GITHUB_OUTPUT=" + output, "GITHUB_STEP_SUMMARY=" + summary,
		"INPUT_ENVIRONMENT=bench", "INPUT_SCOPES=api", "INPUT_STORE=" + s.store,
		"INPUT_COMMENT=false", "INPUT_CHECK-RUN=false", "INPUT_LEASE-TTL=30s", "INPUT_WAIT=10s",
	}
	for k, v := range inputs {
		env = append(env, "INPUT_"+strings.ToUpper(k)+"="+v)
	}
	cmd := exec.Command(s.bin, "action")
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if err != nil {
		tb.Fatalf("latestwins action %v: %v\n%s", inputs, err, out.String())
	}
	b, err := os.ReadFile(output)
	if err != nil {
		tb.Fatal(err)
	}
	return took, parseFileCommands(string(b))
}

// parseFileCommands reads a GITHUB_OUTPUT file: name=value lines and name<<DELIMITER blocks.
func parseFileCommands(s string) map[string]string {
	m := map[string]string{}
	lines := strings.Split(s, "\n")
	for i := 0; i < len(lines); i++ {
		if name, delim, ok := strings.Cut(lines[i], "<<"); ok {
			var val []string
			for i++; i < len(lines) && lines[i] != delim; i++ {
				val = append(val, lines[i])
			}
			m[name] = strings.Join(val, "\n")
			continue
		}
		if name, val, ok := strings.Cut(lines[i], "="); ok {
			m[name] = val
		}
	}
	return m
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkActionStep measures what the Action itself adds to each step of a job, as whole
// processes of `latestwins action` against dynalite: claim, gate (deploy, taking the lease) and
// run with `true` as the command (gate again, run, complete), one new push per iteration. It
// reports the median wall time of each step, and of starting the process (`action --help`).
func BenchmarkActionStep(b *testing.B) {
	bin := buildLatestwins(b)
	ep := dynalitetest.Endpoint(b)
	table := dynalitetest.TableName(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := dynamo.New(dynalitetest.Client(b), table).Migrate(ctx); err != nil {
		b.Fatalf("create table %s: %v", table, err)
	}
	s := &stepRunner{bin: bin, dir: b.TempDir(), store: fmt.Sprintf("dynamodb://%s?region=us-east-1&endpoint=%s", table, ep)}

	var start, claim, gate, run []time.Duration
	for i := 1; b.Loop(); i++ {
		t0 := time.Now()
		if out, err := exec.Command(bin, "action", "--help").CombinedOutput(); err != nil {
			b.Fatalf("latestwins action --help: %v\n%s", err, out)
		}
		start = append(start, time.Since(t0))

		took, out := s.step(b, i, map[string]string{"command": "claim"})
		if out["authorized"] != "true" || out["generation"] != fmt.Sprint(i) {
			b.Fatalf("claim of push %d: outputs %v, want authorized=true generation=%d", i, out, i)
		}
		claim = append(claim, took)
		took, out = s.step(b, i, map[string]string{"command": "gate", "phase": "deploy"})
		if out["outcome"] != "authorized" {
			b.Fatalf("gate of push %d: outputs %v, want outcome=authorized", i, out)
		}
		gate = append(gate, took)
		took, out = s.step(b, i, map[string]string{"command": "run", "run": "true"})
		if out["outcome"] != "deployed" {
			b.Fatalf("run of push %d: outputs %v, want outcome=deployed", i, out)
		}
		run = append(run, took)
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(median(start)), "start-ms")
	b.ReportMetric(ms(median(claim)), "claim-ms")
	b.ReportMetric(ms(median(gate)), "gate-ms")
	b.ReportMetric(ms(median(run)), "run-ms")
}
