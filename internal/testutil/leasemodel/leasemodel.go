// Package leasemodel is the contract of a named lease as a porcupine model, and a race that records
// a history of acquires and releases by separate processes to check against it. The fault tests of
// every store (DynamoDB behind a proxy that loses requests and answers, the git store behind one
// that also refuses connections) check their histories with the same model.
package leasemodel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/latestwins/latestwins/internal/authority"
)

// State is a named lease as a register: who holds it, and the token of the newest grant.
type State struct {
	Holder string
	Token  int64
}

// Input is one call.
type Input struct {
	Op     string // "acquire" or "release"
	Client string
	Token  int64 // release: the token of the grant released
}

// Output is its answer.
type Output struct {
	Unknown bool   // the call failed: it may or may not have taken effect
	Granted bool   // acquire: granted; release: released
	Token   int64  // acquire granted: the grant's token
	Holder  string // acquire refused: who holds it
}

// Model is the contract of Acquire and ReleaseNamed on a lease that never expires: a free lease, or
// one the caller holds, is granted with the next token (every grant takes a new one, a repeat by
// the holder too); a lease held by another is refused, naming the holder; a release with the
// current grant's token frees it and keeps the token, any other is refused as lost. A call that
// failed took effect or did not.
var Model = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{State{}} },
	Step: func(state, input, output interface{}) []interface{} {
		s, in, out := state.(State), input.(Input), output.(Output)
		switch in.Op {
		case "acquire":
			if s.Holder == "" || s.Holder == in.Client {
				next := State{Holder: in.Client, Token: s.Token + 1}
				switch {
				case out.Unknown:
					return []interface{}{next, s}
				case out.Granted && out.Token == next.Token:
					return []interface{}{next}
				}
				return nil
			}
			if out.Unknown || (!out.Granted && out.Holder == s.Holder) {
				return []interface{}{s}
			}
			return nil
		case "release":
			if s.Holder == in.Client && s.Token == in.Token {
				next := State{Token: s.Token}
				switch {
				case out.Unknown:
					return []interface{}{next, s}
				case out.Granted:
					return []interface{}{next}
				}
				return nil
			}
			if out.Unknown || !out.Granted {
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

// Never is the return time of a call whose effect is unknown: it may take effect at any later time.
const Never int64 = 1 << 62

// Acquire is an acquire by client, called at call and answered at ret with out.
func Acquire(client string, call, ret int64, out Output) porcupine.Operation {
	return porcupine.Operation{Input: Input{Op: "acquire", Client: client}, Call: call, Output: out, Return: ret}
}

// Release is a release by client of its grant with token.
func Release(client string, token, call, ret int64, out Output) porcupine.Operation {
	return porcupine.Operation{Input: Input{Op: "release", Client: client, Token: token}, Call: call, Output: out, Return: ret}
}

// Check says whether history is linearizable against Model, within timeout (porcupine.Unknown when
// it could not decide in time).
func Check(history []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(Model.ToModel(), history, timeout)
}

// Race has each of procs (each what a separate process has: its own store client and Authority)
// acquire and release lease in turn, ops calls each, all starting at once, and returns the history of
// calls and answers, and how many of them ended in an error (their effect unknown). Leases are
// asked for an hour, so that a holder changes only by a release.
func Race(ctx context.Context, procs []*authority.Authority, lease string, ops int) (history []porcupine.Operation, unknowns int) {
	base := time.Now()
	stamp := func() int64 { return int64(time.Since(base)) }
	var mu sync.Mutex
	Together(len(procs), func(c int) {
		me := fmt.Sprintf("c%d", c)
		var mine *authority.Grant
		for range ops {
			var op porcupine.Operation
			call := stamp()
			if mine == nil {
				var out Output
				g, err := procs[c].Acquire(ctx, lease, me, "deploy", time.Hour)
				var held *authority.HeldError
				switch {
				case err == nil:
					mine, out = g, Output{Granted: true, Token: g.Tokens[lease]}
				case errors.As(err, &held):
					out = Output{Holder: held.Holder}
				default:
					out = Output{Unknown: true}
				}
				op = Acquire(me, call, stamp(), out)
			} else {
				var out Output
				err := procs[c].ReleaseNamed(ctx, mine)
				switch {
				case err == nil:
					out = Output{Granted: true}
				case errors.Is(err, authority.ErrLeaseLost):
					out = Output{}
				default:
					out = Output{Unknown: true}
				}
				op = Release(me, mine.Tokens[lease], call, stamp(), out)
				mine = nil
			}
			op.ClientId = c
			if op.Output.(Output).Unknown {
				op.Return = Never
			}
			mu.Lock()
			history = append(history, op)
			if op.Output.(Output).Unknown {
				unknowns++
			}
			mu.Unlock()
		}
	})
	return history, unknowns
}

// Together runs fn for each of n racers at once: all start on one signal, after every goroutine is
// ready, so that their requests meet at the store.
func Together(n int, fn func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}
