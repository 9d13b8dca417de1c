package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
)

// cmdEnv is what every command gets: the process IO, a logger and, once opened, the store.
type cmdEnv struct {
	io  IO
	log *slog.Logger
	s   settings
	fs  *flag.FlagSet
	// interspersed lets flags follow positional arguments (not for run, whose arguments are a command).
	interspersed bool
	positional   []string
	auth         *authority.Authority
	close        func() error
	// pass runs a pass's steps and view reads state: on the store (auth), or through the App's API
	// (--api). Set by connect.
	pass pass.Authority
	view stateReader
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
	attempt     int
	maxAttempts int
	redeploy    bool
	lease       bool
	jsonOut     bool
	state       string
	outcome     string
	message     string
	run         string
	tokens      string
	reason      string
	limit       int
}

func (c *cmdEnv) env(flagName string) string {
	return c.io.Getenv("LATESTWINS_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_")))
}

func (c *cmdEnv) newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("latestwins "+name, flag.ContinueOnError)
	fs.SetOutput(c.io.Stderr)
	c.fs = fs
	c.str(&c.s.store, "store", "bolt://./latestwins.db", "store URL: bolt://PATH, memory://, dynamodb://TABLE?region=R&endpoint=URL")
	c.boolean(&c.s.jsonOut, "json", false, "print machine-readable JSON")
	return fs
}

func (c *cmdEnv) str(p *string, name, def, usage string) {
	if v := c.env(name); v != "" {
		def = v
	}
	c.fs.StringVar(p, name, def, usage+" ($LATESTWINS_"+strings.ToUpper(strings.ReplaceAll(name, "-", "_"))+")")
}

func (c *cmdEnv) boolean(p *bool, name string, def bool, usage string) {
	if v, err := strconv.ParseBool(c.env(name)); err == nil {
		def = v
	}
	c.fs.BoolVar(p, name, def, usage)
}

// numeric flags take their variable's value at parse time, so a malformed variable is an error
// that names it rather than a silent default.
type envDefault struct {
	name string
	raw  string
}

func (c *cmdEnv) int64Var(p *int64, name string, def int64, usage string) *envDefault {
	c.fs.Int64Var(p, name, def, usage)
	return &envDefault{name: name, raw: c.env(name)}
}

func (c *cmdEnv) intVar(p *int, name string, def int, usage string) *envDefault {
	c.fs.IntVar(p, name, def, usage)
	return &envDefault{name: name, raw: c.env(name)}
}

func (c *cmdEnv) durVar(p *time.Duration, name string, def time.Duration, usage string) *envDefault {
	c.fs.DurationVar(p, name, def, usage)
	return &envDefault{name: name, raw: c.env(name)}
}

// parse parses args; variables fill numeric flags that were not given on the command line.
func (c *cmdEnv) parse(args []string, defaults ...*envDefault) error {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageErrorf("%v", err)
	}
	if c.interspersed {
		// Flags may follow positional arguments: status staging --json.
		var positional []string
		for c.fs.NArg() > 0 {
			rest := c.fs.Args()
			positional = append(positional, rest[0])
			if err := c.fs.Parse(rest[1:]); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return err
				}
				return usageErrorf("%v", err)
			}
		}
		c.positional = positional
	} else {
		c.positional = c.fs.Args()
	}
	given := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, d := range defaults {
		if d == nil || d.raw == "" || given[d.name] {
			continue
		}
		if err := c.fs.Set(d.name, d.raw); err != nil {
			return usageErrorf("LATESTWINS_%s=%q: %v", strings.ToUpper(strings.ReplaceAll(d.name, "-", "_")), d.raw, err)
		}
	}
	return nil
}

func (c *cmdEnv) open(ctx context.Context) error {
	st, closeFn, err := OpenStore(ctx, c.s.store)
	if err != nil {
		return err
	}
	opts := []authority.Option{authority.WithLogger(c.log)}
	if c.s.skew > 0 {
		opts = append(opts, authority.WithSkew(c.s.skew))
	}
	c.auth, c.close = authority.New(st, opts...), closeFn
	return nil
}

func (c *cmdEnv) done() {
	if c.close != nil {
		if err := c.close(); err != nil {
			c.log.Warn("closing the store", "err", err)
		}
	}
}

func (c *cmdEnv) printJSON(v any) error {
	enc := json.NewEncoder(c.io.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *cmdEnv) printf(format string, args ...any) { fmt.Fprintf(c.io.Stdout, format, args...) }

// progress goes to stderr so that stdout stays machine-readable.
func (c *cmdEnv) progress(format string, args ...any) {
	fmt.Fprintf(c.io.Stderr, format+"\n", args...)
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
