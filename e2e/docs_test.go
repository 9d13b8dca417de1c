package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/latestwins/latestwins/internal/testutil"
)

// The recipes of the README and the guides are run by TestDocRecipes, so that they cannot drift from
// the code. How a fenced block of README.md or docs/*.md is treated:
//
//   - ```sh: run. The sh blocks under one heading are one recipe: one bash script (set -e), in a
//     directory of its own that holds the repository's top-level files and folders (as links), with
//     the latestwins binary this test builds first on PATH. 127.0.0.1:8080 in a recipe is replaced by
//     a free loopback port.
//   - <!-- needs: WHAT --> on the line before a block (after any other markers): the block needs what
//     the test does not have offline (aws, github, docker, terraform) or a tool only the test command
//     installs (act): it is checked, not run. act's recipe is run when LATESTWINS_TEST_ACT names act
//     (scripts/test sets it), in a scratch git repository holding a copy of the module.
//   - <!-- not run: WHY -->: checked, never run (the test command itself; placeholders to fill in).
//   - <!-- expect: TEXT -->: the recipe's output must hold TEXT.
//
// Checked, in every block and in the inline code of the text: each `latestwins VERB --flag` is a
// verb and flag of the binary (its -h output), and each repository path a shell block names (under
// one of repoDirs) exists. TestDocLinks checks the links between the documents.

// docNeeds are the things a block may need; another name is a typo.
var docNeeds = []string{"act", "aws", "docker", "github", "terraform"}

// repoDirs are the repository's folders whose paths a shell block may name; each named must exist.
var repoDirs = []string{"app", "cmd", "docs", "e2e", "examples", "infra", "internal", "lambda", "scripts", "testdata", "tools"}

// readmeMaxWords keeps the README a front door: what is more belongs in a guide under docs/.
const readmeMaxWords = 1600

// docBlock is one fenced block of a document.
type docBlock struct {
	file    string // relative to the module root
	line    int    // of the opening fence, 1-based
	heading string // the nearest heading above it
	info    string // the fence's info string
	text    string // the content, without the fence's indentation
	needs   string
	notRun  string
	expects []string
}

func (b docBlock) runnable() bool {
	return strings.Fields(b.info + " x")[0] == "sh" && b.needs == "" && b.notRun == ""
}

func (b docBlock) shell() bool {
	switch strings.Fields(b.info + " x")[0] {
	case "sh", "bash":
		return true
	}
	return false
}

func (b docBlock) where() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

// docFile is a document: its fenced blocks, and its text outside them.
type docFile struct {
	path   string // relative to the module root
	blocks []docBlock
	prose  string // the lines outside fenced blocks
	heads  []string
}

var (
	fenceRE  = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*(.*)$")
	markerRE = regexp.MustCompile(`^\s*<!--\s*(needs|not run|expect):\s*(.*?)\s*-->\s*$`)
	headRE   = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
)

func parseDoc(tb testing.TB, root, rel string) docFile {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		tb.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	d := docFile{path: rel}
	var prose []string
	heading := ""
	for i := 0; i < len(lines); i++ {
		m := fenceRE.FindStringSubmatch(lines[i])
		if m == nil {
			if h := headRE.FindStringSubmatch(lines[i]); h != nil {
				heading = h[2]
				d.heads = append(d.heads, heading)
			}
			prose = append(prose, lines[i])
			continue
		}
		b := docBlock{file: rel, line: i + 1, heading: heading, info: strings.TrimSpace(m[3])}
		// The markers are the comment lines right above the fence.
		for j := i - 1; j >= 0; j-- {
			mm := markerRE.FindStringSubmatch(lines[j])
			if mm == nil {
				break
			}
			switch mm[1] {
			case "needs":
				b.needs = mm[2]
			case "not run":
				b.notRun = mm[2]
			case "expect":
				b.expects = append([]string{mm[2]}, b.expects...)
			}
		}
		indent, fence := m[1], m[2]
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), fence) && strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(lines[i]), fence[:1])) == "" {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if !closed {
			tb.Fatalf("%s: the block has no closing fence", b.where())
		}
		b.text = strings.Join(body, "\n") + "\n"
		d.blocks = append(d.blocks, b)
		prose = append(prose, "")
	}
	d.prose = strings.Join(prose, "\n")
	return d
}

// docFiles are README.md and every guide under docs/.
func docFiles(tb testing.TB, root string) []docFile {
	tb.Helper()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		tb.Fatal(err)
	}
	files := []string{"README.md"}
	for _, g := range guides {
		rel, _ := filepath.Rel(root, g)
		files = append(files, rel)
	}
	var out []docFile
	for _, f := range files {
		out = append(out, parseDoc(tb, root, f))
	}
	return out
}

// cliFlags knows the verbs of a latestwins binary and the flags of each, from its -h output.
type cliFlags struct {
	bin   string
	verbs map[string]bool
	flags map[string]map[string]bool // by "verb", "app create" or "webhook send"
}

var (
	verbLineRE = regexp.MustCompile(`^  ([a-z][a-z-]*)\s{2,}`)
	flagLineRE = regexp.MustCompile(`^\s+-([a-z0-9][a-z0-9-]*)`)
)

func newCLIFlags(tb testing.TB, bin string) *cliFlags {
	tb.Helper()
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		tb.Fatalf("latestwins --help: %v\n%s", err, out)
	}
	c := &cliFlags{bin: bin, verbs: map[string]bool{}, flags: map[string]map[string]bool{}}
	inCommands := false
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "Commands:"):
			inCommands = true
		case inCommands && strings.TrimSpace(l) == "":
			inCommands = false
		case inCommands:
			if m := verbLineRE.FindStringSubmatch(l); m != nil {
				c.verbs[m[1]] = true
			}
		}
	}
	if len(c.verbs) < 10 || !c.verbs["run"] {
		tb.Fatalf("latestwins --help lists no commands the test recognizes:\n%s", out)
	}
	return c
}

// of returns the flags of a command ("run", "app create"), from `latestwins COMMAND -h`.
func (c *cliFlags) of(tb testing.TB, command string) map[string]bool {
	tb.Helper()
	if f, ok := c.flags[command]; ok {
		return f
	}
	out, _ := exec.Command(c.bin, append(strings.Fields(command), "-h")...).CombinedOutput()
	f := map[string]bool{"h": true, "help": true}
	for _, l := range strings.Split(string(out), "\n") {
		if m := flagLineRE.FindStringSubmatch(l); m != nil {
			f[m[1]] = true
		}
	}
	c.flags[command] = f
	return f
}

// A use of the command line in the docs: latestwins, a verb, then words. It must not be part of a
// longer word or path (ghcr.io/latestwins/latestwins, /latestwins deploy, latestwins-lambda).
var useRE = regexp.MustCompile(`(?:^|[\s(\x60"'$=])latestwins +([a-z][a-z-]*)((?:[ \t]+[^\s]+)*)`)

// checkUses checks every `latestwins VERB ...` in text: the verb is one of the binary's and every
// --flag after it is one of the verb's, up to the end of the command (--, a pipe, ;, &&, #, a
// closing parenthesis). The word after `app` is its subcommand.
func (c *cliFlags) checkUses(t *testing.T, where, text string) {
	t.Helper()
	for _, line := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
		for _, m := range useRE.FindAllStringSubmatchIndex(line, -1) {
			verb := line[m[2]:m[3]]
			rest := strings.Fields(line[m[4]:m[5]])
			if strings.HasPrefix(line[m[3]:], ":") {
				continue // "latestwins serve: listening on ...": a message, not a command
			}
			if !c.verbs[verb] {
				t.Errorf("%s: `latestwins %s`: latestwins has no command %q (latestwins --help)", where, verb, verb)
				continue
			}
			command := verb
			if (verb == "app" || verb == "webhook") && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") && !strings.HasPrefix(rest[0], "[") {
				command, rest = verb+" "+rest[0], rest[1:]
			}
			flags := c.of(t, command)
			depth := 0
		words:
			for _, w := range rest {
				switch {
				case w == "--", w == ";", w == "&&", w == "||", w == "&", strings.HasPrefix(w, "#"), strings.HasPrefix(w, "2>"), strings.HasPrefix(w, ">"):
					break words
				case w == "|" && depth == 0:
					break words
				}
				depth += strings.Count(w, "[") - strings.Count(w, "]")
				if end := strings.IndexAny(w, "`)"); end >= 0 && !strings.HasPrefix(w, "$(") {
					w = w[:end]
					if fl := flagName(w); fl != "" && !flags[fl] {
						t.Errorf("%s: `latestwins %s --%s`: %s has no flag --%s (latestwins %s -h)", where, command, fl, command, fl, command)
					}
					break words
				}
				if fl := flagName(w); fl != "" && !flags[fl] {
					t.Errorf("%s: `latestwins %s --%s`: %s has no flag --%s (latestwins %s -h)", where, command, fl, command, fl, command)
				}
			}
		}
	}
}

// checkInline checks inline code that starts with `latestwins VERB`. Text of messages is quoted that
// way too (`latestwins has not accepted ...`): an unknown verb is an error only when flags follow it.
func (c *cliFlags) checkInline(t *testing.T, where, code string) {
	t.Helper()
	f := strings.Fields(code)
	if len(f) < 2 || f[0] != "latestwins" {
		return
	}
	if !c.verbs[f[1]] && !slices.ContainsFunc(f[2:], func(w string) bool { return strings.HasPrefix(w, "--") && len(w) > 2 }) {
		return
	}
	c.checkUses(t, where, code)
}

// flagName returns the name of a word that is a flag (--lease-ttl, [--json, --lease=false), or "".
var flagWordRE = regexp.MustCompile(`^[\[(]*--?([a-z][a-z0-9-]*)(?:=.*)?[\],.;:)]*$`)

func flagName(w string) string {
	if m := flagWordRE.FindStringSubmatch(w); m != nil {
		return m[1]
	}
	return ""
}

// repoPathRE finds words that name a path under one of repoDirs.
var repoPathRE = regexp.MustCompile(`(?:^|[\s"'=@(])(?:\./)?((?:` + strings.Join(repoDirs, "|") + `)/[A-Za-z0-9._/-]*[A-Za-z0-9_/-])`)

// checkPaths checks that every repository path a shell block names exists.
func checkPaths(t *testing.T, root string, b docBlock) {
	t.Helper()
	for _, line := range strings.Split(b.text, "\n") {
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i] // a comment may name what a command writes
		}
		for _, m := range repoPathRE.FindAllStringSubmatch(line, -1) {
			if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
				t.Errorf("%s: the block names %s, which is not in the repository", b.where(), m[1])
			}
		}
	}
}

// inlineCodeRE finds inline code spans of the text (which may run across a line break).
var inlineCodeRE = regexp.MustCompile("`([^`]+)`")

// TestDocRecipes runs the runnable recipes of README.md and docs/*.md, and checks every block and
// every inline use of the command line against the binary.
func TestDocRecipes(t *testing.T) {
	root := moduleRoot(t)
	docs := docFiles(t, root)
	bin := filepath.Dir(buildLatestwins(t)) // as the Action builds it, so act's recipe finds it in Go's cache
	cli := newCLIFlags(t, filepath.Join(bin, "latestwins"))

	t.Run("readme", func(t *testing.T) { checkReadme(t, root, docs[0]) })

	type recipe struct {
		name   string
		needs  string
		blocks []docBlock
	}
	var recipes []*recipe
	byKey := map[string]*recipe{}
	for _, d := range docs {
		for _, line := range strings.Split(strings.ReplaceAll(d.prose, "\n", " "), "\n") {
			for _, m := range inlineCodeRE.FindAllStringSubmatch(line, -1) {
				cli.checkInline(t, d.path, m[1])
			}
		}
		for _, b := range d.blocks {
			if b.needs != "" && !slices.Contains(docNeeds, b.needs) {
				t.Errorf("%s: <!-- needs: %s -->: not one of %v", b.where(), b.needs, docNeeds)
			}
			if b.needs != "" && b.notRun != "" {
				t.Errorf("%s: a block is either needs or not run, not both", b.where())
			}
			if (b.needs != "" || b.notRun != "" || len(b.expects) > 0) && !b.shell() {
				t.Errorf("%s: markers before a %q block: only sh blocks are run", b.where(), b.info)
			}
			cli.checkUses(t, b.where(), b.text)
			if b.shell() {
				checkPaths(t, root, b)
			}
			if !b.runnable() && b.needs != "act" {
				continue
			}
			key := d.path + "#" + b.heading + "#" + b.needs
			r := byKey[key]
			if r == nil {
				r = &recipe{name: d.path + "#" + anchor(b.heading), needs: b.needs}
				byKey[key] = r
				recipes = append(recipes, r)
			}
			r.blocks = append(r.blocks, b)
		}
	}
	if len(recipes) < 3 {
		t.Fatalf("found %d recipes to run; the README alone has three", len(recipes))
	}

	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			dir, timeout := linkedRoot(t, root), 2*time.Minute
			path := bin + string(os.PathListSeparator) + os.Getenv("PATH")
			if r.needs == "act" {
				act := os.Getenv(actEnvVar)
				if act == "" {
					testutil.MissingTool(t, fmt.Sprintf("%s: the recipe needs act, and %s is not set: the test command (scripts/test) installs act and sets it; only its commands' verbs, flags and files were checked", r.blocks[0].where(), actEnvVar))
					return
				}
				requireTool(t, "act", actEnvVar, "")
				dir, timeout = scratchRepo(t, nil), 15*time.Minute
				path = filepath.Dir(act) + string(os.PathListSeparator) + path
			}
			runRecipe(t, dir, path, timeout, r.blocks)
		})
	}
}

// checkReadme keeps the README a front door: the two commands of a fresh machine on its first
// screen, and few words.
func checkReadme(t *testing.T, root string, d docFile) {
	raw, err := os.ReadFile(filepath.Join(root, d.path))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	first := strings.Join(lines[:min(len(lines), 30)], "\n")
	for _, want := range []string{"go run ./cmd/latestwins demo", "scripts/test"} {
		if !strings.Contains(first, want) {
			t.Errorf("README.md: the first screen (30 lines) does not show %q", want)
		}
	}
	if n := len(strings.Fields(string(raw))); n > readmeMaxWords {
		t.Errorf("README.md has %d words, more than %d: move what is not the first run's into a guide under docs/", n, readmeMaxWords)
	}
	// The act the README asks to install is the one the test command pins.
	pin := regexp.MustCompile(`github\.com/nektos/act@v[0-9.]+`)
	script, err := os.ReadFile(filepath.Join(root, "scripts", "test"))
	if err != nil {
		t.Fatal(err)
	}
	want := pin.FindString(string(script))
	for _, got := range pin.FindAllString(string(raw), -1) {
		if got != want {
			t.Errorf("README.md installs %s; scripts/test pins %s", got, want)
		}
	}
}

// linkedRoot returns a new folder holding links to the repository's top-level files and folders, so
// that a recipe reads the repository's files and writes its own into the folder.
func linkedRoot(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runRecipe runs blocks as one bash script in dir, with PATH path, in a process group of its own
// that is killed when the script ends (a server it left running goes too).
func runRecipe(t *testing.T, dir, path string, timeout time.Duration, blocks []docBlock) {
	t.Helper()
	requireTool(t, "bash", "", "install bash")
	port := freePort(t)
	var script strings.Builder
	// lineOf maps the script's lines to the documents'.
	lineOf := map[int]string{}
	script.WriteString("set -e\ntrap 'echo \"recipe: exit $? at script line $LINENO\" >&2' ERR\n")
	n := 2
	for _, b := range blocks {
		text := strings.ReplaceAll(b.text, "127.0.0.1:8080", "127.0.0.1:"+strconv.Itoa(port))
		for _, tool := range []string{"curl", "openssl", "git", "jq"} {
			if regexp.MustCompile(`(^|[\s($|])` + tool + `\s`).MatchString(text) {
				requireTool(t, tool, "", "install "+tool)
			}
		}
		for i, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			n++
			lineOf[n] = fmt.Sprintf("%s:%d", b.file, b.line+1+i)
			script.WriteString(l + "\n")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = recipeEnv(path)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	p, err := startProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	t.Logf("%s ran in %s", blocks[0].where(), time.Since(start).Round(time.Millisecond))
	if p.err != nil {
		where := blocks[0].where()
		if m := regexp.MustCompile(`recipe: exit \d+ at script line (\d+)`).FindStringSubmatch(out.String()); m != nil {
			if n, _ := strconv.Atoi(m[1]); lineOf[n] != "" {
				where = lineOf[n]
			}
		}
		t.Fatalf("the recipe failed at %s (%v, after %s):\n%s", where, p.err, time.Since(start).Round(time.Millisecond), tail(out.String(), 60))
	}
	for _, b := range blocks {
		for _, want := range b.expects {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: the output does not hold %q (<!-- expect -->):\n%s", b.where(), want, tail(out.String(), 60))
			}
		}
	}
}

// recipeEnv is this process's environment, without the LATESTWINS_ settings a developer may have
// (a recipe sets its own), with path as PATH.
func recipeEnv(path string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "LATESTWINS_") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+path)
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// anchor is the fragment GitHub gives a heading: lower case, without punctuation but hyphens and
// underscores, spaces as hyphens.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the fragments of a document's headings, the second of two equal ones with -1.
func anchors(d docFile) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, h := range d.heads {
		a := anchor(h)
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// A Markdown link, inline: [text](target).
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocLinks checks the links of README.md and docs/*.md that stay in the repository: the file or
// folder exists, and a #fragment names a heading of the Markdown file it points into.
func TestDocLinks(t *testing.T) {
	root := moduleRoot(t)
	docs := docFiles(t, root)
	byPath := map[string]docFile{}
	for _, d := range docs {
		byPath[d.path] = d
	}
	for _, d := range docs {
		for _, m := range linkRE.FindAllStringSubmatch(d.prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			rel := d.path
			if file != "" {
				rel = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(d.path), file)))
				if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
					t.Errorf("%s: the link %s points at %s, which is not in the repository", d.path, target, rel)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(rel, ".md") {
				continue
			}
			to, ok := byPath[rel]
			if !ok {
				to = parseDoc(t, root, rel)
			}
			if !anchors(to)[frag] {
				t.Errorf("%s: the link %s names #%s, which is no heading of %s", d.path, target, frag, rel)
			}
		}
	}
}
