// Package config reads .github/latestwins.yml: the environments a repository deploys to, their
// scopes, the repository, branch and paths each scope is built from, and the workflow to dispatch.
// It is pure: bytes in, a validated Config or an error naming every line to fix.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/latestwins/latestwins/internal/authority"
)

// Path is where a repository keeps its configuration.
const Path = ".github/latestwins.yml"

// NumberPlaceholder in an environment name makes it a preview template: one environment per pull
// request, the placeholder replaced by the pull request's number (preview/pr-{number}).
const NumberPlaceholder = "{number}"

// Policy says how an environment orders its deploys.
type Policy string

// Policies.
const (
	// PolicyLatest deploys the newest accepted commit and supersedes older pending ones (the default).
	PolicyLatest Policy = "latest"
	// PolicyQueue deploys every accepted intent in generation order, superseding nothing.
	PolicyQueue Policy = "queue"
)

// Config is a validated .github/latestwins.yml.
type Config struct {
	Environments []Environment // in file order
}

// Environment is a deploy target and its scopes.
type Environment struct {
	// Name is the environment's name, or a preview template holding NumberPlaceholder once.
	Name   string
	Policy Policy
	Scopes []Scope // in file order
	// GitHubEnvironment is the GitHub environment whose deployment protection rule this environment
	// answers (github-environment:); empty means the environment's own name. A preview template's
	// holds NumberPlaceholder too.
	GitHubEnvironment string
	// AllowedOverrides lists what a repository's own file may set for its scopes of this environment
	// (OverridePaths, OverrideWorkflow): the environment's allowed-overrides, or else the top level's.
	// Empty: nothing.
	AllowedOverrides []string
	// Requires names the environments a commit must be live in (deployed with success, in the same
	// scope) before it deploys here: promotion (requires:). Each is defined in the same file.
	Requires []string
	// RequiresAncestor: a descendant of the commit live there counts too, as GitHub's compare API
	// tells (requires-ancestor:).
	RequiresAncestor bool
	// AlertAfter is how long a scope may wait for its newest accepted commit before it counts as
	// behind or stuck (alert-after:, authority.Judge); zero: no alarm.
	AlertAfter time.Duration
	// AlertWebhook is the URL the alert notifier posts each change of the environment's alarm to
	// (alert-webhook:); empty: none.
	AlertWebhook string
	// AlertIssue is the repository (OWNER/NAME) where the alert notifier keeps one issue open while
	// the environment is late (alert-issue:); empty: none.
	AlertIssue string
	// Gates hold commits at the deploy gate for soak time (soak:), approvals (approvals:,
	// approvers:) and change windows (windows:); see gates.go.
	Gates authority.Gates
	// BreakGlass is the repository permission a commenter needs to waive the gates of a commit
	// (/latestwins break-glass, break-glass:): admin (the default), maintain or write.
	BreakGlass string
	Line       int
}

// AlertThreshold is the environment's alert-after as intents carry it (authority.Intent.AlertAfter):
// zero when the file sets none, so that an alert-after removed from the file is removed from the
// environment too.
func (e *Environment) AlertThreshold() *time.Duration {
	d := e.AlertAfter
	return &d
}

// Requirements is the environment's promotion requirement as intents carry it: an empty one
// (requires nothing) when the file names none, so that a requirement removed from the file is
// removed from the environment too.
func (e *Environment) Requirements() *authority.Requirements {
	return &authority.Requirements{Environments: slices.Clone(e.Requires), Ancestor: e.RequiresAncestor && len(e.Requires) > 0}
}

// GitHubName is the GitHub environment this environment answers deployment protection rules for.
func (e *Environment) GitHubName() string {
	if e.GitHubEnvironment != "" {
		return e.GitHubEnvironment
	}
	return e.Name
}

// ScopesFedBy names the environment's scopes built from repository repo (OWNER/NAME, in any case),
// in their order: the one rule of who feeds what, asked by every door.
func (e *Environment) ScopesFedBy(repo string) []string {
	var out []string
	for _, s := range e.Scopes {
		if s.FedBy(repo) {
			out = append(out, s.Name)
		}
	}
	return out
}

// FedBy reports whether any scope of the environment is built from repository repo.
func (e *Environment) FedBy(repo string) bool { return len(e.ScopesFedBy(repo)) > 0 }

// FedBy reports whether the scope is built from repository repo (OWNER/NAME, in any case).
func (s Scope) FedBy(repo string) bool { return strings.EqualFold(s.Repository, repo) }

// Preview reports whether the environment is a template for pull request previews.
func (e *Environment) Preview() bool { return strings.Contains(e.Name, NumberPlaceholder) }

// For returns the name of the preview environment of pull request number.
func (e *Environment) For(number int) string {
	return strings.ReplaceAll(e.Name, NumberPlaceholder, strconv.Itoa(number))
}

// Scope is a separately deployed part of an environment and where it is built from.
type Scope struct {
	Name string
	// Repository is owner/name; matched without regard to case, as GitHub does.
	Repository string
	// Branch is the branch pushes deploy from; for a preview, the base branch of the pull requests.
	Branch string
	// Paths are glob patterns (`**` spans directories); a change must touch one of them. Empty: any change.
	Paths []string
	// BarrierPaths are glob patterns, as Paths: a commit that touches one of them is a barrier in
	// this scope (under policy latest, nothing newer supersedes it; see IsBarrier).
	BarrierPaths []string
	// Workflow is the workflow file (in the repository's .github/workflows) to dispatch; empty:
	// none, the workflow runs on its own trigger and claims through the Action.
	Workflow string
	// NarrowPaths are the patterns the repository's own file gave (see Narrow): a change must also
	// touch one of them. Empty: no narrowing.
	NarrowPaths []string
	// WorkflowFrom names the file the workflow was taken from when the repository's own file set
	// it; empty when it comes from the trusted file.
	WorkflowFrom string
	Line         int
}

// Selection is what one event asks of one environment: the scopes it touches.
type Selection struct {
	Environment string
	Policy      Policy
	Scopes      []Scope
	// Requires is the environment's promotion requirement (Environment.Requirements).
	Requires *authority.Requirements
	// AlertAfter is the environment's alert-after (Environment.AlertThreshold).
	AlertAfter *time.Duration
	// Gates are the environment's gates (Environment.GatesOf).
	Gates *authority.Gates
}

// ScopeNames lists the selected scopes' names.
func (s Selection) ScopeNames() []string {
	out := make([]string, len(s.Scopes))
	for i, sc := range s.Scopes {
		out[i] = sc.Name
	}
	return out
}

// IsBarrier reports whether a commit with changedPaths is a barrier in the scope: the scope has
// barrier-paths and the commit touches one of them. nil or empty changedPaths means the changes are
// unknown (more files than GitHub lists, a forced push): the commit is then a barrier, which is the
// safe side, since it may hold the change that must not be skipped.
func (s Scope) IsBarrier(changedPaths []string) bool {
	return len(s.BarrierPaths) > 0 && touches(s.BarrierPaths, changedPaths)
}

// Barriers lists the selected scopes in which a commit with changedPaths is a barrier (IsBarrier):
// what goes in authority.Intent.Barrier.
func (s Selection) Barriers(changedPaths []string) []string {
	var out []string
	for _, sc := range s.Scopes {
		if sc.IsBarrier(changedPaths) {
			out = append(out, sc.Name)
		}
	}
	return out
}

// ScopesFor selects, per environment other than previews, the scopes built from branch of repo
// that changedPaths touch. nil or empty changedPaths means the changes are unknown: every scope of
// the repository and branch is selected.
func (c *Config) ScopesFor(repo, branch string, changedPaths []string) []Selection {
	return c.selectScopes(false, repo, branch, changedPaths, 0)
}

// PreviewsFor selects, per preview template, the scopes built from repo whose branch is the pull
// request's base branch, in the environment of pull request number.
func (c *Config) PreviewsFor(repo, baseBranch string, number int, changedPaths []string) []Selection {
	return c.selectScopes(true, repo, baseBranch, changedPaths, number)
}

func (c *Config) selectScopes(preview bool, repo, branch string, changed []string, number int) []Selection {
	var out []Selection
	for i := range c.Environments {
		e := &c.Environments[i]
		if e.Preview() != preview {
			continue
		}
		sel := Selection{Environment: e.Name, Policy: e.Policy, Requires: e.Requirements(), AlertAfter: e.AlertThreshold(), Gates: e.GatesOf()}
		if preview {
			sel.Environment = e.For(number)
		}
		for _, s := range e.Scopes {
			if s.FedBy(repo) && s.Branch == branch && touches(s.Paths, changed) && touches(s.NarrowPaths, changed) {
				sel.Scopes = append(sel.Scopes, s)
			}
		}
		if len(sel.Scopes) > 0 {
			out = append(out, sel)
		}
	}
	return out
}

// Environment returns the environment named name, or the preview template it is an instance of.
func (c *Config) Environment(name string) (*Environment, bool) {
	for i := range c.Environments {
		e := &c.Environments[i]
		if e.Name == name || (e.Preview() && matchesTemplate(e.Name, name)) {
			return e, true
		}
	}
	return nil, false
}

// ForGitHubEnvironment finds the environment that answers deployment protection rules of the GitHub
// environment name: the one whose github-environment, or else whose name, is name, compared without
// regard to case as GitHub compares environment names. A preview template matches its instances
// (preview/pr-803); envName is then the instance's name.
func (c *Config) ForGitHubEnvironment(name string) (envName string, env *Environment, ok bool) {
	for i := range c.Environments {
		e := &c.Environments[i]
		if !e.Preview() && strings.EqualFold(e.GitHubName(), name) {
			return e.Name, e, true
		}
	}
	for i := range c.Environments {
		e := &c.Environments[i]
		if !e.Preview() {
			continue
		}
		if n, ok := templateNumber(strings.ToLower(e.GitHubName()), strings.ToLower(name)); ok {
			return e.For(n), e, true
		}
	}
	return "", nil, false
}

func matchesTemplate(tmpl, name string) bool {
	_, ok := templateNumber(tmpl, name)
	return ok
}

// templateNumber is the pull request number of name, an instance of the preview template tmpl.
func templateNumber(tmpl, name string) (int, bool) {
	prefix, suffix, _ := strings.Cut(tmpl, NumberPlaceholder)
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, suffix) || len(name) <= len(prefix)+len(suffix) {
		return 0, false
	}
	digits := name[len(prefix) : len(name)-len(suffix)]
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 || strconv.Itoa(n) != digits {
		return 0, false
	}
	return n, true
}

func touches(patterns, changed []string) bool {
	if len(patterns) == 0 || len(changed) == 0 {
		return true
	}
	for _, f := range changed {
		for _, p := range patterns {
			if matchPath(p, f) {
				return true
			}
		}
	}
	return false
}

// matchPath matches a slash-separated file path against a pattern whose segments are path.Match
// patterns, or `**` for any number of segments (none included).
func matchPath(pattern, name string) bool {
	return matchSegments(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := range name {
				if matchSegments(pat, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// --- parsing ---------------------------------------------------------------------------------------

// Problem is one thing wrong in the file, at a line, with what to fix.
type Problem struct {
	Line   int
	Column int
	Msg    string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.Msg
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.Msg)
}

// Error lists every problem found in a configuration file. It matches authority.ErrInvalidInput: a
// bad configuration is terminal, and the message says what to fix.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("%s is invalid: %s", Path, strings.Join(parts, "; "))
}

// Is matches authority.ErrInvalidInput.
func (e *Error) Is(target error) bool { return target == authority.ErrInvalidInput }

var (
	repoRE     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$`)
	workflowRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}\.ya?ml$`)
	branchRE   = regexp.MustCompile(`^[^\s~^:?*\[\\]{1,200}$`)
)

const maxPaths = 64

type parser struct {
	problems []Problem
}

func (p *parser) addf(n *yaml.Node, format string, args ...any) {
	pr := Problem{Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		pr.Line, pr.Column = n.Line, n.Column
	}
	p.problems = append(p.problems, pr)
}

// Parse reads and validates a configuration file. The error is an *Error listing every problem.
func Parse(data []byte) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Error{Problems: []Problem{{Msg: yamlMessage(err)}}}
	}
	p := &parser{}
	cfg := &Config{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		p.addf(nil, "the file is empty; define at least one environment under `environments:` (see docs/config.md)")
		return nil, &Error{Problems: p.problems}
	}
	root := doc.Content[0]
	if !p.mapping(root, "the top level") {
		return nil, &Error{Problems: p.problems}
	}
	var envs *yaml.Node
	var overrides []string
	p.fields(root, func(key, val *yaml.Node) {
		switch key.Value {
		case "version":
			if val.Kind != yaml.ScalarNode || val.Value != "1" {
				p.addf(val, "version must be 1 (or left out)")
			}
		case "environments":
			envs = val
		case "allowed-overrides":
			overrides = p.allowedOverrides("the top level", val)
		default:
			p.addf(key, "unknown key %q at the top level; allowed: version, environments, allowed-overrides", key.Value)
		}
	})
	if envs == nil {
		p.addf(root, "no `environments:`; define at least one environment (see docs/config.md)")
	} else if p.mapping(envs, "environments") {
		if len(envs.Content) == 0 {
			p.addf(envs, "environments is empty; define at least one environment")
		}
		seen := map[string]int{}
		p.fields(envs, func(key, val *yaml.Node) {
			if prev, dup := seen[key.Value]; dup {
				p.addf(key, "environment %q is defined twice (first at line %d); merge them", key.Value, prev)
				return
			}
			seen[key.Value] = key.Line
			if e, ok := p.environment(key, val); ok {
				if e.AllowedOverrides == nil {
					e.AllowedOverrides = overrides
				}
				cfg.Environments = append(cfg.Environments, e)
			}
		})
		p.checkGitHubNames(cfg.Environments)
		p.checkRequires(cfg.Environments)
	}
	if len(p.problems) > 0 {
		return nil, &Error{Problems: p.problems}
	}
	return cfg, nil
}

func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msg = strings.Join(te.Errors, "; ")
	}
	return "not valid YAML: " + msg
}

func (p *parser) mapping(n *yaml.Node, what string) bool {
	switch n.Kind {
	case yaml.MappingNode:
		return true
	case yaml.AliasNode:
		p.addf(n, "%s: anchors and aliases are not supported; write the values out", what)
	default:
		p.addf(n, "%s must be a mapping of keys to values", what)
	}
	return false
}

// fields calls fn for each key of a mapping whose key is a plain string, reporting the others.
func (p *parser) fields(n *yaml.Node, fn func(key, val *yaml.Node)) {
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		if key.Kind != yaml.ScalarNode || key.Tag == "!!merge" {
			p.addf(key, "keys must be plain names (merge keys and complex keys are not supported)")
			continue
		}
		if val.Kind == yaml.AliasNode {
			p.addf(val, "%q: anchors and aliases are not supported; write the value out", key.Value)
			continue
		}
		fn(key, val)
	}
}

func (p *parser) scalar(key, val *yaml.Node) (string, bool) {
	if val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
		p.addf(val, "%s must be a single value", key.Value)
		return "", false
	}
	return val.Value, true
}

func (p *parser) environment(key, val *yaml.Node) (Environment, bool) {
	e := Environment{Name: key.Value, Policy: PolicyLatest, Line: key.Line}
	before := len(p.problems)
	p.checkEnvName(key)
	if !p.mapping(val, fmt.Sprintf("environment %q", e.Name)) {
		return e, false
	}
	var scopes *yaml.Node
	p.fields(val, func(k, v *yaml.Node) {
		switch k.Value {
		case "policy":
			if s, ok := p.scalar(k, v); ok {
				switch Policy(s) {
				case PolicyLatest, PolicyQueue:
					e.Policy = Policy(s)
				default:
					p.addf(v, "environment %q: policy %q is not known; use latest (the default: the newest commit wins) or queue (every commit, in order)", e.Name, s)
				}
			}
		case "scopes":
			scopes = v
		case "github-environment":
			if g, ok := p.scalar(k, v); ok {
				p.checkGitHubName(v, e.Name, g)
				e.GitHubEnvironment = g
			}
		case "allowed-overrides":
			e.AllowedOverrides = p.allowedOverrides(fmt.Sprintf("environment %q", e.Name), v)
			if e.AllowedOverrides == nil {
				e.AllowedOverrides = []string{} // an explicit empty list: nothing, whatever the top level says
			}
		case "requires":
			e.Requires = p.requires(e.Name, v)
		case "alert-after":
			e.AlertAfter = p.alertAfter(e.Name, k, v)
		case "alert-webhook":
			if u, ok := p.scalar(k, v); ok {
				if err := CheckWebhookURL(u); err != nil {
					p.addf(v, "environment %q: alert-webhook %v", e.Name, err)
				}
				e.AlertWebhook = u
			}
		case "alert-issue":
			if r, ok := p.scalar(k, v); ok {
				if !repoRE.MatchString(r) {
					p.addf(v, "environment %q: alert-issue %q must be the repository to open the issue in, OWNER/NAME (e.g. acme/.github)", e.Name, r)
				}
				e.AlertIssue = r
			}
		case "soak":
			e.Gates.Soak = p.soak(e.Name, k, v)
		case "approvals", "approvers", "pusher-may-approve":
			p.approvals(&e, k, v)
		case "windows":
			e.Gates.Windows = p.windows(e.Name, k, v)
		case "break-glass":
			e.BreakGlass = p.breakGlass(e.Name, k, v)
		case "requires-ancestor":
			switch {
			case v.Kind == yaml.ScalarNode && v.Tag == "!!bool":
				e.RequiresAncestor = v.Value == "true"
			default:
				p.addf(v, "environment %q: requires-ancestor must be true or false", e.Name)
			}
		default:
			p.addf(k, "unknown key %q in environment %q; allowed: policy, scopes, github-environment, allowed-overrides, requires, requires-ancestor, soak, approvals, approvers, pusher-may-approve, windows, break-glass, alert-after, alert-webhook, alert-issue", k.Value, e.Name)
		}
	})
	p.checkApprovals(&e, key)
	p.checkSoak(&e, val)
	if e.AlertAfter == 0 && (e.AlertWebhook != "" || e.AlertIssue != "") {
		p.addf(key, "environment %q: alert-webhook and alert-issue need alert-after (e.g. alert-after: 30m): without it nothing is ever late, so nothing would be sent", e.Name)
	}
	if scopes == nil {
		p.addf(key, "environment %q has no `scopes:`; give it at least one scope", e.Name)
	} else if p.mapping(scopes, fmt.Sprintf("scopes of %q", e.Name)) {
		if len(scopes.Content) == 0 {
			p.addf(scopes, "environment %q: scopes is empty; give it at least one scope", e.Name)
		}
		if len(scopes.Content)/2 > authority.MaxScopesSplit {
			p.addf(scopes, "environment %q has %d scopes; at most %d are allowed, split it into several environments", e.Name, len(scopes.Content)/2, authority.MaxScopesSplit)
		}
		seen := map[string]int{}
		p.fields(scopes, func(k, v *yaml.Node) {
			if prev, dup := seen[k.Value]; dup {
				p.addf(k, "scope %q of environment %q is defined twice (first at line %d); give each scope one entry", k.Value, e.Name, prev)
				return
			}
			seen[k.Value] = k.Line
			if s, ok := p.scope(e.Name, k, v); ok {
				e.Scopes = append(e.Scopes, s)
			}
		})
	}
	return e, len(p.problems) == before
}

// minAlertAfter is the shortest alert-after: a deploy takes minutes, and the sweep that notifies
// runs once a minute.
const minAlertAfter = time.Minute

// alertAfter reads an environment's alert-after: a Go duration (30m, 1h30m) from a minute to
// authority.MaxAlertAfter.
func (p *parser) alertAfter(env string, k, v *yaml.Node) time.Duration {
	s, ok := p.scalar(k, v)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		p.addf(v, "environment %q: alert-after %q is not a duration; write it as Go does, e.g. 30m or 1h30m", env, s)
	case d < minAlertAfter || d > authority.MaxAlertAfter:
		p.addf(v, "environment %q: alert-after %s is out of range; give from %s to %s", env, s, minAlertAfter, authority.MaxAlertAfter)
	default:
		return d
	}
	return 0
}

// CheckWebhookURL checks an outgoing webhook's address: https, or http to a loopback host (a
// receiver on the same machine); no credentials in it, since the URL shows in logs.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%q must be an https URL, e.g. https://hooks.example.com/latestwins", raw)
	}
	if u.User != nil {
		return fmt.Errorf("%q holds credentials; the URL shows in logs: let the receiver check the signature instead (LATESTWINS_ALERT_SECRET)", u.Redacted())
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if h := u.Hostname(); h == "localhost" || net.ParseIP(h).IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%q must be an https URL (http only to a loopback host)", raw)
}

// requires reads an environment's list of required environments; checkRequires checks them
// against the file once every environment is read.
func (p *parser) requires(env string, v *yaml.Node) []string {
	if v.Kind != yaml.SequenceNode {
		p.addf(v, "environment %q: requires must be a list of environments of this file, e.g. [staging]", env)
		return nil
	}
	var out []string
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode || item.Value == "" {
			p.addf(item, "environment %q: each entry of requires must be an environment's name", env)
			continue
		}
		if !slices.Contains(out, item.Value) {
			out = append(out, item.Value)
		}
	}
	return out
}

// checkRequires refuses requirements that name an environment the file does not define, a
// preview template, the environment itself, or that go round in a cycle (which nothing could
// ever pass); and requires-ancestor without requires.
func (p *parser) checkRequires(envs []Environment) {
	byName := map[string]*Environment{}
	for i := range envs {
		byName[envs[i].Name] = &envs[i]
	}
	for i := range envs {
		e := &envs[i]
		if e.RequiresAncestor && len(e.Requires) == 0 {
			p.problems = append(p.problems, Problem{Line: e.Line, Msg: fmt.Sprintf("environment %q: requires-ancestor without requires; name the environments it requires (requires: [staging])", e.Name)})
		}
		if len(e.Requires) > maxRequires {
			p.problems = append(p.problems, Problem{Line: e.Line, Msg: fmt.Sprintf("environment %q requires %d environments; at most %d are allowed", e.Name, len(e.Requires), maxRequires)})
		}
		for _, r := range e.Requires {
			switch req, ok := byName[r]; {
			case r == e.Name:
				p.problems = append(p.problems, Problem{Line: e.Line, Msg: fmt.Sprintf("environment %q requires itself; name the environments a commit must be live in first", e.Name)})
			case !ok:
				p.problems = append(p.problems, Problem{Line: e.Line, Msg: fmt.Sprintf("environment %q requires %q, which this file does not define; requires names environments of the same file", e.Name, r)})
			case req.Preview() || e.Preview():
				p.problems = append(p.problems, Problem{Line: e.Line, Msg: fmt.Sprintf("environment %q requires %q: pull request previews neither require nor are required", e.Name, r)})
			}
		}
	}
	// A cycle: following requires from an environment comes back to it.
	reported := map[string]bool{}
	for i := range envs {
		e := &envs[i]
		if path := requireCycle(byName, e.Name, e.Name, nil, map[string]bool{}); path != nil && !reported[e.Name] {
			for _, n := range path {
				reported[n] = true
			}
			p.problems = append(p.problems, Problem{Line: e.Line, Msg: fmt.Sprintf("environments require each other in a cycle (%s), so no commit could ever deploy in them; break it",
				strings.Join(append([]string{e.Name}, path...), " requires "))})
		}
	}
}

// maxRequires is how many environments one may require (each costs its deploy gate one read).
const maxRequires = 8

// requireCycle returns the path of requirements from name back to start, or nil.
func requireCycle(byName map[string]*Environment, start, name string, path []string, seen map[string]bool) []string {
	if seen[name] {
		return nil
	}
	seen[name] = true
	e := byName[name]
	if e == nil {
		return nil
	}
	for _, r := range e.Requires {
		if r == start && r != name {
			return append(path, r)
		}
		if found := requireCycle(byName, start, r, append(path, r), seen); found != nil {
			return found
		}
	}
	return nil
}

// maxGitHubEnvironment is GitHub's limit on an environment name.
const maxGitHubEnvironment = 255

func (p *parser) checkGitHubName(v *yaml.Node, env, g string) {
	placeholders := strings.Count(g, NumberPlaceholder)
	preview := strings.Contains(env, NumberPlaceholder)
	switch {
	case strings.TrimSpace(g) == "" || len(g) > maxGitHubEnvironment || strings.ContainsFunc(g, unicode.IsControl):
		p.addf(v, "environment %q: github-environment %q must be a GitHub environment name of 1-%d characters", env, g, maxGitHubEnvironment)
	case preview && placeholders != 1:
		p.addf(v, "environment %q: github-environment %q must hold %s once, like the environment's name (e.g. preview-%s), so that each pull request has its own", env, g, NumberPlaceholder, NumberPlaceholder)
	case !preview && placeholders > 0:
		p.addf(v, "environment %q: github-environment %q may hold %s only in a preview environment (one whose name holds it)", env, g, NumberPlaceholder)
	}
}

// checkGitHubNames refuses two environments that answer the same GitHub environment.
func (p *parser) checkGitHubNames(envs []Environment) {
	first := map[string]*Environment{}
	for i := range envs {
		e := &envs[i]
		key := strings.ToLower(e.GitHubName())
		if prev, dup := first[key]; dup {
			p.problems = append(p.problems, Problem{Line: e.Line, Msg: fmt.Sprintf(
				"environments %q (line %d) and %q both answer the GitHub environment %q (names are compared without regard to case); set a different github-environment on one of them",
				prev.Name, prev.Line, e.Name, e.GitHubName())})
			continue
		}
		first[key] = e
	}
}

func (p *parser) checkEnvName(key *yaml.Node) {
	name := key.Value
	switch n := strings.Count(name, NumberPlaceholder); {
	case n > 1:
		p.addf(key, "environment %q: use %s at most once", name, NumberPlaceholder)
		return
	case n == 1:
		name = strings.ReplaceAll(name, NumberPlaceholder, "1")
	case strings.ContainsAny(name, "{}"):
		p.addf(key, "environment %q: the only placeholder is %s (for pull request previews, e.g. preview/pr-%s)", name, NumberPlaceholder, NumberPlaceholder)
		return
	}
	var ie *authority.InputError
	if err := authority.ValidateEnvironment(name); errors.As(err, &ie) {
		p.addf(key, "environment name %q is invalid: %s", key.Value, ie.Fix)
	}
}

func (p *parser) scope(env string, key, val *yaml.Node) (Scope, bool) {
	s := Scope{Name: key.Value, Line: key.Line}
	before := len(p.problems)
	var ie *authority.InputError
	if err := authority.ValidateScope(s.Name); errors.As(err, &ie) {
		p.addf(key, "scope name %q in environment %q is invalid: %s", s.Name, env, ie.Fix)
	}
	if !p.mapping(val, fmt.Sprintf("scope %q of %q", s.Name, env)) {
		return s, false
	}
	where := fmt.Sprintf("scope %q of environment %q", s.Name, env)
	p.fields(val, func(k, v *yaml.Node) {
		switch k.Value {
		case "repository":
			if r, ok := p.scalar(k, v); ok {
				if !repoRE.MatchString(r) {
					p.addf(v, "%s: repository %q must be OWNER/NAME, e.g. acme/api", where, r)
				}
				s.Repository = r
			}
		case "branch":
			if b, ok := p.scalar(k, v); ok {
				switch {
				case strings.HasPrefix(b, "refs/"):
					p.addf(v, "%s: write the branch name without refs/heads/ (e.g. main)", where)
				case !branchRE.MatchString(b) || strings.Contains(b, "..") || strings.HasSuffix(b, "/") || strings.HasPrefix(b, "/"):
					p.addf(v, "%s: branch %q is not a valid branch name", where, b)
				}
				s.Branch = b
			}
		case "paths":
			s.Paths = p.paths(where, v)
		case "barrier-paths":
			s.BarrierPaths = p.paths(where, v)
		case "workflow":
			if w, ok := p.scalar(k, v); ok {
				if !workflowRE.MatchString(w) {
					p.addf(v, "%s: workflow %q must be a file name in .github/workflows ending in .yml or .yaml (e.g. deploy.yml)", where, w)
				}
				s.Workflow = w
			}
		default:
			p.addf(k, "unknown key %q in %s; allowed: repository, branch, paths, barrier-paths, workflow", k.Value, where)
		}
	})
	if s.Repository == "" {
		p.addf(key, "%s has no repository; say which repository it is built from (repository: OWNER/NAME)", where)
	}
	if s.Branch == "" {
		p.addf(key, "%s has no branch; say which branch deploys it (branch: main)", where)
	}
	return s, len(p.problems) == before
}

func (p *parser) paths(where string, v *yaml.Node) []string {
	if v.Kind != yaml.SequenceNode {
		p.addf(v, "%s: paths must be a list of glob patterns, e.g. [services/api/**]", where)
		return nil
	}
	if len(v.Content) > maxPaths {
		p.addf(v, "%s: at most %d path patterns are allowed", where, maxPaths)
	}
	var out []string
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode || item.Value == "" {
			p.addf(item, "%s: each path must be a non-empty glob pattern", where)
			continue
		}
		pat := item.Value
		if strings.HasPrefix(pat, "/") || strings.HasPrefix(pat, "./") {
			p.addf(item, "%s: path %q must be relative to the repository root, without a leading / or ./", where, pat)
			continue
		}
		bad := false
		for _, seg := range strings.Split(pat, "/") {
			if seg == "" {
				bad = true
			} else if _, err := path.Match(seg, ""); err != nil {
				bad = true
			}
		}
		if bad {
			p.addf(item, "%s: path %q is not a valid glob pattern (segments separated by single slashes; * ? [a-z] and ** are allowed)", where, pat)
			continue
		}
		if !slices.Contains(out, pat) {
			out = append(out, pat)
		}
	}
	return out
}
