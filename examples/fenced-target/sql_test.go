package fencedtarget

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/latestwins/latestwins/internal/testutil"
)

// postgresEnv names a PostgreSQL connection string the SQL example's tests may create schemas in.
const postgresEnv = "LATESTWINS_TEST_POSTGRES_URL"

type pg struct {
	t      *testing.T
	url    string
	schema string
	dir    string // where deploy-sql.sh and fence.sql are run from
}

func newPG(t *testing.T) *pg {
	t.Helper()
	url := os.Getenv(postgresEnv)
	if url == "" {
		testutil.MissingTool(t, postgresEnv+" is not set: the SQL example runs against a real PostgreSQL (psql and a server on 127.0.0.1); scripts/test starts one from the machine's PostgreSQL")
		return nil
	}
	if _, err := exec.LookPath("psql"); err != nil {
		testutil.MissingTool(t, fmt.Sprintf("no psql: %v", err))
		return nil
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	p := &pg{t: t, url: url, schema: "fence_" + hex.EncodeToString(b), dir: "."}
	p.psql("CREATE SCHEMA " + p.schema)
	t.Cleanup(func() { p.psql("DROP SCHEMA " + p.schema + " CASCADE") })
	p.psqlFile("schema.sql")
	return p
}

func (p *pg) env() []string {
	return append(os.Environ(), "DATABASE_URL="+p.url, "PGOPTIONS=-c search_path="+p.schema)
}

func (p *pg) psql(sql string) string {
	p.t.Helper()
	cmd := exec.Command("psql", p.url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql)
	cmd.Env = p.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		p.t.Fatalf("psql %s: %v\n%s", sql, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (p *pg) psqlFile(name string) {
	p.t.Helper()
	cmd := exec.Command("psql", p.url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", name)
	cmd.Env = p.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		p.t.Fatalf("psql -f %s: %v\n%s", name, err, out)
	}
}

// deploy runs deploy-sql.sh as latestwins run would, and returns its exit code.
func (p *pg) deploy(release string, token int64) int {
	p.t.Helper()
	cmd := exec.Command("bash", filepath.Join(p.dir, "deploy-sql.sh"), "api", release)
	cmd.Env = append(p.env(), fmt.Sprintf("%s=%d", EnvToken, token))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		p.t.Fatalf("deploy-sql.sh: %v\n%s", err, out.String())
	}
	return 0
}

// sequence deploys in order and returns what went wrong: a stale token must be refused (exit 3).
func (p *pg) sequence() []string {
	var problems []string
	for _, step := range []struct {
		release string
		token   int64
		code    int
	}{{"r5", 5, 0}, {"r3", 3, 3}, {"r5", 5, 0}, {"r9", 9, 0}, {"r8", 8, 3}} {
		if code := p.deploy(step.release, step.token); code != step.code {
			problems = append(problems, fmt.Sprintf("token %d: exit %d, want %d", step.token, code, step.code))
		}
	}
	if live := p.psql("SELECT release || ' ' || token FROM live_release WHERE name = 'api'"); live != "r9 9" {
		problems = append(problems, "live "+live+", want r9 9")
	}
	return problems
}

func TestSQLRefusesStaleWriters(t *testing.T) {
	p := newPG(t)
	for _, problem := range p.sequence() {
		t.Error(problem)
	}
}

func TestSQLManyWriters(t *testing.T) {
	p := newPG(t)
	var wg sync.WaitGroup
	for i := int64(1); i <= 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := p.deploy(fmt.Sprint("r", i), i); code != 0 && code != 3 {
				t.Errorf("deploy %d: exit %d", i, code)
			}
		}()
	}
	wg.Wait()
	if live := p.psql("SELECT token FROM live_release WHERE name = 'api'"); live != "16" {
		t.Errorf("live token %s after 16 racing processes, want 16", live)
	}
}

// TestSQLCatchesAnUnguardedUpdate runs the sequence with fence.sql's WHERE removed: it must fail.
func TestSQLCatchesAnUnguardedUpdate(t *testing.T) {
	p := newPG(t)
	sql, err := os.ReadFile("fence.sql")
	if err != nil {
		t.Fatal(err)
	}
	const guard = "  WHERE live_release.token <= EXCLUDED.token\n"
	if !bytes.Contains(sql, []byte(guard)) {
		t.Fatalf("fence.sql no longer contains %q: update the mutant", guard)
	}
	p.dir = t.TempDir()
	script, _ := os.ReadFile("deploy-sql.sh")
	if err := os.WriteFile(filepath.Join(p.dir, "deploy-sql.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "fence.sql"), bytes.Replace(sql, []byte(guard), nil, 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if len(p.sequence()) == 0 {
		t.Error("the sequence accepts a fence without its WHERE")
	}
}
