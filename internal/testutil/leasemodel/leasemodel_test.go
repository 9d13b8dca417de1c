package leasemodel

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// TestLeaseModelRejectsBrokenHistories makes sure the model can fail: each history below breaks the
// lease's contract in one way, and the model must reject it; and it accepts what may happen.
func TestLeaseModelRejectsBrokenHistories(t *testing.T) {
	t.Parallel()
	cases := map[string][]porcupine.Operation{
		"two holders": {
			Acquire("c0", 0, 10, Output{Granted: true, Token: 1}),
			Acquire("c1", 20, 30, Output{Granted: true, Token: 2}),
		},
		"a grant applied twice": {
			Acquire("c0", 0, 10, Output{Granted: true, Token: 2}),
		},
		"a release told lost that took effect": {
			Acquire("c0", 0, 10, Output{Granted: true, Token: 1}),
			Release("c0", 1, 20, 30, Output{}),
			Acquire("c1", 40, 50, Output{Granted: true, Token: 2}),
		},
		"a false locked": {
			Acquire("c0", 0, 10, Output{Holder: "c0"}),
		},
		"a token that goes back": {
			Acquire("c0", 0, 10, Output{Granted: true, Token: 1}),
			Release("c0", 1, 20, 30, Output{Granted: true}),
			Acquire("c1", 40, 50, Output{Granted: true, Token: 1}),
		},
	}
	for name, history := range cases {
		t.Run(name, func(t *testing.T) {
			if porcupine.CheckOperations(Model.ToModel(), history) {
				t.Fatal("accepted as linearizable")
			}
		})
	}
	// And it accepts what may happen: an acquire whose answer was lost, and that took effect.
	ok := []porcupine.Operation{
		Acquire("c0", 0, Never, Output{Unknown: true}),
		Acquire("c1", 20, 30, Output{Holder: "c0"}),
		Acquire("c0", 40, 50, Output{Granted: true, Token: 2}),
		Release("c0", 2, 60, 70, Output{Granted: true}),
		Acquire("c1", 80, 90, Output{Granted: true, Token: 3}),
	}
	if !porcupine.CheckOperations(Model.ToModel(), ok) {
		t.Fatal("a history with an ambiguous grant that took effect was rejected")
	}
}
