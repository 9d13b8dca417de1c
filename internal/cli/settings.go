package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/metrics"
	"github.com/latestwins/latestwins/internal/pass"
	"github.com/latestwins/latestwins/internal/report"
	"github.com/latestwins/latestwins/internal/tracing"
)

// cmdEnv is what every command gets: the process IO, a logger and, once opened, the store.
type cmdEnv struct {
	io  IO
	log *slog.Logger
	// promoter, when set, is the Authority's promotion comparer (serve: GitHub's compare API).
	promoter authority.Comparer
	// metrics, when set (serve), counts the store's requests and the gates' answers.
	metrics *metrics.Metrics
	// tracing, when set (serve with an OTLP endpoint), traces the store's requests; done shuts it
	// down.
	tracing *tracing.Tracing
	s       settings
	fs      *flag.FlagSet
	// typed are the flags whose variables are read after the command line (parse), and whose values
	// are checked before anything is opened.
	typed []*typedFlag
	// interspersed lets flags follow positional arguments (not for run, whose arguments are a command).
	interspersed bool
	positional   []string
	// dashdash: the flags ended with "--", so the positional arguments are a command.
	dashdash bool
	// cmdline are the flags given on the command line (not by their variables).
	cmdline map[string]bool
	// mode is how the command opens a store: creating it, or only one that exists.
	mode storeMode
	auth *authority.Authority
	// clock, when set, is the clock the Authority runs on (the demo's simulated one).
	clock authority.Clock
	close func() error
	// where names the store (or the App) the command works on, for messages; set by connect.
	where string
	// pass runs a pass's steps and view reads state: on the store (auth), or through the App's API
	// (--api). Set by connect.
	pass pass.Authority
	view stateReader
	// deploys are the commits run's pass deploys, as claimed: what its command and --json are told.
	deploys []authority.ClaimedScope
}

// settings are the flags shared by the verbs. Each has a LATESTWINS_* variable of the same name
// (--lease-ttl: LATESTWINS_LEASE_TTL), so that the Action and any CI speak one vocabulary.
type settings struct {
	store       string
	api         string
	apiToken    string
	apiAudience string
	environment string
	scopes      string
	sha         string
	ref         string
	before      string
	pushedAt    string
	committedAt string
	// fromEvent names the ordering facts read from the push event's payload, not given as flags.
	fromEvent   map[string]bool
	forced      bool
	beforeSeq   int64
	source      string
	actor       string
	intentID    string
	holder      string
	generation  int64
	phase       string
	leaseTTL    time.Duration
	wait        time.Duration
	skew        time.Duration
	grace       time.Duration
	stall       time.Duration
	attempt     int
	maxAttempts int
	redeploy    bool
	// requires and requiresAncestor: the environment's promotion requirement (--requires).
	requires         string
	requiresAncestor bool
	alertAfter       string // the environment's alert-after (--alert-after); "": keep the stored one
	lease            bool
	jsonOut          bool
	quiet            bool
	state            string
	outcome          string
	message          string
	run              string
	tokens           string
	reason           string
	limit            int
	since            string // how far back a report looks (--since)
	policy           string
	barrier          string
	queueLimit       int
}

// envName is the variable a flag reads: --lease-ttl reads LATESTWINS_LEASE_TTL.
func envName(flagName string) string {
	return "LATESTWINS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func (c *cmdEnv) env(flagName string) string { return c.io.Getenv(envName(flagName)) }

func (c *cmdEnv) newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("latestwins "+name, flag.ContinueOnError)
	c.fs, c.typed = fs, nil
	c.str(&c.s.store, "store", "bolt://./latestwins.db", "store URL: bolt://PATH, memory://, dynamodb://TABLE?region=R&endpoint=URL, github://OWNER/REPO, git+file:///PATH.git or git+https://HOST/OWNER/REPO.git")
	c.boolean(&c.s.jsonOut, "json", false, "print machine-readable JSON")
	return fs
}

func (c *cmdEnv) str(p *string, name, def, usage string) {
	if v := c.env(name); v != "" {
		def = v
	}
	c.fs.StringVar(p, name, def, usage+" ($"+envName(name)+")")
}

// secret is a string flag whose variable is read after the command line, like a typed flag's, so
// that its value never shows as the flag's default in usage or help.
func (c *cmdEnv) secret(p *string, name, usage string) {
	c.fs.StringVar(p, name, "", usage+" ($"+envName(name)+"; its value is never shown)")
	c.typedVar(name, "", nil)
}

// typedFlag is a flag whose variable is parsed like the flag itself, after the command line, so
// that a malformed variable is an error that names it rather than a silent default; check bounds
// its value.
type typedFlag struct {
	name  string
	raw   string // the variable's value
	form  string // what a well-formed value looks like
	check func() error
}

func (c *cmdEnv) typedVar(name, form string, check func() error) {
	c.typed = append(c.typed, &typedFlag{name: name, raw: c.env(name), form: form, check: check})
}

func (c *cmdEnv) boolean(p *bool, name string, def bool, usage string) {
	c.fs.BoolVar(p, name, def, usage+" ($"+envName(name)+")")
	c.typedVar(name, "use true or false", nil)
}

// int64Var and intVar take whole numbers of at least min.
func (c *cmdEnv) int64Var(p *int64, name string, def, min int64, usage string) {
	c.fs.Int64Var(p, name, def, usage+" ($"+envName(name)+")")
	c.typedVar(name, "give a whole number", atLeast(c, name, p, min, usage))
}

func (c *cmdEnv) intVar(p *int, name string, def, min int, usage string) {
	c.fs.IntVar(p, name, def, usage+" ($"+envName(name)+")")
	c.typedVar(name, "give a whole number", atLeast(c, name, p, min, usage))
}

func atLeast[N int | int64](c *cmdEnv, name string, p *N, min N, usage string) func() error {
	return func() error {
		if *p < min {
			return c.badSetting(name, fmt.Sprint(*p), fmt.Sprintf("give %d or more (%s)", min, usage))
		}
		return nil
	}
}

// attemptVar is --attempt: 0 (unset) means the GitHub run's attempt, else 1; a number given must
// be 1 or more.
func (c *cmdEnv) attemptVar(usage string) {
	c.fs.IntVar(&c.s.attempt, "attempt", 0, usage+" ($"+envName("attempt")+")")
	c.typedVar("attempt", "give a whole number", func() error {
		if c.given("attempt") && c.s.attempt < 1 {
			return c.badSetting("attempt", fmt.Sprint(c.s.attempt), "give the attempt number, 1 or more (default $GITHUB_RUN_ATTEMPT, else 1)")
		}
		return nil
	})
}

// durVar takes durations of 0 or more.
func (c *cmdEnv) durVar(p *time.Duration, name string, def time.Duration, usage string) {
	c.fs.DurationVar(p, name, def, usage+" ($"+envName(name)+")")
	c.typedVar(name, "give a duration such as 90s, 2m or 1h", func() error {
		if *p < 0 {
			return c.badSetting(name, p.String(), fmt.Sprintf("give a duration of 0s or more, such as 30s or 10m (%s)", usage))
		}
		return nil
	})
}

// parseFlagSet parses args. -h prints the flag set's whole usage to help; a flag error is returned
// alone, the one problem and where the help is, without the usage of every flag.
func parseFlagSet(fs *flag.FlagSet, help io.Writer, args []string) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(help)
		fmt.Fprintf(help, "Usage of %s:\n", fs.Name())
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		return err
	case err != nil:
		return usageErrorf("%w; run '%s -h' for help", err, fs.Name())
	}
	return nil
}

// parse parses args, reads the variables of typed flags not given on the command line, and checks
// every typed flag's value: all before the command opens anything.
func (c *cmdEnv) parse(args []string) error {
	if err := parseFlagSet(c.fs, c.io.Stderr, args); err != nil {
		return err
	}
	if c.interspersed {
		// Flags may follow positional arguments: status staging --json.
		var positional []string
		for c.fs.NArg() > 0 {
			rest := c.fs.Args()
			positional = append(positional, rest[0])
			if err := parseFlagSet(c.fs, c.io.Stderr, rest[1:]); err != nil {
				return err
			}
		}
		c.positional = positional
	} else {
		c.positional = c.fs.Args()
		stop := len(args) - c.fs.NArg()
		c.dashdash = stop > 0 && args[stop-1] == "--"
	}
	c.cmdline = map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { c.cmdline[f.Name] = true })
	for _, t := range c.typed {
		if t.raw == "" || c.cmdline[t.name] {
			continue
		}
		if err := c.fs.Set(t.name, t.raw); err != nil {
			return usageErrorf("%s=%q: %s (or unset the variable)", envName(t.name), t.raw, t.form)
		}
	}
	for _, t := range c.typed {
		if t.check == nil {
			continue
		}
		if err := t.check(); err != nil {
			return err
		}
	}
	return nil
}

// given reports whether a setting was given, on the command line or by its variable.
func (c *cmdEnv) given(name string) bool { return c.cmdline[name] || c.env(name) != "" }

// badSetting is bad input in a flag, named as the user gave it: --name, or LATESTWINS_NAME when
// only the variable set it.
func (c *cmdEnv) badSetting(name, value, fix string) error {
	field := "--" + name
	if !c.cmdline[name] && c.env(name) != "" {
		field = envName(name)
	}
	return &authority.InputError{Field: field, Value: value, Fix: fix}
}

// noArguments refuses positional arguments, which the verbs other than status, history and unlock
// do not take: a second word after a flag's value would otherwise be dropped.
func (c *cmdEnv) noArguments() error {
	if len(c.positional) == 0 {
		return nil
	}
	return usageErrorf("unexpected argument %q: %s takes flags only; give a list as one comma-separated value (--scopes api,web)",
		c.positional[0], c.fs.Name())
}

// command returns the command given after "--", refusing arguments before it.
func (c *cmdEnv) command() ([]string, error) {
	if len(c.positional) > 0 && !c.dashdash {
		return nil, usageErrorf("unexpected argument %q before --: give the command after --, e.g. -- ./deploy.sh, and a list as one comma-separated value (--scopes api,web)",
			c.positional[0])
	}
	return c.positional, nil
}

// retention is the Authority option of LATESTWINS_RETENTION, if set.
func (c *cmdEnv) retention() ([]authority.Option, error) {
	v := c.io.Getenv("LATESTWINS_RETENTION")
	if v == "" {
		return nil, nil
	}
	d, err := authority.ParseRetention(v)
	if err != nil {
		return nil, fmt.Errorf("LATESTWINS_RETENTION: %w", err)
	}
	return []authority.Option{authority.WithRetention(d)}, nil
}

func (c *cmdEnv) open(ctx context.Context) error {
	opts, err := c.retention()
	if err != nil {
		return err
	}
	opts = append(opts, authority.WithLogger(c.log))
	if c.clock != nil {
		opts = append(opts, authority.WithClock(c.clock))
	}
	st, closeFn, err := openStore(ctx, c.s.store, c.mode, c.io.Getenv)
	if err != nil {
		return err
	}
	if c.fs != nil && c.fs.Lookup("lease-skew") != nil {
		opts = append(opts, authority.WithSkew(c.s.skew))
	}
	if c.fs != nil && c.fs.Lookup("queue-limit") != nil {
		opts = append(opts, authority.WithQueueLimit(c.s.queueLimit))
	}
	if c.promoter != nil {
		opts = append(opts, authority.WithPromotionComparer(c.promoter))
	}
	if c.metrics != nil {
		st = c.metrics.Store(st)
		opts = append(opts, authority.WithObserver(c.metrics))
	}
	st = c.tracing.Store(st) // as it was, without tracing
	c.auth, c.close, c.where = authority.New(st, opts...), closeFn, c.s.store
	return nil
}

func (c *cmdEnv) done() {
	if c.close != nil {
		if err := c.close(); err != nil {
			c.log.Warn("closing the store", "err", err)
		}
	}
	if c.tracing != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.tracing.Shutdown(ctx); err != nil {
			c.log.Warn("traces not all exported", "err", err)
		}
		c.tracing = nil
	}
}

func (c *cmdEnv) printJSON(v any) error {
	enc := json.NewEncoder(c.io.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printf writes a line for people to stdout; text from users in args is escaped (report.Escape).
func (c *cmdEnv) printf(format string, args ...any) {
	fmt.Fprintf(c.io.Stdout, format, escapeArgs(args)...)
}

// progress goes to stderr so that stdout stays machine-readable; text from users in args is
// escaped (report.Escape).
func (c *cmdEnv) progress(format string, args ...any) {
	fmt.Fprintf(c.io.Stderr, format+"\n", escapeArgs(args)...)
}

// escapeArgs escapes the text among args: strings, errors and Stringers.
func escapeArgs(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			out[i] = report.Escape(v)
		case error:
			out[i] = report.Escape(v.Error())
		case fmt.Stringer:
			out[i] = report.Escape(v.String())
		default:
			out[i] = a
		}
	}
	return out
}

// githubDefaults fills what a GitHub Actions run tells about itself.
func (c *cmdEnv) githubDefaults() {
	g := c.io.Getenv
	if c.s.sha == "" {
		c.s.sha = g("GITHUB_SHA")
	}
	if c.s.ref == "" {
		c.s.ref = g("GITHUB_REF")
	}
	if c.s.actor == "" {
		c.s.actor = g("GITHUB_ACTOR")
	}
	if c.s.source == "" && g("GITHUB_RUN_ID") != "" {
		c.s.source = "github-actions " + g("GITHUB_EVENT_NAME")
	}
	if c.s.intentID == "" && g("GITHUB_RUN_ID") != "" {
		// The run, not the attempt: a re-run is the same intent, and its attempt counts toward max-attempts.
		c.s.intentID = fmt.Sprintf("gha:%s/%s", g("GITHUB_REPOSITORY"), g("GITHUB_RUN_ID"))
	}
	if c.s.attempt == 0 {
		if n, err := strconv.Atoi(g("GITHUB_RUN_ATTEMPT")); err == nil {
			c.s.attempt = n
		}
	}
}

// defaultHolder names this pass as a lease holder: the GitHub job when in Actions, else the host
// and this process, so that two passes on one machine never share a lease by sharing a name. Later
// steps of the pass find the name in the --state file.
func (c *cmdEnv) defaultHolder() string {
	g := c.io.Getenv
	if id := g("GITHUB_RUN_ID"); id != "" {
		return fmt.Sprintf("gha:%s/%s/%s/%s", g("GITHUB_REPOSITORY"), id, g("GITHUB_RUN_ATTEMPT"), g("GITHUB_JOB"))
	}
	return fmt.Sprintf("host:%s#%d", hostname(), os.Getpid())
}

func hostname() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "localhost"
	}
	return host
}

// passState is what the steps of one pass share through --state (the Action keeps it under
// RUNNER_TEMP), so that the generation and tokens need not be threaded by hand.
type passState struct {
	Environment string           `json:"environment"`
	Generation  int64            `json:"generation"`
	Scopes      []string         `json:"scopes"`
	Holder      string           `json:"holder,omitempty"`
	Tokens      map[string]int64 `json:"tokens,omitempty"`
	ExpiresAt   time.Time        `json:"expires_at,omitzero"`
}

func (c *cmdEnv) loadState() (*passState, error) {
	if c.s.state == "" {
		return &passState{}, nil
	}
	b, err := os.ReadFile(c.s.state)
	if errors.Is(err, os.ErrNotExist) {
		return &passState{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state file: %w", err)
	}
	var st passState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, usageErrorf("state file %s is not valid JSON (%v); delete it to start a new pass", c.s.state, err)
	}
	return &st, nil
}

func (c *cmdEnv) saveState(st *passState) error {
	if c.s.state == "" {
		return nil
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := c.s.state + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	if err := os.Rename(tmp, c.s.state); err != nil {
		return fmt.Errorf("write state file: %w", err)
	}
	return nil
}

// fromState fills environment, generation, scopes and holder from the state file where not given.
func (c *cmdEnv) fromState(st *passState) {
	if c.s.environment == "" {
		c.s.environment = st.Environment
	}
	if c.s.generation == 0 && (st.Environment == "" || st.Environment == c.s.environment) {
		c.s.generation = st.Generation
	}
	if c.s.scopes == "" && len(st.Scopes) > 0 {
		c.s.scopes = strings.Join(st.Scopes, ",")
	}
	if c.s.holder == "" {
		c.s.holder = st.Holder
	}
}

func (c *cmdEnv) requireEnvironment() error {
	if c.s.environment == "" {
		return &authority.InputError{Field: "environment", Fix: "name the environment (--environment or LATESTWINS_ENVIRONMENT)"}
	}
	return authority.ValidateEnvironment(c.s.environment)
}

func (c *cmdEnv) requireGeneration() error {
	if c.s.generation <= 0 {
		return &authority.InputError{Field: "generation", Fix: "pass the generation `latestwins claim` printed (--generation or LATESTWINS_GENERATION), or share a --state file between the steps"}
	}
	return nil
}

// parseTokens reads "api=5,web=7".
func parseTokens(s string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, kv := range splitList(s) {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || k == "" {
			return nil, &authority.InputError{Field: "tokens", Value: kv, Fix: "give tokens as SCOPE=N pairs, e.g. api=5,web=7"}
		}
		out[k] = n
	}
	return out, nil
}
