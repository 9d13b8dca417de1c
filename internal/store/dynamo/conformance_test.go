package dynamo

import (
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

// TestConformance runs the suite every adapter passes, each subtest on a fresh table.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) authority.Store {
		client, table := migrated(t)
		return New(client, table)
	})
}

// TestConformanceSplit runs the suite with every environment in the per-scope layout.
func TestConformanceSplit(t *testing.T) {
	storetest.RunSplit(t, func(t *testing.T) authority.Store {
		client, table := migrated(t)
		return New(client, table)
	})
}

// TestCounterAcrossClients: clients of their own, as separate processes have, add to one counter
// of one table at once; every value goes to one caller, and none is skipped without faults.
func TestCounterAcrossClients(t *testing.T) {
	t.Parallel()
	_, table := migrated(t)
	clients := make([]authority.Store, 16)
	for i := range clients {
		clients[i] = New(dynalitetest.Client(t), table)
	}
	res := storetest.RaceCounter(t, clients, authority.CounterKey("prod"), 20)
	if res.Final != 320 || res.Skipped != 0 {
		t.Fatalf("after 320 additions the counter reads %d, %d values skipped; want 320, none", res.Final, res.Skipped)
	}
}
