package dynamo

import (
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
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
