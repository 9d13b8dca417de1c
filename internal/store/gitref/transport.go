package gitref

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/file"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"
)

// Transport is how the Store reaches a repository. The Store asks only for what a compare-and-swap
// on refs needs, so a transport over another API (GitHub's, later) slots in beside the pack
// protocol.
type Transport interface {
	// Fetch reads the refs under Namespace, asks pick which of their commits to bring and which
	// the caller already has, and stores those commits with depth commits of their history (1:
	// the commit, its tree and blobs) in into. It returns the refs it read. pick may be asked
	// more than once, each time with the refs read anew.
	Fetch(ctx context.Context, pick func(refs map[plumbing.ReferenceName]plumbing.Hash) (wants, haves []plumbing.Hash), depth int, into storer.Storer) (map[plumbing.ReferenceName]plumbing.Hash, error)
	// Push sends the objects and applies every update at once iff each ref still has the update's
	// old id (zero: absent) on the server. A refusal the server answered is a *RefusedError;
	// any other error leaves the outcome unknown.
	Push(ctx context.Context, updates []Update, objects []plumbing.EncodedObject) error
}

// Update moves one ref from Old to New; a zero Old creates it, a zero New deletes it.
type Update struct {
	Name     plumbing.ReferenceName
	Old, New plumbing.Hash
}

// RefusedError is the server's refusal of a push: it answered, and applied nothing.
type RefusedError struct{ Err error }

func (e *RefusedError) Error() string { return "push refused: " + e.Err.Error() }
func (e *RefusedError) Unwrap() error { return e.Err }

// packTransport speaks git's pack protocol through go-git: smart HTTP, or a local repository
// through git's own upload-pack and receive-pack programs.
type packTransport struct {
	client   transport.Transport
	endpoint *transport.Endpoint
	auth     transport.AuthMethod
	// explain, when set, turns the server's refusals of the credentials or the repository into
	// errors that say what to fix (github.go).
	explain func(error) error
}

// why is err, explained when the transport can.
func (t *packTransport) why(err error) error {
	if t.explain == nil {
		return err
	}
	return t.explain(err)
}

// refusedAccess: the server refused the credentials or the repository before a push was sent, so
// nothing was applied.
func refusedAccess(err error) bool {
	return errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed) ||
		errors.Is(err, transport.ErrRepositoryNotFound)
}

var _ Transport = (*packTransport)(nil)

// NewFileTransport reaches the bare repository at path (absolute) through the git-upload-pack and
// git-receive-pack programs, which must be on the PATH: their receive-pack checks the old ids.
// (go-git's in-process server does not check old ids, so it is not used.)
func NewFileTransport(path string) (Transport, error) {
	ep, err := transport.NewEndpoint("file://" + path)
	if err != nil {
		return nil, fmt.Errorf("git repository %s: %w", path, err)
	}
	return &packTransport{client: file.DefaultClient, endpoint: ep}, nil
}

// NewHTTPTransport reaches a repository over git's smart HTTP protocol at url (http or https),
// with basic auth when token is set, through client (nil: http.DefaultClient).
func NewHTTPTransport(url, token string, client *http.Client) (Transport, error) {
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return nil, fmt.Errorf("git repository %s: %w", url, err)
	}
	if ep.Protocol != "http" && ep.Protocol != "https" {
		return nil, fmt.Errorf("git repository %s: not an http or https URL", url)
	}
	t := &packTransport{client: githttp.NewClient(client), endpoint: ep}
	if token != "" {
		t.auth = &githttp.BasicAuth{Username: "x-access-token", Password: token}
	}
	return t, nil
}

// session is a copy of the endpoint for one session: go-git's HTTP session rewrites its endpoint
// when the server redirects, so sessions running at once must not share one.
func (t *packTransport) session() *transport.Endpoint {
	ep := *t.endpoint
	return &ep
}

// errNotOurRef: the server no longer has a commit the fetch asked for at any ref's reach. Over
// HTTP the refs are read in one request and the pack asked for in another, and a write in between
// that compacted the ref leaves the commit read unreachable (compact.go).
var errNotOurRef = errors.New("the server no longer reaches a commit asked for")

// fetchAttempts bounds the fetches that read the refs again after errNotOurRef.
const fetchAttempts = 4

func (t *packTransport) Fetch(ctx context.Context, pick func(map[plumbing.ReferenceName]plumbing.Hash) ([]plumbing.Hash, []plumbing.Hash), depth int, into storer.Storer) (map[plumbing.ReferenceName]plumbing.Hash, error) {
	for attempt := 1; ; attempt++ {
		refs, err := t.fetch(ctx, pick, depth, into)
		if !errors.Is(err, errNotOurRef) || attempt == fetchAttempts {
			return refs, err
		}
	}
}

// fetch is one Fetch: pick is asked again on every attempt, with the refs read then.
func (t *packTransport) fetch(ctx context.Context, pick func(map[plumbing.ReferenceName]plumbing.Hash) ([]plumbing.Hash, []plumbing.Hash), depth int, into storer.Storer) (map[plumbing.ReferenceName]plumbing.Hash, error) {
	sess, err := t.client.NewUploadPackSession(t.session(), t.auth)
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", t.why(err))
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		wants, _ := pick(map[plumbing.ReferenceName]plumbing.Hash{})
		if len(wants) > 0 {
			return nil, errors.New("fetch: the repository is empty")
		}
		return map[plumbing.ReferenceName]plumbing.Hash{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fetch: read refs: %w", t.why(err))
	}
	refs := ours(ar.References)
	wants, haves := pick(refs)
	if len(wants) == 0 {
		return refs, nil
	}
	req := packp.NewUploadPackRequestFromCapabilities(ar.Capabilities)
	// One ACK or NAK and no thin pack: the answer is then a whole pack whatever the server has
	// in common with us.
	for _, c := range []capability.Capability{capability.MultiACK, capability.MultiACKDetailed, capability.ThinPack} {
		req.Capabilities.Delete(c)
	}
	if ar.Capabilities.Supports(capability.NoProgress) {
		_ = req.Capabilities.Set(capability.NoProgress)
	}
	if !ar.Capabilities.Supports(capability.Shallow) {
		return nil, errors.New("fetch: the server cannot send shallow packs")
	}
	_ = req.Capabilities.Set(capability.Shallow)
	req.Depth = packp.DepthCommits(max(depth, 1))
	req.Wants, req.Haves = wants, haves
	resp, err := sess.UploadPack(ctx, req)
	if err != nil && strings.Contains(err.Error(), "not our ref") {
		return nil, fmt.Errorf("fetch: %w: %w", errNotOurRef, err)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", t.why(err))
	}
	defer resp.Close()
	var r io.Reader = resp
	switch {
	case req.Capabilities.Supports(capability.Sideband64k):
		r = sideband.NewDemuxer(sideband.Sideband64k, resp)
	case req.Capabilities.Supports(capability.Sideband):
		r = sideband.NewDemuxer(sideband.Sideband, resp)
	}
	if err := packfile.UpdateObjectStorage(into, r); err != nil {
		return nil, fmt.Errorf("fetch: read pack: %w", err)
	}
	return refs, nil
}

func (t *packTransport) Push(ctx context.Context, updates []Update, objects []plumbing.EncodedObject) error {
	sess, err := t.client.NewReceivePackSession(t.session(), t.auth)
	if err != nil {
		return fmt.Errorf("push: %w", t.why(err))
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if refusedAccess(err) { // nothing was sent: pushing again would be refused again
		return &RefusedError{Err: fmt.Errorf("read refs: %w", t.why(err))}
	}
	if err != nil {
		return fmt.Errorf("push: read refs: %w", t.why(err))
	}
	if !ar.Capabilities.Supports(capability.ReportStatus) {
		return errors.New("push: the server does not report the status of a push")
	}
	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	if len(updates) > 1 {
		if !ar.Capabilities.Supports(capability.Atomic) {
			return errors.New("push: the server cannot update several refs at once (no atomic push)")
		}
		_ = req.Capabilities.Set(capability.Atomic)
	}
	for _, u := range updates {
		req.Commands = append(req.Commands, &packp.Command{Name: u.Name, Old: u.Old, New: u.New})
	}
	if len(objects) > 0 {
		pack, err := encodePack(objects)
		if err != nil {
			return fmt.Errorf("push: %w", err)
		}
		req.Packfile = io.NopCloser(bytes.NewReader(pack))
	}
	report, err := sess.ReceivePack(ctx, req)
	if err != nil && (report != nil || refusedAccess(err)) {
		return &RefusedError{Err: t.why(err)}
	}
	if err != nil {
		return fmt.Errorf("push: %w", t.why(err))
	}
	return nil
}

// ours keeps the refs under Namespace.
func ours(all map[string]plumbing.Hash) map[plumbing.ReferenceName]plumbing.Hash {
	refs := make(map[plumbing.ReferenceName]plumbing.Hash)
	for name, h := range all {
		if strings.HasPrefix(name, Namespace) {
			refs[plumbing.ReferenceName(name)] = h
		}
	}
	return refs
}

// encodePack makes a pack of objects, without deltas (they are few and small).
func encodePack(objects []plumbing.EncodedObject) ([]byte, error) {
	st := memory.NewStorage()
	hashes := make([]plumbing.Hash, 0, len(objects))
	seen := make(map[plumbing.Hash]bool, len(objects))
	for _, o := range objects {
		if seen[o.Hash()] {
			continue
		}
		seen[o.Hash()] = true
		if _, err := st.SetEncodedObject(o); err != nil {
			return nil, err
		}
		hashes = append(hashes, o.Hash())
	}
	var buf bytes.Buffer
	if _, err := packfile.NewEncoder(&buf, st, false).Encode(hashes, 0); err != nil {
		return nil, fmt.Errorf("encode pack: %w", err)
	}
	return buf.Bytes(), nil
}
