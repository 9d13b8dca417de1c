package faults

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil"
)

// A named lease as a register: who holds it, and the token of the newest grant.
type leaseState struct {
	holder string
	token  int64
}

type leaseInput struct {
	op     string // "acquire" or "release"
	client string
	token  int64 // release: the token of the grant released
}

type leaseOutput struct {
	unknown bool   // the call failed: it may or may not have taken effect
	granted bool   // acquire: granted; release: released
	token   int64  // acquire granted: the grant's token
	holder  string // acquire refused: who holds it
}

// leaseModel is the contract of Acquire and ReleaseNamed on a lease that never expires: a free
// lease, or one the caller holds, is granted with the next token (every grant takes a new one, a
// repeat by the holder too); a lease held by another is refused, naming the holder; a release
// with the current grant's token frees it and keeps the token, any other is refused as lost. A
// call that failed took effect or did not.
var leaseModel = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{leaseState{}} },
	Step: func(state, input, output interface{}) []interface{} {
		s, in, out := state.(leaseState), input.(leaseInput), output.(leaseOutput)
		switch in.op {
		case "acquire":
			if s.holder == "" || s.holder == in.client {
				next := leaseState{holder: in.client, token: s.token + 1}
				switch {
				case out.unknown:
					return []interface{}{next, s}
				case out.granted && out.token == next.token:
					return []interface{}{next}
				}
				return nil
			}
			if out.unknown || (!out.granted && out.holder == s.holder) {
				return []interface{}{s}
			}
			return nil
		case "release":
			if s.holder == in.client && s.token == in.token {
				next := leaseState{token: s.token}
				switch {
				case out.unknown:
					return []interface{}{next, s}
				case out.granted:
					return []interface{}{next}
				}
				return nil
			}
			if out.unknown || !out.granted {
				return []interface{}{s}
			}
			return nil
		}
		return nil
	},
	DescribeOperation: func(input, output interface{}) string {
		return fmt.Sprintf("%+v -> %+v", input, output)
	},
}

// checkTimeout bounds one history's check; a history that cannot be decided in it fails the test.
const checkTimeout = 30 * time.Second

// raceLinearizable: in each round 8 processes acquire and release one lease of their own round,
// 16 calls each, all starting at once, while writes lose their requests and responses. The history
// of calls and answers must be linearizable against leaseModel: no two holders at once, no grant
// applied twice, no release told "lost" that took effect.
func raceLinearizable(t *testing.T, n *network, rounds int) *findings {
	const clients, opsEach = 8, 16
	ctx := t.Context()
	procs := n.processes(clients) // leases never expire here: a holder changes only by a release
	f := newFindings(rounds)
	n.proxy.Set(lossy(0.15, 0.1))
	var ops, unknowns int
	for round := range rounds {
		lease := fmt.Sprintf("shared-%d", round)
		base := time.Now()
		stamp := func() int64 { return int64(time.Since(base)) }
		var mu sync.Mutex
		var history []porcupine.Operation
		together(clients, func(c int) {
			me := fmt.Sprintf("c%d", c)
			var mine *authority.Grant
			for range opsEach {
				var in leaseInput
				var out leaseOutput
				call := stamp()
				if mine == nil {
					in = leaseInput{op: "acquire", client: me}
					g, err := procs[c].Acquire(ctx, lease, me, "deploy", time.Hour)
					var held *authority.HeldError
					switch {
					case err == nil:
						mine, out = g, leaseOutput{granted: true, token: g.Tokens[lease]}
					case errors.As(err, &held):
						out = leaseOutput{holder: held.Holder}
					default:
						out = leaseOutput{unknown: true}
					}
				} else {
					in = leaseInput{op: "release", client: me, token: mine.Tokens[lease]}
					err := procs[c].ReleaseNamed(ctx, mine)
					switch {
					case err == nil:
						out = leaseOutput{granted: true}
					case errors.Is(err, authority.ErrLeaseLost):
						out = leaseOutput{}
					default:
						out = leaseOutput{unknown: true}
					}
					mine = nil
				}
				ret := stamp()
				if out.unknown {
					ret = 1 << 62 // an operation whose effect is unknown may take effect at any later time
				}
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
				mu.Unlock()
			}
		})
		ops += len(history)
		for _, op := range history {
			if op.Output.(leaseOutput).unknown {
				unknowns++
			}
		}
		switch res := porcupine.CheckOperationsTimeout(leaseModel.ToModel(), history, checkTimeout); res {
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

// TestLeaseModelRejectsBrokenHistories makes sure the model can fail.
func TestLeaseModelRejectsBrokenHistories(t *testing.T) {
	acquire := func(client string, call, ret int64, out leaseOutput) porcupine.Operation {
		return porcupine.Operation{Input: leaseInput{op: "acquire", client: client}, Call: call, Output: out, Return: ret}
	}
	release := func(client string, token, call, ret int64, out leaseOutput) porcupine.Operation {
		return porcupine.Operation{Input: leaseInput{op: "release", client: client, token: token}, Call: call, Output: out, Return: ret}
	}
	cases := map[string][]porcupine.Operation{
		"two holders": {
			acquire("c0", 0, 10, leaseOutput{granted: true, token: 1}),
			acquire("c1", 20, 30, leaseOutput{granted: true, token: 2}),
		},
		"a grant applied twice": {
			acquire("c0", 0, 10, leaseOutput{granted: true, token: 2}),
		},
		"a release told lost that took effect": {
			acquire("c0", 0, 10, leaseOutput{granted: true, token: 1}),
			release("c0", 1, 20, 30, leaseOutput{}),
			acquire("c1", 40, 50, leaseOutput{granted: true, token: 2}),
		},
		"a false locked": {
			acquire("c0", 0, 10, leaseOutput{holder: "c0"}),
		},
	}
	for name, history := range cases {
		t.Run(name, func(t *testing.T) {
			if porcupine.CheckOperations(leaseModel.ToModel(), history) {
				t.Fatal("accepted as linearizable")
			}
		})
	}
	// And it accepts what may happen: an acquire whose answer was lost, and that took effect.
	ok := []porcupine.Operation{
		acquire("c0", 0, 1<<62, leaseOutput{unknown: true}),
		acquire("c1", 20, 30, leaseOutput{holder: "c0"}),
		acquire("c0", 40, 50, leaseOutput{granted: true, token: 2}),
		release("c0", 2, 60, 70, leaseOutput{granted: true}),
		acquire("c1", 80, 90, leaseOutput{granted: true, token: 3}),
	}
	if !porcupine.CheckOperations(leaseModel.ToModel(), ok) {
		t.Fatal("a history with an ambiguous grant that took effect was rejected")
	}
}
