package authority

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// The per-scope layout (layout 7, docs/design.md section 9) keeps an environment in several
// documents, so that a transition reads and writes what it touches:
//
//   - the head (env#NAME): the policy, requirements, gates and alert-after, the generation
//     counter, and the log of the intents of several scopes accepted and not yet known to be
//     applied to all of them;
//   - a document per scope (env#NAME#SCOPE): the scope's state as the single document keeps it,
//     with its own events and intent records, numbered and stored per scope;
//   - the directory (scopes#NAME): every scope's name, written when a scope is first named.
//
// The store port does not change: each step is one conditional write of one document. A
// transition reads the head afresh, then the documents of its scopes, applies the log entries
// that name them and that they do not hold yet, and runs the same domain rules on the environment
// so assembled (Env.Split). It then writes the directory (new scopes), the head (a new
// generation, a log entry, a policy) and the scope documents, in that order. An intent of one
// scope needs no log entry: until its scope's document is written no gate sees it, so a crash
// after the head's write only leaves a generation nobody holds, which observed (derived from the
// scopes) does not wait for. An intent of several scopes is in the log from the head's write, so
// whoever writes one of its scopes next applies it first, and no gate can see it on one scope and
// miss it on another. internal/layoutmodel checks the protocol in every interleaving.

type docPart string

const (
	partHead  docPart = "head"
	partScope docPart = "scope"
	partDir   docPart = "dir"
)

// MaxScopesSplit bounds the scopes of an environment in the per-scope layout. No document grows
// with them but the directory, which at this bound and the longest names holds 2,048 names of 64
// bytes: about 140 KB, far inside DynamoDB's 400 KB item.
const MaxScopesSplit = 2048

// maxLog and maxLogScopes bound the head's log (its entries, and the scope names they hold all
// together): an accept that would pass either completes and trims the entries there are first.
// With the records of the same intents, which the head keeps until its log is trimmed, the head
// stays within about 300 KB at the longest names (TestWorstCasePerScopeItemsFit).
const (
	maxLog       = 64
	maxLogScopes = MaxScopesSplit
)

// logScopes counts the scope names the log's entries hold.
func logScopes(log []logEntry) int {
	n := 0
	for _, l := range log {
		n += len(l.Intent.Scopes)
	}
	return n
}

// loadParallel is how many documents a read or a write of many scopes asks the store for at once.
const loadParallel = 16

// eachParallel calls fn for 0 to n-1, up to loadParallel at once, and returns the first error:
// once one has failed no more calls begin, and those already begun run to their end.
func eachParallel(n int, fn func(i int) error) error {
	if n == 1 {
		return fn(0)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for range min(loadParallel, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		mu.Lock()
		failed := first != nil
		mu.Unlock()
		if failed {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

const dirKeyPrefix = "scopes#"

// ScopeKey is the document key of one scope of an environment in the per-scope layout: under
// the environment's own key, so that the stores' index of pending documents lists the scopes
// with pending work (as ENV#SCOPE; Authority.Pending names their environments).
func ScopeKey(env, scope string) string { return EnvKey(env) + "#" + scope }

// scopeOfKey is the scope whose document of env is under key (ScopeKey).
func scopeOfKey(env, key string) string { return strings.TrimPrefix(key, ScopeKey(env, "")) }

// DirKey is the document key of the directory of an environment in the per-scope layout.
func DirKey(env string) string { return dirKeyPrefix + env }

// ScopeEventKey is the record key of a scope's event number seq, in the per-scope layout.
func ScopeEventKey(env, scope string, seq int64) string {
	return fmt.Sprintf("%s%s#%s#%019d", eventKeyPrefix, env, scope, seq)
}

// WithScopeDocuments makes the environments this Authority creates use the per-scope layout: up
// to MaxScopesSplit scopes, each in a document of its own. Environments already stored keep
// their layout.
func WithScopeDocuments() Option { return func(a *Authority) { a.scoped = true } }

// logEntry is an intent of several scopes in the head's log: what applying it to one of its
// scopes needs (applyIntent), as its accept decided it.
type logEntry struct {
	Generation int64
	Intent     Intent
	Answers    map[string]verdict
	Claim      bool
	At         time.Time
}

type storedLogEntry struct {
	G  int64          `json:"g"`
	I  string         `json:"i"`
	S  []string       `json:"s"`
	H  string         `json:"h"`
	R  string         `json:"r,omitempty"`
	B  string         `json:"b,omitempty"`
	O  *storedOrder   `json:"o,omitempty"`
	Sr string         `json:"sr,omitempty"`
	Ac string         `json:"ac,omitempty"`
	Og string         `json:"og,omitempty"`
	Bw []int          `json:"bw,omitempty"` // the barrier scopes, as indexes into S
	Rd bool           `json:"rd,omitempty"`
	An map[string]int `json:"an,omitempty"`
	C  bool           `json:"c,omitempty"`
	T  int64          `json:"t"`
}

func encodeLogEntry(l logEntry) storedLogEntry {
	in := l.Intent
	s := storedLogEntry{G: l.Generation, I: in.ID, S: in.Scopes, H: in.Sha, R: in.Ref, B: in.Before, O: encodeOrder(in.Order),
		Sr: in.Source, Ac: in.Actor, Og: in.Origin, Rd: in.Redeploy, C: l.Claim, T: nanos(l.At)}
	for i, name := range in.Scopes {
		if slices.Contains(in.Barrier, name) {
			s.Bw = append(s.Bw, i)
		}
	}
	for sha, v := range l.Answers {
		if s.An == nil {
			s.An = map[string]int{}
		}
		s.An[sha] = int(v)
	}
	return s
}

func decodeLogEntry(s storedLogEntry) logEntry {
	l := logEntry{Generation: s.G, Claim: s.C, At: fromNanos(s.T), Answers: map[string]verdict{},
		Intent: Intent{ID: s.I, Scopes: s.S, Sha: s.H, Ref: s.R, Before: s.B, Order: decodeOrder(s.O), Source: s.Sr,
			Actor: s.Ac, Origin: s.Og, Redeploy: s.Rd}}
	for _, i := range s.Bw {
		if i >= 0 && i < len(s.S) {
			l.Intent.Barrier = append(l.Intent.Barrier, s.S[i])
		}
	}
	for sha, v := range s.An {
		l.Answers[sha] = verdict(v)
	}
	return l
}

// namesFunc says which scopes a transition touches, given the head it read; nil: every scope.
type namesFunc func(head *Env) []string

// scopesOf is the namesFunc of a transition of fixed scopes.
func scopesOf(scopes []string) namesFunc {
	return func(*Env) []string { return scopes }
}

// view is an environment of the per-scope layout as one attempt of a transition read it.
type view struct {
	env    string
	head   *Doc
	dir    *Doc // nil: not read
	scopes map[string]*Doc
	all    bool
	fresh  bool // every scope document came from the store in this attempt
	// remembered names the scopes whose documents came from this process's memory.
	remembered map[string]bool
	// accepts says where each intent record of the assembled environment is kept: the scope
	// whose document holds it, "" for the head.
	accepts map[string]string
	doc     *Doc // the assembled environment
}

// isSplit reports whether d is the head of an environment in the per-scope layout.
func isSplit(d *Doc) bool { return d != nil && d.Env != nil && d.Env.Part == partHead }

// readView reads env in the per-scope layout: head is its head as just read (Env nil: nothing
// stored yet), and the scopes named (every scope the directory lists when names gives nil).
// Scope documents may come from memory unless fresh; the head never does.
func (a *Authority) readView(ctx context.Context, env string, head *Doc, names namesFunc, fresh bool) (*view, error) {
	v := &view{env: env, head: head, scopes: map[string]*Doc{}, fresh: fresh, remembered: map[string]bool{}}
	var list []string
	if names != nil {
		if head.Env != nil {
			list = names(head.Env)
		} else {
			list = names(&Env{Name: env})
		}
	}
	if list == nil {
		v.all = true
	}
	if v.all || head.Env == nil {
		if err := a.readDir(ctx, v); err != nil {
			return nil, err
		}
	}
	if v.all {
		list = v.dir.Env.Dir
	}
	keys := make([]string, 0, len(list))
	for _, name := range list {
		keys = append(keys, ScopeKey(env, name))
	}
	docs, fromMemory, err := a.loadMany(ctx, keys, fresh)
	if err != nil {
		return nil, err
	}
	missing := false
	for i, name := range list {
		v.scopes[name] = docs[i]
		v.remembered[name] = fromMemory[i]
		missing = missing || docs[i].Env == nil
	}
	if missing && v.dir == nil {
		if err := a.readDir(ctx, v); err != nil {
			return nil, err
		}
	}
	v.assemble(a, a.clock.Now())
	if v.doc.Env != nil {
		v.doc.Env.Streams = v.streams()
	}
	return v, nil
}

func (a *Authority) readDir(ctx context.Context, v *view) error {
	d, err := a.load(ctx, DirKey(v.env))
	if err != nil {
		return err
	}
	if d.Env == nil {
		d.Env = &Env{Name: v.env, Part: partDir}
	}
	v.dir = d
	return nil
}

// loadMany reads the documents of keys, from memory unless fresh, several at once.
func (a *Authority) loadMany(ctx context.Context, keys []string, fresh bool) ([]*Doc, []bool, error) {
	out, mem := make([]*Doc, len(keys)), make([]bool, len(keys))
	var todo []int
	for i, k := range keys {
		if !fresh {
			if d := a.remembered(k); d != nil {
				out[i], mem[i] = d, true
				continue
			}
		}
		todo = append(todo, i)
	}
	err := eachParallel(len(todo), func(j int) error {
		d, err := a.load(ctx, keys[todo[j]])
		out[todo[j]] = d
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return out, mem, nil
}

// fromMemory reports whether any scope of the view came from this process's memory.
func (v *view) fromMemory() bool {
	for _, mem := range v.remembered {
		if mem {
			return true
		}
	}
	return false
}

// revisions names the documents v was assembled from, by key and revision.
func (v *view) revisions() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%d", v.head.Key, v.head.Rev)
	for _, name := range sortedKeys(v.scopes) {
		if d := v.scopes[name]; d != nil {
			fmt.Fprintf(&b, " %s@%d", d.Key, d.Rev)
		}
	}
	return b.String()
}

// unwritten reports whether the view holds a remembered scope that p does not write.
func (v *view) unwritten(p *plan) bool {
	for name, mem := range v.remembered {
		if mem && !slices.ContainsFunc(p.scopes, func(d *Doc) bool { return d.Key == ScopeKey(v.env, name) }) {
			return true
		}
	}
	return false
}

// assemble builds the environment a transition decides on: the head's settings and counter,
// the scopes read, and their intent records, with the head's log applied to the scopes that do
// not hold its entries yet.
func (v *view) assemble(a *Authority, now time.Time) {
	e := &Env{Name: v.env, Split: true, Scopes: map[string]*Scope{}}
	if h := v.head.Env; h != nil {
		e.Policy, e.Requires, e.Gates, e.AlertAfter, e.Desired, e.Moved, e.Counted = h.Policy, h.Requires, h.Gates, h.AlertAfter, h.Desired, h.Moved, h.Counted
		e.Log = slices.Clone(h.Log)
		e.Accepts = slices.Clone(h.Accepts)
		e = e.clone() // its own requirements and gates
	}
	v.accepts = map[string]string{}
	for _, in := range e.Accepts {
		v.accepts[in.ID] = ""
	}
	for _, name := range sortedKeys(v.scopes) {
		d := v.scopes[name]
		if d.Env == nil || d.Env.Scopes[name] == nil {
			continue
		}
		c := d.Env.clone()
		e.Scopes[name] = c.Scopes[name]
		e.applied(name, d.Env.Applied)
		for _, in := range c.Accepts {
			e.Accepts = append(e.Accepts, in)
			v.accepts[in.ID] = name
		}
	}
	if v.dir != nil {
		e.Dir = slices.Clone(v.dir.Env.Dir)
	}
	for _, l := range e.Log {
		if l.Generation == 0 {
			continue // reserved: not accepted yet (counter.go)
		}
		for _, name := range l.Intent.Scopes {
			if d, ok := v.scopes[name]; ok && l.Generation > appliedOf(d) {
				e.applyEntry(l, name, a.queueLimit, now)
			}
		}
	}
	if e.Counted {
		// The head's Desired is where the counter starts: the environment's is the newest
		// generation its documents hold.
		for _, l := range e.Log {
			e.Desired = max(e.Desired, l.Generation)
		}
		for name := range e.Scopes {
			e.Desired = max(e.Desired, e.topOf(name))
		}
	}
	if v.head.Env == nil {
		e = nil // nothing stored: a transition sees no environment, as in the single document
	}
	v.doc = &Doc{Key: EnvKey(v.env), Rev: v.head.Rev, Pending: v.head.Pending, Env: e, Assembled: true}
}

func appliedOf(d *Doc) int64 {
	if d.Env == nil {
		return 0
	}
	return d.Env.Applied
}

// applyEntry applies a log entry to one of its scopes, as its accept did to the others. A scope
// that cannot take it any more (its queue filled meanwhile) records why it was left out.
func (e *Env) applyEntry(l logEntry, name string, limit int, now time.Time) {
	res := e.Results[l.Generation]
	if res == nil {
		res = &AcceptResult{Generation: l.Generation}
		if e.Results == nil {
			e.Results = map[int64]*AcceptResult{}
		}
		e.Results[l.Generation] = res
	}
	e.applied(name, l.Generation)
	if err := e.applyIntent(&l.Intent, l.Generation, name, l.Answers, limit, now, res); err != nil {
		e.record(now, Event{Kind: EventWithdrawn, Scope: name, Generation: l.Generation, Sha: l.Intent.Sha,
			Message: fmt.Sprintf("Not accepted here: %v", err)})
		return
	}
	if l.Claim && slices.Contains(res.Accepted, name) {
		e.claim(l.Generation, []string{name}, now)
	}
}

// logIntent adds an intent of several scopes, just accepted at gen on the split environment e,
// to the head's log, so that its other scopes get it whatever happens to this writer.
func (e *Env) logIntent(in *Intent, gen int64, answers map[string]verdict, claim bool, now time.Time) {
	if !e.Split || len(in.Scopes) < 2 {
		return
	}
	l := logEntry{Generation: gen, Claim: claim, At: now, Answers: map[string]verdict{},
		Intent: Intent{ID: in.ID, Scopes: sortedCopy(in.Scopes), Sha: in.Sha, Ref: in.Ref, Before: in.Before, Order: in.Order,
			Source: in.Source, Actor: in.Actor, Origin: in.Origin, Barrier: in.Barrier, Redeploy: in.Redeploy}}
	for sha, v := range answers {
		l.Answers[sha] = v
	}
	e.Log = append(e.Log, l)
}

// plan is what one attempt of a transition writes, in order.
type plan struct {
	headDone bool     // the head's write landed
	wrote    []string // the scopes whose writes landed
	dir      *Doc
	head     *Doc
	scopes   []*Doc
	// logged: the head's write adds log entries (an intent of several scopes), so a scope whose
	// write meets a conflict is completed from the log rather than by deciding again.
	logged []int64
}

// split turns the environment a transition left into the documents it changed.
func (a *Authority) split(v *view, work *Env, now time.Time) (*plan, error) {
	p := &plan{}
	env := v.env
	// The head's settings, counter and log, before any events or records are routed to it.
	old := v.head.Env
	h := &Env{Name: env, Part: partHead}
	if old != nil {
		h.EventSeq, h.Outbox, h.Accepts = old.EventSeq, slices.Clone(old.Outbox), nil
	}
	h.Policy, h.Requires, h.Gates, h.AlertAfter, h.Desired = work.Policy, work.Requires, work.Gates, work.AlertAfter, work.Desired
	h.Counted = work.Counted
	if old != nil {
		h.Counted = old.Counted
	}
	if h.Counted {
		h.Desired = old.desiredOrZero() // where the counter starts; it never moves
	}
	h.Log = work.Log
	headMoves := old == nil || old.Policy != h.Policy || old.AlertAfter != h.AlertAfter || old.Desired != h.Desired || len(old.Log) != len(h.Log)
	if !headMoves {
		var err error
		if headMoves, err = settingsDiffer(old, h); err != nil {
			return nil, err
		}
	}
	// Events go to the stream of their scope. The environment's own (a policy change, a join)
	// go to the head's when the head is written anyway, else to the first scope the transition
	// read: a transition of scopes alone never writes the head for its events.
	fallback := ""
	if !headMoves {
		if names := sortedKeys(work.Scopes); len(names) > 0 {
			fallback = names[0]
		}
	}
	routed := map[string][]Event{}
	for _, ev := range work.Outbox {
		to := ev.Scope
		if _, ok := work.Scopes[to]; !ok {
			to = fallback
		}
		routed[to] = append(routed[to], ev)
	}
	logged := map[int64]bool{}
	for _, l := range work.Log {
		logged[l.Generation] = true
	}
	keep := map[string][]IntentRecord{}
	for _, in := range work.Accepts {
		to, known := v.accepts[in.ID]
		if !known {
			// An intent's record goes with the intent: in the head beside its log entry, else in
			// its first scope's document, the one its accept writes.
			to = fallback
			if !logged[in.Generation] || in.Generation == 0 {
				for _, s := range sortedCopy(in.Scopes) {
					if _, ok := work.Scopes[s]; ok {
						to = s
						break
					}
				}
			} else {
				to = ""
			}
		}
		keep[to] = append(keep[to], in)
	}

	// The head.
	h.Accepts = keep[""]
	h.appendEvents(routed[""])
	pending := len(h.Log) > 0 // the scopes' own documents say which of them have pending work
	for _, l := range h.Log {
		if l.Generation != 0 && !slices.ContainsFunc(old.logOrNil(), func(o logEntry) bool { return o.Generation == l.Generation }) {
			p.logged = append(p.logged, l.Generation)
		}
	}
	if work.Wide != 0 {
		p.logged = []int64{work.Wide} // the scopes complete an entry filled before
	}
	if changed, err := differs(old, h); err != nil {
		return nil, err
	} else if changed || pending != v.head.Pending {
		p.head = &Doc{Key: EnvKey(env), Rev: v.head.Rev, Pending: pending, Env: h}
	}

	// The scopes, by name.
	var added []string
	for _, name := range sortedKeys(work.Scopes) {
		d := v.scopes[name]
		if d == nil {
			if !v.all {
				// Not read, yet in the environment: only a transition that names a scope it did
				// not declare does this, a bug this refuses rather than writes past.
				return nil, fmt.Errorf("write %s: the transition changed scope %s, which it did not read", EnvKey(env), name)
			}
			d = &Doc{Key: ScopeKey(env, name)} // new since the directory was read, or created now
		}
		s := &Env{Name: env, Part: partScope, Scopes: map[string]*Scope{name: work.Scopes[name]}}
		if d.Env != nil {
			s.EventSeq, s.Outbox, s.Applied = d.Env.EventSeq, slices.Clone(d.Env.Outbox), d.Env.Applied
		} else {
			added = append(added, name)
		}
		s.Applied = max(s.Applied, work.topOf(name))
		s.Accepts = keep[name]
		s.appendEvents(routed[name])
		if changed, err := differs(d.Env, s); err != nil {
			return nil, err
		} else if changed || d.Pending != s.HasPending() {
			p.scopes = append(p.scopes, &Doc{Key: ScopeKey(env, name), Rev: d.Rev, Pending: s.HasPending(), Env: s})
		}
	}
	if len(added) > 0 {
		dir := v.dir
		if dir == nil {
			return nil, fmt.Errorf("write %s: new scopes %s without the directory", EnvKey(env), strings.Join(added, ","))
		}
		names := slices.Clone(dir.Env.Dir)
		for _, n := range added {
			if _, found := slices.BinarySearch(names, n); !found {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		if len(names) != len(dir.Env.Dir) {
			p.dir = &Doc{Key: DirKey(env), Rev: dir.Rev, Env: &Env{Name: env, Part: partDir, Dir: names}}
		}
	}
	return p, nil
}

func (e *Env) desiredOrZero() int64 {
	if e == nil {
		return 0
	}
	return e.Desired
}

func (e *Env) logOrNil() []logEntry {
	if e == nil {
		return nil
	}
	return e.Log
}

// appendEvents numbers evs in e's own stream and adds them to its outbox.
func (e *Env) appendEvents(evs []Event) {
	for _, ev := range evs {
		e.EventSeq++
		ev.Seq = e.EventSeq
		e.Outbox = append(e.Outbox, ev)
	}
}

// settingsDiffer reports whether the requirements, gates or log of two heads differ.
func settingsDiffer(a, b *Env) (bool, error) {
	x, err := EncodeEnv(&Env{Name: a.Name, Part: partHead, Requires: a.Requires, Gates: a.Gates, Log: a.Log})
	if err != nil {
		return false, err
	}
	y, err := EncodeEnv(&Env{Name: b.Name, Part: partHead, Requires: b.Requires, Gates: b.Gates, Log: b.Log})
	if err != nil {
		return false, err
	}
	return !bytes.Equal(x, y), nil
}

// differs reports whether the stored forms of a and b differ (a nil: nothing stored).
func differs(a, b *Env) (bool, error) {
	if a == nil {
		return true, nil
	}
	x, err := EncodeEnv(a)
	if err != nil {
		return false, err
	}
	y, err := EncodeEnv(b)
	if err != nil {
		return false, err
	}
	return !bytes.Equal(x, y), nil
}

// writeSplit is write for an environment in the per-scope layout (or one this Authority creates
// in it): every attempt reads the head, then the scopes named, decides with fn on the environment
// they make, and writes what changed.
//
// A head this process remembered (headRemembered, from acceptIn) serves the first attempt only
// to get as far as the counter's request: nothing decided on it is written or returned before
// the head is read again.
func (a *Authority) writeSplit(ctx context.Context, env string, head *Doc, headRemembered bool, names namesFunc, prepare func(context.Context, *Doc) error, flush bool, fn func(*Doc, time.Time) (bool, error)) (*Doc, error) {
	// Transitions of one scope from this process go one at a time, as the single document's do;
	// transitions of other scopes go on beside them.
	var locks []string
	if names == nil {
		locks = []string{EnvKey(env)}
	} else if head.Env != nil {
		for _, n := range sortedCopy(names(head.Env)) {
			locks = append(locks, ScopeKey(env, n))
		}
	}
	for _, k := range locks {
		defer a.lock(k)()
	}
	fresh := false
	taken := int64(0)    // the counter's value taken for this transition, on a counted head
	counter := int64(-1) // the newest generation the counter handed out, once read (-1: not read)
	prepared := ""       // the revisions of the documents prepare last decided on (revisions)
	// What the attempts wrote, a failed one's first writes too: their waiters are woken however
	// the transition ends. A head written wakes every waiter of the environment (every scope's
	// gate reads it); scopes alone wake their own.
	var wroteHead bool
	var wrote []string
	defer func() {
		if wroteHead {
			a.woke(EnvKey(env))
		} else if len(wrote) > 0 {
			a.wokeScopes(env, wrote)
		}
	}()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			var err error
			if head, err = a.load(ctx, EnvKey(env)); err != nil {
				return nil, err
			}
			headRemembered = false
		}
		var err error
		if head, err = a.finishIfMoving(ctx, env, head); err != nil {
			return nil, err
		}
		if err := movedError(head); err != nil {
			return nil, err
		}
		if head.Env != nil && !isSplit(head) {
			// Another process created it in the single document meanwhile.
			return a.write(ctx, EnvKey(env), names, prepare, flush, fn)
		}
		v, err := a.readView(ctx, env, head, names, fresh)
		if err != nil {
			return nil, err
		}
		for _, name := range sortedKeys(v.scopes) {
			// Marked by a Move of the environment that began after this transition read the head.
			if err := movedError(v.scopes[name]); err != nil {
				a.forget(v.scopes[name].Key)
				return nil, err
			}
		}
		if err := movedError(v.dir); err != nil {
			a.forget(DirKey(env))
			return nil, err
		}
		if revs := v.revisions(); prepare != nil && revs != prepared {
			// What prepare read (an intent's record, say) is current while the documents it
			// decided on are: what could change it writes one of them. So an attempt that only
			// took a generation since does not read it again.
			if err := prepare(ctx, v.doc); err != nil {
				return nil, err
			}
			prepared = revs
		}
		// A generation is the head's Desired (where its counter starts) plus the counter's
		// value, with the Desired of the head this attempt read.
		base := v.head.Env.desiredOrZero()
		work := cloneDoc(v.doc)
		if taken > 0 {
			work.Taken = base + taken
		}
		if work.Env != nil {
			work.Env.Taken, work.Env.Counter = work.Taken, counter
			if counter >= 0 {
				work.Env.Counter = base + counter
			}
		}
		if work.Env != nil && len(wrote) > 0 {
			work.Env.Landed = map[string]bool{}
			for _, name := range wrote {
				work.Env.Landed[name] = true
			}
		}
		now := a.clock.Now()
		changed, ferr := fn(work, now)
		switch {
		case errors.Is(ferr, errTakeGeneration):
			// Taken before the head is read again (counter.go).
			if taken, err = a.takeGeneration(ctx, env, 0); err != nil {
				return nil, err
			}
			continue
		case errors.Is(ferr, errFillReserved):
			if _, err := a.fillReserved(ctx, env, ""); err != nil {
				return nil, err
			}
			continue
		case errors.Is(ferr, errReadCounter):
			n, err := a.store.Add(ctx, CounterKey(env), 0)
			if err != nil {
				return nil, fmt.Errorf("read the generation counter of %s: %w", env, err)
			}
			counter = n
			continue
		}
		if headRemembered {
			continue // decided on a remembered head: read it, and decide again
		}
		if !changed && !fresh && v.fromMemory() {
			fresh = true // a decision on remembered scopes that writes nothing is confirmed on fresh ones
			continue
		}
		if !changed {
			return work, ferr
		}
		if work.Env == nil {
			return nil, fmt.Errorf("write %s: the transition dropped the environment", EnvKey(env))
		}
		if n := len(work.Env.Log); n > 1 && (n > maxLog || logScopes(work.Env.Log) > maxLogScopes) {
			if err := a.completeLog(ctx, env); err != nil {
				return nil, err
			}
			continue
		}
		work.Env.Accepts = slices.DeleteFunc(work.Env.Accepts, func(in IntentRecord) bool { return a.expired(in, now) })
		p, err := a.split(v, work.Env, now)
		if err != nil {
			return nil, err
		}
		if p.dir == nil && p.head == nil && len(p.scopes) == 0 {
			if !fresh && v.fromMemory() {
				fresh = true // a decision that changes nothing stored is confirmed on fresh scopes
				continue
			}
			return work, ferr
		}
		if !fresh && v.fromMemory() && work.Env.Wide == 0 && (p.head != nil && len(p.scopes) > 0 || len(p.scopes) > 1 || v.unwritten(p)) {
			// A decision on remembered scopes is proved current only by the conditional writes of
			// the scopes it writes: one that read a remembered scope it does not write, or that
			// writes several documents (a conflict after the first would leave the others to a
			// second decision, and a generation unused), is made again on fresh ones first. The
			// application of a filled entry to its scopes (Wide) is exempt: its generation is
			// the entry's whatever happens, each scope's write is conditional, and a retry leaves
			// the scopes an earlier attempt wrote as written (Landed).
			fresh = true
			continue
		}
		done, err := a.commit(ctx, v, p, flush, attempt == 0)
		wroteHead = wroteHead || p.headDone
		wrote = append(wrote, p.wrote...)
		if err != nil {
			return nil, err
		}
		if done {
			return work, ferr
		}
		if len(p.wrote) == 0 {
			// A loser of its scope's race takes a new generation, so that one taken before a
			// newer one settled elsewhere does not take observed back (design.md section 9).
			taken = 0
		}
		// A lost race for the head (accepts, one small document) is retried after a short pause
		// that grows slowly: the head's writes are quick, and the racers for it are accepts of
		// scopes that do not conflict otherwise. A lost race for a scope backs off as the single
		// document does.
		wait := backoff
		if p.head != nil && !p.headDone {
			wait = headBackoff
		}
		if err := wait(ctx, attempt); err != nil {
			return nil, err
		}
		fresh = true
	}
	return nil, fmt.Errorf("write %s: gave up after %d conflicting attempts: %w", EnvKey(env), maxAttempts, ErrConflict)
}

// commit writes a plan: the directory, the head, then the scopes by name. It reports false when a
// conflict means the transition must decide again on fresh documents (what it wrote stays: a
// scope written before the conflict is one the next attempt finds done). Once the head's write
// added log entries, the scopes are completed from the log instead, whatever their conflicts.
func (a *Authority) commit(ctx context.Context, v *view, p *plan, flush, first bool) (bool, error) {
	if p.dir != nil {
		if err := a.putDir(ctx, p.dir); err != nil {
			return false, err
		}
	}
	if p.head != nil {
		ok, err := a.putPart(ctx, p.head, flush, first)
		if err != nil || !ok {
			return false, err
		}
		p.headDone = true
	}
	if len(p.logged) == 0 {
		// In name order, one at a time: of two transitions that race for the same scopes, the
		// loser meets its first conflict before it wrote any of them, and decides again on what
		// the winner left instead of leaving a part of its own change behind.
		for _, d := range p.scopes {
			ok, err := a.putPart(ctx, d, flush, first)
			if err != nil || !ok {
				return false, err
			}
			p.wrote = append(p.wrote, scopeOfKey(v.env, d.Key))
		}
		return true, nil
	}
	// An intent in the log: every scope gets it whatever its write meets, so the writes go out
	// together (a wide intent's hundreds of them), and a scope lost to a race is completed from
	// the log.
	lost, landed, err := a.putScopes(ctx, p.scopes, flush, first)
	for _, d := range landed {
		p.wrote = append(p.wrote, scopeOfKey(v.env, d.Key))
	}
	if err != nil {
		return false, err
	}
	for _, d := range lost {
		name := scopeOfKey(v.env, d.Key)
		if err := a.completeScope(ctx, v.env, name); err != nil {
			return false, err
		}
	}
	if err := a.trimLog(ctx, v.env, p.logged); err != nil {
		// The entries stay in the log; the sweep or the next accept that finds it full
		// completes and trims them.
		a.log.WarnContext(ctx, "trimming the head's log failed; a later write trims it", "environment", v.env, "err", err)
	}
	return true, nil
}

// putScopes writes the scopes' documents, up to loadParallel at once, and returns those that met
// a conflict, and those whose writes landed (on an error too).
func (a *Authority) putScopes(ctx context.Context, docs []*Doc, flush, first bool) (lost, landed []*Doc, err error) {
	var mu sync.Mutex
	err = eachParallel(len(docs), func(i int) error {
		ok, err := a.putPart(ctx, docs[i], flush, first)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil && ok:
			landed = append(landed, docs[i])
		case err == nil:
			lost = append(lost, docs[i])
		}
		return err
	})
	if err != nil {
		return nil, landed, err
	}
	slices.SortFunc(lost, func(x, y *Doc) int { return strings.Compare(x.Key, y.Key) })
	return lost, landed, nil
}

// putPart writes one document of the per-scope layout, storing the outbox it replaces first as
// the single document's writes do. It reports false on a conflict.
// On a retry it stores that outbox only once it has grown past the soft limit, as the single
// document's writes do: the events a partly written attempt left stay in their documents' outboxes
// until a later write, so each transition's events are where its readers look for them.
func (a *Authority) putPart(ctx context.Context, d *Doc, flush, first bool) (bool, error) {
	prev := a.remembered(d.Key)
	if prev != nil && prev.Rev == d.Rev && prev.Env != nil {
		if n := prev.Env.outboxLen(); n > 0 && ((first && (flush || n >= outboxBatch)) || n > outboxSoftLimit) {
			if err := a.archive(ctx, prev); err != nil {
				a.log.WarnContext(ctx, "storing the outbox's records failed; the next write tries again", "key", d.Key, "err", err)
			}
		}
	}
	a.trim(d.Key, d.Env)
	if prev != nil && prev.Env != nil {
		// The bound is on what earlier writes left unstored, as the single document's.
		inherited := 0
		for _, ev := range d.Env.Outbox {
			if ev.Seq <= prev.Env.EventSeq {
				inherited++
			}
		}
		if inherited > maxOutbox {
			return false, fmt.Errorf("write %s: %d events of earlier writes wait to be stored as records, more than %d: the store does not take records (%w)",
				d.Key, inherited, maxOutbox, ErrOutboxFull)
		}
	}
	rev, err := a.store.Put(ctx, d)
	if err == nil {
		d.Rev = rev
		a.remember(d)
		return true, nil
	}
	a.forget(d.Key)
	if errors.Is(err, ErrConflict) {
		return false, nil
	}
	return false, fmt.Errorf("write %s: %w", d.Key, err)
}

// putDir writes the directory, merging on a conflict: it only ever gains names.
func (a *Authority) putDir(ctx context.Context, d *Doc) error {
	want := d.Env.Dir
	for attempt := 0; attempt < maxAttempts; attempt++ {
		ok, err := a.putPart(ctx, d, false, true)
		if err != nil || ok {
			return err
		}
		cur, err := a.load(ctx, d.Key)
		if err != nil {
			return err
		}
		if err := movedError(cur); err != nil {
			return err // a Move marked it: the scope stays out of this store's environment
		}
		names := []string{}
		if cur.Env != nil {
			names = slices.Clone(cur.Env.Dir)
		}
		for _, n := range want {
			if _, found := slices.BinarySearch(names, n); !found {
				names = append(names, n)
				slices.Sort(names)
			}
		}
		if len(names) > MaxScopesSplit {
			return &InputError{Field: "scopes", Value: strings.Join(want, ","),
				Fix: fmt.Sprintf("environment %s would have %d scopes; at most %d fit, split it into several environments", d.Env.Name, len(names), MaxScopesSplit)}
		}
		if cur.Env != nil && len(names) == len(cur.Env.Dir) {
			return nil
		}
		d = &Doc{Key: d.Key, Rev: cur.Rev, Env: &Env{Name: d.Env.Name, Part: partDir, Dir: names}}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("write %s: gave up after %d conflicting attempts: %w", d.Key, maxAttempts, ErrConflict)
}

// completeScope applies the head's log to one scope: what a writer that lost a scope's race
// after its head's write does, and what the sweep does for a crashed accepter.
func (a *Authority) completeScope(ctx context.Context, env, name string) error {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		head, err := a.load(ctx, EnvKey(env))
		if err != nil {
			return err
		}
		if movedError(head) != nil {
			return nil // a Move carries the log as applied
		}
		v, err := a.readView(ctx, env, head, scopesOf([]string{name}), true)
		if err != nil {
			return err
		}
		p, err := a.split(v, v.doc.Env, a.clock.Now())
		if err != nil {
			return err
		}
		p.head, p.logged = nil, nil
		if len(p.scopes) == 0 || movedError(v.scopes[name]) != nil {
			return nil
		}
		ok, err := a.putPart(ctx, p.scopes[0], false, true)
		if err != nil {
			return err
		}
		if ok {
			a.wokeScopes(env, []string{name}) // an intent newer than their own reached the scope
			return nil
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("complete %s: gave up after %d conflicting attempts: %w", ScopeKey(env, name), maxAttempts, ErrConflict)
}

// trimLog drops the log entries of gens from the head: their scopes are written.
func (a *Authority) trimLog(ctx context.Context, env string, gens []int64) error {
	for attempt := 0; attempt < maxAttempts; attempt++ {
		head, err := a.load(ctx, EnvKey(env))
		if err != nil {
			return err
		}
		if !isSplit(head) || head.Env.Moved != nil {
			return nil
		}
		h := head.Env.clone()
		h.Log = slices.DeleteFunc(h.Log, func(l logEntry) bool { return l.Generation != 0 && slices.Contains(gens, l.Generation) })
		if len(h.Log) == len(head.Env.Log) {
			return nil
		}
		// The head carries the records of the intents of several scopes (their scope lists):
		// stored now, so that every later accept does not write them again. Its events stay for
		// a later write, as every write leaves its own.
		if len(h.Accepts) > 0 {
			if err := a.store.PutRecords(ctx, a.records(&Env{Name: env, Accepts: h.Accepts})); err == nil {
				h.Accepts = nil
			}
		}
		ok, err := a.putPart(ctx, &Doc{Key: head.Key, Rev: head.Rev, Pending: len(h.Log) > 0, Env: h}, false, true)
		if err != nil || ok {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return fmt.Errorf("trim the log of %s: gave up after %d conflicting attempts: %w", env, maxAttempts, ErrConflict)
}

// completeLog applies every entry of the head's log to all its scopes and drops the entries from
// the log: what the sweep does, and an accept that finds the log full.
func (a *Authority) completeLog(ctx context.Context, env string) error {
	// An entry reserved by an accept that did not finish is filled first: its intent is
	// accepted, as its accept would have done (counter.go).
	if _, err := a.fillReserved(ctx, env, ""); err != nil {
		return err
	}
	head, err := a.load(ctx, EnvKey(env))
	if err != nil || !isSplit(head) || len(head.Env.Log) == 0 || head.Env.Moved != nil {
		return err
	}
	var gens []int64
	names := map[string]bool{}
	for _, l := range head.Env.Log {
		if l.Generation == 0 {
			continue // reserved after the fill: the next pass completes it
		}
		gens = append(gens, l.Generation)
		for _, s := range l.Intent.Scopes {
			names[s] = true
		}
	}
	all := sortedKeys(names)
	if err := eachParallel(len(all), func(i int) error { return a.completeScope(ctx, env, all[i]) }); err != nil {
		return err
	}
	return a.trimLog(ctx, env, gens)
}

// readEnv reads env whole, from the store: the single document, or the per-scope layout's head
// and every scope, assembled (with the log applied, and observed derived from the scopes).
func (a *Authority) readEnv(ctx context.Context, env string) (*Doc, error) {
	return a.readEnvScopes(ctx, env, nil)
}

// readEnvScopes is readEnv of the scopes names only (nil: all) for the per-scope layout; the
// single document is read whole.
func (a *Authority) readEnvScopes(ctx context.Context, env string, names []string) (*Doc, error) {
	var nf namesFunc
	if names != nil {
		nf = scopesOf(names)
	}
	return a.readEnvNamed(ctx, env, nf)
}

// readEnvNamed is readEnvScopes of the scopes names gives for the head read (nil: all).
func (a *Authority) readEnvNamed(ctx context.Context, env string, nf namesFunc) (*Doc, error) {
	d, err := a.load(ctx, EnvKey(env))
	if err != nil || !isSplit(d) {
		return d, err
	}
	if isMigrating(d) {
		return singleOf(d), nil // a move to this layout not yet finished: the single document it was
	}
	v, err := a.readView(ctx, env, d, nf, true)
	if err != nil {
		return nil, err
	}
	e := v.doc.Env
	if e == nil {
		return v.doc, nil
	}
	e.Observed = 0
	e.settle()
	e.Tops, e.Results = nil, nil // what a transition would decide with, not what is stored
	// Every scope's newest event, so that readers that show "the newest" see one number.
	for _, name := range sortedKeys(v.scopes) {
		if s := v.scopes[name].Env; s != nil {
			e.EventSeq += s.EventSeq
		}
	}
	if h := v.head.Env; h != nil {
		e.EventSeq += h.EventSeq
	}
	return v.doc, nil
}

// stream is one numbered event stream of an environment: the head's, or one scope's.
type stream struct {
	Scope  string // "" for the head's own, or the single document's
	Newest int64
	Outbox []Event
}

func (v *view) streams() []stream {
	var out []stream
	if h := v.head.Env; h != nil {
		out = append(out, stream{Newest: h.EventSeq, Outbox: h.Outbox})
	}
	for _, name := range sortedKeys(v.scopes) {
		if s := v.scopes[name].Env; s != nil && s.EventSeq > 0 {
			out = append(out, stream{Scope: name, Newest: s.EventSeq, Outbox: s.Outbox})
		}
	}
	return out
}

func streamKey(env string, s stream, seq int64) string {
	if s.Scope == "" {
		return EventKey(env, seq)
	}
	return ScopeEventKey(env, s.Scope, seq)
}

// eventKey is the record key of event seq of the document e is.
func (e *Env) eventKey(ev Event) string {
	if e.Part == partScope {
		for name := range e.Scopes { // the document's one scope: its stream, whatever the event names
			return ScopeEventKey(e.Name, name, ev.Seq)
		}
	}
	return EventKey(e.Name, ev.Seq)
}

// splitTimeline is the timeline of an environment in the per-scope layout: its streams merged by
// time, newest first, up to limit events that happened before the time before (Unix nanoseconds;
// 0: the newest). Events of one time are kept on one page, so that paging by time skips none.
func (a *Authority) splitTimeline(ctx context.Context, e *Env, before int64, limit int) (*HistoryPage, error) {
	now := a.clock.Now()
	type cursor struct {
		s    stream
		next int64 // the next sequence number to read, going back
		buf  []Event
	}
	var curs []*cursor
	for _, s := range e.Streams {
		curs = append(curs, &cursor{s: s, next: s.Newest})
	}
	// fill reads up to n older events of c into its buffer.
	fill := func(cs []*cursor, n int64) error {
		var keys []string
		byKey := map[string]*cursor{}
		for _, c := range cs {
			for seq := c.next; seq > max(0, c.next-n); seq-- {
				if i := slices.IndexFunc(c.s.Outbox, func(ev Event) bool { return ev.Seq == seq }); i >= 0 {
					c.buf = append(c.buf, c.s.Outbox[i])
					continue
				}
				k := streamKey(e.Name, c.s, seq)
				keys = append(keys, k)
				byKey[k] = c
			}
			c.next = max(0, c.next-n)
		}
		for chunk := range slices.Chunk(keys, maxRecordsPerRead) {
			recs, err := a.store.GetRecords(ctx, chunk)
			if err != nil {
				return fmt.Errorf("read events: %w", err)
			}
			for _, r := range recs {
				if c := byKey[r.Key]; c != nil && r.Event != nil && now.Before(r.ExpiresAt) {
					c.buf = append(c.buf, *r.Event)
				}
			}
		}
		for _, c := range cs {
			slices.SortFunc(c.buf, func(x, y Event) int { return cmp.Compare(y.Seq, x.Seq) })
		}
		return nil
	}
	if err := fill(curs, int64(min(limit, 8))); err != nil {
		return nil, err
	}
	page := &HistoryPage{Events: []Event{}, Newest: e.EventSeq, Timed: true}
	for len(page.Events) < limit {
		// The cursor whose next event is the newest before the bound.
		var best *cursor
		for _, c := range curs {
			// Past the events at or after the bound: as many reads as it takes, each twice the
			// one before, so a page far back costs a few reads per stream.
			for n := int64(limit); ; n *= 2 {
				for len(c.buf) > 0 && before > 0 && c.buf[0].At.UnixNano() >= before {
					c.buf = c.buf[1:]
				}
				if len(c.buf) > 0 || c.next == 0 {
					break
				}
				if err := fill([]*cursor{c}, n); err != nil {
					return nil, err
				}
			}
			if len(c.buf) > 0 && (best == nil || c.buf[0].At.After(best.buf[0].At)) {
				best = c
			}
		}
		if best == nil {
			break
		}
		page.Events = append(page.Events, best.buf[0])
		best.buf = best.buf[1:]
	}
	if n := len(page.Events); n > 0 {
		// Keep every event of the oldest time on this page, so that the next one starts before it.
		oldest := page.Events[n-1].At
		for _, c := range curs {
			for {
				if len(c.buf) == 0 && c.next > 0 {
					if err := fill([]*cursor{c}, int64(limit)); err != nil {
						return nil, err
					}
				}
				if len(c.buf) == 0 || !c.buf[0].At.Equal(oldest) {
					break
				}
				page.Events = append(page.Events, c.buf[0])
				c.buf = c.buf[1:]
			}
		}
		more := false
		for _, c := range curs {
			more = more || len(c.buf) > 0 || c.next > 0
		}
		if more {
			page.Before = oldest.UnixNano()
		}
	}
	slices.SortFunc(page.Events, func(x, y Event) int {
		return cmp.Or(x.At.Compare(y.At), strings.Compare(x.Scope, y.Scope), cmp.Compare(x.Seq, y.Seq))
	})
	return page, nil
}

// headBackoff waits a random time below a ceiling that grows from 1 ms to 32 ms with each lost
// race for the head.
func headBackoff(ctx context.Context, attempt int) error {
	return pause(ctx, time.Millisecond<<min(attempt, 5))
}
