package gitref

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/internal/testutil/faultproxy"
)

// TestCounterUnderFaults: 6 processes (each with its own HTTP client and Store) add to one counter
// of git's smart HTTP server 10 times each, at once, through a proxy that loses a share of the
// pushes before they reach the server and, after the server applied them, of their answers,
// while a share of every process's requests is refused a connection. An Add whose push lost its
// answer settles it by reading the ref again: no value is handed out twice, and none the counter
// never reached (storetest.RaceCounter).
func TestCounterUnderFaults(t *testing.T) {
	t.Parallel()
	const clients, each = 6, 10
	srv := newGitServer(t)
	path := strings.TrimPrefix(srv.repo(t), srv.URL)
	proxy := faultproxy.Start(srv.URL, 9)
	t.Cleanup(proxy.Close)
	proxy.Set(faultproxy.Faults{Match: isReceivePack, LoseResponse: 0.2, LoseRequest: 0.1})
	dead := deadAddress(t)
	var refused atomic.Int64
	stores := make([]authority.Store, clients)
	for i := range stores {
		rt := &refusing{next: &http.Transport{}, dead: dead, share: 0.05, rng: rand.New(rand.NewPCG(uint64(i), 13)), refused: &refused}
		tr, err := NewHTTPTransport(proxy.URL+path, "", &http.Client{Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = New(tr)
	}
	res := storetest.RaceCounter(t, stores, authority.CounterKey("prod"), each)
	c := proxy.Counts()
	if c.LostResponses == 0 || c.LostRequests == 0 {
		t.Fatalf("proxy %+v: the faults were not exercised", c)
	}
	t.Logf("%d adds failed and were made again; %d values skipped; the counter reads %d; proxy: %+v; %d connections refused",
		res.Failed, res.Skipped, res.Final, c, refused.Load())
}
