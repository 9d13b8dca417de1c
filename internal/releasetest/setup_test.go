package releasetest

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/testutil"
)

const repo = "latestwins/latestwins"

// releaseServer stands in for GitHub's release downloads: BASE/VERSION/NAME answers the file, and
// anything else is a 404. It records the paths asked for.
type releaseServer struct {
	URL   string
	files map[string][]byte

	mu    sync.Mutex
	asked []string
}

func newReleaseServer(t testing.TB, files map[string][]byte) *releaseServer {
	t.Helper()
	rs := &releaseServer{files: files}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.asked = append(rs.asked, r.URL.Path)
		rs.mu.Unlock()
		b, ok := rs.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	rs.URL = srv.URL
	return rs
}

func (rs *releaseServer) paths() []string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.asked)
}

// release returns the files of one release holding the given assets, with a checksums.txt that
// lists each asset's sha256 the way goreleaser writes it ("HASH  NAME").
func release(version string, assets map[string][]byte) map[string][]byte {
	files := map[string][]byte{}
	var sums bytes.Buffer
	names := make([]string, 0, len(assets))
	for n := range assets {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		sum := sha256.Sum256(assets[n])
		fmt.Fprintf(&sums, "%s  %s\n", hex.EncodeToString(sum[:]), n)
		files["/"+version+"/"+n] = assets[n]
	}
	files["/"+version+"/checksums.txt"] = sums.Bytes()
	return files
}

// fakeBinary is what the fake release serves: a script that says where it came from, so that the
// test can run what the setup installed.
func fakeBinary(from string) []byte {
	return []byte("#!/bin/sh\necho latestwins from " + from + "\n")
}

// setup is one run of the setup script in a controlled environment: PATH holds only the tools the
// script may use, plus fake go and gh commands that record their arguments.
type setup struct {
	t          testing.TB
	script     string // the setup script to run
	actionPath string // GITHUB_ACTION_PATH
	dir        string
	bin        string // LATESTWINS_BIN
	pathDir    string
	env        map[string]string
}

// realTools are the commands the script runs besides go and gh. A tool missing here makes the
// script fail in the test, so the list is the script's real dependencies on a runner.
var realTools = []string{"bash", "curl", "awk", "sha256sum", "install", "mktemp", "rm", "mkdir", "dirname", "tr", "cat"}

func newSetup(t testing.TB) *setup {
	t.Helper()
	dir := t.TempDir()
	s := &setup{
		t:          t,
		script:     filepath.Join(moduleRoot(t), "scripts", "action-setup.sh"),
		actionPath: filepath.Join(dir, "action"),
		dir:        dir,
		bin:        filepath.Join(dir, "runner-temp", "latestwins-bin", "latestwins"),
		pathDir:    filepath.Join(dir, "path"),
		env: map[string]string{
			"ACTION_REPOSITORY": repo,
			"RUNNER_OS_NAME":    "Linux",
			"RUNNER_ARCH_NAME":  "X64",
		},
	}
	for _, d := range []string{s.actionPath, s.pathDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range realTools {
		p, err := exec.LookPath(tool)
		if err != nil {
			testutil.MissingTool(t, fmt.Sprintf("the setup script needs %s: %v", tool, err))
		}
		if err := os.Symlink(p, filepath.Join(s.pathDir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// fakeGo puts a go command on PATH that records its arguments and working directory and "builds"
// by writing a script to the -o path.
func (s *setup) fakeGo() {
	s.t.Helper()
	chmod, err := exec.LookPath("chmod")
	if err != nil {
		testutil.MissingTool(s.t, fmt.Sprintf("chmod: %v", err))
	}
	s.writeTool("go", `#!/bin/bash
if [ "$1" = version ]; then echo "go version go1.26.8 fake"; exit 0; fi
printf '%s\n' "$PWD" "$*" >>"`+s.dir+`/go.calls"
out=""; prev=""
for a in "$@"; do if [ "$prev" = -o ]; then out="$a"; fi; prev="$a"; done
printf '#!/bin/sh\necho latestwins from source\n' >"$out"; `+chmod+` +x "$out"
`)
}

// fakeGh puts a gh command on PATH that records its arguments and exits with code.
func (s *setup) fakeGh(code int) {
	s.t.Helper()
	s.writeTool("gh", fmt.Sprintf("#!/bin/bash\nprintf '%%s\\n' \"$*\" >>%q\necho gh says no >&2\nexit %d\n", s.dir+"/gh.calls", code))
}

func (s *setup) writeTool(name, body string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.pathDir, name), []byte(body), 0o755); err != nil {
		s.t.Fatal(err)
	}
}

func (s *setup) calls(name string) []string {
	b, err := os.ReadFile(filepath.Join(s.dir, name+".calls"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

type result struct {
	code           int
	stdout, stderr string
	output         string // what the script wrote to GITHUB_OUTPUT
}

func (s *setup) run() result {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(s.pathDir, "bash"), s.script)
	outFile := filepath.Join(s.dir, "github-output")
	cmd.Env = []string{
		"PATH=" + s.pathDir,
		"HOME=" + s.dir,
		"RUNNER_TEMP=" + filepath.Join(s.dir, "runner-temp"),
		"GITHUB_ACTION_PATH=" + s.actionPath,
		"GITHUB_OUTPUT=" + outFile,
		"LATESTWINS_BIN=" + s.bin,
	}
	for k, v := range s.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		res.code = ee.ExitCode()
	case err != nil:
		s.t.Fatalf("run the setup script: %v", err)
	}
	if b, err := os.ReadFile(outFile); err == nil {
		res.output = string(b)
	}
	return res
}

// installed returns what the installed binary prints, or "" when nothing runnable was installed.
func (s *setup) installed() string {
	s.t.Helper()
	if _, err := os.Stat(s.bin); errors.Is(err, os.ErrNotExist) {
		return ""
	}
	out, err := exec.Command(s.bin).Output()
	if err != nil {
		s.t.Fatalf("the installed binary does not run: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return root
}

const linuxAsset = "latestwins_linux_amd64"

func TestReleaseRefDownloadsAndNeverCompiles(t *testing.T) {
	t.Parallel()
	rs := newReleaseServer(t, release("v1.2.3", map[string][]byte{
		linuxAsset:                fakeBinary("v1.2.3 linux/amd64"),
		"latestwins_darwin_arm64": fakeBinary("v1.2.3 darwin/arm64"),
	}))
	s := newSetup(t)
	s.fakeGo()
	s.env["ACTION_REF"] = "v1.2.3"
	s.env["LATESTWINS_RELEASE_URL"] = rs.URL
	res := s.run()
	if res.code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if got := s.installed(); got != "latestwins from v1.2.3 linux/amd64" {
		t.Errorf("installed binary says %q", got)
	}
	if calls := s.calls("go"); calls != nil {
		t.Errorf("a release ref compiled: go %v", calls)
	}
	if d := cmp.Diff([]string{"/v1.2.3/checksums.txt", "/v1.2.3/" + linuxAsset}, rs.paths()); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
	if res.output != "path="+s.bin+"\n" {
		t.Errorf("GITHUB_OUTPUT = %q, want the binary's path", res.output)
	}
	if !strings.Contains(res.stderr, "checksum verified, no gh command") {
		t.Errorf("the log does not say what was verified: %s", res.stderr)
	}

	// A second step of the job reuses the binary: no request, no build.
	before := len(rs.paths())
	if res := s.run(); res.code != 0 || len(rs.paths()) != before || res.output == "" {
		t.Errorf("second run: exit %d, %d new requests, output %q", res.code, len(rs.paths())-before, res.output)
	}
}

func TestRunnerPlatforms(t *testing.T) {
	t.Parallel()
	assets := map[string][]byte{}
	for _, os := range []string{"linux", "darwin"} {
		for _, arch := range []string{"amd64", "arm64"} {
			assets["latestwins_"+os+"_"+arch] = fakeBinary(os + "/" + arch)
		}
	}
	rs := newReleaseServer(t, release("v2.0.0", assets))
	for _, tc := range []struct{ os, arch, want string }{
		{"Linux", "X64", "linux/amd64"},
		{"Linux", "ARM64", "linux/arm64"},
		{"macOS", "X64", "darwin/amd64"},
		{"macOS", "ARM64", "darwin/arm64"},
		{"Windows", "X64", ""},
		{"Linux", "ARM", ""},
	} {
		t.Run(tc.os+"-"+tc.arch, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t)
			s.env["ACTION_REF"] = "v2.0.0"
			s.env["LATESTWINS_RELEASE_URL"] = rs.URL
			s.env["RUNNER_OS_NAME"], s.env["RUNNER_ARCH_NAME"] = tc.os, tc.arch
			res := s.run()
			if tc.want == "" {
				if res.code != 2 || !strings.Contains(res.stdout, "no release binary for the runner") {
					t.Fatalf("exit %d, stdout %q: want 2 and the reason", res.code, res.stdout)
				}
				return
			}
			if res.code != 0 {
				t.Fatalf("exit %d: %s%s", res.code, res.stdout, res.stderr)
			}
			if got := s.installed(); got != "latestwins from "+tc.want {
				t.Errorf("installed %q, want the %s binary", got, tc.want)
			}
		})
	}
}

// refusal is a broken release the setup must refuse: it exits 2, says why, and installs nothing.
type refusal struct {
	name  string
	files map[string][]byte
	gh    int // exit code of a fake gh; -1: no gh on PATH
	want  string
}

func refusals() []refusal {
	good := release("v1.2.3", map[string][]byte{linuxAsset: fakeBinary("v1.2.3")})
	wrongSum := release("v1.2.3", map[string][]byte{linuxAsset: fakeBinary("v1.2.3")})
	wrongSum["/v1.2.3/"+linuxAsset] = fakeBinary("someone else")
	missingAsset := release("v1.2.3", map[string][]byte{linuxAsset: fakeBinary("v1.2.3")})
	delete(missingAsset, "/v1.2.3/"+linuxAsset)
	noSums := release("v1.2.3", map[string][]byte{linuxAsset: fakeBinary("v1.2.3")})
	delete(noSums, "/v1.2.3/checksums.txt")
	notListed := release("v1.2.3", map[string][]byte{"latestwins_darwin_amd64": fakeBinary("darwin")})
	notListed["/v1.2.3/"+linuxAsset] = fakeBinary("v1.2.3")
	return []refusal{
		{name: "wrong checksum", files: wrongSum, gh: -1, want: "checksum mismatch for " + linuxAsset},
		{name: "missing asset", files: missingAsset, gh: -1, want: "cannot download"},
		{name: "no checksums.txt", files: noSums, gh: -1, want: "checksums.txt"},
		{name: "asset not in checksums.txt", files: notListed, gh: -1, want: "lists no " + linuxAsset},
		{name: "attestation does not verify", files: good, gh: 1, want: "no valid build provenance attestation"},
	}
}

// refused runs the setup against the broken release and returns what went wrong: nothing when the
// setup refused it as it must.
func (s *setup) refused(t *testing.T, tc refusal) []string {
	t.Helper()
	rs := newReleaseServer(t, tc.files)
	s.fakeGo()
	if tc.gh >= 0 {
		s.fakeGh(tc.gh)
	}
	s.env["ACTION_REF"] = "v1.2.3"
	s.env["LATESTWINS_RELEASE_URL"] = rs.URL
	res := s.run()
	var problems []string
	if res.code != 2 {
		problems = append(problems, fmt.Sprintf("exit %d, want 2 (refused)\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr))
	}
	if !strings.Contains(res.stdout, "::error::") || !strings.Contains(res.stdout, tc.want) {
		problems = append(problems, fmt.Sprintf("stdout %q: want an error annotation saying %q", res.stdout, tc.want))
	}
	if got := s.installed(); got != "" {
		problems = append(problems, fmt.Sprintf("installed a binary that says %q", got))
	}
	if res.output != "" {
		problems = append(problems, fmt.Sprintf("GITHUB_OUTPUT = %q after a refusal", res.output))
	}
	if calls := s.calls("go"); calls != nil {
		problems = append(problems, fmt.Sprintf("fell back to compiling on a release ref: go %v", calls))
	}
	return problems
}

func TestBrokenReleasesAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range refusals() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, p := range newSetup(t).refused(t, tc) {
				t.Error(p)
			}
		})
	}
}

// mutants are broken versions of the setup script; TestBrokenReleasesAreRefused must fail against
// each of them, or it would not catch the bug it is named for.
var mutants = map[string]struct{ from, to, refusal string }{
	"checksum not compared": {`if [ "$got" != "$want" ]; then`, `if false; then`, "wrong checksum"},
	"failed attestation ignored": {`if ! gh attestation verify "$tmp/$asset" --repo "$repo" >"$tmp/attestation.log" 2>&1; then`,
		`if ! gh attestation verify "$tmp/$asset" --repo "$repo" >"$tmp/attestation.log" 2>&1 && false; then`, "attestation does not verify"},
	"unlisted asset trusted": {`if [ -z "$want" ]; then`, `if false; then want=x; fi; if false; then`, "asset not in checksums.txt"},
}

func TestMutantsAreCaught(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "scripts", "action-setup.sh"))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]refusal{}
	for _, r := range refusals() {
		byName[r.name] = r
	}
	for name, m := range mutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if !bytes.Contains(src, []byte(m.from)) {
				t.Fatalf("the script no longer contains %q: update the mutant", m.from)
			}
			s := newSetup(t)
			s.script = filepath.Join(s.dir, "mutant.sh")
			if err := os.WriteFile(s.script, bytes.Replace(src, []byte(m.from), []byte(m.to), 1), 0o755); err != nil {
				t.Fatal(err)
			}
			if problems := s.refused(t, byName[m.refusal]); len(problems) == 0 {
				t.Errorf("the %q check passes against a script whose %s", m.refusal, name)
			}
		})
	}
}

func TestMovingTagUsesPinnedRelease(t *testing.T) {
	t.Parallel()
	rs := newReleaseServer(t, release("v1.4.2", map[string][]byte{linuxAsset: fakeBinary("v1.4.2")}))
	for _, tc := range []struct {
		name, ref, pin string
		wantCode       int
		want           string // installed binary's words, or the error
	}{
		{"major tag", "v1", "v1.4.2\n", 0, "latestwins from v1.4.2"},
		{"minor tag", "v1.4", "v1.4.2", 0, "latestwins from v1.4.2"},
		{"pin of another major", "v2", "v1.4.2", 2, "not a release of v2"},
		{"pin of another minor", "v1.5", "v1.4.2", 2, "not a release of v1.5"},
		{"pin that is not a version", "v1", "main", 2, "not a release of v1"},
		{"no pin: not a release", "v1", "", 0, "latestwins from source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t)
			s.fakeGo()
			s.env["ACTION_REF"] = tc.ref
			s.env["LATESTWINS_RELEASE_URL"] = rs.URL
			if tc.pin != "" {
				if err := os.WriteFile(filepath.Join(s.actionPath, ".release-version"), []byte(tc.pin), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			res := s.run()
			if res.code != tc.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", res.code, tc.wantCode, res.stdout, res.stderr)
			}
			if tc.wantCode == 0 {
				if got := s.installed(); got != tc.want {
					t.Errorf("installed %q, want %q", got, tc.want)
				}
			} else if !strings.Contains(res.stdout, tc.want) || s.installed() != "" {
				t.Errorf("stdout %q: want %q and nothing installed", res.stdout, tc.want)
			}
		})
	}
}

func TestOtherRefsBuildFromSource(t *testing.T) {
	t.Parallel()
	rs := newReleaseServer(t, release("v1.2.3", map[string][]byte{linuxAsset: fakeBinary("v1.2.3")}))
	for _, tc := range []struct{ name, repo, ref, why string }{
		{"branch", repo, "main", "main is not a release of " + repo},
		{"commit sha", repo, "8f3c2a1d9e0b4c5d6e7f8a9b0c1d2e3f4a5b6c7d", "is not a release of " + repo},
		{"local action", "", "", "used from a local path (uses: ./)"},
		{"tag that is not a version", repo, "stable", "stable is not a release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSetup(t)
			s.fakeGo()
			s.env["ACTION_REPOSITORY"], s.env["ACTION_REF"] = tc.repo, tc.ref
			s.env["LATESTWINS_RELEASE_URL"] = rs.URL
			res := s.run()
			if res.code != 0 {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
			}
			if got := s.installed(); got != "latestwins from source" {
				t.Errorf("installed %q", got)
			}
			want := []string{s.actionPath, "build -trimpath -o " + s.bin + " ./cmd/latestwins"}
			if d := cmp.Diff(want, s.calls("go")); d != "" {
				t.Errorf("go calls (-want +got):\n%s", d)
			}
			if !strings.Contains(res.stderr, tc.why) {
				t.Errorf("the log does not say why it builds (%q): %s", tc.why, res.stderr)
			}
		})
	}
	if n := len(rs.paths()); n != 0 {
		t.Errorf("a ref that is not a release asked the release server %d times", n)
	}

	t.Run("no Go", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t)
		s.env["ACTION_REF"] = "main"
		res := s.run()
		if res.code != 2 || !strings.Contains(res.stdout, "add actions/setup-go") {
			t.Errorf("exit %d, stdout %q: want 2 and how to fix it", res.code, res.stdout)
		}
	})
}

func TestAttestation(t *testing.T) {
	t.Parallel()
	rs := newReleaseServer(t, release("v1.2.3", map[string][]byte{linuxAsset: fakeBinary("v1.2.3")}))
	t.Run("verified", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t)
		s.fakeGh(0)
		s.env["ACTION_REF"], s.env["LATESTWINS_RELEASE_URL"] = "v1.2.3", rs.URL
		res := s.run()
		if res.code != 0 || s.installed() != "latestwins from v1.2.3" {
			t.Fatalf("exit %d: %s%s", res.code, res.stdout, res.stderr)
		}
		calls := s.calls("gh")
		if len(calls) != 1 || !strings.HasPrefix(calls[0], "attestation verify ") || !strings.HasSuffix(calls[0], "/"+linuxAsset+" --repo "+repo) {
			t.Errorf("gh calls %q: want one attestation verify of the asset for %s", calls, repo)
		}
		if !strings.Contains(res.stderr, "attestation verified") {
			t.Errorf("the log does not say the attestation was verified: %s", res.stderr)
		}
	})
	t.Run("skipped on request", func(t *testing.T) {
		t.Parallel()
		s := newSetup(t)
		s.fakeGh(1)
		s.env["ACTION_REF"], s.env["LATESTWINS_RELEASE_URL"] = "v1.2.3", rs.URL
		s.env["LATESTWINS_SKIP_ATTESTATION"] = "true"
		res := s.run()
		if res.code != 0 || s.installed() != "latestwins from v1.2.3" || s.calls("gh") != nil {
			t.Fatalf("exit %d, gh calls %v: %s%s", res.code, s.calls("gh"), res.stdout, res.stderr)
		}
	})
}

// BenchmarkSetupFromRelease times the release path of the setup script as a whole process: two
// downloads from a server on loopback (checksums.txt and a binary of the size of the real linux/amd64
// one), the checksum and the install. Network time to GitHub comes on top.
func BenchmarkSetupFromRelease(b *testing.B) {
	const size = 19 << 20 // latestwins_linux_amd64 is 18.7 MiB
	blob := make([]byte, size)
	if _, err := rand.Read(blob); err != nil {
		b.Fatal(err)
	}
	rs := newReleaseServer(b, release("v1.2.3", map[string][]byte{linuxAsset: blob}))
	var total time.Duration
	for i := 0; b.Loop(); i++ {
		s := newSetup(b)
		s.env["ACTION_REF"], s.env["LATESTWINS_RELEASE_URL"] = "v1.2.3", rs.URL
		s.bin = filepath.Join(s.dir, fmt.Sprint(i), "latestwins")
		start := time.Now()
		if res := s.run(); res.code != 0 {
			b.Fatalf("exit %d: %s%s", res.code, res.stdout, res.stderr)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms/setup")
	b.ReportMetric(size>>20, "MiB")
}
