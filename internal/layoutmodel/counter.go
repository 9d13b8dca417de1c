package layoutmodel

import "fmt"

// The counter protocol (docs/design.md section 9, "Next: generations from an atomic counter") takes
// generations from a counter that a store increments in one request (DynamoDB's ADD), so that an
// accept of one scope writes no head, and accepts of different scopes never race. What it must keep
// is the order: every scope applies its intents in increasing generation. The hazard is an intent
// of several scopes, whose generation has to reach the head's log: a one-scope accept that took a
// newer generation without seeing that entry would apply its own first, and the older one after it.
//
// The protocol:
//
//   - A one-scope accept takes its generation from the counter, then reads the head. An entry of
//     the log that names its scope and is still reserved (no generation yet) it fills first (below)
//     and reads the head again. It then writes its scope: the filled entries that name the scope
//     and are older than its generation, then its own. If the scope holds a newer generation
//     already, it takes a new one instead.
//   - An accept of several scopes first reserves its entry in the log (a head write, no
//     generation), then takes its generation from the counter, then fills the entry with it (a
//     head write). Entries are filled in log order, each with a generation newer than the one
//     before it: an accepter whose entry has a reserved one before it fills that one first, and one
//     whose generation is not newer than its predecessor's takes another. An entry someone else
//     filled is adopted. It then writes each of its scopes with the filled entries that name it.
//   - Whoever fills an entry for another takes a generation of its own for it.
//
// Why the order holds: an entry older than a one-scope accept's generation was reserved before
// that generation was taken (it is reserved before its generation is, and a helper fills only
// reserved entries), so the accept's read of the head, after it took its generation, finds it,
// filled or to be filled first. An entry reserved after that read gets a newer generation.
//
// CheckCounter explores every interleaving of a few accepters, each crashing at any step, and then
// the sweep, which fills what is reserved and applies the log to every scope.

// CounterMutant is a deliberately broken variant of the counter protocol, which the check must
// catch.
type CounterMutant int

const (
	// CounterSound is the protocol as designed.
	CounterSound CounterMutant = iota
	// HeadBeforeAdd: a one-scope accept reads the head before it takes its generation.
	HeadBeforeAdd
	// IgnoreReserved: a one-scope accept goes on past a reserved entry that names its scope.
	IgnoreReserved
	// FillOutOfOrder: an entry is filled while one before it in the log is still reserved.
	FillOutOfOrder
	// KeepStaleGeneration: a one-scope accept that finds a newer generation on its scope writes its
	// own all the same.
	KeepStaleGeneration
	// AddBeforeReserve: an accept of several scopes takes its generation first and writes its entry
	// filled.
	AddBeforeReserve
)

// CounterScenario is what runs at once: intents, each accepted by its own accepter that may
// crash at any step.
type CounterScenario struct {
	Name    string
	Scopes  int      // at most maxScopes
	Intents []Intent // at most maxCounterIntents
}

const maxCounterIntents = 3

type cEntry struct {
	intent int8
	gen    uint8 // 0: reserved
}

type cHead struct {
	rev uint8
	n   uint8
	log [maxCounterIntents]cEntry
}

type cScope struct {
	rev     uint8
	top     uint8 // the newest generation applied
	applied uint8 // the intents applied
}

type cActor struct {
	pc      uint8
	ret     uint8 // where a helper goes back to
	gen     uint8 // its own generation, 0: none taken
	help    uint8 // the generation it took to fill another's entry
	next    int8  // the scope it writes next (several scopes)
	head    cHead
	doc     cScope
	crashed bool
	done    bool
}

type cWorld struct {
	counter uint8
	head    cHead
	scopes  [maxScopes]cScope
	actors  [maxCounterIntents]cActor
}

type counterChecker struct {
	sc    CounterScenario
	m     CounterMutant
	seen  map[cWorld]bool
	found string
}

// CheckCounter explores every interleaving of the scenario under the counter protocol (with the
// mutant) and returns the number of states and the first violation found.
func CheckCounter(sc CounterScenario, m CounterMutant) (Result, error) {
	if sc.Scopes > maxScopes || len(sc.Intents) > maxCounterIntents {
		return Result{}, fmt.Errorf("scenario %s is larger than the model holds (%d scopes, %d intents)", sc.Name, maxScopes, maxCounterIntents)
	}
	c := &counterChecker{sc: sc, m: m, seen: map[cWorld]bool{}}
	c.explore(cWorld{})
	return Result{States: len(c.seen), Violation: c.found}, nil
}

// Steps. One scope: take, read the head, (help), read the scope, write it. Several scopes: read
// the head, reserve, take, read the head, (help), fill, then read and write each scope.
const (
	cStart = iota
	sTake
	sHead
	sRead
	sWrite
	wHead
	wReserve
	wTake
	wFillRead
	wFill
	wRead
	wWrite
	hTake
	hFill
)

func (c *counterChecker) explore(w cWorld) {
	if c.found != "" || c.seen[w] {
		return
	}
	c.seen[w] = true
	moved := false
	for i := range c.sc.Intents {
		a := w.actors[i]
		if a.done || a.crashed {
			continue
		}
		moved = true
		next := w
		if msg := c.step(&next, i); msg != "" {
			c.found = msg
			return
		}
		canonicalCounter(&next)
		c.explore(next)
		if a.pc != cStart {
			crashed := w
			crashed.actors[i] = cActor{crashed: true}
			canonicalCounter(&crashed)
			c.explore(crashed)
		}
	}
	if !moved {
		if msg := c.sweep(w); msg != "" {
			c.found = msg
		}
	}
}

// canonicalCounter forgets what no accepter will read again: the copies its next step
// overwrites, and all of one that ended. States that differ only there behave alike.
func canonicalCounter(w *cWorld) {
	for i := range w.actors {
		a := &w.actors[i]
		if a.done || a.crashed {
			*a = cActor{done: a.done, crashed: a.crashed}
			continue
		}
		switch a.pc {
		case sHead, wHead, wFillRead:
			a.head = cHead{}
		case sRead, wRead:
			a.doc = cScope{}
		}
		if a.pc != hTake && a.pc != hFill {
			a.ret, a.help = 0, 0
		}
	}
}

func (c *counterChecker) step(w *cWorld, i int) string {
	a := &w.actors[i]
	in := c.sc.Intents[i]
	switch a.pc {
	case cStart:
		switch {
		case multi(in) && c.m == AddBeforeReserve:
			a.pc, a.ret = wTake, wHead
		case multi(in):
			a.pc = wHead
		case c.m == HeadBeforeAdd:
			a.pc, a.ret = sHead, sTake
		default:
			a.pc = sTake
		}
	case sTake:
		w.counter++
		a.gen = w.counter
		a.pc = sHead
		if c.m == HeadBeforeAdd {
			a.pc = sRead
		}
	case sHead:
		a.head = w.head
		a.pc = sRead
		if c.m == HeadBeforeAdd && a.gen == 0 {
			a.pc = sTake
		}
		s := firstScope(in.Scopes, 0)
		if k := c.reserved(a.head, s); k >= 0 && c.m != IgnoreReserved {
			a.pc, a.ret = hTake, sHead
		}
	case sRead:
		a.doc = w.scopes[firstScope(in.Scopes, 0)]
		a.pc = sWrite
	case sWrite:
		s := firstScope(in.Scopes, 0)
		if w.scopes[s].rev != a.doc.rev {
			a.pc = sRead
			return ""
		}
		d := a.doc
		for _, e := range a.head.log[:a.head.n] {
			if e.gen != 0 && e.gen < a.gen && c.names(e, s) && d.applied&(1<<e.intent) == 0 {
				if msg := c.apply(&d, int(e.intent), e.gen, s); msg != "" {
					return msg
				}
			}
		}
		if d.top > a.gen && c.m != KeepStaleGeneration {
			a.pc = sTake // a newer generation reached the scope: take a newer one, and read the head again
			if c.m == HeadBeforeAdd {
				a.pc, a.gen = sHead, 0
			}
			return ""
		}
		if msg := c.apply(&d, i, a.gen, s); msg != "" {
			return msg
		}
		d.rev++
		w.scopes[s] = d
		a.done = true
	case wHead:
		a.head = w.head
		a.pc = wReserve
	case wReserve:
		if w.head.rev != a.head.rev {
			a.pc = wHead
			return ""
		}
		h := a.head
		h.log[h.n] = cEntry{intent: int8(i), gen: a.gen} // reserved (filled, with AddBeforeReserve)
		h.n++
		h.rev++
		w.head, a.head = h, h
		a.pc = wTake
		if c.m == AddBeforeReserve {
			a.pc, a.next = wRead, int8(firstScope(in.Scopes, 0))
		}
	case wTake:
		w.counter++
		a.gen = w.counter
		a.pc = wFillRead
		if c.m == AddBeforeReserve {
			a.pc = wHead
		}
	case wFillRead:
		a.head = w.head
		k := c.entryOf(a.head, i)
		switch {
		case a.head.log[k].gen != 0:
			a.gen = a.head.log[k].gen // filled by another
			a.pc, a.next = wRead, int8(firstScope(in.Scopes, 0))
		case c.m != FillOutOfOrder && c.reservedBefore(a.head, k):
			a.pc, a.ret = hTake, wFillRead
		case a.gen <= c.before(a.head, k):
			a.pc = wTake
		default:
			a.pc = wFill
		}
	case wFill:
		if w.head.rev != a.head.rev {
			a.pc = wFillRead
			return ""
		}
		h := a.head
		h.log[c.entryOf(h, i)].gen = a.gen
		h.rev++
		w.head, a.head = h, h
		a.pc, a.next = wRead, int8(firstScope(in.Scopes, 0))
	case wRead:
		a.doc = w.scopes[a.next]
		a.pc = wWrite
	case wWrite:
		s := int(a.next)
		if w.scopes[s].rev != a.doc.rev {
			a.pc = wRead
			return ""
		}
		d := a.doc
		for _, e := range a.head.log[:a.head.n] {
			if e.gen != 0 && c.names(e, s) && d.applied&(1<<e.intent) == 0 {
				if msg := c.apply(&d, int(e.intent), e.gen, s); msg != "" {
					return msg
				}
			}
		}
		d.rev++
		w.scopes[s] = d
		if n := firstScope(in.Scopes, s+1); n >= 0 {
			a.next, a.pc = int8(n), wRead
			return ""
		}
		a.done = true
	case hTake:
		w.counter++
		a.help = w.counter
		a.pc = hFill
	case hFill:
		if w.head.rev != a.head.rev {
			a.pc = a.ret // read the head again
			return ""
		}
		k := c.reserved(a.head, -1)
		if c.m == FillOutOfOrder && !multi(c.sc.Intents[i]) {
			k = c.reserved(a.head, firstScope(c.sc.Intents[i].Scopes, 0))
		}
		if k < 0 {
			a.pc = a.ret
			return ""
		}
		if a.help <= c.before(a.head, k) {
			a.pc = hTake
			return ""
		}
		h := a.head
		h.log[k].gen = a.help
		h.rev++
		w.head, a.head = h, h
		a.pc = a.ret
	}
	return ""
}

// apply applies intent i at generation gen to scope s's document d, which must not hold a
// generation as new.
func (c *counterChecker) apply(d *cScope, i int, gen uint8, s int) string {
	if gen <= d.top {
		return fmt.Sprintf("scope %d applies intent %d at generation %d after generation %d", s, i, gen, d.top)
	}
	d.top = gen
	d.applied |= 1 << i
	return ""
}

func (c *counterChecker) names(e cEntry, s int) bool {
	return c.sc.Intents[e.intent].Scopes&(1<<s) != 0
}

// reserved is the first reserved entry of h that names scope s (any scope: s < 0), or -1.
func (c *counterChecker) reserved(h cHead, s int) int {
	for k, e := range h.log[:h.n] {
		if e.gen == 0 && (s < 0 || c.names(e, s)) {
			return k
		}
	}
	return -1
}

// reservedBefore reports whether an entry before entry k is still reserved.
func (c *counterChecker) reservedBefore(h cHead, k int) bool {
	r := c.reserved(h, -1)
	return r >= 0 && r < k
}

// before is the newest generation of the filled entries before entry k.
func (c *counterChecker) before(h cHead, k int) uint8 {
	g := uint8(0)
	for _, e := range h.log[:k] {
		g = max(g, e.gen)
	}
	return g
}

func (c *counterChecker) entryOf(h cHead, i int) int {
	for k, e := range h.log[:h.n] {
		if int(e.intent) == i {
			return k
		}
	}
	panic(fmt.Sprintf("intent %d has no entry", i))
}

// sweep checks a state where every accepter ended or crashed: the sweep fills every reserved
// entry in log order and applies the log to every scope, and no scope applies an intent after a
// newer one.
func (c *counterChecker) sweep(w cWorld) string {
	h := w.head
	for k := range h.log[:h.n] {
		if h.log[k].gen == 0 {
			w.counter++
			h.log[k].gen = w.counter
		}
	}
	for s := range c.sc.Scopes {
		d := w.scopes[s]
		for _, e := range h.log[:h.n] {
			if c.names(e, s) && d.applied&(1<<e.intent) == 0 {
				if msg := c.apply(&d, int(e.intent), e.gen, s); msg != "" {
					return "after every accepter ended, the sweep: " + msg
				}
			}
		}
	}
	return ""
}
