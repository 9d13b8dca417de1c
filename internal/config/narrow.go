package config

import (
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/latestwins/latestwins/internal/authority"
)

// What a repository's own file may set for its scopes, when the trusted file's allowed-overrides
// lists it.
const (
	// OverridePaths narrows the paths whose changes deploy the scope: a change must touch the
	// trusted file's paths (if any) and the repository's.
	OverridePaths = "paths"
	// OverrideWorkflow names the workflow of the repository to dispatch for the scope.
	OverrideWorkflow = "workflow"
)

var overrideKeys = []string{OverridePaths, OverrideWorkflow}

func (p *parser) allowedOverrides(where string, v *yaml.Node) []string {
	if v.Kind != yaml.SequenceNode {
		p.addf(v, "%s: allowed-overrides must be a list, e.g. [paths, workflow]", where)
		return nil
	}
	var out []string
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode || !slices.Contains(overrideKeys, item.Value) {
			p.addf(item, "%s: allowed-overrides may list %s; %q is not one of them", where, strings.Join(overrideKeys, ", "), item.Value)
			continue
		}
		if !slices.Contains(out, item.Value) {
			out = append(out, item.Value)
		}
	}
	return out
}

// NarrowError says what a repository's own configuration file tried to set that the trusted file
// does not let it. It matches authority.ErrInvalidInput: nothing is decided from the file until it
// is fixed.
type NarrowError struct {
	Repo     string // OWNER/NAME whose file it is
	Trusted  string // where the trusted file is, e.g. acme/.github:.github/latestwins.yml
	Problems []Problem
}

func (e *NarrowError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("%s's %s is refused: %s. Environments, their scopes and the repositories and branches that feed them "+
		"are defined in the trusted file %s; a repository's own file may only set what that file's allowed-overrides lists "+
		"(paths, workflow) for the repository's own scopes (see docs/config.md, \"Where environments are defined\")",
		e.Repo, Path, strings.Join(parts, "; "), e.Trusted)
}

// Is matches authority.ErrInvalidInput.
func (e *NarrowError) Is(target error) bool { return target == authority.ErrInvalidInput }

// Narrow applies the repository repo's own file (data, in the .github/latestwins.yml form) to c,
// the trusted configuration named trusted, and returns the result; c is not changed. The file may
// set, for scopes of c built from repo, only what the environment's allowed-overrides lists: paths
// (which narrow the trusted paths: a change must touch both) and workflow. Anything else (a new
// environment or scope, a scope of another repository, repository, branch, policy,
// github-environment) is a *NarrowError naming every line, so that a repository can never add
// itself to an environment or feed another's scopes.
func (c *Config) Narrow(repo string, data []byte, trusted string) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &NarrowError{Repo: repo, Trusted: trusted, Problems: []Problem{{Msg: yamlMessage(err)}}}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return c, nil // an empty file narrows nothing
	}
	out := c.clone()
	p := &parser{}
	root := doc.Content[0]
	if p.mapping(root, "the top level") {
		p.fields(root, func(key, val *yaml.Node) {
			switch key.Value {
			case "version":
				if val.Kind != yaml.ScalarNode || val.Value != "1" {
					p.addf(val, "version must be 1 (or left out)")
				}
			case "environments":
				if p.mapping(val, "environments") {
					p.fields(val, func(k, v *yaml.Node) { p.narrowEnvironment(out, repo, k, v) })
				}
			default:
				p.addf(key, "%q may only be set in the trusted file", key.Value)
			}
		})
	}
	if len(p.problems) > 0 {
		return nil, &NarrowError{Repo: repo, Trusted: trusted, Problems: p.problems}
	}
	return out, nil
}

func (p *parser) narrowEnvironment(c *Config, repo string, key, val *yaml.Node) {
	var env *Environment
	for i := range c.Environments {
		if c.Environments[i].Name == key.Value {
			env = &c.Environments[i]
		}
	}
	if env == nil {
		p.addf(key, "environment %q is not defined in the trusted file; a repository cannot add environments", key.Value)
		return
	}
	if !p.mapping(val, fmt.Sprintf("environment %q", env.Name)) {
		return
	}
	p.fields(val, func(k, v *yaml.Node) {
		if k.Value != "scopes" {
			p.addf(k, "environment %q: %q may only be set in the trusted file", env.Name, k.Value)
			return
		}
		if p.mapping(v, fmt.Sprintf("scopes of %q", env.Name)) {
			p.fields(v, func(sk, sv *yaml.Node) { p.narrowScope(env, repo, sk, sv) })
		}
	})
}

func (p *parser) narrowScope(env *Environment, repo string, key, val *yaml.Node) {
	var s *Scope
	for i := range env.Scopes {
		if env.Scopes[i].Name == key.Value {
			s = &env.Scopes[i]
		}
	}
	where := fmt.Sprintf("scope %q of environment %q", key.Value, env.Name)
	switch {
	case s == nil:
		p.addf(key, "%s is not defined in the trusted file; a repository cannot add scopes", where)
		return
	case !s.FedBy(repo):
		p.addf(key, "%s is built from %s, not %s; a repository may only narrow its own scopes", where, s.Repository, repo)
		return
	case !p.mapping(val, where):
		return
	}
	p.fields(val, func(k, v *yaml.Node) {
		if !slices.Contains(overrideKeys, k.Value) {
			p.addf(k, "%s: %q may only be set in the trusted file", where, k.Value)
			return
		}
		if !slices.Contains(env.AllowedOverrides, k.Value) {
			p.addf(k, "%s: the trusted file does not allow overriding %s in %q (allowed-overrides: [%s])",
				where, k.Value, env.Name, strings.Join(env.AllowedOverrides, ", "))
			return
		}
		switch k.Value {
		case OverridePaths:
			if paths := p.paths(where, v); len(paths) > 0 {
				s.NarrowPaths = paths
			}
		case OverrideWorkflow:
			if w, ok := p.scalar(k, v); ok {
				if !workflowRE.MatchString(w) {
					p.addf(v, "%s: workflow %q must be a file name in .github/workflows ending in .yml or .yaml (e.g. deploy.yml)", where, w)
					return
				}
				s.Workflow = w
				s.WorkflowFrom = repo
			}
		}
	})
}

// clone copies c deeply enough for Narrow to change scopes.
func (c *Config) clone() *Config {
	out := &Config{Environments: slices.Clone(c.Environments)}
	for i := range out.Environments {
		out.Environments[i].Scopes = slices.Clone(out.Environments[i].Scopes)
	}
	return out
}

// Overridable reports whether repo's own file could set anything: some environment allows
// overrides and has a scope built from repo. When it cannot, the file need not be read at all.
func (c *Config) Overridable(repo string) bool {
	for _, e := range c.Environments {
		if len(e.AllowedOverrides) == 0 {
			continue
		}
		if e.FedBy(repo) {
			return true
		}
	}
	return false
}
