package dynamo

import (
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// TestMove moves an environment out of a table (its intent records listed with a Scan) and into
// one.
func TestMove(t *testing.T) {
	table := func(t *testing.T) authority.Store {
		client, table := migrated(t)
		return New(client, table)
	}
	mem := func(t *testing.T) authority.Store { return memory.New() }
	t.Run("FromDynamoDB", func(t *testing.T) { t.Parallel(); storetest.RunMove(t, table, mem) })
	t.Run("IntoDynamoDB", func(t *testing.T) { t.Parallel(); storetest.RunMove(t, mem, table) })
}
