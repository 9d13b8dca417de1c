package faults

import (
	"net/http"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/internal/testutil/faultproxy"
)

func isUpdateItem(r *http.Request, _ []byte) bool {
	return r.Header.Get("X-Amz-Target") == "DynamoDB_20120810.UpdateItem"
}

// TestAmbiguousAddsHandOutNoValueTwice: 16 processes, each with its own SDK client and store, add
// to one counter 20 times each, at once, while a quarter of the additions lose their answer after
// the server applied them and a tenth never reach it. The SDK sends an addition whose answer was
// lost again, so the counter moves twice for it: values are skipped, and none is handed out twice
// (storetest.RaceCounter).
func TestAmbiguousAddsHandOutNoValueTwice(t *testing.T) {
	t.Parallel()
	n := newNetwork(t, 3, nil)
	n.proxy.Set(faultproxy.Faults{Match: isUpdateItem, LoseResponse: 0.25, LoseRequest: 0.1})
	clients := make([]authority.Store, 16)
	for i := range clients {
		clients[i] = n.store()
	}
	res := storetest.RaceCounter(t, clients, authority.CounterKey("prod"), 20)
	c := n.proxy.Counts()
	if c.LostResponses == 0 {
		t.Fatalf("the proxy lost no answer of an addition (%+v): the race did not exercise ambiguous additions", c)
	}
	t.Logf("%d additions failed and were made again; %d values skipped; the counter reads %d; proxy: %+v", res.Failed, res.Skipped, res.Final, c)
}
