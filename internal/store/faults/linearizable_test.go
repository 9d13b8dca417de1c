package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/latestwins/latestwins/internal/testutil"
	"github.com/latestwins/latestwins/internal/testutil/leasemodel"
)

// checkTimeout bounds one history's check; a history that cannot be decided in it fails the test.
const checkTimeout = 30 * time.Second

// raceLinearizable: in each round 8 processes acquire and release one lease of their own round,
// 16 calls each, all starting at once, while writes lose their requests and responses. The history
// of calls and answers must be linearizable against leasemodel.Model: no two holders at once, no
// grant applied twice, no release told "lost" that took effect.
func raceLinearizable(t *testing.T, n *network, rounds int) *findings {
	const clients, opsEach = 8, 16
	ctx := t.Context()
	procs := n.processes(clients) // leases never expire here: a holder changes only by a release
	f := newFindings(rounds)
	n.proxy.Set(lossy(0.15, 0.1))
	var ops, unknowns int
	for round := range rounds {
		lease := fmt.Sprintf("shared-%d", round)
		history, unknown := leasemodel.Race(ctx, procs, lease, opsEach)
		ops, unknowns = ops+len(history), unknowns+unknown
		switch res := leasemodel.Check(history, checkTimeout); res {
		case porcupine.Illegal:
			f.violation(round, "the history of %d calls on %s is not linearizable", len(history), lease)
		case porcupine.Unknown:
			t.Fatalf("round %d: the history of %d calls on %s could not be checked within %s", round, len(history), lease, checkTimeout)
		}
	}
	c := n.proxy.Counts()
	if c.LostResponses == 0 {
		t.Fatalf("no response was lost (%+v): ambiguous writes were not exercised", c)
	}
	f.note("%d rounds, %d calls of which %d ended in an error; proxy: %+v", rounds, ops, unknowns, c)
	return f
}

func TestLeaseHistoryIsLinearizableUnderFaults(t *testing.T) {
	t.Parallel()
	raceLinearizable(t, newNetwork(t, 3, nil), testutil.SoakRounds(t, linearizableRounds)).requireNone(t)
}
