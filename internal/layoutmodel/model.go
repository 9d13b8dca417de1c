// Package layoutmodel checks, exhaustively, the accept and gate protocol of the per-scope layout
// (docs/design.md, "The next layout: a document per scope") before it is built: every
// interleaving of a few accepters and gates, each a sequence of single-document reads and
// compare-and-swap writes, with the accepters crashing at any step. It checks that a multi-scope
// intent is accepted on all its scopes or none as far as any gate can see, that an accept that
// returned is seen by every gate that starts after it, and that whatever a crash leaves is
// completed by the next writer of each scope.
//
// The model keeps only what the rule is about: the head (its revision, its log of accepted intents
// and the reservations it voided) and, per scope, a revision, the intents applied there and the
// reservations in flight. Which commit deploys is not modelled; what a gate sees is.
package layoutmodel

import (
	"fmt"
	"math/bits"
)

// Protocol is a way of accepting intents and deciding at gates.
type Protocol int

const (
	// FreshHead: every transition of a scope reads the head first and applies the log entries
	// naming the scope that it does not hold yet; no reservations.
	FreshHead Protocol = iota
	// Reservations: a multi-scope intent reserves its scopes before the head's write; a transition
	// reads the head only when it finds a reservation, and may void one whose intent is not in the
	// log.
	Reservations
)

// Mutant is a deliberately broken variant, which the check must catch.
type Mutant int

const (
	// Sound is the protocol as designed.
	Sound Mutant = iota
	// RememberedHead: a gate decides on the head it read before anything happened.
	RememberedHead
	// NoReservation: a multi-scope intent writes the head without reserving its scopes first.
	NoReservation
	// VoidWithoutHead: a gate drops a reservation without voiding it through the head.
	VoidWithoutHead
)

// Intent is an intent of a scenario: the scopes it names, as a bit set (scope i is bit i).
type Intent struct{ Scopes uint8 }

// Scenario is what runs at once: intents, each accepted by its own accepter that may crash at any
// step, and gates, each on one scope.
type Scenario struct {
	Name    string
	Scopes  int      // at most maxScopes
	Intents []Intent // at most maxIntents
	Gates   []int    // the scope of each gate; at most maxGates
}

const (
	maxScopes  = 3
	maxIntents = 3
	maxGates   = 4
	maxActors  = maxIntents + maxGates + 1 // and the writer that comes after them all (recovered)
)

type scopeDoc struct {
	rev      uint8
	applied  uint8 // intents applied here
	reserved uint8 // reservations of intents in flight
}

type head struct {
	rev    uint8
	log    uint8 // intents accepted
	voided uint8 // reservations voided: their intents can no longer be accepted
}

// actor is one accepter or gate: where it is, and what it read.
type actor struct {
	pc      uint8
	next    uint8 // the scope it works on next (accepters)
	head    head  // the head as it read it
	doc     scopeDoc
	crashed bool
	done    bool
	started bool
	keep    bool // a gate that leaves the reservations it found young in place
	// recovery: the writer after every actor ended, which reads the head whatever the protocol
	// (a later accept, the sweep).
	recovery bool
	// seen is what a gate saw when its write landed; after is who had ended when it started.
	seen  uint8
	after uint16
}

type world struct {
	head   head
	scopes [maxScopes]scopeDoc
	actors [maxActors]actor
	ended  uint16 // the actors that ended (gates whose write landed, accepters that returned)
}

// Result is what a check found.
type Result struct {
	States    int
	Violation string // empty: none
}

type checker struct {
	sc      Scenario
	p       Protocol
	m       Mutant
	seen    map[world]bool
	initial head
	found   string
}

// Check explores every interleaving of the scenario under the protocol (with the mutant) and
// returns the number of states and the first violation found.
func Check(sc Scenario, p Protocol, m Mutant) (Result, error) {
	if sc.Scopes > maxScopes || len(sc.Intents) > maxIntents || len(sc.Gates) > maxGates {
		return Result{}, fmt.Errorf("scenario %s is larger than the model holds (%d scopes, %d intents, %d gates)", sc.Name, maxScopes, maxIntents, maxGates)
	}
	c := &checker{sc: sc, p: p, m: m, seen: map[world]bool{}}
	c.explore(world{})
	return Result{States: len(c.seen), Violation: c.found}, nil
}

func (c *checker) isGate(i int) bool { return i >= len(c.sc.Intents) }

func (c *checker) gateScope(i int) int { return c.sc.Gates[i-len(c.sc.Intents)] }

func (c *checker) actorCount() int { return len(c.sc.Intents) + len(c.sc.Gates) }

func (c *checker) explore(w world) {
	if c.found != "" || c.seen[w] {
		return
	}
	c.seen[w] = true
	moved := false
	for i := range c.actorCount() {
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
		c.canonical(&next)
		c.explore(next)
		if c.isGate(i) && a.pc == gateReservedHeadRead && next.actors[i].pc == gateVoidWrite {
			// The reservation may be too young to void: the gate goes on without its intent, and
			// leaves the reservation in place.
			young := next
			young.actors[i].pc = gateWrite
			young.actors[i].keep = true
			c.explore(young)
		}
		if !c.isGate(i) && a.pc > 0 && readStep(a.pc) {
			// The accepter crashes here: it never takes another step. Stopping before a read
			// leaves what stopping before the write after it leaves, so only these are tried.
			crashed := w
			crashed.actors[i].crashed = true
			c.canonical(&crashed)
			c.explore(crashed)
		}
	}
	if !moved {
		if msg := c.recovered(w); msg != "" {
			c.found = msg
		}
	}
}

// readStep reports whether an accepter's next step is a read.
func readStep(pc uint8) bool {
	return pc == accReserveRead || pc == accHeadRead || pc == accApplyRead
}

// canonical forgets what no actor will read again: the copies an actor holds that its next step
// overwrites, and everything but what it saw of an actor that ended. States that differ only
// there behave alike, so the search visits them once.
func (c *checker) canonical(w *world) {
	for i := range c.actorCount() {
		a := &w.actors[i]
		if a.done || a.crashed {
			*a = actor{done: a.done, crashed: a.crashed, seen: a.seen, after: a.after, started: a.started}
			continue
		}
		if c.isGate(i) {
			switch a.pc {
			case gateStart, gateHeadRead:
				a.head, a.doc = head{}, scopeDoc{}
			case gateScopeRead:
				a.doc = scopeDoc{}
			case gateReservedHeadRead:
				a.head = head{}
			}
			continue
		}
		switch a.pc {
		case accReserveRead, accHeadRead:
			a.head, a.doc = head{}, scopeDoc{}
		case accApplyRead:
			a.doc = scopeDoc{}
		}
	}
}

// apply is what a writer of scope s holds after applying the log entries of h that name s.
func (c *checker) apply(h head, doc scopeDoc, s int) uint8 {
	applied := doc.applied
	for i, in := range c.sc.Intents {
		if h.log&(1<<i) != 0 && in.Scopes&(1<<s) != 0 {
			applied |= 1 << i
		}
	}
	return applied
}

func multi(in Intent) bool { return bits.OnesCount8(in.Scopes) > 1 }

// step takes actor i's next step in w; it returns a violation found by the step, if any.
func (c *checker) step(w *world, i int) string {
	if c.isGate(i) {
		return c.gateStep(w, i)
	}
	c.acceptStep(w, i)
	return ""
}

// Accepter: (reserve each scope, with Reservations, for a multi-scope intent) read the head, write
// it with the intent in its log, then apply the intent to each scope in order.
const (
	accReserveRead = iota + 1 // 0: not started
	accReserveWrite
	accHeadRead
	accHeadWrite
	accApplyRead
	accApplyWrite
)

func (c *checker) acceptStep(w *world, i int) {
	a := &w.actors[i]
	in := c.sc.Intents[i]
	reserve := c.p == Reservations && multi(in) && c.m != NoReservation
	if a.pc == 0 {
		a.pc = accHeadRead
		if reserve {
			a.pc = accReserveRead
		}
		a.next = uint8(firstScope(in.Scopes, 0))
	}
	switch a.pc {
	case accReserveRead:
		a.doc = w.scopes[a.next]
		a.pc = accReserveWrite
	case accReserveWrite:
		if w.scopes[a.next].rev != a.doc.rev {
			a.pc = accReserveRead
			return
		}
		d := a.doc
		d.rev++
		d.reserved |= 1 << i
		w.scopes[a.next] = d
		if n := firstScope(in.Scopes, int(a.next)+1); n >= 0 {
			a.next, a.pc = uint8(n), accReserveRead
			return
		}
		a.pc = accHeadRead
	case accHeadRead:
		a.head = w.head
		a.pc = accHeadWrite
	case accHeadWrite:
		if w.head.rev != a.head.rev {
			a.pc = accHeadRead
			return
		}
		if a.head.voided&(1<<i) != 0 {
			// A gate voided the reservation: the accept fails, and nothing of it is seen anywhere.
			a.done = true
			w.ended |= 1 << i
			return
		}
		h := a.head
		h.rev++
		h.log |= 1 << i
		w.head, a.head = h, h
		a.next, a.pc = uint8(firstScope(in.Scopes, 0)), accApplyRead
	case accApplyRead:
		a.doc = w.scopes[a.next]
		a.pc = accApplyWrite
	case accApplyWrite:
		if w.scopes[a.next].rev != a.doc.rev {
			a.pc = accApplyRead
			return
		}
		d := a.doc
		d.rev++
		d.applied = c.apply(a.head, d, int(a.next)) | 1<<i
		d.reserved &^= 1 << i
		w.scopes[a.next] = d
		if n := firstScope(in.Scopes, int(a.next)+1); n >= 0 {
			a.next, a.pc = uint8(n), accApplyRead
			return
		}
		a.done = true
		w.ended |= 1 << i
	}
}

// Gate on scope s: (read the head) read the scope, decide what it sees, write the scope
// conditionally (the gate records its decision, as a lease or a refusal). With Reservations it
// reads the head only when the scope holds a reservation, and voids a reservation whose intent is
// not in the log through the head before it drops it.
const (
	gateStart = iota
	gateHeadRead
	gateScopeRead
	gateReservedHeadRead
	gateVoidWrite
	gateWrite
)

func (c *checker) gateStep(w *world, i int) string {
	a := &w.actors[i]
	s := c.gateScope(i)
	switch a.pc {
	case gateStart:
		if !a.started {
			// When it started: a retry after a conflict is the same gate, which may still be put
			// before what ended meanwhile.
			a.after, a.started = w.ended, true
		}
		a.head, a.keep = c.initial, false
		a.pc = gateScopeRead
		if (c.p == FreshHead && c.m != RememberedHead) || a.recovery {
			a.pc = gateHeadRead
		}
	case gateHeadRead:
		a.head = w.head
		a.pc = gateScopeRead
	case gateScopeRead:
		a.doc = w.scopes[s]
		a.pc = gateWrite
		if c.p == Reservations && a.doc.reserved != 0 && (c.m != RememberedHead || a.recovery) {
			a.pc = gateReservedHeadRead
		}
	case gateReservedHeadRead:
		a.head = w.head
		a.pc = gateWrite
		if a.doc.reserved&^a.head.log != 0 && c.m != VoidWithoutHead {
			// A reservation whose intent is not accepted: void it through the head first (the
			// model lets every such reservation be old enough to void).
			a.pc = gateVoidWrite
		}
	case gateVoidWrite:
		if w.head.rev != a.head.rev {
			a.pc = gateReservedHeadRead
			return ""
		}
		h := a.head
		h.rev++
		h.voided |= a.doc.reserved &^ a.head.log
		w.head, a.head = h, h
		a.pc = gateWrite
	case gateWrite:
		if w.scopes[s].rev != a.doc.rev {
			a.pc = gateStart
			return ""
		}
		d := a.doc
		d.rev++
		d.applied = c.apply(a.head, d, s)
		switch {
		case c.p != Reservations:
		case c.m == VoidWithoutHead:
			d.reserved = 0
		case a.keep:
			d.reserved &^= a.head.log // applied now; the young ones stay
		default:
			// Reservations of accepted intents are applied; voided ones are dropped.
			d.reserved &^= a.head.log | a.head.voided
		}
		w.scopes[s] = d
		a.seen, a.done = d.applied, true
		w.ended |= 1 << i
		return c.checkGate(w, i)
	}
	return ""
}

// checkGate checks the gate that just ended against everything that had ended before it started:
// each intent a gate saw there, or an accept that returned, naming this gate's scope, must be seen
// here too.
func (c *checker) checkGate(w *world, i int) string {
	a := w.actors[i]
	s := c.gateScope(i)
	for j := range c.actorCount() {
		if a.after&(1<<j) == 0 {
			continue
		}
		var before uint8
		if c.isGate(j) {
			before = w.actors[j].seen
		} else if w.head.log&(1<<j) != 0 {
			before = 1 << j // the accept of intent j returned
		}
		for k, in := range c.sc.Intents {
			if before&(1<<k) != 0 && in.Scopes&(1<<s) != 0 && a.seen&(1<<k) == 0 {
				return fmt.Sprintf("intent %d (scopes %03b) was seen by %s, which ended before gate %d on scope %d started, and gate %d does not see it",
					k, in.Scopes, c.who(j), i, s, i)
			}
		}
	}
	return ""
}

func (c *checker) who(j int) string {
	if c.isGate(j) {
		return fmt.Sprintf("gate %d on scope %d", j, c.gateScope(j))
	}
	return fmt.Sprintf("the accept of intent %d", j)
}

// recovered checks a state where every actor ended or crashed: the next writer of each scope, a
// gate that starts now, sees every intent accepted in the log that names the scope, and no intent
// both voided and accepted.
func (c *checker) recovered(w world) string {
	if w.head.log&w.head.voided != 0 {
		return fmt.Sprintf("intents %03b both voided and accepted", w.head.log&w.head.voided)
	}
	for s := range c.sc.Scopes {
		next := w
		i := c.actorCount() // a fresh writer
		next.actors[i] = actor{recovery: true}
		sc := c.sc
		sc.Gates = append(append([]int(nil), sc.Gates...), s)
		fresh := &checker{sc: sc, p: c.p, m: c.m, seen: map[world]bool{}}
		for !next.actors[i].done {
			if msg := fresh.gateStep(&next, i); msg != "" {
				return "after every actor ended: " + msg
			}
		}
		for k, in := range c.sc.Intents {
			if w.head.log&(1<<k) != 0 && in.Scopes&(1<<s) != 0 && next.actors[i].seen&(1<<k) == 0 {
				return fmt.Sprintf("intent %d is accepted, but after every actor ended the next writer of scope %d does not apply it", k, s)
			}
		}
	}
	return ""
}

// firstScope is the lowest scope of set at or above from; -1 when none.
func firstScope(set uint8, from int) int {
	for s := from; s < maxScopes; s++ {
		if set&(1<<s) != 0 {
			return s
		}
	}
	return -1
}
