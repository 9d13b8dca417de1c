package gitref

import (
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// TestConformanceFile runs the suite every adapter passes on local bare repositories, each subtest
// on a new one, reached through git's upload-pack and receive-pack.
func TestConformanceFile(t *testing.T) {
	needGit(t)
	storetest.Run(t, func(t *testing.T) authority.Store {
		s, _ := fileStore(t)
		return s
	})
}

// TestConformanceHTTP runs it against git's own smart HTTP server on loopback.
func TestConformanceHTTP(t *testing.T) {
	srv := newGitServer(t)
	storetest.Run(t, func(t *testing.T) authority.Store { return srv.store(t) })
}
