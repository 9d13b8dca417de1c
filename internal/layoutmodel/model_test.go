package layoutmodel

import (
	"strings"
	"testing"
)

// Scopes x=0, y=1, z=2 as bit sets.
const (
	x = 1 << iota
	y
	z
)

var scenarios = []Scenario{
	{Name: "a two-scope intent and gates on each scope, one of them twice", Scopes: 2,
		Intents: []Intent{{Scopes: x | y}}, Gates: []int{0, 1, 0}},
	{Name: "a two-scope intent racing a one-scope intent", Scopes: 2,
		Intents: []Intent{{Scopes: x | y}, {Scopes: x}}, Gates: []int{1, 0}},
	{Name: "two overlapping two-scope intents", Scopes: 3,
		Intents: []Intent{{Scopes: x | y}, {Scopes: y | z}}, Gates: []int{0, 2}},
	{Name: "a three-scope intent", Scopes: 3,
		Intents: []Intent{{Scopes: x | y | z}}, Gates: []int{2, 0, 1}},
}

// TestProtocolsKeepMultiScopeAcceptsAllOrNone: under both protocols, in every interleaving with
// the accepters crashing at any step, a gate that starts after another gate saw an intent (or after
// the intent's accept returned) sees it too, when it names the gate's scope; and whatever the
// crashes left, the next writer of each scope completes.
func TestProtocolsKeepMultiScopeAcceptsAllOrNone(t *testing.T) {
	for _, p := range []Protocol{FreshHead, Reservations} {
		for _, sc := range scenarios {
			r, err := Check(sc, p, Sound)
			if err != nil {
				t.Fatal(err)
			}
			if r.Violation != "" {
				t.Errorf("%s, %s: %s", name(p), sc.Name, r.Violation)
			}
			t.Logf("%s, %s: %d states", name(p), sc.Name, r.States)
		}
	}
}

// TestTheCheckCatchesBrokenProtocols: each broken variant is caught in at least one scenario, with
// the counterexample the design names (a gate on one scope sees the intent, a later one on the
// other scope does not).
func TestTheCheckCatchesBrokenProtocols(t *testing.T) {
	for _, c := range []struct {
		p    Protocol
		m    Mutant
		name string
	}{
		{FreshHead, RememberedHead, "fresh head, deciding on a remembered head"},
		{Reservations, RememberedHead, "reservations, not reading the head when one is found"},
		{Reservations, NoReservation, "reservations, a multi-scope intent that reserves nothing"},
		{Reservations, VoidWithoutHead, "reservations, dropped without voiding them in the head"},
	} {
		caught := ""
		for _, sc := range scenarios {
			r, err := Check(sc, c.p, c.m)
			if err != nil {
				t.Fatal(err)
			}
			if r.Violation != "" {
				caught = sc.Name + ": " + r.Violation
				break
			}
		}
		if caught == "" {
			t.Errorf("%s: no scenario caught it", c.name)
			continue
		}
		if !strings.Contains(caught, "does not") && !strings.Contains(caught, "both voided") {
			t.Errorf("%s: caught as %q; want a gate that misses an intent", c.name, caught)
		}
		t.Logf("%s: %s", c.name, caught)
	}
}

func name(p Protocol) string {
	if p == FreshHead {
		return "fresh head"
	}
	return "reservations"
}
