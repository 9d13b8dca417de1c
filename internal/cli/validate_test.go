package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/latestwins/latestwins/internal/testutil/syncbuf"
)

// validationCase is one command line that must be refused as bad input before anything is written.
type validationCase struct {
	name string
	vars map[string]string
	args []string
	want []string // what stderr must say: the flag or variable, and the fix
}

// runArgs, gateArgs and completeArgs are complete command lines but for what a case adds: the case
// is refused for its own flag, not for a missing one.
func runArgs(extra ...string) []string {
	return append(append([]string{"run", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--intent-id", "new"}, extra...), "--", "true")
}

func gateArgs(extra ...string) []string {
	return append([]string{"gate", "--environment", "staging", "--generation", "1", "--scopes", "api", "--holder", "h"}, extra...)
}

func completeArgs(extra ...string) []string {
	return append([]string{"complete", "--environment", "staging", "--generation", "1", "--scopes", "api", "--outcome", "failure"}, extra...)
}

func claimArgs(extra ...string) []string {
	return append([]string{"claim", "--environment", "staging", "--scopes", "api", "--sha", "cccc333000000000000000000000000000000000", "--intent-id", "claim-new"}, extra...)
}

func validationCases() []validationCase {
	ttl := []string{"from 5s to 24h"}
	return []validationCase{
		// run: every bound, by flag
		{"run lease-ttl 0", nil, runArgs("--lease-ttl", "0"), append([]string{`--lease-ttl "0s"`}, ttl...)},
		{"run lease-ttl below the minimum", nil, runArgs("--lease-ttl", "4s"), append([]string{`--lease-ttl "4s"`}, ttl...)},
		{"run lease-ttl above the maximum", nil, runArgs("--lease-ttl", "1000000h"), append([]string{`--lease-ttl "1000000h0m0s"`}, ttl...)},
		{"run max-attempts -1", nil, runArgs("--max-attempts", "-1"), []string{`--max-attempts "-1"`, "give 1 or more"}},
		{"run max-attempts 0", nil, runArgs("--max-attempts", "0"), []string{`--max-attempts "0"`, "give 1 or more"}},
		{"run attempt 0", nil, runArgs("--attempt", "0"), []string{`--attempt "0"`, "1 or more"}},
		{"run attempt -2", nil, runArgs("--attempt", "-2"), []string{`--attempt "-2"`, "1 or more"}},
		{"run wait -5s", nil, runArgs("--wait", "-5s"), []string{`--wait "-5s"`, "give a duration of 0s or more"}},
		{"run grace -1s", nil, runArgs("--grace", "-1s"), []string{`--grace "-1s"`, "give a duration of 0s or more"}},
		{"run lease-skew -1s", nil, runArgs("--lease-skew", "-1s"), []string{`--lease-skew "-1s"`, "give a duration of 0s or more"}},
		{"run generation -1", nil, runArgs("--generation", "-1"), []string{`--generation "-1"`, "give 0 or more"}},
		{"run grace longer than a third of the lease", nil, runArgs("--grace", "50s"), []string{`--grace "50s"`, "does not fit a 2m0s lease: use at most 40s"}},
		{"run default grace with a short lease", nil, runArgs("--lease-ttl", "20s"), []string{`--grace "10s"`, "does not fit a 20s lease", "--lease-ttl of at least 30s"}},
		{"run word after a list", nil, []string{"run", "--environment", "staging", "--scopes", "api", "web", "--sha", "bbbb222000000000000000000000000000000000", "--", "true"},
			[]string{`unexpected argument "web" before --`, "--scopes api,web"}},
		{"run command without --", nil, []string{"run", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "./deploy.sh"},
			[]string{`unexpected argument "./deploy.sh" before --`, "give the command after --"}},
		{"run without a command", nil, []string{"run", "--environment", "staging", "--scopes", "api", "--sha", "bbbb222000000000000000000000000000000000", "--"}, []string{"give the command to run after --"}},
		// run: the same bounds, by variable
		{"LATESTWINS_LEASE_TTL 0s", map[string]string{"LATESTWINS_LEASE_TTL": "0s"}, runArgs(), append([]string{`LATESTWINS_LEASE_TTL "0s"`}, ttl...)},
		{"LATESTWINS_LEASE_TTL 25h", map[string]string{"LATESTWINS_LEASE_TTL": "25h"}, runArgs(), append([]string{`LATESTWINS_LEASE_TTL "25h0m0s"`}, ttl...)},
		{"LATESTWINS_LEASE_TTL soon", map[string]string{"LATESTWINS_LEASE_TTL": "soon"}, runArgs(), []string{`LATESTWINS_LEASE_TTL="soon"`, "give a duration such as 90s"}},
		{"LATESTWINS_MAX_ATTEMPTS -1", map[string]string{"LATESTWINS_MAX_ATTEMPTS": "-1"}, runArgs(), []string{`LATESTWINS_MAX_ATTEMPTS "-1"`, "give 1 or more"}},
		{"LATESTWINS_MAX_ATTEMPTS three", map[string]string{"LATESTWINS_MAX_ATTEMPTS": "three"}, runArgs(), []string{`LATESTWINS_MAX_ATTEMPTS="three"`, "give a whole number"}},
		{"LATESTWINS_ATTEMPT 0", map[string]string{"LATESTWINS_ATTEMPT": "0"}, runArgs(), []string{`LATESTWINS_ATTEMPT "0"`, "1 or more"}},
		{"LATESTWINS_WAIT -5s", map[string]string{"LATESTWINS_WAIT": "-5s"}, runArgs(), []string{`LATESTWINS_WAIT "-5s"`, "0s or more"}},
		{"LATESTWINS_GRACE -1s", map[string]string{"LATESTWINS_GRACE": "-1s"}, runArgs(), []string{`LATESTWINS_GRACE "-1s"`, "0s or more"}},
		{"LATESTWINS_GRACE too long", map[string]string{"LATESTWINS_GRACE": "1m"}, runArgs(), []string{`LATESTWINS_GRACE "1m0s"`, "does not fit a 2m0s lease"}},
		{"LATESTWINS_LEASE_SKEW -1s", map[string]string{"LATESTWINS_LEASE_SKEW": "-1s"}, runArgs(), []string{`LATESTWINS_LEASE_SKEW "-1s"`, "0s or more"}},
		{"LATESTWINS_GENERATION -4", map[string]string{"LATESTWINS_GENERATION": "-4"}, runArgs(), []string{`LATESTWINS_GENERATION "-4"`, "give 0 or more"}},
		{"LATESTWINS_REDEPLOY maybe", map[string]string{"LATESTWINS_REDEPLOY": "maybe"}, runArgs(), []string{`LATESTWINS_REDEPLOY="maybe"`, "use true or false"}},
		{"LATESTWINS_JSON yes", map[string]string{"LATESTWINS_JSON": "yes"}, claimArgs(), []string{`LATESTWINS_JSON="yes"`, "use true or false"}},
		// gate
		{"gate lease-ttl 0", nil, gateArgs("--lease-ttl", "0"), append([]string{`--lease-ttl "0s"`}, ttl...)},
		{"gate wait -5s", nil, gateArgs("--wait", "-5s"), []string{`--wait "-5s"`, "0s or more"}},
		{"gate generation -3", nil, gateArgs("--generation", "-3"), []string{`--generation "-3"`, "give 0 or more"}},
		{"gate word after a list", nil, gateArgs("--scopes", "api", "web"), []string{`unexpected argument "web"`, "--scopes api,web"}},
		{"gate scope name", nil, gateArgs("--scopes", "a/b"), []string{`invalid scope "a/b"`}},
		{"LATESTWINS_LEASE flase", map[string]string{"LATESTWINS_LEASE": "flase"}, gateArgs(), []string{`LATESTWINS_LEASE="flase"`, "use true or false"}},
		{"LATESTWINS_LEASE_TTL on gate", map[string]string{"LATESTWINS_LEASE_TTL": "100h"}, gateArgs(), append([]string{`LATESTWINS_LEASE_TTL "100h0m0s"`}, ttl...)},
		// claim
		{"claim word after a list", nil, []string{"claim", "--environment", "staging", "--scopes", "api", "web", "--sha", "cccc333000000000000000000000000000000000"},
			[]string{`unexpected argument "web"`, "latestwins claim takes flags only", "--scopes api,web"}},
		{"claim attempt 0", nil, claimArgs("--attempt", "0"), []string{`--attempt "0"`, "1 or more"}},
		{"claim without sha", nil, []string{"claim", "--environment", "staging", "--scopes", "api"}, []string{"invalid sha", "--sha"}},
		{"claim scope name", nil, []string{"claim", "--environment", "staging", "--scopes", "api,a b/c", "--sha", "cccc333000000000000000000000000000000000"}, []string{`invalid scope "b/c"`}},
		// complete
		{"complete max-attempts 0", nil, completeArgs("--max-attempts", "0"), []string{`--max-attempts "0"`, "give 1 or more"}},
		{"complete attempt -1", nil, completeArgs("--attempt", "-1"), []string{`--attempt "-1"`, "1 or more"}},
		{"complete word after a flag", nil, completeArgs("--message", "it", "broke"), []string{`unexpected argument "broke"`}},
		{"complete outcome", nil, completeArgs("--outcome", "meh"), []string{`invalid outcome "meh"`}},
		{"complete tokens", nil, completeArgs("--tokens", "api"), []string{`invalid tokens "api"`, "SCOPE=N"}},
		// history, status
		{"history limit -1", nil, []string{"history", "staging", "--limit", "-1"}, []string{`--limit "-1"`, "give 0 or more"}},
		{"LATESTWINS_LIMIT -1", map[string]string{"LATESTWINS_LIMIT": "-1"}, []string{"history", "staging"}, []string{`LATESTWINS_LIMIT "-1"`, "give 0 or more"}},
		{"status two environments", nil, []string{"status", "staging", "prod"}, []string{`unexpected arguments ["prod"]`}},
		// sweep
		{"sweep stall -1m", nil, []string{"sweep", "--stall", "-1m"}, []string{`--stall "-1m0s"`, "0s or more"}},
		{"sweep max-attempts 0", nil, []string{"sweep", "--stall", "1ns", "--max-attempts", "0", "--", "true"}, []string{`--max-attempts "0"`, "give 1 or more"}},
		{"sweep word before --", nil, []string{"sweep", "--stall", "1ns", "now", "--", "true"}, []string{`unexpected argument "now" before --`}},
		{"LATESTWINS_STALL -1s", map[string]string{"LATESTWINS_STALL": "-1s"}, []string{"sweep", "--", "true"}, []string{`LATESTWINS_STALL "-1s"`, "0s or more"}},
		// unlock
		{"unlock blank reason", nil, []string{"unlock", "staging/api", "--reason", "   "}, []string{"invalid --reason", "say why the lease is unlocked"}},
		{"LATESTWINS_REASON blank", map[string]string{"LATESTWINS_REASON": " \t "}, []string{"unlock", "staging/api"}, []string{"invalid LATESTWINS_REASON", "say why"}},
		{"unlock two leases", nil, []string{"unlock", "staging/api", "staging/web", "--reason", "stuck"}, []string{"name one lease"}},
		// migrate, demo, serve
		{"migrate argument", nil, []string{"migrate", "now"}, []string{`unexpected argument "now"`}},
		{"demo argument", nil, []string{"demo", "fast"}, []string{`unexpected argument "fast"`}},
		{"demo build -1s", nil, []string{"demo", "--build", "-1s"}, []string{`--build "-1s"`, "0s or more"}},
		{"serve sweep-every -1s", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s"}, []string{"serve", "--sweep-every", "-1s"}, []string{`--sweep-every "-1s"`, "0s or more"}},
		{"serve max-attempts 0", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s"}, []string{"serve", "--max-attempts", "0"}, []string{`--max-attempts "0"`, "give 1 or more"}},
		{"serve argument", map[string]string{"LATESTWINS_WEBHOOK_SECRET": "s"}, []string{"serve", "extra"}, []string{`unexpected argument "extra"`}},
	}
}

// Every bad flag and variable is refused with exit 2 and a message that names it and the fix,
// before anything is written: the store file is byte for byte the same, the environment has no new
// generation and its lease is not held.
func TestBadSettingsAreRefusedBeforeAnyWrite(t *testing.T) {
	t.Parallel()
	for _, tc := range validationCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h, before := storeWithPass(t)
			h.vars = tc.vars
			args := append([]string{}, tc.args...)
			if args[0] == "demo" {
				args = append(args, "--store", h.store)
			}
			o := h.run(context.Background(), args...)
			if o.code != ExitUsage {
				t.Errorf("exit %d, want %d\nstderr:\n%s", o.code, ExitUsage, o.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(o.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, o.stderr)
				}
			}
			checkUnchanged(t, h, before)
		})
	}
}

// storeWithPass makes a store where staging is at generation 1 with api claimed, and returns the
// store file's bytes.
func storeWithPass(t *testing.T) (*harness, []byte) {
	t.Helper()
	h := newHarness(t)
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "one")
	b, err := os.ReadFile(strings.TrimPrefix(h.store, "bolt://"))
	if err != nil {
		t.Fatal(err)
	}
	return h, b
}

func checkUnchanged(t *testing.T, h *harness, before []byte) {
	t.Helper()
	after, err := os.ReadFile(strings.TrimPrefix(h.store, "bolt://"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("the store file changed")
	}
	h.vars = nil
	st := h.status("staging")
	if st["desired_generation"] != float64(1) {
		t.Errorf("desired generation %v, want 1", st["desired_generation"])
	}
	if lease := scopeField(st, "api", "lease").(map[string]any); lease["holder"] != nil && lease["holder"] != "" {
		t.Errorf("the lease is held: %v", lease)
	}
}

// The check of the test above can see a write: the same command lines without the bad setting
// write (a mutant of the validation that let everything through would be caught).
func TestValidCommandLinesDoWrite(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][]string{"run": runArgs(), "gate": gateArgs(), "claim": claimArgs(), "complete": completeArgs("--attempt", "1"),
		"unlock": {"unlock", "staging/api", "--reason", "stuck"}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, before := storeWithPass(t)
			if name == "unlock" {
				h.must(ExitOK, gateArgs()...)
				b, err := os.ReadFile(strings.TrimPrefix(h.store, "bolt://"))
				if err != nil {
					t.Fatal(err)
				}
				before = b
			}
			if o := h.run(context.Background(), args...); o.code == ExitUsage {
				t.Fatalf("refused: %s", o.stderr)
			}
			after, err := os.ReadFile(strings.TrimPrefix(h.store, "bolt://"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(before, after) {
				t.Errorf("%s wrote nothing: the unchanged-file check could not see a write", name)
			}
		})
	}
}

// A store location that can never work is bad configuration (exit 2) that says what to fix, and
// the commands that only read never create a store.
func TestStoreLocationsThatCannotWork(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("not a database, just some text\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "latestwins.db")
	cases := []struct {
		name, store string
		args        []string
		want        []string
	}{
		{"missing directory", "bolt://" + filepath.Join(dir, "nope", "x.db"), claimArgs(), []string{"does not exist; create it first"}},
		{"a directory", "bolt://" + dir, claimArgs(), []string{"is a directory; give the path of a database file inside it"}},
		{"not a database", "bolt://" + file, claimArgs(), []string{"is not a latestwins database"}},
		{"status of no store", "bolt://" + missing, []string{"status", "staging"},
			[]string{"no store at bolt://" + missing + ": nothing was ever recorded there; check the path, or pass --store"}},
		{"history of no store", "bolt://" + missing, []string{"history", "staging"}, []string{"no store at bolt://" + missing}},
		{"gate on no store", "bolt://" + missing, gateArgs(), []string{"no store at bolt://" + missing}},
		{"unlock on no store", "bolt://" + missing, []string{"unlock", "staging/api", "--reason", "stuck"}, []string{"no store at bolt://" + missing}},
		{"sweep on no store", "bolt://" + missing, []string{"sweep"}, []string{"no store at bolt://" + missing}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.store = tc.store
			o := h.run(context.Background(), tc.args...)
			if o.code != ExitUsage {
				t.Errorf("exit %d, want %d\nstderr:\n%s", o.code, ExitUsage, o.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(o.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, o.stderr)
				}
			}
		})
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a command created the store it was only to read or must find (stat: %v)", err)
	}
}

// The default store, named by nothing: status and history say where they looked and leave nothing
// behind. (Not parallel: the default store is relative to the working directory.)
func TestReadingTheDefaultStoreCreatesNothing(t *testing.T) {
	cwd := t.TempDir()
	t.Chdir(cwd)
	h := newHarness(t)
	h.store = ""
	for _, verb := range []string{"status", "history"} {
		o := h.run(context.Background(), verb, "staging")
		if o.code != ExitUsage || !strings.Contains(o.stderr, "no store at bolt://./latestwins.db: nothing was ever recorded there; check the path, or pass --store") {
			t.Errorf("%s with no store named: exit %d\n%s", verb, o.code, o.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(cwd, "latestwins.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading created ./latestwins.db (stat: %v)", err)
	}
}

func TestPermissionsThatCannotWork(t *testing.T) {
	if os.Geteuid() == 0 {
		rerunAsNobody(t) // permissions do not bind root
		return
	}
	t.Parallel()
	h, _ := storeWithPass(t)
	path := strings.TrimPrefix(h.store, "bolt://")
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if o := h.run(context.Background(), claimArgs()...); o.code != ExitUsage || !strings.Contains(o.stderr, "is not writable") {
		t.Errorf("claim on a read-only file: exit %d\n%s", o.code, o.stderr)
	}
	if o := h.run(context.Background(), "status", "staging"); o.code != ExitOK {
		t.Errorf("status on a read-only file: exit %d\n%s", o.code, o.stderr)
	}
	if err := os.Chmod(path, 0o000); err != nil {
		t.Fatal(err)
	}
	if o := h.run(context.Background(), "status", "staging"); o.code != ExitUsage || !strings.Contains(o.stderr, "not readable") {
		t.Errorf("status on an unreadable file: exit %d\n%s", o.code, o.stderr)
	}
}

// A damaged store file is exit 1 with one clear line: what is wrong, with which file, and what to
// do; never a panic or a goroutine dump.
func TestDamagedStoreFile(t *testing.T) {
	t.Parallel()
	_, data := storeWithPass(t)
	for name, cut := range map[string][]byte{"truncated": data[:2*os.Getpagesize()], "empty": {}} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.store = "bolt://" + filepath.Join(h.dir, "lw.db")
			if err := os.WriteFile(strings.TrimPrefix(h.store, "bolt://"), cut, 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"status", "staging"}, {"history", "staging"}, claimArgs(), gateArgs(), runArgs()} {
				o := h.run(context.Background(), args...)
				want := "latestwins " + args[0] + ": " + strings.TrimPrefix(h.store, "bolt://") + " is damaged ("
				if o.code != ExitError || !strings.HasPrefix(o.stderr, want) || strings.Count(o.stderr, "\n") != 1 ||
					!strings.HasSuffix(o.stderr, "): restore it from a backup or move it away\n") {
					t.Errorf("%s: exit %d, stderr:\n%s\nwant exit 1 and one line %q...", args[0], o.code, o.stderr, want)
				}
			}
		})
	}
}

// A command interrupted while it waits exits 8, whatever it waits for.
func TestInterruptedWaitsExit8(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	state := filepath.Join(h.dir, "s.json")
	h.must(ExitOK, "claim", "--environment", "qa", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a", "--state", state)
	h.must(ExitOK, "gate", "--state", state, "--holder", "first", "--lease-ttl", "1m")
	for _, args := range [][]string{
		{"gate", "--state", state, "--holder", "second", "--wait", "10m"},
		{"run", "--state", state, "--holder", "second", "--wait", "10m", "--", "true"},
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		waiting := make(chan struct{})
		var stderr syncbuf.Buffer
		pio := IO{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &signalWriter{w: &stderr, say: "waiting: qa/api is locked by first", ch: waiting},
			Getenv: func(k string) string { return map[string]string{"LATESTWINS_STORE": h.store}[k] }}
		done := make(chan int, 1)
		go func() { done <- Main(ctx, args, pio) }()
		select {
		case <-waiting:
		case code := <-done:
			t.Fatalf("%s ended (exit %d) before it waited:\n%s", args[0], code, stderr.String())
		}
		cancel(&SignalCause{Signal: syscall.SIGINT})
		if code := <-done; code != ExitInterrupted || !strings.Contains(stderr.String(), "interrupted while waiting for the lease") {
			t.Errorf("%s interrupted while waiting: exit %d, want %d\n%s", args[0], code, ExitInterrupted, stderr.String())
		}
	}
	// The lease of the first pass is untouched: the interrupted waiters took nothing.
	if lease := scopeField(h.status("qa"), "api", "lease").(map[string]any); lease["holder"] != "first" {
		t.Errorf("lease after the interrupted waits: %v", lease)
	}
}

// signalWriter closes ch the first time what is written contains say.
type signalWriter struct {
	w    io.Writer
	say  string
	ch   chan struct{}
	once sync.Once
}

func (s *signalWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(s.say)) {
		s.once.Do(func() { close(s.ch) })
	}
	return s.w.Write(p)
}

// Text users gave (actor, reason, message, holder) reaches the terminal escaped: history, status
// and progress lines show control characters as text and never a forged line.
func TestUserTextIsEscapedOnTheTerminal(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	state := filepath.Join(h.dir, "s.json")
	evil := "x\x1b[2J\x1b[H\nforged line\u202e"
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "api", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "a", "--state", state, "--actor", evil)
	h.must(ExitOK, "gate", "--state", state, "--holder", "holder"+evil, "--lease-ttl", "1m")
	other := filepath.Join(h.dir, "o.json")
	h.must(ExitOK, "claim", "--environment", "staging", "--scopes", "web", "--sha", "aaaa111000000000000000000000000000000000", "--intent-id", "b", "--state", other)
	h.must(ExitRetry, "complete", "--state", other, "--outcome", "failure", "--attempt", "1", "--message", "failed"+evil)
	waited := h.run(context.Background(), "gate", "--state", state, "--holder", "second", "--wait", "1ms")
	h.must(ExitOK, "unlock", "staging/api", "--reason", "reason"+evil, "--actor", "actor"+evil)
	outs := map[string]string{
		"history":   h.must(ExitOK, "history", "staging", "--limit", "0").stdout,
		"status":    h.must(ExitOK, "status", "staging").stdout,
		"gate wait": waited.stderr,
	}
	for name, out := range outs {
		if strings.ContainsAny(out, "\x1b\r\u202e") || strings.Contains(out, "\nforged line") {
			t.Errorf("%s lets a control character through:\n%q", name, out)
		}
	}
	for name, want := range map[string]string{"history": `reason` + `x\x1b[2J\x1b[H\nforged line\u202e`, "gate wait": `holderx\x1b[2J\x1b[H\nforged line\u202e`} {
		if !strings.Contains(outs[name], want) {
			t.Errorf("%s does not show %q:\n%s", name, want, outs[name])
		}
	}
}
