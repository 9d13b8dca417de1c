package gitref

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// counting counts the HTTP requests (round trips) a Store sends.
type counting struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (c *counting) RoundTrip(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(req)
}

// BenchmarkUncontendedPass runs uncontended passes (accept with claim, gate deploy with a lease,
// complete with success) against git's smart HTTP server on loopback and reports the HTTP requests
// of each phase: warm, one Store and Authority for everything (serve, the App); cold, a new Store
// and Authority per phase (the Action's steps, each a process).
func BenchmarkUncontendedPass(b *testing.B) {
	srv := newGitServer(b)
	for _, mode := range []string{"warm", "cold"} {
		b.Run(mode, func(b *testing.B) {
			ctx := b.Context()
			url := srv.repo(b)
			c := &counting{next: srv.Client().Transport}
			open := func() *authority.Authority {
				tr, err := NewHTTPTransport(url, "", &http.Client{Transport: c})
				if err != nil {
					b.Fatal(err)
				}
				return authority.New(New(tr))
			}
			warm := open()
			proc := func() *authority.Authority {
				if mode == "warm" {
					return warm
				}
				return open()
			}
			sums := map[string]int64{}
			pass := func(i int) {
				take := func(phase string) { sums[phase] += c.n.Swap(0) }
				c.n.Store(0)
				res, err := proc().Accept(ctx, authority.Intent{ID: fmt.Sprintf("delivery-%d", i), Environment: "bench", Scopes: []string{"api"},
					Sha: fmt.Sprintf("%040x", i+1), Ref: "refs/heads/main"}, true)
				if err != nil || res.Claim == nil || len(res.Claim.Claimed) != 1 {
					b.Fatalf("pass %d: accept: %+v, %v", i, res, err)
				}
				take("accept")
				g, err := proc().Gate(ctx, authority.GateRequest{Environment: "bench", Generation: res.Generation, Scopes: []string{"api"},
					Phase: "deploy", Holder: fmt.Sprintf("run-%d", i), LeaseTTL: authority.DefaultLeaseTTL})
				if err != nil {
					b.Fatalf("pass %d: gate: %v", i, err)
				}
				take("gate")
				out, err := proc().Complete(ctx, authority.Completion{Environment: "bench", Generation: res.Generation, Scopes: []string{"api"},
					Holder: g.Holder, Tokens: g.Tokens, Outcome: authority.OutcomeSuccess})
				if err != nil || out.Overall() != authority.ResultDeployed {
					b.Fatalf("pass %d: complete: %+v, %v", i, out, err)
				}
				take("complete")
			}
			pass(-1) // the environment exists before the timed passes
			clear(sums)
			i := 0
			for b.Loop() {
				pass(i)
				i++
			}
			for _, ph := range []string{"accept", "gate", "complete"} {
				b.ReportMetric(float64(sums[ph])/float64(i), ph+"-req/op")
			}
		})
	}
}
