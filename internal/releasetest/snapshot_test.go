package releasetest

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// snapshotEnv names the directory of a goreleaser snapshot (its dist directory) that
// TestSnapshotMatchesSetup checks; scripts/check-release builds one and sets it.
const snapshotEnv = "LATESTWINS_RELEASE_SNAPSHOT"

// platformsEnv names the platforms (GOOS_GOARCH, comma-separated) the snapshot was built for:
// scripts/check-release builds only the host's unless LATESTWINS_RELEASE_ALL is set, and says which.
// Unset, the snapshot must hold every platform, as a release does.
const platformsEnv = "LATESTWINS_RELEASE_PLATFORMS"

// runnerPlatforms are the platforms a release serves, as the Action's runners name them.
var runnerPlatforms = []struct{ runnerOS, runnerArch, goos, goarch string }{
	{"Linux", "X64", "linux", "amd64"},
	{"Linux", "ARM64", "linux", "arm64"},
	{"macOS", "X64", "darwin", "amd64"},
	{"macOS", "ARM64", "darwin", "arm64"},
}

// releaseFiles is what a release publishes besides SBOMs: the names the Action's setup downloads,
// the Lambda zips infra/ and docs/deploy.md name, and the checksums. A snapshot of some platforms
// holds the command line of each, and the Lambda zip (always linux) of each one's architecture.
func releaseFiles(platforms []string) []string {
	files := []string{"checksums.txt"}
	for _, p := range platforms {
		_, arch, _ := strings.Cut(p, "_")
		files = append(files, "latestwins_"+p)
		if zip := "latestwins-lambda-" + arch + ".zip"; !slices.Contains(files, zip) {
			files = append(files, zip)
		}
	}
	slices.Sort(files)
	return files
}

// snapshotPlatforms returns the platforms the snapshot holds: LATESTWINS_RELEASE_PLATFORMS, or all
// of a release's. A platform no release serves fails the test.
func snapshotPlatforms(t *testing.T) []string {
	t.Helper()
	var all []string
	for _, p := range runnerPlatforms {
		all = append(all, p.goos+"_"+p.goarch)
	}
	v := strings.TrimSpace(os.Getenv(platformsEnv))
	if v == "" {
		return all
	}
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(all, p) {
			t.Fatalf("%s=%s: %q is no platform of a release (%s)", platformsEnv, v, p, strings.Join(all, ", "))
		}
		out = append(out, p)
	}
	return out
}

// TestSnapshotMatchesSetup checks a goreleaser snapshot (.goreleaser.yaml as it is) against the
// Action's setup script: it serves the snapshot's files as a release on 127.0.0.1 and runs the real
// setup for each runner platform the snapshot holds (every one, unless LATESTWINS_RELEASE_PLATFORMS
// names some), which must find its binary under the name it asks for and verify it with the
// snapshot's checksums.txt. It also checks the binaries' platforms and the Lambda zips.
func TestSnapshotMatchesSetup(t *testing.T) {
	dir := os.Getenv(snapshotEnv)
	if dir == "" {
		t.Skipf("%s is not set: scripts/check-release builds a snapshot and runs this test", snapshotEnv)
	}
	platforms := snapshotPlatforms(t)
	files := snapshotFiles(t, dir)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	if d := cmp.Diff(releaseFiles(platforms), names); d != "" {
		t.Fatalf("the snapshot's files differ from what the setup, infra/ and the docs expect (-want +got):\n%s", d)
	}

	const version = "v0.0.0-snapshot"
	served := map[string][]byte{}
	for n, b := range files {
		served["/"+version+"/"+n] = b
	}
	rs := newReleaseServer(t, served)
	for _, p := range runnerPlatforms {
		if !slices.Contains(platforms, p.goos+"_"+p.goarch) {
			continue
		}
		t.Run(p.goos+"_"+p.goarch, func(t *testing.T) {
			s := newSetup(t)
			s.env["ACTION_REF"] = version
			s.env["LATESTWINS_RELEASE_URL"] = rs.URL
			s.env["RUNNER_OS_NAME"], s.env["RUNNER_ARCH_NAME"] = p.runnerOS, p.runnerArch
			res := s.run()
			if res.code != 0 {
				t.Fatalf("the setup refused the snapshot: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
			}
			got, err := os.ReadFile(s.bin)
			if err != nil {
				t.Fatal(err)
			}
			name := "latestwins_" + p.goos + "_" + p.goarch
			if !bytes.Equal(got, files[name]) {
				t.Fatalf("the setup installed something other than %s", name)
			}
			checkPlatform(t, name, got, p.goos, p.goarch)
			if p.goos == runtime.GOOS && p.goarch == runtime.GOARCH {
				out, err := exec.Command(s.bin, "--help").CombinedOutput()
				if err != nil || !strings.Contains(string(out), "Usage: latestwins COMMAND") {
					t.Errorf("the installed binary does not run: %v\n%s", err, out)
				}
			}
		})
	}

	for _, arch := range []string{"arm64", "amd64"} {
		name := "latestwins-lambda-" + arch + ".zip"
		if _, ok := files[name]; !ok {
			continue // a snapshot of some platforms: the file list above says which zips it holds
		}
		zr, err := zip.NewReader(bytes.NewReader(files[name]), int64(len(files[name])))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(zr.File) != 1 || zr.File[0].Name != "bootstrap" {
			var in []string
			for _, f := range zr.File {
				in = append(in, f.Name)
			}
			t.Fatalf("%s holds %v, want only bootstrap at its root", name, in)
		}
		f := zr.File[0]
		if f.Mode()&0o111 == 0 {
			t.Errorf("%s: bootstrap is not executable (%v)", name, f.Mode())
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkPlatform(t, name, b, "linux", arch)
	}
}

// snapshotFiles returns the files a release of the snapshot would publish (those checksums.txt
// lists, and itself), by name, after checking every checksum.
func snapshotFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	var artifacts []struct {
		Name string `json:"name"`
		Path string `json:"path"`
		Type string `json:"type"`
	}
	raw, err := os.ReadFile(filepath.Join(dir, "artifacts.json"))
	if err != nil {
		t.Fatalf("read the snapshot's artifact list: %v", err)
	}
	if err := json.Unmarshal(raw, &artifacts); err != nil {
		t.Fatalf("artifacts.json: %v", err)
	}
	paths := map[string]string{}
	for _, a := range artifacts {
		if _, seen := paths[a.Name]; !seen {
			paths[a.Name] = a.Path
		}
	}
	sums, err := os.ReadFile(filepath.Join(dir, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"checksums.txt": sums}
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("checksums.txt line %q is not 'SHA256  NAME'", sc.Text())
		}
		p, ok := paths[name]
		if !ok {
			t.Fatalf("checksums.txt lists %s, which is not an artifact of the snapshot", name)
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(moduleRoot(t), p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		if hex.EncodeToString(h[:]) != sum {
			t.Fatalf("checksums.txt is wrong for %s", name)
		}
		files[name] = b
	}
	return files
}

// checkPlatform checks that b is a static executable for goos/goarch.
func checkPlatform(t *testing.T, name string, b []byte, goos, goarch string) {
	t.Helper()
	switch goos {
	case "linux":
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s is not an ELF executable: %v", name, err)
			return
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]
		if f.Machine != want {
			t.Errorf("%s is for %v, want %v", name, f.Machine, want)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked; the release binaries are static (CGO_ENABLED=0)", name)
			}
		}
	case "darwin":
		f, err := macho.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s is not a Mach-O executable: %v", name, err)
			return
		}
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]
		if f.Cpu != want {
			t.Errorf("%s is for %v, want %v", name, f.Cpu, want)
		}
	}
}
