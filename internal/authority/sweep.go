package authority

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Origins holds, per scope, the Origin of the intent waiting there: how its maker starts it again.
	Origins map[string]string `json:"origins,omitempty"`
}

// SweepReport says what one sweep did.
type SweepReport struct {
	Redriven []StalledWork `json:"redriven"`
	// Exhausted is work whose attempts ran out: one terminal error was recorded for it instead.
	Exhausted []StalledWork `json:"exhausted,omitempty"`
	// Failed lists environments the sweep could not handle, with the reason; the next sweep retries.
	Failed map[string]string `json:"failed,omitempty"`
	// Expired is how many records past the retention the sweep deleted (stores without a time to
	// live of their own).
	Expired int `json:"expired,omitempty"`
}

// Sweep finds environments with pending work through the store's sparse index (never a scan),
// and re-drives the work that has stalled: each re-drive is first recorded in the environment (the
// attempt counted, the scopes marked active, so that concurrent sweepers re-drive it once per stall
// period) and then handed to redrive. A re-drive that fails gives its attempt back unless its error
// matches ErrPermanent or ErrInvalidInput. Work that has used maxAttempts gets one terminal error
// instead, and observed moves past it, so that the sweep never resurrects it.
func (a *Authority) Sweep(ctx context.Context, stall time.Duration, maxAttempts int, redrive func(context.Context, StalledWork) error) (*SweepReport, error) {
	if stall <= 0 || maxAttempts < 1 {
		return nil, &InputError{Field: "sweep", Value: fmt.Sprintf("stall %s, max attempts %d", stall, maxAttempts),
			Fix: "give a positive stall timeout and at least one attempt"}
	}
	envs, scopes, err := a.pending(ctx)
	if err != nil {
		return nil, err
	}
	rep := &SweepReport{Redriven: []StalledWork{}}
	for _, env := range envs {
		work, exhausted, err := a.claimStalled(ctx, env, pendingScopes(scopes[env]), stall, maxAttempts)
		if err != nil {
			// A failure after the re-drives were recorded (the head's log) still re-drives them:
			// their attempts are counted already.
			rep.fail(env, err)
		}
		rep.Exhausted = append(rep.Exhausted, exhausted...)
		for _, w := range work {
			if err := redrive(ctx, w); err != nil {
				rep.fail(env, fmt.Errorf("re-drive generation %d: %w", w.Generation, err))
				if errors.Is(err, ErrPermanent) || errors.Is(err, ErrInvalidInput) {
					// Retrying cannot help: the attempt stays counted, so the work ends with a terminal
					// error once its attempts are spent instead of being re-driven forever.
					continue
				}
				if uerr := a.undoRedrive(ctx, w, err); uerr != nil {
					rep.fail(env, fmt.Errorf("re-drive generation %d: %w; and giving its attempt back: %w", w.Generation, err, uerr))
				}
				continue
			}
			rep.Redriven = append(rep.Redriven, w)
		}
	}
	if ex, ok := a.store.(Expirer); ok {
		n, err := ex.DeleteExpired(ctx, a.clock.Now())
		rep.Expired = n
		if err != nil {
			rep.fail("(expired records)", err)
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

// pendingScopes is the namesFunc of a sweep of the per-scope layout: the scopes whose documents
// the pending index lists (none: nil would read every scope). Only these can hold stalled work,
// so a sweep of an environment of a thousand scopes reads what is pending, not the thousand; the
// head's log, which a head in the index has pending, is applied by completeLog.
func pendingScopes(listed []string) namesFunc {
	return scopesOf(append([]string{}, listed...))
}

// claimStalled records the re-drives of an environment's stalled work in one write; names are
// the scopes of the per-scope layout that may hold it. It then applies the head's log of the
// per-scope layout: an error there comes with the work recorded, to be re-driven all the same.
func (a *Authority) claimStalled(ctx context.Context, env string, names namesFunc, stall time.Duration, maxAttempts int) ([]StalledWork, []StalledWork, error) {
	var work, exhausted []StalledWork
	req := newRequired()
	prepare := func(ctx context.Context, d *Doc) error { return a.readRequired(ctx, d.Env, d.Env.heads(), req) }
	d, err := a.write(ctx, EnvKey(env), names, prepare, false, func(d *Doc, now time.Time) (bool, error) {
		// The re-drives an earlier attempt recorded on the scopes it wrote (the per-scope layout,
		// before its write of another lost a race to another sweeper) are this sweep's to make.
		keptWork, keptExhausted := landedWork(work, d.Env), landedWork(exhausted, d.Env)
		work, exhausted = nil, nil
		defer func() { work, exhausted = append(keptWork, work...), append(keptExhausted, exhausted...) }()
		if d.Env == nil {
			return false, nil
		}
		noted := d.Env.noteHeadSoakStarts(req) // where a head's soak counts from, kept by this write
		work, exhausted = d.Env.stalled(now, stall, a.skew, maxAttempts, req)
		if len(work) == 0 && len(exhausted) == 0 {
			return noted, nil
		}
		for _, w := range exhausted {
			d.Env.exhaust(w.Scopes[0], w.Generation, maxAttempts, now)
		}
		for _, w := range work {
			for _, name := range w.Scopes {
				sc := d.Env.Scopes[name]
				idle := now.Sub(sc.ActiveAt).Round(time.Second)
				sc.Mailbox.Attempt = w.Attempt
				sc.ActiveAt = now
				d.Env.record(now, Event{Kind: EventRedriven, Scope: name, Generation: w.Generation, Sha: sc.Mailbox.Sha,
					Message: fmt.Sprintf("Idle for %s with no live lease; re-driven as generation %d, attempt %d of %d", idle, w.Generation, w.Attempt, maxAttempts)})
			}
		}
		d.Env.settle()
		return true, nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, nil, fmt.Errorf("sweep %s: %w", env, err)
	}
	if err == nil && d != nil && d.Env != nil && d.Env.Split && len(d.Env.Log) > 0 {
		// Intents of several scopes in the head's log: one whose accepter stopped after the
		// head's write reaches its scopes here (and stalls there, to be re-driven) when no other
		// writer of them comes.
		if err := a.completeLog(ctx, env); err != nil {
			return work, exhausted, fmt.Errorf("sweep %s: apply the head's log: %w", env, err)
		}
	}
	return work, exhausted, nil
}

// landedWork is the part of ws on the scopes an earlier attempt of this transition wrote (Env.Landed).
func landedWork(ws []StalledWork, e *Env) []StalledWork {
	if e == nil || len(e.Landed) == 0 {
		return nil
	}
	var kept []StalledWork
	for _, w := range ws {
		k := w
		k.Scopes = slices.DeleteFunc(slices.Clone(w.Scopes), func(name string) bool { return !e.Landed[name] })
		if len(k.Scopes) == 0 {
			continue
		}
		if w.Origins != nil {
			k.Origins = map[string]string{}
			for _, name := range k.Scopes {
				if o, ok := w.Origins[name]; ok {
					k.Origins[name] = o
				}
			}
		}
		kept = append(kept, k)
	}
	return kept
}

// Stalled lists, without changing anything, the work a sweep would re-drive now and the work whose
// attempts have run out.
func (a *Authority) Stalled(ctx context.Context, stall time.Duration, maxAttempts int) (work, exhausted []StalledWork, err error) {
	envs, scopes, err := a.pending(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, env := range envs {
		d, err := a.readEnvNamed(ctx, env, pendingScopes(scopes[env]))
		if err != nil {
			return nil, nil, err
		}
		if d.Env == nil {
			continue
		}
		req := newRequired()
		if err := a.readRequired(ctx, d.Env, d.Env.heads(), req); err != nil {
			return nil, nil, err
		}
		w, x := d.Env.stalled(a.clock.Now(), stall, a.skew, maxAttempts, req)
		work, exhausted = append(work, w...), append(exhausted, x...)
	}
	return work, exhausted, nil
}

// stalled finds the scopes with pending work, no live lease and no activity for the stall
// timeout, grouped by the generation to re-drive them as, with the attempt the re-drive will be.
// Scopes whose attempts are spent come back on their own in exhausted. A head that waits for its
// commit in a required environment (req: what the sweep read of them) is left alone, its attempts
// untouched: re-driving it would only wait again. Once the commit is live there it is stalled work
// like any other, and re-driven.
func (e *Env) stalled(now time.Time, stall, skew time.Duration, maxAttempts int, req *required) (work, exhausted []StalledWork) {
	byGen := map[int64]*StalledWork{}
	for _, name := range sortedKeys(e.Scopes) {
		sc := e.Scopes[name]
		m := sc.Mailbox
		if m == nil || m.Failed || liveLease(&sc.Lease, now, skew) || now.Sub(sc.ActiveAt) < stall {
			continue
		}
		if !Hold(e.view(name, req, true), m.Generation, now, skew).Go() {
			continue // held by a freeze, or waiting for its commit in a required environment
		}
		gen, attempt := max(sc.Owner, m.Generation), m.Attempt+1
		if attempt > maxAttempts {
			exhausted = append(exhausted, StalledWork{Environment: e.Name, Generation: gen, Scopes: []string{name}, Attempt: m.Attempt})
			continue
		}
		w, ok := byGen[gen]
		if !ok {
			w = &StalledWork{Environment: e.Name, Generation: gen}
			byGen[gen] = w
		}
		w.Scopes = append(w.Scopes, name)
		w.Attempt = max(w.Attempt, attempt)
		if m.Origin != "" {
			if w.Origins == nil {
				w.Origins = map[string]string{}
			}
			w.Origins[name] = m.Origin
		}
	}
	gens := sortedGens(byGen)
	for _, g := range gens {
		work = append(work, *byGen[g])
	}
	return work, exhausted
}

// heads is each scope's head, for readRequired; nil for an environment not stored yet.
func (e *Env) heads() map[string]*Ref {
	if e == nil {
		return nil
	}
	out := map[string]*Ref{}
	for name, sc := range e.Scopes {
		if sc.Mailbox != nil {
			out[name] = sc.Mailbox
		}
	}
	return out
}

func sortedGens(m map[int64]*StalledWork) []int64 {
	gens := make([]int64, 0, len(m))
	for g := range m {
		gens = append(gens, g)
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	return gens
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
	e.endEntry(sc, 0, true, now)
	if m.Failed {
		msg += "; nothing behind it deploys until someone decides (skip or retry)"
	}
	e.record(now, Event{Kind: EventFailed, Scope: name, Generation: gen, Sha: m.Sha,
		Message: fmt.Sprintf("Failed on the final attempt (%d of %d): %s", m.Attempt, maxAttempts, msg)})
}
