package gitref

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
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
			url := srv.repo(b)
			c := &counting{next: srv.Client().Transport}
			open := func() *authority.Authority { return authority.New(countedStore(b, url, c)) }
			warm := open()
			proc := func() *authority.Authority {
				if mode == "warm" {
					return warm
				}
				return open()
			}
			benchPasses(b, c, proc)
		})
	}
}

// BenchmarkRepositoryGrowth runs warm passes (as BenchmarkUncontendedPass) on a repository whose
// refs keep their whole history, and on one whose refs are compacted (the default), and reports
// what the passes added to the repository once git's gc has packed it and pruned what no ref
// reaches (git gc --prune=now, then git count-objects -v), per 1,000 passes, and the requests of
// each phase. Run it with -benchtime 1000x.
func BenchmarkRepositoryGrowth(b *testing.B) {
	srv := newGitServer(b)
	for _, mode := range []struct {
		name  string
		every int
	}{{"whole history", math.MaxInt}, {"compacted", defaultCompactEvery}} {
		b.Run(mode.name, func(b *testing.B) {
			url := srv.repo(b)
			path := srv.root + strings.TrimPrefix(url, srv.URL)
			c := &counting{next: srv.Client().Transport}
			st := countedStore(b, url, c)
			st.compactEvery = mode.every
			a := authority.New(st)
			var start packed
			benchPasses(b, c, func() *authority.Authority { return a }, func() { start = gcCount(b, path) })
			end := gcCount(b, path)
			n := float64(b.N)
			b.ReportMetric(float64(end.objects-start.objects)*1000/n, "objects/1000passes")
			b.ReportMetric(float64(end.kib-start.kib)*1000/n, "KiB/1000passes")
			b.ReportMetric(float64(end.kib), "KiB-total")
			doc, _ := docRef(authority.EnvKey("bench"))
			rec, _ := recordsRef("bench")
			b.ReportMetric(float64(len(strings.Fields(git(b, "-C", path, "rev-list", doc.String(), rec.String())))), "commits-reachable")
		})
	}
}

// packed is what git count-objects -v says of a packed repository.
type packed struct{ objects, kib int64 }

// gcCount packs the repository at path, pruning every object no ref reaches, and counts it.
func gcCount(b *testing.B, path string) packed {
	b.Helper()
	git(b, "-C", path, "gc", "-q", "--prune=now")
	var p packed
	for _, line := range strings.Split(git(b, "-C", path, "count-objects", "-v"), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "count", "in-pack":
			p.objects += n
		case "size", "size-pack":
			p.kib += n
		}
	}
	return p
}

func countedStore(b *testing.B, url string, c *counting) *Store {
	b.Helper()
	tr, err := NewHTTPTransport(url, "", &http.Client{Transport: c})
	if err != nil {
		b.Fatal(err)
	}
	return New(tr)
}

// benchPasses runs one pass to create the environment, then ready (if given), then the timed
// passes, and reports the requests of each phase per pass.
func benchPasses(b *testing.B, c *counting, proc func() *authority.Authority, ready ...func()) {
	ctx := b.Context()
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
	for _, f := range ready {
		f()
	}
	clear(sums)
	i := 0
	for b.Loop() {
		pass(i)
		i++
	}
	for _, ph := range []string{"accept", "gate", "complete"} {
		b.ReportMetric(float64(sums[ph])/float64(i), ph+"-req/op")
	}
}
