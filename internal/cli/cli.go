// Package cli is the latestwins command line: one binary for the Action's verbs, the operators'
// commands and the demo. cmd/latestwins only wires it to the process.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
	"github.com/latestwins/latestwins/internal/store/bolt"
)

// Exit codes. They are part of the contract: workflows branch on them.
const (
	ExitOK          = 0 // done
	ExitError       = 1 // unexpected error (store unreachable, ...): retryable; a damaged store file or corrupt stored state once repaired
	ExitUsage       = 2 // bad input or configuration: terminal, the message says what to fix
	ExitSuperseded  = 3 // a newer generation owns the scope: stop cleanly, nothing was deployed
	ExitLocked      = 4 // the lease stayed held by another pass for longer than --wait
	ExitLeaseLost   = 5 // the lease was lost while working: retryable infrastructure loss
	ExitRetry       = 6 // the command failed on a non-final attempt: retryable, nothing terminal published
	ExitFailed      = 7 // the command failed on the final attempt: one terminal error published
	ExitInterrupted = 8 // stopped by SIGINT/SIGTERM: the lease was released, retryable
	ExitQueueFull   = 9 // the scope's queue is full: the intent was refused, nothing written; retryable
	// ExitHeld: a soak, approvals or a change window hold the commit for longer than --wait; it stays
	// pending, and the recovery sweep starts its work again once it may go.
	ExitHeld = 10
)

// IO is the process's surroundings, injected so that tests run the CLI in-process. Stdout and
// Stderr must be safe for concurrent writes: run's command writes to them while progress is printed.
type IO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// OSIO is the real process's IO.
func OSIO() IO { return IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv} }

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, c *cmdEnv, args []string) error
}

func commands() []command {
	return []command{
		{"demo", "run the forced A -> B -> C race on the embedded store and check every guarantee", runDemo},
		{"claim", "accept an intent and claim its scopes: prints the generation", runClaim},
		{"gate", "check that a pass may enter a phase; with a lease for deploy", runGate},
		{"run", "gate, run a command under a renewed fenced lease, complete: run -- CMD ARGS", runRun},
		{"complete", "record how a pass ended (success, failure, lost, interrupted, invalid)", runComplete},
		{"status", "print an environment's status table: status ENV [--json]; without ENV, what is live where in every environment (with --api: those the repository feeds)", runStatus},
		{"promote", "ask for the commit live in one environment's scope in another's: promote ENV/SCOPE --from staging", runPromote},
		{"history", "print an environment's timeline: history ENV [--json]", runHistory},
		{"report", "print an environment's delivery report (deploys, lead time, change failures, restores, time behind): report ENV [--since 30d] [--json]", runReport},
		{"unlock", "free a lease by hand, audited: unlock ENV/SCOPE --reason TEXT", runUnlock},
		{"skip", "unblock a scope whose queue head or barrier failed: go on to the next: skip ENV/SCOPE --reason TEXT", runSkip},
		{"retry", "unblock a scope whose queue head or barrier failed: try it again: retry ENV/SCOPE --reason TEXT", runRetry},
		{"policy", "set an environment's policy, recorded: policy ENV latest|queue", runPolicy},
		{"rollback", "deploy an older commit ahead of everything pending, and freeze the scope: rollback ENV/SCOPE [--to SHA] --reason TEXT", runRollback},
		{"unfreeze", "let the newest intent held by a rollback's freeze go: unfreeze ENV/SCOPE --freeze G --reason TEXT", runUnfreeze},
		{"gates", "set an environment's soak time, approvals and change windows on a store, recorded: gates ENV [--soak 30m] [--approvals 1] [--windows ...]", runGates},
		{"break-glass", "waive a pending commit's soak time, approvals and change windows, audited: break-glass ENV --sha SHA --reason TEXT", runBreakGlass},
		{"approve", "approve a commit waiting for approvals, as a person, with the store's credentials: approve ENV --sha SHA --actor LOGIN", runApprove},
		{"migrate", "create or upgrade the store (DynamoDB table, bolt file); idempotent", runMigrate},
		{"sweep", "re-drive stalled work once: sweep [--stall 10m] [-- CMD]; without CMD a dry run", runSweep},
		{"action", "the GitHub Action's step: reads INPUT_* variables (see action.yml)", runAction},
		{"serve", "the GitHub App as an HTTP server: serve [--addr 127.0.0.1:8080] --config PATH", runServe},
		{"webhook", "sign a payload file as GitHub does and send it to the App: webhook send --event push FILE --url URL", runWebhook},
		{"doctor", "check a deployed App: it answers, its webhook secret, installation, trusted file, store and OIDC audience: doctor --url URL", runDoctor},
		{"app", "register the GitHub App with GitHub's manifest flow: app create [--org ORG] [--url PUBLIC_URL]", runApp},
	}
}

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, pio IO) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(pio.Stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		env := &cmdEnv{io: pio, log: slog.New(slog.NewTextHandler(pio.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		err := env.explain(ctx, c.run(ctx, env, args[1:]))
		if err == nil {
			return ExitOK
		}
		var ec *exitError
		if !errors.As(err, &ec) || ec.msg != "" {
			fmt.Fprintf(pio.Stderr, "latestwins %s: %s\n", c.name, report.Escape(message(err)))
		}
		return ExitCode(err)
	}
	fmt.Fprintf(pio.Stderr, "latestwins: unknown command %q\n\n", args[0])
	usage(pio.Stderr)
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "latestwins: latest-wins coordination for deployments")
	fmt.Fprintln(w, "\nUsage: latestwins COMMAND [flags]\n\nCommands:")
	width := 0
	for _, c := range commands() {
		width = max(width, len(c.name))
	}
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintln(w, "\nStore: --store or LATESTWINS_STORE: bolt://PATH (default bolt://./latestwins.db), memory://,")
	fmt.Fprintln(w, "       dynamodb://TABLE?region=R&endpoint=URL")
	fmt.Fprintln(w, "       Or --api URL (LATESTWINS_API): claim, gate, run, complete, status, history and report through the App's HTTP API")
	fmt.Fprintln(w, "\nExit codes: 0 done, 1 error (retryable), 2 bad input, 3 superseded, 4 locked (gave up waiting),")
	fmt.Fprintln(w, "            5 lease lost (retryable), 6 failed (will retry), 7 failed (final), 8 interrupted,")
	fmt.Fprintln(w, "            9 queue full (refused, retryable), 10 held (a soak, approvals or a change window; the sweep starts it again)")
	fmt.Fprintln(w, "\nRun `latestwins COMMAND -h` for a command's flags.")
}

// exitError carries an exit code for an outcome that is not an error of the program (superseded,
// a failed command on a non-final attempt). An empty message prints nothing more.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// explain makes the error of a command tell the truth: an unexpected error of a command that was
// interrupted is the interruption, and a lookup that found nothing names the store it looked in.
func (c *cmdEnv) explain(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && ExitCode(err) == ExitError {
		return &exitError{code: ExitInterrupted, msg: fmt.Sprintf("interrupted (%v) before it finished; nothing more was done, and it can be retried", context.Cause(ctx))}
	}
	var in *authority.InputError
	if c.where != "" && (errors.Is(err, authority.ErrNotFound) || errors.As(err, &in) && (in.Field == "environment" || in.Field == "lease")) {
		return fmt.Errorf("%w (looked in %s)", err, c.where)
	}
	return err
}

// message is what the command line says about err: a damaged store file and a stored environment
// that breaks an invariant are said plainly, without the operations that ran into them.
func message(err error) string {
	var d *bolt.DamagedError
	if errors.As(err, &d) {
		return d.Error()
	}
	if c, ok := errors.AsType[*authority.CorruptError](err); ok {
		return c.Error()
	}
	return err.Error()
}

// ExitCode maps an error to the documented exit code.
func ExitCode(err error) int {
	var (
		ec     *exitError
		held   *authority.HeldError
		denied interface{ AccessDenied() bool }
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ec):
		return ec.code
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, authority.ErrInvalidInput), errors.Is(err, errUsage), errors.Is(err, authority.ErrFreezeMismatch),
		errors.Is(err, bolt.ErrUnusable), errors.Is(err, bolt.ErrNoStore), errors.Is(err, authority.ErrMoved),
		errors.As(err, &denied) && denied.AccessDenied(): // a store refused the token or the repository: fix them first
		return ExitUsage
	case errors.Is(err, authority.ErrSuperseded):
		return ExitSuperseded
	case errors.As(err, &held) && held.Why().Lasting():
		return ExitHeld
	case errors.Is(err, authority.ErrLeaseHeld):
		return ExitLocked
	case errors.Is(err, authority.ErrLeaseLost):
		return ExitLeaseLost
	case errors.Is(err, authority.ErrQueueFull):
		return ExitQueueFull
	}
	return ExitError
}

// errUsage is the category of bad input and configuration that has no authority.InputError.
var errUsage = errors.New("usage")

// usageError is an error of that category: its message, and the error it unwraps to.
type usageError struct {
	msg string
	err error
}

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Unwrap() error        { return e.err }
func (e *usageError) Is(target error) bool { return target == errUsage }

// usageErrorf formats a usage error; it unwraps to what %w names.
func usageErrorf(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &usageError{msg: err.Error(), err: err}
}

// usageCause is a usage error that says msg and unwraps to cause without repeating it.
func usageCause(cause error, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), err: cause}
}

// splitList splits a comma or space separated list, dropping empties.
func splitList(s string) []string {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
	return f
}

func sortedScopes(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
