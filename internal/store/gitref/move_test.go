package gitref

import (
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// TestMove moves an environment into a repository and out of one, its intent ids listed from the
// environment's records ref.
func TestMove(t *testing.T) {
	needGit(t)
	repo := func(t *testing.T) authority.Store {
		s, _ := fileStore(t)
		return s
	}
	mem := func(t *testing.T) authority.Store { return memory.New() }
	t.Run("IntoGit", func(t *testing.T) { t.Parallel(); storetest.RunMove(t, mem, repo) })
	t.Run("FromGit", func(t *testing.T) { t.Parallel(); storetest.RunMove(t, repo, mem) })
}
