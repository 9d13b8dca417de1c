package gitref

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil"
	"github.com/latestwins/latestwins/internal/testutil/faultproxy"
	"github.com/latestwins/latestwins/internal/testutil/leasemodel"
)

// refusing sends a share of its requests to an address where nothing listens, so that they fail
// as a connection the server's host refused; the others go on to next.
type refusing struct {
	next    http.RoundTripper
	dead    string // host:port
	share   float64
	mu      sync.Mutex
	rng     *rand.Rand
	refused *atomic.Int64
}

func (r *refusing) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	refuse := r.rng.Float64() < r.share
	r.mu.Unlock()
	if !refuse {
		return r.next.RoundTrip(req)
	}
	out := req.Clone(req.Context())
	out.URL.Host, out.Host = r.dead, r.dead
	resp, err := r.next.RoundTrip(out)
	if err == nil {
		resp.Body.Close()
		return nil, fmt.Errorf("%s answered: it was to refuse connections", r.dead)
	}
	r.refused.Add(1)
	return nil, err
}

// deadAddress is a loopback address where nothing listens: a port taken and given back.
func deadAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func isReceivePack(r *http.Request, _ []byte) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-receive-pack")
}

// TestLeaseHistoryIsLinearizableUnderFaults: in each round 6 processes (each with its own HTTP
// client, Store and Authority) acquire and release one lease of their own round on one repository
// of git's smart HTTP server, 12 calls each, all starting at once, through a proxy that loses a
// share of the pushes before they reach the server and, after the server applied them, of their
// answers, while a share of every process's requests is refused a connection. The history of calls
// and answers must be linearizable against the lease's contract (leasemodel.Model): no two holders
// at once, no grant applied twice, no release told "lost" that took effect, no false "locked".
func TestLeaseHistoryIsLinearizableUnderFaults(t *testing.T) {
	t.Parallel()
	const clients, ops, rounds = 6, 12, 3
	srv := newGitServer(t)
	path := strings.TrimPrefix(srv.repo(t), srv.URL)
	proxy := faultproxy.Start(srv.URL, 7)
	t.Cleanup(proxy.Close)
	proxy.Set(faultproxy.Faults{Match: isReceivePack, LoseResponse: 0.2, LoseRequest: 0.1})
	dead := deadAddress(t)
	var refused atomic.Int64
	procs := make([]*authority.Authority, clients)
	for i := range procs {
		rt := &refusing{next: &http.Transport{}, dead: dead, share: 0.05, rng: rand.New(rand.NewPCG(uint64(i), 11)), refused: &refused}
		tr, err := NewHTTPTransport(proxy.URL+path, "", &http.Client{Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		procs[i] = authority.New(New(tr))
	}
	n := testutil.SoakRounds(t, rounds)
	var calls, unknowns int
	for round := range n {
		lease := fmt.Sprintf("shared-%d", round)
		history, unknown := leasemodel.Race(t.Context(), procs, lease, ops)
		calls, unknowns = calls+len(history), unknowns+unknown
		switch leasemodel.Check(history, 30*time.Second) {
		case porcupine.Illegal:
			t.Errorf("round %d: the history of %d calls on %s is not linearizable", round, len(history), lease)
		case porcupine.Unknown:
			t.Fatalf("round %d: the history of %d calls on %s could not be checked within 30s", round, len(history), lease)
		}
	}
	c := proxy.Counts()
	if c.LostResponses == 0 || c.LostRequests == 0 || refused.Load() == 0 {
		t.Fatalf("proxy %+v, %d connections refused: the faults were not exercised", c, refused.Load())
	}
	t.Logf("%d rounds, %d calls of which %d ended in an error; proxy: %+v; %d connections refused", n, calls, unknowns, c, refused.Load())
}
