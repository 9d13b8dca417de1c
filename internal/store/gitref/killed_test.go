package gitref

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// killer is the HTTP transport of a process that dies at its request n: requests before it reach
// the server; request n itself is lost before it is sent, or (afterSend) sent, answered in full
// (a push applied) and its answer lost; every later request fails, as nothing runs after a kill.
type killer struct {
	next      http.RoundTripper
	mu        sync.Mutex
	seen, n   int
	afterSend bool
	pushes    map[int]bool // the numbers of the requests that were pushes
}

var errKilled = errors.New("process killed")

func (k *killer) RoundTrip(req *http.Request) (*http.Response, error) {
	k.mu.Lock()
	k.seen++
	i := k.seen
	if isReceivePack(req, nil) {
		k.pushes[i] = true
	}
	k.mu.Unlock()
	switch {
	case k.n == 0 || i < k.n:
		return k.next.RoundTrip(req)
	case i == k.n && k.afterSend:
		resp, err := k.next.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body) // the server has answered: a push is applied
		resp.Body.Close()
		return nil, fmt.Errorf("killed after the answer came: %w", errKilled)
	}
	if req.Body != nil {
		req.Body.Close()
	}
	return nil, errKilled
}

// onePass runs a whole pass (accept and claim, gate deploy, complete) of intent id at commit sha,
// tolerating the refusals a retried pass meets after its work already ended. It returns the token
// of the grant it was told, if any.
func onePass(ctx context.Context, a *authority.Authority, env, id, sha string) (int64, error) {
	res, err := a.Accept(ctx, authority.Intent{ID: id, Environment: env, Scopes: []string{"api"}, Sha: sha, Ref: "refs/heads/main"}, true)
	if err != nil {
		return 0, err
	}
	if res.Claim == nil || len(res.Claim.Claimed) == 0 {
		return 0, nil // its work already ended: nothing to redo
	}
	g, err := a.Gate(ctx, authority.GateRequest{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: id, LeaseTTL: time.Minute})
	if errors.Is(err, authority.ErrSuperseded) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	token := g.Tokens["api"]
	_, err = a.Complete(ctx, authority.Completion{Environment: env, Generation: res.Generation, Scopes: []string{"api"}, Holder: g.Holder,
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess, Attempt: 1, MaxAttempts: 3})
	return token, err
}

// TestKilledAtEveryRequest: a pass on an environment with history, killed at each of its HTTP
// requests to git's server in turn (the request lost before it is sent, or, for a push, applied
// with its answer lost), then run again by a new process on the same repository, leaves
// every event of the timeline exactly once, every intent remembered once with its generation, the
// environment settled and off the pending index, and the deploy done under the newest grant, whose
// token is above every one a caller was told.
func TestKilledAtEveryRequest(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := newGitServer(t)
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	sha := func(i int) string { return fmt.Sprintf("%040x", 0xa1+i) }
	proc := func(url string, rt http.RoundTripper) (*Store, *authority.Authority) {
		tr, err := NewHTTPTransport(url, "", &http.Client{Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		s := New(tr)
		return s, authority.New(s, authority.WithClock(clock))
	}
	direct := srv.Client().Transport
	// The history every kill starts from: one pass done, in a repository copied for each kill.
	template := srv.repo(t)
	_, first := proc(template, direct)
	if _, err := onePass(ctx, first, "prod", "run-0", sha(0)); err != nil {
		t.Fatal(err)
	}
	var copies atomic.Int64
	copyRepo := func(t *testing.T) string {
		name := fmt.Sprintf("kill-%03d.git", copies.Add(1))
		if err := os.CopyFS(filepath.Join(srv.root, name), os.DirFS(filepath.Join(srv.root, strings.TrimPrefix(template, srv.URL)))); err != nil {
			t.Fatal(err)
		}
		return srv.URL + "/" + name
	}
	// Count the requests of the pass.
	count := &killer{next: direct, pushes: map[int]bool{}}
	_, counted := proc(copyRepo(t), count)
	if _, err := onePass(ctx, counted, "prod", "run-1", sha(1)); err != nil {
		t.Fatal(err)
	}
	total := count.seen
	var kills atomic.Int64
	t.Run("kills", func(t *testing.T) {
		for _, afterSend := range []bool{false, true} {
			for k := 1; k <= total; k++ {
				if afterSend && !count.pushes[k] {
					continue // a read's answer lost is a kill before the next request
				}
				t.Run(fmt.Sprintf("request %02d after send %v", k, afterSend), func(t *testing.T) {
					t.Parallel()
					url := copyRepo(t)
					_, dying := proc(url, &killer{next: direct, n: k, afterSend: afterSend, pushes: map[int]bool{}})
					told, err := onePass(ctx, dying, "prod", "run-1", sha(1))
					if err != nil {
						kills.Add(1)
					}
					_, again := proc(url, direct)
					token, err := onePass(ctx, again, "prod", "run-1", sha(1))
					if err != nil {
						t.Fatalf("killed at request %d of %d (after send %v), the pass run again: %v", k, total, afterSend, err)
					}
					checkAfterKill(t, fmt.Sprintf("killed at request %d of %d (after send %v)", k, total, afterSend), url, direct, proc, told, token, sha)
				})
			}
		}
	})
	t.Logf("a pass makes %d requests, %d of them pushes; %d of %d kills stopped it", total, len(count.pushes), kills.Load(), total+len(count.pushes))
}

// checkAfterKill checks the repository at url after a pass was killed and run again: told is the
// token the killed pass was told (0: none), token the one the pass run again was told.
func checkAfterKill(t *testing.T, where, url string, rt http.RoundTripper, proc func(string, http.RoundTripper) (*Store, *authority.Authority), told, token int64, sha func(int) string) {
	t.Helper()
	ctx := t.Context()
	s, a := proc(url, rt)
	page, err := a.History(ctx, "prod", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for i, ev := range page.Events {
		if ev.Seq != int64(i+1) {
			t.Fatalf("%s: timeline numbers %d at %d; want every event once", where, ev.Seq, i+1)
		}
	}
	if int64(len(page.Events)) != page.Newest {
		t.Fatalf("%s: %d events of %d", where, len(page.Events), page.Newest)
	}
	e, err := a.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	api := e.Scopes["api"]
	if e.Desired != 2 || e.Observed != 2 || api.Live == nil || api.Live.Generation != 2 || api.Live.Sha != sha(1) || api.Mailbox != nil {
		t.Fatalf("%s: %d/%d, live %+v, pending %+v; want generation 2 deployed and settled", where, e.Observed, e.Desired, api.Live, api.Mailbox)
	}
	switch {
	case api.Lease.Holder != "" || api.Lease.Token != api.Live.Token:
		t.Fatalf("%s: lease %+v after the deploy with token %d; want it free at the deploy's token", where, api.Lease, api.Live.Token)
	case token != 0 && (api.Live.Token != token || token <= told):
		t.Fatalf("%s: the killed pass was told token %d, the pass run again %d, live has %d; want the newest grant, above every earlier", where, told, token, api.Live.Token)
	case token == 0 && api.Live.Token != told:
		t.Fatalf("%s: the killed pass deployed with token %d, live has %d", where, told, api.Live.Token)
	}
	for id, gen := range map[string]int64{"run-0": 1, "run-1": 2} {
		res, err := a.Accept(ctx, authority.Intent{ID: id, Environment: "prod", Scopes: []string{"api"}, Sha: sha(int(gen - 1)), Ref: "refs/heads/main"}, false)
		if err != nil || !res.Duplicate || res.Generation != gen {
			t.Fatalf("%s: %s again: %+v, %v; want a repeat of generation %d", where, id, res, err, gen)
		}
	}
	if p, err := s.Pending(ctx); err != nil || len(p) != 0 {
		t.Fatalf("%s: pending index %v, %v; want the settled environment off it", where, p, err)
	}
}
