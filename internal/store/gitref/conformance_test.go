package gitref

import (
	"os"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// FullConformanceVar runs the whole conformance suite on the git store, on both transports (a long
// setting: every request is a new git process, and the whole suite takes about 25 minutes on two
// busy cores). Without it the port's own group runs against the HTTP server.
const FullConformanceVar = "LATESTWINS_GITREF_CONFORMANCE"

// portGroups are the conformance groups that run by default: the store port itself (documents and
// their conditional writes under racing writers, the pending index, records, counters under a few
// racing adders). The other groups drive the domain through the port, or race 32 adders on one
// counter (CounterRace); on this store they take minutes (about 6.5 minutes for the pending index,
// outbox, fencing, leases and deliveries groups alone on two cores), so they run under the long
// setting.
var portGroups = []string{"Port", "Counter"}

// TestConformanceFile runs the suite every adapter passes on local bare repositories, each subtest
// on a new one, reached through git's upload-pack and receive-pack.
func TestConformanceFile(t *testing.T) {
	if os.Getenv(FullConformanceVar) == "" {
		t.Skipf("a long setting: %s=1 runs the whole suite on local bare repositories too", FullConformanceVar)
	}
	needGit(t)
	storetest.Run(t, func(t *testing.T) authority.Store {
		s, _ := fileStore(t)
		return s
	})
}

// TestConformanceHTTP runs it against git's own smart HTTP server on loopback: the port's groups,
// or all of them with the long setting.
func TestConformanceHTTP(t *testing.T) {
	srv := newGitServer(t)
	var only []string
	if os.Getenv(FullConformanceVar) == "" {
		only = portGroups
	}
	storetest.RunGroups(t, func(t *testing.T) authority.Store { return srv.store(t) }, only...)
}

// TestConformanceSplitHTTP runs, with every environment in the per-scope layout, the groups
// that write an environment's head, scopes and directory through the smart HTTP transport; the
// long setting runs the whole suite.
func TestConformanceSplitHTTP(t *testing.T) {
	srv := newGitServer(t)
	only := []string{"Generations", "Outcomes"}
	if os.Getenv(FullConformanceVar) != "" {
		only = nil
	}
	storetest.RunSplit(t, func(t *testing.T) authority.Store { return srv.store(t) }, only...)
}
