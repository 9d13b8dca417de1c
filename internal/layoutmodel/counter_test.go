package layoutmodel

import (
	"strings"
	"testing"
)

var counterScenarios = []CounterScenario{
	{Name: "a two-scope intent and a one-scope intent on one of its scopes", Scopes: 2,
		Intents: []Intent{{Scopes: x | y}, {Scopes: x}}},
	{Name: "two one-scope intents on one scope and a two-scope intent", Scopes: 2,
		Intents: []Intent{{Scopes: x}, {Scopes: x | y}, {Scopes: x}}},
	{Name: "two overlapping two-scope intents and a one-scope intent", Scopes: 3,
		Intents: []Intent{{Scopes: x | y}, {Scopes: y | z}, {Scopes: y}}},
	{Name: "two two-scope intents on the same scopes and a one-scope intent", Scopes: 2,
		Intents: []Intent{{Scopes: x | y}, {Scopes: x | y}, {Scopes: y}}},
}

// TestCounterKeepsEachScopeInOrder: with generations from an atomic counter, in every
// interleaving with the accepters crashing at any step, every scope applies its intents in
// increasing generation, and so does the sweep that finishes what the crashes left.
func TestCounterKeepsEachScopeInOrder(t *testing.T) {
	for _, sc := range counterScenarios {
		r, err := CheckCounter(sc, CounterSound)
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation != "" {
			t.Errorf("%s: %s", sc.Name, r.Violation)
		}
		t.Logf("%s: %d states", sc.Name, r.States)
	}
}

// TestTheCounterCheckCatchesBrokenProtocols: each broken variant puts an older generation after a
// newer one on some scope in at least one scenario.
func TestTheCounterCheckCatchesBrokenProtocols(t *testing.T) {
	for _, c := range []struct {
		m    CounterMutant
		name string
	}{
		{HeadBeforeAdd, "a one-scope accept that reads the head before it takes its generation"},
		{IgnoreReserved, "a one-scope accept that goes on past a reserved entry of its scope"},
		{FillOutOfOrder, "entries filled out of log order"},
		{KeepStaleGeneration, "a one-scope accept that keeps a generation older than its scope's"},
		{AddBeforeReserve, "a two-scope accept that takes its generation before it reserves its entry"},
	} {
		caught := ""
		for _, sc := range counterScenarios {
			r, err := CheckCounter(sc, c.m)
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
		if !strings.Contains(caught, "after generation") {
			t.Errorf("%s: caught as %q; want a scope that applies an older generation after a newer one", c.name, caught)
		}
		t.Logf("%s: %s", c.name, caught)
	}
}
