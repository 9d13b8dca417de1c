package alert_test

import (
	"context"
	"crypto/hmac"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/alert"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

var (
	t0     = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	secret = []byte("alert secret for tests")
)

const sha = "bbbbbbb222222222222222222222222222222222"

// receiver is a webhook receiver on loopback that checks every post's signature.
type receiver struct {
	t    *testing.T
	srv  *httptest.Server
	mu   sync.Mutex
	got  []alert.Payload
	ids  []string
	fail int // answer this many posts 503 first
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if !hmac.Equal([]byte(req.Header.Get(alert.SignatureHeader)), []byte(alert.Sign(secret, body))) {
			t.Errorf("post with signature %q does not match its body", req.Header.Get(alert.SignatureHeader))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.fail > 0 {
			r.fail--
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		var p alert.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("post is not a payload: %v", err)
		}
		if req.Header.Get(alert.EventHeader) != p.Event {
			t.Errorf("event header %q, payload %q", req.Header.Get(alert.EventHeader), p.Event)
		}
		r.got, r.ids = append(r.got, p), append(r.ids, req.Header.Get(alert.DeliveryHeader))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) posts() []alert.Payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]alert.Payload(nil), r.got...)
}

// installations stands for the App's installations: every repository has installation 1, whose
// client is the strict fake's.
type installations struct{ gh *githubtest.Server }

func (i installations) ForRepo(context.Context, string, string) (int64, error) { return 1, nil }
func (i installations) Client(int64) (*githubapp.Client, error) {
	return githubapp.New(i.gh.Client), nil
}

type world struct {
	t     *testing.T
	ctx   context.Context
	clock *storetest.Clock
	store *memory.Store
	auth  *authority.Authority
	hook  *receiver
	gh    *githubtest.Server
	cfg   *config.Config
}

func newWorld(t *testing.T) *world {
	w := &world{t: t, ctx: t.Context(), clock: storetest.NewClock(t0), store: memory.New(), hook: newReceiver(t), gh: githubtest.New(t)}
	w.auth = authority.New(w.store, authority.WithClock(w.clock))
	cfg, err := config.Parse([]byte(`environments:
  prod:
    alert-after: 30m
    alert-webhook: ` + w.hook.srv.URL + `/hook
    alert-issue: acme/ops
    scopes:
      api: {repository: acme/api, branch: main}
  staging:
    scopes:
      api: {repository: acme/api, branch: main}
`))
	if err != nil {
		t.Fatal(err)
	}
	w.cfg = cfg
	return w
}

// notifier is a notifier as a process of its own would have it: its own Authority on the shared
// store.
func (w *world) notifier(holder string) *alert.Notifier {
	n, err := alert.New(alert.Options{Authority: authority.New(w.store, authority.WithClock(w.clock)),
		Trusted: func(context.Context) (*config.Config, error) { return w.cfg, nil }, Secret: secret,
		Issues: &ghadapter.Issues{Installations: installations{w.gh}}, Holder: holder, Clock: w.clock, Backoff: []time.Duration{0, 0}})
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *world) sweep(n *alert.Notifier) *alert.Report {
	w.t.Helper()
	rep, err := n.Sweep(w.ctx)
	if err != nil {
		w.t.Fatal(err)
	}
	return rep
}

func (w *world) issue(number int, title string) map[string]any {
	is := githubtest.Example(w.t, "POST", "/repos/{owner}/{repo}/issues", http.StatusCreated, "")
	is["number"], is["title"] = number, title
	return is
}

func comment(t *testing.T, body string) map[string]any {
	c := githubtest.Example(t, "POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments", http.StatusCreated, "")
	c["body"] = body
	return c
}

// A scope goes behind past its threshold: one signed post and one issue; still behind: nothing
// more; stuck: one post and one comment; live again: the recovery posted and the issue closed.
func TestAlarmLifecycle(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	n := w.notifier("n1")
	res, err := w.auth.Accept(w.ctx, authority.Intent{ID: "push-1", Environment: "prod", Scopes: []string{"api"}, Sha: sha}, true)
	if err != nil {
		t.Fatal(err)
	}

	// Waiting: nothing is told, but the stored alert-after now is the file's.
	w.clock.Advance(10 * time.Minute)
	if rep := w.sweep(n); len(rep.Told) != 0 {
		t.Fatalf("a waiting scope was told: %+v", rep)
	}
	if e, _ := w.auth.State(w.ctx, "prod"); e.AlertAfter != 30*time.Minute {
		t.Fatalf("stored alert-after %s; want the file's 30m", e.AlertAfter)
	}

	// A pass takes the lease and runs late: behind.
	w.clock.Advance(15 * time.Minute)
	g, err := w.auth.Gate(w.ctx, authority.GateRequest{Environment: "prod", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-7", LeaseTTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	w.clock.Advance(6 * time.Minute) // 31m
	opened := w.gh.On("POST", "/repos/acme/ops/issues", http.StatusCreated, w.issue(12, "latestwins: prod is behind (api)"))
	rep := w.sweep(n)
	posts := w.hook.posts()
	if len(posts) != 1 || posts[0].Event != alert.EventLate || posts[0].State != "behind" || posts[0].Environment != "prod" ||
		len(posts[0].Scopes) != 1 || posts[0].Scopes[0].Sha != sha || posts[0].Scopes[0].WaitingSeconds != 31*60 || !posts[0].Since.Equal(t0) ||
		!strings.Contains(posts[0].Scopes[0].Text, "behind 31m (alert after 30m): a pass is deploying bbbbbbb") {
		t.Fatalf("posts %+v; want one behind post for api", posts)
	}
	if reqs := opened.Requests(); len(reqs) != 1 || !strings.Contains(reqs[0].Body.(map[string]any)["body"].(string), "behind 31m") ||
		reqs[0].Body.(map[string]any)["title"] != "latestwins: prod is behind (api)" {
		t.Fatalf("issue requests %+v", reqs)
	}
	if len(rep.Told) != 1 || rep.Told[0].Issue != 12 || !rep.Told[0].Webhook {
		t.Fatalf("report %+v", rep)
	}

	// Still behind: nothing new is told, by this notifier or another process's.
	w.clock.Advance(time.Minute)
	if rep := w.sweep(n); len(rep.Told) != 0 || len(w.hook.posts()) != 1 {
		t.Fatalf("a scope still behind was told again: %+v", rep)
	}
	if rep := w.sweep(w.notifier("n2")); len(rep.Told) != 0 || len(w.hook.posts()) != 1 {
		t.Fatalf("another notifier told it again: %+v", rep)
	}

	// The pass dies: its lease expires and the scope is stuck, which is a change.
	w.clock.Advance(5 * time.Minute) // 37m, the lease expired at 35m
	commented := w.gh.On("POST", "/repos/acme/ops/issues/12/comments", http.StatusCreated, comment(t, "stuck"))
	w.sweep(n)
	if posts := w.hook.posts(); len(posts) != 2 || posts[1].State != "stuck" || posts[1].Scopes[0].State != "stuck" {
		t.Fatalf("posts %+v; want a second, stuck", posts)
	}
	if reqs := commented.Requests(); len(reqs) != 1 || !strings.Contains(reqs[0].Body.(map[string]any)["body"].(string), "stuck 37m") {
		t.Fatalf("comment requests %+v", reqs)
	}

	// It deploys: the recovery is posted and the issue closed.
	w.clock.Advance(time.Minute)
	g, err = w.auth.Gate(w.ctx, authority.GateRequest{Environment: "prod", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-7", LeaseTTL: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.auth.Complete(w.ctx, authority.Completion{Environment: "prod", Generation: res.Generation, Scopes: []string{"api"}, Holder: "run-7",
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess}); err != nil {
		t.Fatal(err)
	}
	closing := w.gh.On("POST", "/repos/acme/ops/issues/12/comments", http.StatusCreated, comment(t, "recovered"))
	closed := w.gh.On("PATCH", "/repos/acme/ops/issues/12", http.StatusOK, githubtest.Example(t, "PATCH", "/repos/{owner}/{repo}/issues/{issue_number}", http.StatusOK, ""))
	rep = w.sweep(n)
	if posts := w.hook.posts(); len(posts) != 3 || posts[2].Event != alert.EventRecovered || posts[2].State != "current" ||
		len(posts[2].Scopes) != 0 || len(posts[2].Recovered) != 1 || posts[2].Recovered[0] != "api" {
		t.Fatalf("posts %+v; want the recovery third", posts)
	}
	if len(closing.Requests()) != 1 || len(closed.Requests()) != 1 || closed.Requests()[0].Body.(map[string]any)["state"] != "closed" {
		t.Fatalf("close: comments %+v, edits %+v", closing.Requests(), closed.Requests())
	}
	if len(rep.Told) != 1 || rep.Told[0].Event != alert.EventRecovered {
		t.Fatalf("report %+v", rep)
	}
	if rep := w.sweep(n); len(rep.Told) != 0 {
		t.Fatalf("a recovered environment was told again: %+v", rep)
	}
	if ids := w.hook.ids; ids[0] == ids[1] || ids[1] == ids[2] {
		t.Errorf("delivery ids %v: each notification has its own", ids)
	}
}

// Two notifiers sweeping one store at once tell a change once.
func TestTwoNotifiersTellOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.cfg.Environments[0].AlertIssue = "" // the webhook alone: its posts count what was told
	if _, err := w.auth.Accept(w.ctx, authority.Intent{ID: "push-1", Environment: "prod", Scopes: []string{"api"}, Sha: sha}, false); err != nil {
		t.Fatal(err)
	}
	w.sweep(w.notifier("setup")) // stores the file's alert-after
	w.clock.Advance(45 * time.Minute)
	var wg sync.WaitGroup
	for _, h := range []string{"n1", "n2", "n3"} {
		n := w.notifier(h)
		wg.Go(func() {
			if _, err := n.Sweep(w.ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// A notifier that found the lease held left the change to its holder; a later sweep of any of
	// them tells nothing more.
	for _, h := range []string{"n1", "n2", "n3"} {
		w.sweep(w.notifier(h))
	}
	if posts := w.hook.posts(); len(posts) != 1 || posts[0].State != "stuck" {
		t.Fatalf("posts %+v; want exactly one, stuck", posts)
	}
}

// A failed post is retried with back-off within the sweep, and, when it keeps failing, by the
// next sweep: what was told is recorded only once it was.
func TestFailedPostIsToldNextSweep(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.cfg.Environments[0].AlertIssue = ""
	if _, err := w.auth.Accept(w.ctx, authority.Intent{ID: "push-1", Environment: "prod", Scopes: []string{"api"}, Sha: sha}, false); err != nil {
		t.Fatal(err)
	}
	n := w.notifier("n1")
	w.sweep(n)
	w.clock.Advance(45 * time.Minute)
	w.hook.mu.Lock()
	w.hook.fail = 4 // more than one sweep's three attempts
	w.hook.mu.Unlock()
	rep := w.sweep(n)
	if len(rep.Failed) != 1 || !strings.Contains(rep.Failed["prod"], "answered 503") || len(w.hook.posts()) != 0 {
		t.Fatalf("report %+v, posts %+v; want prod failed, nothing delivered", rep, w.hook.posts())
	}
	if strings.Contains(rep.Failed["prod"], "/hook") {
		t.Errorf("the failure shows the webhook's path: %s", rep.Failed["prod"])
	}
	if rep := w.sweep(n); len(rep.Told) != 1 || len(w.hook.posts()) != 1 {
		t.Fatalf("the next sweep: %+v, posts %d; want it told once", rep, len(w.hook.posts()))
	}
}

// Without the secret nothing unsigned is posted, and the sweep says why.
func TestNoSecretNoPost(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.cfg.Environments[0].AlertIssue = ""
	if _, err := w.auth.Accept(w.ctx, authority.Intent{ID: "push-1", Environment: "prod", Scopes: []string{"api"}, Sha: sha}, false); err != nil {
		t.Fatal(err)
	}
	n, err := alert.New(alert.Options{Authority: w.auth, Trusted: func(context.Context) (*config.Config, error) { return w.cfg, nil }, Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	w.sweep(n)
	w.clock.Advance(45 * time.Minute)
	if rep := w.sweep(n); !strings.Contains(rep.Failed["prod"], alert.SecretVariable) || len(w.hook.posts()) != 0 {
		t.Fatalf("report %+v; want the missing secret named and nothing posted", rep)
	}
}

// staleFirstRead is a store whose first read of key answers what was stored before hook ran: a
// notifier that read the alarm just before another told it and let go of its lease.
type staleFirstRead struct {
	*memory.Store
	key  string
	once sync.Once
	hook func()
}

func (s *staleFirstRead) Get(ctx context.Context, key string) (*authority.Doc, error) {
	if key != s.key {
		return s.Store.Get(ctx, key)
	}
	var (
		d   *authority.Doc
		err error
		hit bool
	)
	s.once.Do(func() {
		hit = true
		d, err = s.Store.Get(ctx, key)
		s.hook()
	})
	if hit {
		return d, err
	}
	return s.Store.Get(ctx, key)
}

// A notifier that saw the alarm untold, and takes its lease only after another told it, reads it
// again under the lease and tells nothing.
func TestANotifierReadsTheAlarmAgainUnderItsLease(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.cfg.Environments[0].AlertIssue = ""
	if _, err := w.auth.Accept(w.ctx, authority.Intent{ID: "push-1", Environment: "prod", Scopes: []string{"api"}, Sha: sha}, false); err != nil {
		t.Fatal(err)
	}
	w.sweep(w.notifier("setup"))
	w.clock.Advance(45 * time.Minute)
	first := w.notifier("n1")
	slow := &staleFirstRead{Store: w.store, key: authority.LeaseKey(authority.AlarmLease("prod")), hook: func() { w.sweep(first) }}
	n2, err := alert.New(alert.Options{Authority: authority.New(slow, authority.WithClock(w.clock)),
		Trusted: func(context.Context) (*config.Config, error) { return w.cfg, nil }, Secret: secret, Holder: "n2", Clock: w.clock, Backoff: []time.Duration{0}})
	if err != nil {
		t.Fatal(err)
	}
	if rep := w.sweep(n2); len(rep.Told) != 0 {
		t.Fatalf("the second notifier told it again: %+v", rep)
	}
	if posts := w.hook.posts(); len(posts) != 1 {
		t.Fatalf("posts %+v; want the first notifier's only", posts)
	}
}
