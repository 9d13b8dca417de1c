package authority

import (
	"context"
	"fmt"
	"time"
)

// Withdraw ends the pending intents of scopes because what asked for them is gone (a pull request
// was closed, say): each gets the outcome "withdrawn", so observed moves past it and the recovery
// sweep never re-drives it, and the scopes' leases are released. Live state is not touched. It
// returns the scopes that had pending work. Withdrawing again changes nothing.
func (a *Authority) Withdraw(ctx context.Context, env string, scopes []string, reason, actor string) ([]string, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, err
	}
	if err := validateScopes(scopes, true); err != nil {
		return nil, err
	}
	if reason == "" {
		return nil, &InputError{Field: "reason", Fix: "say why the work is withdrawn; it goes in the timeline"}
	}
	var withdrawn []string
	_, err := a.update(ctx, EnvKey(env), func(d *Doc, now time.Time) (bool, error) {
		withdrawn = nil
		if d.Env == nil {
			return false, nil
		}
		changed := false
		for _, name := range scopes {
			sc := d.Env.Scopes[name]
			if sc == nil {
				continue
			}
			if _, freed := d.Env.unlock(name, reason, actor, now); freed {
				changed = true
			}
			list := sc.Entries()
			if len(list) == 0 {
				continue
			}
			sc.setEntries(nil, now)
			sc.ActiveAt = now
			withdrawn = append(withdrawn, name)
			for _, m := range list {
				d.Env.record(now, Event{Kind: EventWithdrawn, Scope: name, Generation: m.Generation, Sha: m.Sha,
					Message: fmt.Sprintf("Withdrawn by %s: %s", orUnknown(actor), reason)})
			}
		}
		if len(withdrawn) == 0 && !changed {
			return false, nil
		}
		d.Env.settle()
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("withdraw %v in %s: %w", scopes, env, err)
	}
	return withdrawn, nil
}
