package authority

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Override is a break-glass on one pending commit: someone waived its soak time, approvals and
// change windows, for a reason. It never waives supersession, a lease, a freeze, a queue or a
// promotion requirement, and it belongs to the commit's pending entry: a newer commit is held as
// the gates say.
type Override struct {
	Actor  string    `json:"actor"`
	Reason string    `json:"reason"`
	Via    string    `json:"via,omitempty"` // the door: cli, comment, page
	At     time.Time `json:"at"`
}

// BreakGlassRequest asks to waive the gates for a pending commit of an environment.
type BreakGlassRequest struct {
	Environment string
	// Scopes the override applies to; none: every scope where the commit is pending.
	Scopes []string
	// Sha is the commit: its full sha, or at least MinShaPrefix hex digits of one pending there.
	Sha    string
	Actor  string
	Reason string
	Via    string
}

// maxOverrideReason bounds the reason an override keeps in the environment's document.
const maxOverrideReason = 200

// BreakGlass waives the soak time, approvals and change windows of a pending commit, and records
// who did it and why in the timeline: the audited way past the gates in an incident. It returns
// the scopes it applies to. Waiving a commit already waived changes nothing. The commit must be
// pending in the scopes named (an error matching ErrInvalidInput says what is).
func (a *Authority) BreakGlass(ctx context.Context, r BreakGlassRequest) ([]string, error) {
	if err := ValidateEnvironment(r.Environment); err != nil {
		return nil, err
	}
	if err := validateScopes(r.Scopes, false); err != nil {
		return nil, err
	}
	r.Sha = CanonicalSha(r.Sha)
	if err := ValidateShaPrefix(r.Sha); err != nil {
		return nil, err
	}
	r.Reason = strings.TrimSpace(r.Reason)
	if r.Reason == "" {
		return nil, &InputError{Field: "reason", Fix: "say why the gates are waived (an incident, a fix that cannot wait): it is kept in the timeline"}
	}
	if strings.TrimSpace(r.Actor) == "" {
		return nil, &InputError{Field: "actor", Fix: "say who breaks the glass: it is kept in the timeline"}
	}
	var applied []string
	_, err := a.update(ctx, EnvKey(r.Environment), func(d *Doc, now time.Time) (bool, error) {
		applied = nil
		if d.Env == nil {
			return false, &InputError{Field: "environment", Value: r.Environment, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
		}
		if d.Env.Gates == nil {
			return false, &InputError{Field: "environment", Value: r.Environment, Fix: fmt.Sprintf("%s has no soak time, approvals or change windows: nothing to waive", r.Environment)}
		}
		names := r.Scopes
		if len(names) == 0 {
			names = sortedKeys(d.Env.Scopes)
		}
		var shas []string
		for _, name := range names {
			if sc := d.Env.Scopes[name]; sc != nil {
				for _, ref := range sc.Entries() {
					if strings.HasPrefix(ref.Sha, r.Sha) && !ref.Failed && !slices.Contains(shas, ref.Sha) {
						shas = append(shas, ref.Sha)
					}
				}
			}
		}
		if len(shas) > 1 {
			return false, &InputError{Field: "sha", Value: r.Sha, Fix: fmt.Sprintf("%s names %d commits pending in %s: give more of the sha", r.Sha, len(shas), r.Environment)}
		}
		changed := false
		for _, name := range names {
			sc := d.Env.Scopes[name]
			if sc == nil {
				continue
			}
			for _, ref := range sc.Entries() {
				if !strings.HasPrefix(ref.Sha, r.Sha) || ref.Failed {
					continue
				}
				applied = append(applied, name)
				if ref.BreakGlass != nil {
					break
				}
				ref.BreakGlass = &Override{Actor: r.Actor, Reason: truncate(r.Reason, maxOverrideReason), Via: r.Via, At: now}
				d.Env.record(now, Event{Kind: EventBreakGlass, Scope: name, Generation: ref.Generation, Sha: ref.Sha,
					Message: fmt.Sprintf("Break-glass by %s%s: soak, approvals and change windows waived for %s: %s", r.Actor, via(r.Via), shortSha(ref.Sha), ref.BreakGlass.Reason)})
				changed = true
				break
			}
		}
		if len(applied) == 0 {
			return false, &InputError{Field: "sha", Value: r.Sha, Fix: fmt.Sprintf("%s is not pending in %s of %s: only a commit waiting at the gates can be let through (latestwins status %s shows what waits)",
				shortSha(r.Sha), scopeList(names), r.Environment, r.Environment)}
		}
		return changed, nil
	})
	if err != nil {
		return nil, fmt.Errorf("break-glass for %s in %s: %w", shortSha(r.Sha), r.Environment, err)
	}
	slices.Sort(applied)
	a.log.WarnContext(ctx, "break-glass", "environment", r.Environment, "sha", r.Sha, "scopes", applied, "actor", r.Actor, "via", r.Via)
	return applied, nil
}

func via(door string) string {
	if door == "" {
		return ""
	}
	return " (" + door + ")"
}

func scopeList(names []string) string {
	if len(names) == 0 {
		return "any scope"
	}
	return strings.Join(names, ", ")
}
