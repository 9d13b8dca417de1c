package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/testutil"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

func TestMain(m *testing.M) { dynalitetest.Main(m) }

// actEnvVar names the act binary to use; without it, act is looked up on PATH.
const actEnvVar = "LATESTWINS_TEST_ACT"

// requireTool returns the path of a tool the test needs, or ends the test: a failure under CI, a
// skip saying how to get the tool elsewhere (testutil.MissingTool).
func requireTool(tb testing.TB, name, envVar, how string) string {
	tb.Helper()
	if envVar != "" {
		if p := os.Getenv(envVar); p != "" {
			if _, err := os.Stat(p); err != nil {
				tb.Fatalf("%s=%s: %v", envVar, p, err)
			}
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	msg := fmt.Sprintf("this test needs %s: %v. %s", name, err, how)
	testutil.MissingTool(tb, msg)
	return ""
}

// moduleRoot is the repository root: the directory above this package.
func moduleRoot(tb testing.TB) string {
	tb.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.Contains(b, []byte("module github.com/latestwins/latestwins\n")) {
		tb.Fatalf("%s is not the latestwins module root (go.mod: %v)", root, err)
	}
	return root
}

// copyModule copies the module's source tree (everything but VCS data, node_modules and workflows)
// into dst, keeping file modes. A file the Go build overlay replaces (see buildOverlay) is copied
// from its replacement, so that what act's runs build from the copy is what this test was built from.
func copyModule(tb testing.TB, src, dst string) {
	tb.Helper()
	replaced, _ := buildOverlay(tb)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", ".github", "node_modules":
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		// In a linked worktree .git is a file naming the real repository: copied, it would make the
		// scratch repository's git commands act on that repository.
		if !d.Type().IsRegular() || d.Name() == ".git" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		from := path
		if r, ok := replaced[path]; ok {
			from = r
			delete(replaced, path)
		}
		b, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
	if err != nil {
		tb.Fatalf("copy the module into the scratch repository: %v", err)
	}
	// What the overlay adds besides (the switched build's helper file in each package it mutates).
	for path, from := range replaced {
		rel, err := filepath.Rel(src, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, rel), b, 0o644)
		}
		if err != nil {
			tb.Fatalf("copy the build overlay's %s into the scratch repository: %v", rel, err)
		}
	}
}

// git runs git in dir with a fixed identity and no signing, failing the test on an error.
func git(tb testing.TB, dir string, args ...string) {
	tb.Helper()
	base := []string{"-c", "user.name=latestwins e2e", "-c", "user.email=e2e@latestwins.invalid", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main"}
	cmd := exec.Command("git", append(base, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// scratchRepo makes a git repository holding a copy of the module (the action and the sources its
// composite step builds) and the given workflows (file name -> text) under .github/workflows. act's
// actions/checkout copies it into each run's workspace; its origin makes the runs' repository
// (GITHUB_REPOSITORY) latestwins/e2e.
func scratchRepo(tb testing.TB, workflows map[string][]byte) string {
	tb.Helper()
	requireTool(tb, "git", "", "install git")
	root := moduleRoot(tb)
	dir := filepath.Join(tb.TempDir(), "repo")
	copyModule(tb, root, dir)
	wfDir := filepath.Join(dir, ".github", "workflows")
	if err := os.MkdirAll(wfDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, text := range workflows {
		if err := os.WriteFile(filepath.Join(wfDir, name), text, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	git(tb, dir, "init", "-q")
	git(tb, dir, "add", "-A")
	git(tb, dir, "commit", "-q", "-m", "the action under test")
	git(tb, dir, "remote", "add", "origin", "https://github.com/latestwins/e2e.git")
	return dir
}

// testdataFile reads a file of this package's testdata.
func testdataFile(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// pushEvent writes the push fixture as the event of one run: the push of sha on top of before.
func pushEvent(tb testing.TB, dir, name, sha, before string) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(tb), "testdata", "webhooks", "push.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(b, &ev); err != nil {
		tb.Fatalf("push fixture: %v", err)
	}
	ev["after"], ev["before"] = sha, before
	head, ok := ev["head_commit"].(map[string]any)
	if !ok {
		tb.Fatal("push fixture has no head_commit")
	}
	head["id"] = sha
	out, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(dir, "event-"+name+".json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		tb.Fatal(err)
	}
	return p
}

// buildOverlay reads the Go build overlay GOFLAGS names (-overlay=FILE, go help build), as
// scripts/mutants sets it to build a mutant in place of a file: replaced maps each replaced file's
// real path to its replacement's. goflags is GOFLAGS without the overlay, for builds of a copy of
// the module, where the overlay's paths name nothing.
func buildOverlay(tb testing.TB) (replaced map[string]string, goflags string) {
	tb.Helper()
	replaced = map[string]string{}
	root := moduleRoot(tb)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		tb.Fatal(err)
	}
	var rest []string
	for _, f := range strings.Fields(goEnv(tb, "GOFLAGS")["GOFLAGS"]) {
		file, ok := strings.CutPrefix(strings.Trim(f, `'"`), "-overlay=")
		if !ok {
			rest = append(rest, f)
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			tb.Fatalf("GOFLAGS names the build overlay %s: %v", file, err)
		}
		var o struct{ Replace map[string]string }
		if err := json.Unmarshal(b, &o); err != nil {
			tb.Fatalf("build overlay %s: %v", file, err)
		}
		for from, to := range o.Replace {
			// copyModule walks the module through root's path, which may differ from the overlay's.
			if rel, err := filepath.Rel(realRoot, from); err == nil && !strings.HasPrefix(rel, "..") {
				from = filepath.Join(root, rel)
			}
			replaced[from] = to
		}
	}
	return replaced, strings.Join(rest, " ")
}

// goEnv returns `go env` values for the given variables, so that act's runs share this machine's
// build and module caches.
func goEnv(tb testing.TB, names ...string) map[string]string {
	tb.Helper()
	out, err := exec.Command("go", append([]string{"env", "-json"}, names...)...).Output()
	if err != nil {
		tb.Fatalf("go env: %v", err)
	}
	m := map[string]string{}
	if err := json.Unmarshal(out, &m); err != nil {
		tb.Fatalf("go env: %v", err)
	}
	return m
}

// process is a command started in its own process group, so that ending it also ends the step
// shells it started.
type process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// startProcess starts cmd, which must come from exec.CommandContext: cancelling the context kills
// the whole group.
func startProcess(cmd *exec.Cmd) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// fifo is a named pipe the test holds open for reading and writing, so that neither side's open
// blocks: a step's `echo > pipe` and `read < pipe` proceed as soon as the test is ready.
type fifo struct {
	path string
	f    *os.File
}

func newFifo(tb testing.TB, path string) *fifo {
	tb.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		tb.Fatalf("mkfifo %s: %v", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return &fifo{path: path, f: f}
}

// readLine waits for a line in the pipe, until the process ends or ctx is done.
func (q *fifo) readLine(ctx context.Context, p *process) (string, error) {
	type line struct {
		s   string
		err error
	}
	ch := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(q.f).ReadString('\n')
		ch <- line{strings.TrimSpace(s), err}
	}()
	select {
	case l := <-ch:
		return l.s, l.err
	case <-p.done:
		_ = q.f.Close()
		return "", fmt.Errorf("the run ended (%v) before writing to %s", p.err, filepath.Base(q.path))
	case <-ctx.Done():
		_ = q.f.Close()
		return "", fmt.Errorf("waiting for %s: %w", filepath.Base(q.path), ctx.Err())
	}
}

// writeLine puts a line in the pipe; the test's open handle keeps it there until a reader comes.
func (q *fifo) writeLine(s string) error {
	_, err := io.WriteString(q.f, s+"\n")
	return err
}

// actLine is one line of act's --json log.
type actLine struct {
	Msg        string   `json:"msg"`
	Command    string   `json:"command"`
	Content    string   `json:"content"`
	Name       string   `json:"name"`
	Arg        string   `json:"arg"`
	Stage      string   `json:"stage"`
	StepID     []string `json:"stepID"`
	StepResult string   `json:"stepResult"`
	JobResult  string   `json:"jobResult"`
}

// actLog is what a job did, read from act's --json log.
type actLog struct {
	Job       string            // the job's result: success or failure
	Steps     map[string]string // the workflow's steps (not the action's inner ones): id -> result
	Summaries map[string]string // step id -> the job summary it wrote
	Messages  []string          // every message, for failure reports
}

func readActLog(tb testing.TB, path string) actLog {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	l := actLog{Steps: map[string]string{}, Summaries: map[string]string{}}
	for _, raw := range bytes.Split(b, []byte("\n")) {
		var line actLine
		if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &line) != nil {
			if len(raw) > 0 {
				l.Messages = append(l.Messages, string(raw))
			}
			continue
		}
		l.Messages = append(l.Messages, strings.TrimRight(line.Msg, "\n"))
		if line.JobResult != "" {
			l.Job = line.JobResult
		}
		if len(line.StepID) != 1 || line.Stage != "Main" {
			continue
		}
		id := line.StepID[0]
		if line.StepResult != "" {
			l.Steps[id] = line.StepResult
		}
		if line.Command == "summary" {
			l.Summaries[id] = line.Content
		}
	}
	return l
}

// tail is the end of a log, for a failure message.
func (l actLog) tail(n int) string {
	m := l.Messages
	if len(m) > n {
		m = m[len(m)-n:]
	}
	return strings.Join(m, "\n")
}

// readKV reads a file of key=value lines; a missing file is an empty map.
func readKV(tb testing.TB, path string) map[string]string {
	tb.Helper()
	m := map[string]string{}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m
	}
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[k] = v
		}
	}
	return m
}

// readLines reads a file's lines; a missing file has none.
func readLines(tb testing.TB, path string) []string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}
