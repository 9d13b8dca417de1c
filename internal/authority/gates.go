package authority

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Gates are what an environment's deploy gate holds a commit for besides promotion, each a reason
// of the evaluator: soak time in the required environments (ReasonSoaking), approvals by people
// (ReasonApproval) and change windows (ReasonWindow). They are the environment's, set like its
// requirements from its maker's configuration; a rollback is held by none of them.
//
// In an intent a nil gate keeps the stored one and an empty one removes it, so that a maker that
// sets one gate (the command line's --soak) leaves the others alone, and a configuration file
// that no longer sets one removes it.
type Gates struct {
	Soak      *Soak         `json:"soak,omitempty"`
	Approvals *ApprovalRule `json:"approvals,omitempty"`
	Windows   *Windows      `json:"windows,omitempty"`
}

// validate checks the gates of env's intent, which requires req (nil: nothing).
func (g *Gates) validate(env string, req *Requirements) error {
	if g == nil {
		return nil
	}
	if err := g.Soak.validate(env, req); err != nil {
		return err
	}
	if err := g.Approvals.validate(); err != nil {
		return err
	}
	return g.Windows.validate()
}

// normal is g without its empty gates; nil when it holds for nothing.
func (g *Gates) normal() *Gates {
	if g == nil {
		return nil
	}
	n := Gates{Soak: g.Soak.normal(), Approvals: g.Approvals.normal(), Windows: g.Windows.normal()}
	if n == (Gates{}) {
		return nil
	}
	return &n
}

// equal compares two gates by what they hold for.
func (g *Gates) equal(o *Gates) bool {
	a, _ := json.Marshal(g.normal())
	b, _ := json.Marshal(o.normal())
	return string(a) == string(b)
}

// String says what the gates hold for, for the timeline.
func (g *Gates) String() string {
	g = g.normal()
	if g == nil {
		return "none"
	}
	var parts []string
	for _, p := range []string{g.Soak.String(), g.Approvals.String(), g.Windows.String()} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "; ")
}

// clone deep-copies g.
func (g *Gates) clone() *Gates {
	if g == nil {
		return nil
	}
	var c Gates
	b, _ := json.Marshal(g)
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("clone gates: %v", err))
	}
	return &c
}

// setGates switches the environment's gates to those g sets and records the change: a nil gate
// of g keeps the stored one, an empty one removes it; nil g leaves them all.
func (e *Env) setGates(g *Gates, actor string, now time.Time) {
	if g == nil {
		return
	}
	next := e.Gates.clone()
	if next == nil {
		next = &Gates{}
	}
	if g.Soak != nil {
		next.Soak = g.Soak
	}
	if g.Approvals != nil {
		next.Approvals = g.Approvals
	}
	if g.Windows != nil {
		next.Windows = g.Windows
	}
	if next.equal(e.Gates) {
		return
	}
	from := e.Gates
	e.Gates = next.normal()
	e.record(now, Event{Kind: EventGates, Message: fmt.Sprintf("Gates changed from %s to %s by %s", from, e.Gates, orUnknown(actor))})
}

// SetGates sets the gates g names of an environment (a nil gate keeps the stored one, an empty one
// removes it) and records the change; it reports whether anything changed. It is how an operator
// sets them on a store, where no trusted file is read (latestwins gates).
func (a *Authority) SetGates(ctx context.Context, env string, g Gates, actor string) (bool, error) {
	if err := ValidateEnvironment(env); err != nil {
		return false, err
	}
	changed := false
	// The gates are the head's alone: no scope is read or written for them.
	_, err := a.updateIn(ctx, env, scopesOf([]string{}), nil, false, func(d *Doc, now time.Time) (bool, error) {
		if d.Env == nil {
			d.Env = newEnv(env)
		}
		if err := g.validate(env, d.Env.Requires); err != nil {
			return false, err
		}
		before := d.Env.EventSeq
		d.Env.setGates(&g, actor, now)
		changed = d.Env.EventSeq != before
		return changed, nil
	})
	if err != nil {
		return false, fmt.Errorf("set the gates of %s: %w", env, err)
	}
	return changed, nil
}
