package config

import (
	"errors"
	"fmt"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/latestwins/latestwins/internal/authority"
)

// windows reads an environment's windows: (see docs/config.md): a time zone, and allow and deny
// periods, each a start as a cron expression and a duration. Each problem names its line and
// what to write instead; the checks are authority's, so that the command line and the API refuse
// the same.
func (p *parser) windows(env string, k, v *yaml.Node) *authority.Windows {
	where := fmt.Sprintf("environment %q: windows", env)
	if !p.mapping(v, where) {
		return nil
	}
	w := &authority.Windows{}
	before := len(p.problems)
	var allow, deny *yaml.Node
	var zone *yaml.Node
	p.fields(v, func(key, val *yaml.Node) {
		switch key.Value {
		case "timezone":
			if s, ok := p.scalar(key, val); ok {
				w.Timezone, zone = s, val
			}
		case "allow":
			allow = val
		case "deny":
			deny = val
		default:
			p.addf(key, "%s: unknown key %q; allowed: timezone, allow, deny", where, key.Value)
		}
	})
	loc := time.UTC
	if zone != nil {
		l, err := authority.CheckWindowTimezone(w.Timezone)
		if err != nil {
			p.addf(zone, "%s: timezone %q: %s", where, w.Timezone, fixOf(err))
		} else {
			loc = l
		}
	}
	if allow != nil {
		w.Allow = p.windowPeriods(where+": allow", allow, loc)
		if len(w.Allow) == 0 && len(allow.Content) == 0 && allow.Kind == yaml.SequenceNode {
			p.addf(allow, "%s: allow is empty, which would allow no time at all; give at least one period, or leave allow out to allow every time but the deny periods", where)
		}
	}
	if deny != nil {
		w.Deny = p.windowPeriods(where+": deny", deny, loc)
	}
	if allow == nil && deny == nil {
		p.addf(k, "%s: give allow or deny periods, e.g. allow: [{start: \"0 9 * * 1-5\", duration: 8h}], or remove windows", where)
	}
	if len(p.problems) > before {
		return nil
	}
	return w
}

// windowPeriods reads a list of periods, {start: CRON, duration: DURATION} each.
func (p *parser) windowPeriods(where string, v *yaml.Node, loc *time.Location) []authority.WindowPeriod {
	const example = `{start: "0 9 * * 1-5", duration: 8h}`
	if v.Kind != yaml.SequenceNode {
		p.addf(v, "%s must be a list of periods, e.g. [%s]", where, example)
		return nil
	}
	if len(v.Content) > authority.MaxWindowPeriods {
		p.addf(v, "%s has %d periods; at most %d are allowed (one cron expression can name several days, 0 9 * * 1-4)", where, len(v.Content), authority.MaxWindowPeriods)
		return nil
	}
	var out []authority.WindowPeriod
	for i, item := range v.Content {
		at := fmt.Sprintf("%s[%d]", where, i)
		if item.Kind != yaml.MappingNode {
			p.mapping(item, at)
			continue
		}
		var per authority.WindowPeriod
		var start, dur *yaml.Node
		p.fields(item, func(key, val *yaml.Node) {
			switch key.Value {
			case "start":
				if s, ok := p.scalar(key, val); ok {
					per.Start, start = s, val
				}
			case "duration":
				if s, ok := p.scalar(key, val); ok {
					dur = val
					d, err := time.ParseDuration(s)
					if err != nil {
						p.addf(val, "%s: duration %q is not a duration; write it as Go does, e.g. 8h or 72h (there is no d: 3 days is 72h)", at, s)
						return
					}
					per.Duration = d
					if err := authority.CheckWindowDuration(d); err != nil {
						p.addf(val, "%s: duration %s: %s", at, s, fixOf(err))
					}
				}
			default:
				p.addf(key, "%s: unknown key %q; a period has start and duration", at, key.Value)
			}
		})
		switch {
		case start == nil:
			p.addf(item, "%s has no start; give it as a cron expression, e.g. %s", at, example)
		default:
			if err := authority.CheckWindowStart(per.Start, loc); err != nil {
				p.addf(start, "%s: start %q: %s", at, per.Start, fixOf(err))
			}
		}
		if dur == nil {
			p.addf(item, "%s has no duration; say how long the period lasts, e.g. %s", at, example)
		}
		out = append(out, per)
	}
	return out
}

// fixOf is what an input error says to do.
func fixOf(err error) string {
	var bad *authority.InputError
	if errors.As(err, &bad) {
		return bad.Fix
	}
	return err.Error()
}
