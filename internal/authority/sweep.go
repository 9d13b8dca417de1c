package authority

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// StalledWork is pending work of one environment that no pass is moving: the scopes have a mailbox
// entry, no live lease and no activity for the stall timeout. The sweep re-drives it as the pass at
// Generation, attempt Attempt.
type StalledWork struct {
	Environment string   `json:"environment"`
	Generation  int64    `json:"generation"`
	Scopes      []string `json:"scopes"`
	Attempt     int      `json:"attempt"`
}

// SweepReport says what one sweep did.
type SweepReport struct {
	Redriven []StalledWork `json:"redriven"`
	// Exhausted is work whose attempts ran out: one terminal error was recorded for it instead.
	Exhausted []StalledWork `json:"exhausted,omitempty"`
	// Failed lists environments the sweep could not handle, with the reason; the next sweep retries.
	Failed map[string]string `json:"failed,omitempty"`
}

// Sweep finds environments with pending work through the store's sparse index (never a scan),
// and re-drives the work that has stalled: each re-drive is first recorded in the environment (the
// attempt counted, the scopes marked active, so that concurrent sweepers re-drive it once per stall
// period) and then handed to redrive. Work that has used maxAttempts gets one terminal error
// instead, and observed moves past it, so that the sweep never resurrects it.
func (a *Authority) Sweep(ctx context.Context, stall time.Duration, maxAttempts int, redrive func(context.Context, StalledWork) error) (*SweepReport, error) {
	if stall <= 0 || maxAttempts < 1 {
		return nil, &InputError{Field: "sweep", Value: fmt.Sprintf("stall %s, max attempts %d", stall, maxAttempts),
			Fix: "give a positive stall timeout and at least one attempt"}
	}
	envs, err := a.Pending(ctx)
	if err != nil {
		return nil, err
	}
	rep := &SweepReport{Redriven: []StalledWork{}}
	for _, env := range envs {
		work, exhausted, err := a.claimStalled(ctx, env, stall, maxAttempts)
		if err != nil {
			rep.fail(env, err)
			continue
		}
		rep.Exhausted = append(rep.Exhausted, exhausted...)
		for _, w := range work {
			if err := redrive(ctx, w); err != nil {
				rep.fail(env, fmt.Errorf("re-drive generation %d: %w", w.Generation, err))
				if uerr := a.undoRedrive(ctx, w, err); uerr != nil {
					rep.fail(env, fmt.Errorf("re-drive generation %d: %w; and giving its attempt back: %w", w.Generation, err, uerr))
				}
				continue
			}
			rep.Redriven = append(rep.Redriven, w)
		}
	}
	return rep, nil
}

func (r *SweepReport) fail(env string, err error) {
	if r.Failed == nil {
		r.Failed = map[string]string{}
	}
	r.Failed[env] = err.Error()
}

// claimStalled records the re-drives of an environment's stalled work in one write.
func (a *Authority) claimStalled(ctx context.Context, env string, stall time.Duration, maxAttempts int) ([]StalledWork, []StalledWork, error) {
	var work, exhausted []StalledWork
	_, err := a.update(ctx, EnvKey(env), func(d *Doc, now time.Time) (bool, error) {
		work, exhausted = nil, nil
		if d.Env == nil {
			return false, nil
		}
		byGen := map[int64]*StalledWork{}
		var gens []int64
		for _, name := range sortedKeys(d.Env.Scopes) {
			sc := d.Env.Scopes[name]
			m := sc.Mailbox
			if m == nil || liveLease(&sc.Lease, now, a.skew) || now.Sub(sc.ActiveAt) < stall {
				continue
			}
			idle := now.Sub(sc.ActiveAt).Round(time.Second)
			gen := max(sc.Owner, m.Generation)
			attempt := m.Attempt + 1
			if attempt > maxAttempts {
				d.Env.exhaust(name, gen, maxAttempts, now)
				exhausted = append(exhausted, StalledWork{Environment: env, Generation: gen, Scopes: []string{name}, Attempt: m.Attempt})
				continue
			}
			m.Attempt = attempt
			sc.ActiveAt = now
			d.Env.record(now, Event{Kind: EventRedriven, Scope: name, Generation: gen, Sha: m.Sha,
				Message: fmt.Sprintf("Idle for %s with no live lease; re-driven as generation %d, attempt %d of %d", idle, gen, attempt, maxAttempts)})
			w, ok := byGen[gen]
			if !ok {
				w = &StalledWork{Environment: env, Generation: gen, Attempt: attempt}
				byGen[gen] = w
				gens = append(gens, gen)
			}
			w.Scopes = append(w.Scopes, name)
			w.Attempt = max(w.Attempt, attempt)
		}
		sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
		for _, g := range gens {
			work = append(work, *byGen[g])
		}
		if len(work) == 0 && len(exhausted) == 0 {
			return false, nil
		}
		d.Env.settle()
		return true, nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, nil, fmt.Errorf("sweep %s: %w", env, err)
	}
	return work, exhausted, nil
}

// undoRedrive gives back the attempt of a re-drive that could not be handed over (the dispatch
// failed), and leaves the work stalled, so that the next sweep tries again at once and a
// dispatcher outage uses up no attempts.
func (a *Authority) undoRedrive(ctx context.Context, w StalledWork, cause error) error {
	_, err := a.update(ctx, EnvKey(w.Environment), func(d *Doc, now time.Time) (bool, error) {
		changed := false
		for _, name := range w.Scopes {
			sc := d.Env.Scopes[name]
			if sc == nil || sc.Mailbox == nil || sc.Mailbox.Attempt != w.Attempt || max(sc.Owner, sc.Mailbox.Generation) != w.Generation {
				continue // something moved since: not ours to undo
			}
			sc.Mailbox.Attempt--
			sc.ActiveAt = time.Time{}
			d.Env.record(now, Event{Kind: EventRedriven, Scope: name, Generation: w.Generation,
				Message: truncate("Re-drive failed, attempt not counted: "+cause.Error(), maxMessageSize)})
			changed = true
		}
		return changed, nil
	})
	return err
}

// liveLease reports whether someone holds the lease and it has not expired past the skew margin.
func liveLease(l *Lease, now time.Time, skew time.Duration) bool {
	return l.Holder != "" && now.Before(l.ExpiresAt.Add(skew))
}

// exhaust ends a scope's pending intent with one terminal error after its attempts ran out.
func (e *Env) exhaust(name string, gen int64, maxAttempts int, now time.Time) {
	sc := e.Scopes[name]
	m := sc.Mailbox
	msg := fmt.Sprintf("no pass completed after %d attempts", maxAttempts)
	sc.Failure = &Failure{Generation: gen, Sha: m.Sha, Message: msg, Attempt: m.Attempt, MaxAttempts: maxAttempts, At: now}
	sc.Mailbox = nil
	e.record(now, Event{Kind: EventFailed, Scope: name, Generation: gen, Sha: m.Sha,
		Message: fmt.Sprintf("Failed on the final attempt (%d of %d): %s", m.Attempt, maxAttempts, msg)})
}
