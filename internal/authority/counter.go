package authority

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// Generations from a counter (docs/design.md section 9, "Generations from an atomic counter";
// checked in internal/layoutmodel, CheckCounter). A head of the per-scope layout that says
// Counted takes its generations from the environment's counter (CounterKey), which the store
// moves in one request, above the head's Desired (the generation the environment had when the
// head was made, which then never moves). So an accept of one scope writes no head, and accepts
// of different scopes race for nothing.
//
// What must hold is the order: every scope applies its intents in increasing generation. An
// intent of several scopes reaches its scopes through the head's log, and its generation is
// taken only after its entry is in the log (reserved: no generation yet), then written into the
// entry (filled: the commit point, what gates see). An accept of one scope takes its generation
// first and reads the head after: an entry older than its generation was reserved before that,
// so the read finds it, filled or to be filled. It fills a reserved entry that names its scope
// before it goes on, applies the filled ones (assemble), and takes a newer generation when its
// scope holds one as new as its own. Entries are filled in log order, each newer than the one
// before it, so filled entries are a prefix of the log in increasing generation.

// errTakeGeneration: the transition needs a generation from the counter (none taken yet, or
// its scope holds one as new): writeSplit takes one, reads the head again and decides again.
var errTakeGeneration = errors.New("take a generation from the counter")

// errFillReserved: a reserved entry of the head's log names a scope the transition takes a
// generation for: writeSplit fills the log's reserved entries, reads the head again and decides
// again.
var errFillReserved = errors.New("fill the reserved entries of the head's log")

// errReadCounter: a request names a generation newer than the documents the transition read
// hold: writeSplit reads the counter, and the transition decides again knowing every generation
// handed out.
var errReadCounter = errors.New("read the generation counter")

// nextGeneration is the generation of an intent accepted now on scopes: the head's next one,
// or, on a counted head, the one the transition took from the counter.
func (e *Env) nextGeneration(scopes []string) (int64, error) {
	if !e.Counted {
		e.Desired++
		return e.Desired, nil
	}
	for _, l := range e.Log {
		if l.Generation == 0 && slices.ContainsFunc(scopes, func(s string) bool { return slices.Contains(l.Intent.Scopes, s) }) {
			return 0, errFillReserved
		}
	}
	top := int64(0)
	for _, s := range scopes {
		top = max(top, e.topOf(s))
	}
	if e.Taken <= top {
		return 0, errTakeGeneration
	}
	e.Desired = max(e.Desired, e.Taken)
	return e.Taken, nil
}

// topOf is the newest generation scope name holds: what its document says it applied, what
// this transition applied there, and what its state names.
func (e *Env) topOf(name string) int64 {
	top := e.Tops[name]
	sc := e.Scopes[name]
	if sc == nil {
		return top
	}
	top = max(top, sc.Owner)
	for _, m := range sc.Entries() {
		top = max(top, m.Generation)
	}
	for _, x := range []interface{ gen() int64 }{sc.Live, sc.Freeze, sc.Failure} {
		top = max(top, x.gen())
	}
	return top
}

func (l *Live) gen() int64 {
	if l == nil {
		return 0
	}
	return l.Generation
}

func (f *Freeze) gen() int64 {
	if f == nil {
		return 0
	}
	return f.Generation
}

func (f *Failure) gen() int64 {
	if f == nil {
		return 0
	}
	return f.Generation
}

// applied notes that the transition applied generation gen to scope name.
func (e *Env) applied(name string, gen int64) {
	if e.Tops == nil {
		e.Tops = map[string]int64{}
	}
	e.Tops[name] = max(e.Tops[name], gen)
}

// takeGeneration takes the next value of env's counter, as a generation above base (the
// counted head's Desired).
func (a *Authority) takeGeneration(ctx context.Context, env string, base int64) (int64, error) {
	n, err := a.store.Add(ctx, CounterKey(env), 1)
	if err != nil {
		return 0, fmt.Errorf("take a generation for %s: %w", env, err)
	}
	return base + n, nil
}

// reserve puts an intent of several scopes in the head's log without a generation: what an
// accept on a counted head writes first. Nothing applies it before it is filled.
func (e *Env) reserve(in *Intent, answers map[string]verdict, claim bool, now time.Time) {
	e.logIntent(in, 0, answers, claim, now)
}

// logged reports whether the head's log holds the entry of intent id, and its generation (0:
// reserved).
func (e *Env) logged(id string) (int64, bool) {
	for _, l := range e.Log {
		if l.Intent.ID == id {
			return l.Generation, true
		}
	}
	return 0, false
}

// fillReserved fills the reserved entries of env's head log, in log order, each with a
// generation taken from the counter and newer than the one before it, and returns the
// generation of intent id's entry (0 when id is "" or its entry is not in the log). An entry
// another process filled meanwhile is adopted. Each intent filled gets its record in the head
// beside its entry, so that a repeat of it is recognised.
func (a *Authority) fillReserved(ctx context.Context, env, id string) (int64, error) {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		head, err := a.load(ctx, EnvKey(env))
		if err != nil {
			return 0, err
		}
		if !isSplit(head) || head.Env.Moved != nil || !head.Env.Counted {
			return 0, nil
		}
		h := head.Env.clone()
		before := int64(0)
		filled := false
		now := a.clock.Now()
		for i := range h.Log {
			l := &h.Log[i]
			if l.Generation == 0 {
				gen, err := a.takeGeneration(ctx, env, h.Desired)
				for err == nil && gen <= before {
					gen, err = a.takeGeneration(ctx, env, h.Desired)
				}
				if err != nil {
					return 0, err
				}
				l.Generation, filled = gen, true
				in := l.Intent
				h.Accepts = append(h.Accepts, IntentRecord{ID: in.ID, Sha: in.Sha, Scopes: slices.Clone(in.Scopes), Generation: gen, At: now})
			}
			before = l.Generation
		}
		if filled {
			ok, err := a.putPart(ctx, &Doc{Key: head.Key, Rev: head.Rev, Pending: true, Env: h}, false, true)
			if err != nil {
				return 0, err
			}
			if !ok {
				if err := headBackoff(ctx, attempt); err != nil {
					return 0, err
				}
				continue
			}
			a.woke(EnvKey(env)) // gates of the filled entries' scopes see them now
		}
		gen, _ := h.logged(id)
		return gen, nil
	}
	return 0, fmt.Errorf("fill the log of %s: gave up after %d conflicting attempts: %w", env, maxAttempts, ErrConflict)
}

// acceptReserved finishes the accept of an intent of several scopes whose entry is in the head's
// log: it fills the entry (and the reserved ones before it), then applies it to each of its
// scopes, claims them when asked, and trims the entry from the log.
func (a *Authority) acceptReserved(ctx context.Context, in Intent, claim bool) (*AcceptResult, error) {
	env := in.Environment
	gen, err := a.fillReserved(ctx, env, in.ID)
	if err != nil {
		return nil, err
	}
	if gen == 0 {
		// The entry left the log: another writer (the sweep) applied it everywhere and trimmed
		// it, and stored its record.
		d, err := a.readEnvScopes(ctx, env, in.Scopes)
		if err != nil {
			return nil, err
		}
		prior := a.outboxIntent(d.Env, in.ID)
		if prior == nil {
			if prior, err = a.intentRecord(ctx, env, in.ID); err != nil {
				return nil, err
			}
		}
		if prior == nil {
			return nil, fmt.Errorf("intent %q left the log of %s without a record of its generation", in.ID, env)
		}
		gen = prior.Generation
	}
	var res *AcceptResult
	_, err = a.updateIn(ctx, env, scopesOf(in.Scopes), nil, false, func(d *Doc, now time.Time) (bool, error) {
		if d.Env == nil {
			return false, fmt.Errorf("environment %s is gone", env)
		}
		before := d.Env.EventSeq
		res = d.Env.wideResult(&in, gen)
		if claim && len(res.Accepted) > 0 {
			res.Claim = d.Env.claim(gen, res.Accepted, now)
		}
		d.Env.Wide = gen
		return d.Env.Results[gen] != nil || d.Env.EventSeq != before, nil
	})
	if err != nil {
		return nil, err
	}
	if err := a.trimLog(ctx, env, []int64{gen}); err != nil {
		// The sweep, or the next accept that finds the log full, trims it.
		a.log.WarnContext(ctx, "trimming the head's log failed; a later write trims it", "environment", env, "err", err)
	}
	return res, nil
}

// wideResult is what the accept of intent in at gen did, as the scopes of e hold it once the
// head's log is applied to them.
func (e *Env) wideResult(in *Intent, gen int64) *AcceptResult {
	res := &AcceptResult{Generation: gen, Accepted: []string{}}
	if r := e.Results[gen]; r != nil {
		res.Stale = r.Stale
	}
	for _, name := range sortedCopy(in.Scopes) {
		sc := e.Scopes[name]
		if sc == nil {
			continue
		}
		for i, m := range sc.Entries() {
			if m.IntentID == in.ID && m.Generation == gen {
				res.Accepted = append(res.Accepted, name)
				res.ahead(name, i)
				break
			}
		}
	}
	return res
}
