package config

import (
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/latestwins/latestwins/internal/authority"
)

// soak reads an environment's soak: (see docs/config.md): one duration for every environment it
// requires (soak: 30m), or one per required environment (soak: {staging: 30m, qa: 1h}). Each is a
// Go duration, positive and at most authority.MaxSoak. Whether it names environments the
// environment requires is checkSoak's, once every key of the environment is read.
func (p *parser) soak(env string, k, v *yaml.Node) *authority.Soak {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			break
		}
		if d, ok := p.soakDuration(env, "soak", v); ok {
			return &authority.Soak{For: d}
		}
		return nil
	case yaml.MappingNode:
		s := &authority.Soak{Environments: map[string]time.Duration{}}
		p.fields(v, func(name, val *yaml.Node) {
			if _, dup := s.Environments[name.Value]; dup {
				p.addf(name, "environment %q: soak names %q twice; give each required environment one soak", env, name.Value)
				return
			}
			if val.Kind != yaml.ScalarNode || val.Tag == "!!null" {
				p.addf(val, "environment %q: the soak in %q must be a duration, e.g. %s: 30m", env, name.Value, name.Value)
				return
			}
			if d, ok := p.soakDuration(env, "soak in "+name.Value, val); ok {
				s.Environments[name.Value] = d
			}
		})
		if len(v.Content) == 0 {
			p.addf(v, "environment %q: soak is empty; give a duration (soak: 30m) or one per required environment (soak: {staging: 30m})", env)
		}
		if len(s.Environments) == 0 {
			return nil
		}
		return s
	}
	p.addf(v, "environment %q: soak must be a duration (soak: 30m) or one per required environment (soak: {staging: 30m, qa: 1h})", env)
	return nil
}

// soakDuration reads one soak: a Go duration, positive, at most authority.MaxSoak (a week: longer
// is a mistaken unit more often than a wish, and a commit that must wait that long is promoted by
// hand).
func (p *parser) soakDuration(env, what string, v *yaml.Node) (time.Duration, bool) {
	d, err := time.ParseDuration(v.Value)
	switch {
	case err != nil:
		p.addf(v, "environment %q: %s %q is not a duration; write it as Go does, e.g. 30m or 1h30m", env, what, v.Value)
	case d <= 0 || d > authority.MaxSoak:
		p.addf(v, "environment %q: %s %s is out of range; give a positive duration of at most 168h (a week)", env, what, v.Value)
	default:
		return d, true
	}
	return 0, false
}

// checkSoak refuses a soak on an environment that requires nothing (it counts in the required
// environments: without any it would hold nothing), and a soak in an environment the environment
// does not require. val is the environment's mapping, where the soak: key is found for its line.
func (p *parser) checkSoak(e *Environment, val *yaml.Node) {
	s := e.Gates.Soak
	if s == nil {
		return
	}
	var key, value *yaml.Node
	for i := 0; i+1 < len(val.Content); i += 2 {
		if val.Content[i].Value == "soak" {
			key, value = val.Content[i], val.Content[i+1]
		}
	}
	if len(e.Requires) == 0 {
		p.addf(key, "environment %q: soak without requires; a commit soaks in the environments it must be live in first: name them (requires: [staging]), or remove the soak", e.Name)
		return
	}
	for i := 0; value != nil && i+1 < len(value.Content); i += 2 {
		if name := value.Content[i]; !slices.Contains(e.Requires, name.Value) {
			p.addf(name, "environment %q: soak in %q, which it does not require; a commit soaks only in the environments of requires: add %s to requires, or remove its soak",
				e.Name, name.Value, name.Value)
		}
	}
}
