package memory

import (
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// TestHandEditedDocumentIsRefused: an environment edited in the store to observed 50, desired 1
// is refused when read, and a claim after it hands out no generation.
func TestHandEditedDocumentIsRefused(t *testing.T) {
	s := New()
	key := authority.EnvKey("staging")
	storetest.SeedForHandEdit(t, s, "staging")
	raw := func() []byte {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.docs[key]
	}
	edited := storetest.HandEdit(t, raw())
	s.mu.Lock()
	s.docs[key] = edited
	s.mu.Unlock()
	storetest.CheckHandEditRefused(t, s, "staging", raw)
}
