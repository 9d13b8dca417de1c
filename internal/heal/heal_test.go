package heal_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/heal"
	"github.com/latestwins/latestwins/internal/metrics"
	"github.com/latestwins/latestwins/internal/metrics/metricstest"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

var _ heal.Log = (*ghadapter.DeliveryLog)(nil)

var secret = []byte("the webhook secret")

// The trusted configuration: pushes to master of the examples' repository feed staging's api.
const trusted = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
`

// fixture decodes a webhook payload of testdata/webhooks: GitHub's published examples
// (scripts/gen-webhook-fixtures).
func fixture(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "webhooks", name))
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return ev
}

func sha(n int) string { return fmt.Sprintf("%040x", n) }

// push is GitHub's example push to master (push.json) as push number n of a chain: from sha(n-1) to
// sha(n), pushed n seconds after the example.
func push(t *testing.T, n int) json.RawMessage {
	t.Helper()
	ev := fixture(t, "push.json")
	ev["before"], ev["after"] = sha(n-1), sha(n)
	ev["head_commit"].(map[string]any)["id"] = sha(n)
	repo := ev["repository"].(map[string]any)
	repo["pushed_at"] = repo["pushed_at"].(float64) + float64(n)
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dispatches counts the workflow dispatches of every App process of a test, by generation.
type dispatches struct {
	mu  sync.Mutex
	gen map[string]int
}

func (d *dispatches) Dispatch(_ context.Context, r app.DispatchRequest) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen[r.Inputs["generation"]]++
	return nil
}

// counts returns how many dispatches each generation got.
func (d *dispatches) counts() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for k, v := range d.gen {
		out[k] = v
	}
	return out
}

// world is one test's GitHub (with its delivery log), store and clock, shared by the App
// processes it starts.
type world struct {
	t      *testing.T
	ctx    context.Context
	gh     *githubtest.Server
	log    *githubtest.DeliveryLog
	store  authority.Store
	clock  *storetest.Clock
	keyPEM []byte
	config string
	sent   *dispatches
}

var start = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func newWorld(t *testing.T) *world {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "latestwins.yml")
	if err := os.WriteFile(cfg, []byte(trusted), 0o600); err != nil {
		t.Fatal(err)
	}
	gh := githubtest.New(t)
	return &world{t: t, ctx: t.Context(), gh: gh, log: gh.DeliveryLog(), store: memory.New(), clock: storetest.NewClock(start),
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		config: cfg, sent: &dispatches{gen: map[string]int{}}}
}

// process is what one App process has: its own Authority over the shared store, its App, and a
// healer reading the delivery log as the App.
type process struct {
	auth   *authority.Authority
	app    *app.App
	healer *heal.Healer
}

func (w *world) process(o heal.Options) *process {
	w.t.Helper()
	auth := authority.New(w.store, authority.WithClock(w.clock))
	a, err := app.New(app.Options{Secret: secret, Authority: auth, Config: &app.FileConfig{Path: w.config}, Dispatcher: w.sent})
	if err != nil {
		w.t.Fatal(err)
	}
	inst, err := githubapp.NewInstallations(42, w.keyPEM, w.gh.URL)
	if err != nil {
		w.t.Fatal(err)
	}
	o.Log, o.Cursor, o.Secret, o.Clock = &ghadapter.DeliveryLog{App: inst}, auth, secret, w.clock
	if o.App == nil {
		o.App = a
	}
	h, err := heal.New(o)
	if err != nil {
		w.t.Fatal(err)
	}
	return &process{auth: auth, app: a, healer: h}
}

// live delivers body to the App as GitHub does, signed, and returns the status it answered.
func (p *process) live(t *testing.T, event, guid string, body []byte) int {
	t.Helper()
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", event)
	r.Header.Set("X-GitHub-Delivery", guid)
	r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	rec := httptest.NewRecorder()
	p.app.ServeHTTP(rec, r)
	return rec.Code
}

func (p *process) heal(t *testing.T) *heal.Report {
	t.Helper()
	rep, err := p.healer.Run(t.Context())
	if err != nil {
		t.Fatalf("heal: %v", err)
	}
	return rep
}

// missed adds a push attempt the App never answered, delivered ago before the clock.
func (w *world) missed(n int, ago time.Duration) *githubtest.LoggedDelivery {
	return w.log.Add(githubtest.LoggedDelivery{GUID: guid(n), DeliveredAt: w.clock.Now().Add(-ago), Event: "push", Payload: push(w.t, n)})
}

func guid(n int) string { return fmt.Sprintf("d%07d-b361-11eb-836d-0e4f3503ccbe", n) }

// desired is staging's generation counter: how many intents it accepted.
func (w *world) desired() int64 {
	w.t.Helper()
	env, err := authority.New(w.store, authority.WithClock(w.clock)).Status(w.ctx, "staging")
	if err != nil {
		w.t.Fatalf("status of staging: %v", err)
	}
	return env.Desired
}

// onceEach fails unless generations 1..n were each dispatched exactly once.
func (w *world) onceEach(n int) {
	w.t.Helper()
	want := map[string]int{}
	for g := 1; g <= n; g++ {
		want[fmt.Sprint(g)] = 1
	}
	if got := w.sent.counts(); fmt.Sprint(got) != fmt.Sprint(want) {
		w.t.Fatalf("dispatches by generation = %v, want %v", got, want)
	}
	if got := w.desired(); got != int64(n) {
		w.t.Fatalf("staging accepted %d intents, want %d", got, n)
	}
}

// acceptedOnce fails unless staging accepted n intents and dispatched no generation twice. Pushes
// accepted out of order (a live one overtaking a replayed one) are recorded, not dispatched.
func (w *world) acceptedOnce(n int) {
	w.t.Helper()
	if got := w.desired(); got != int64(n) {
		w.t.Fatalf("staging accepted %d intents, want %d", got, n)
	}
	counts := w.sent.counts()
	for gen, c := range counts {
		if c != 1 {
			w.t.Errorf("generation %s dispatched %d times", gen, c)
		}
	}
	if len(counts) == 0 {
		w.t.Errorf("nothing was dispatched")
	}
}

func replayedGUIDs(rep *heal.Report) []string {
	var out []string
	for _, r := range rep.Replayed {
		out = append(out, r.GUID)
	}
	return out
}

// A push GitHub failed to deliver while the App was down is accepted (and its workflow
// dispatched) once the App is back; one the App took live is not replayed, nor is one GitHub
// logged as failed although the App processed it (it answered too late); a second run replays
// nothing.
func TestMissedPushIsAcceptedAfterRestart(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	before := w.process(heal.Options{})
	// push 1 taken live; push 2 processed, but GitHub gave up waiting; push 3 while the App was down.
	for _, n := range []int{1, 2} {
		if code := before.live(t, "push", guid(n), push(t, n)); code != http.StatusOK {
			t.Fatalf("live push %d: %d", n, code)
		}
	}
	w.log.Add(githubtest.LoggedDelivery{GUID: guid(1), DeliveredAt: w.clock.Now().Add(-10 * time.Minute), Event: "push", StatusCode: 200, Payload: push(t, 1)})
	w.log.Add(githubtest.LoggedDelivery{GUID: guid(2), DeliveredAt: w.clock.Now().Add(-9 * time.Minute), Event: "push", StatusCode: 0, Status: "timed out", Payload: push(t, 2)})
	down := w.missed(3, 8*time.Minute)

	after := w.process(heal.Options{})
	rep := after.heal(t)
	if got, want := replayedGUIDs(rep), []string{guid(2), guid(3)}; !slices.Equal(got, want) {
		t.Fatalf("replayed %v, want %v (report %+v)", got, want, rep)
	}
	if rep.Replayed[0].Outcome != app.OutcomeDuplicate || rep.Replayed[1].Outcome != app.OutcomeAccepted {
		t.Errorf("replayed as %s and %s, want %s (processed live, logged as failed) and %s", rep.Replayed[0].Outcome, rep.Replayed[1].Outcome, app.OutcomeDuplicate, app.OutcomeAccepted)
	}
	if rep.To != (authority.DeliveryMark{At: down.DeliveredAt, GUID: guid(3)}) || rep.Stopped != nil || len(rep.NotReplayed) != 0 {
		t.Errorf("report %+v: want the cursor at the newest delivery, nothing stopped or left out", rep)
	}
	// Three pushes, three generations, each dispatched once: the missed push got its own.
	w.onceEach(3)

	again := w.process(heal.Options{}).heal(t)
	if len(again.Replayed) != 0 || again.From != rep.To {
		t.Errorf("a second run: %+v; want nothing replayed from the cursor the first left", again)
	}
	w.onceEach(3)
}

// A run that uses its budget of replays stops the cursor after the last one it replayed; the next
// process continues from the stored cursor, across pages of the log, and nothing is replayed
// twice or left out.
func TestRestartContinuesFromTheCursor(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var missed []string
	// 230 attempts over the last 230 minutes, three pages: most answered, every 40th missed.
	for i := 1; i <= 230; i++ {
		ago := time.Duration(231-i) * time.Minute
		if i%40 == 0 {
			missed = append(missed, guid(i))
			w.missed(i, ago)
			continue
		}
		w.log.Add(githubtest.LoggedDelivery{GUID: fmt.Sprintf("ok-%d", i), DeliveredAt: w.clock.Now().Add(-ago), Event: "installation", Action: "created", StatusCode: 202})
	}
	var replayed []string
	for run := 0; run < 3; run++ {
		rep := w.process(heal.Options{MaxReplays: 2}).heal(t)
		replayed = append(replayed, replayedGUIDs(rep)...)
		if want := max(len(missed)-2*(run+1), 0); rep.Deferred != want {
			t.Errorf("run %d deferred %d, want %d", run, rep.Deferred, want)
		}
	}
	if !slices.Equal(replayed, missed) {
		t.Fatalf("replayed %v over three runs, want each missed delivery once, oldest first: %v", replayed, missed)
	}
	if got := w.desired(); got != int64(len(missed)) {
		t.Fatalf("staging accepted %d intents, want %d", got, len(missed))
	}
}

// A delivery that arrives live while another process replays it is accepted once.
func TestLiveDeliveryWhileReplayed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const n = 8
	var ds []*githubtest.LoggedDelivery
	for i := 1; i <= n; i++ {
		ds = append(ds, w.missed(i, time.Duration(20-i)*time.Minute))
	}
	healer, receiver := w.process(heal.Options{}), w.process(heal.Options{})
	var wg sync.WaitGroup
	wg.Go(func() { healer.heal(t) })
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			if code := receiver.live(t, "push", guid(i), push(t, i)); code != http.StatusOK {
				t.Errorf("live push %d: %d", i, code)
			}
		})
	}
	wg.Wait()
	w.acceptedOnce(n)
	for _, d := range ds {
		if d.Fetches(w.log) != 1 {
			t.Errorf("%s fetched %d times, want once", d.GUID, d.Fetches(w.log))
		}
	}
}

// Two App instances healing one store at once accept each missed delivery once, and leave the
// cursor at the newest.
func TestTwoHealersOnOneStore(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const n = 10
	var last *githubtest.LoggedDelivery
	for i := 1; i <= n; i++ {
		last = w.missed(i, time.Duration(30-i)*time.Minute)
	}
	a, b := w.process(heal.Options{}), w.process(heal.Options{})
	var wg sync.WaitGroup
	for _, p := range []*process{a, b} {
		wg.Go(func() { p.heal(t) })
	}
	wg.Wait()
	w.acceptedOnce(n)
	got, err := a.auth.DeliveryCursor(w.ctx)
	if err != nil || got.Handled != (authority.DeliveryMark{At: last.DeliveredAt, GUID: last.GUID}) {
		t.Fatalf("cursor = %v, %v; want the newest delivery", got, err)
	}
}

// failing fails to handle one delivery (the store or GitHub down) a number of times.
type failing struct {
	heal.Handler
	guid  string
	times int
}

func (f *failing) Handle(ctx context.Context, d app.Delivery) (app.Result, error) {
	if d.ID == f.guid && f.times > 0 {
		f.times--
		return app.Result{}, errors.New("the store is unreachable")
	}
	return f.Handler.Handle(ctx, d)
}

// A delivery that cannot be handled stops the cursor before it: what is older is replayed, what
// is newer waits, and the next run replays both once the failure is gone. A payload GitHub fails
// to give stops it the same way.
func TestCursorStopsBeforeAFailure(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	first := w.missed(1, 9*time.Minute)
	w.missed(2, 8*time.Minute)
	third := w.missed(3, 7*time.Minute)
	third.FetchStatus = http.StatusBadGateway
	w.missed(4, 6*time.Minute)

	p := w.process(heal.Options{})
	f := &failing{Handler: p.app, guid: guid(2), times: 1}
	p = w.process(heal.Options{App: f})
	rep := p.heal(t)
	if got := replayedGUIDs(rep); !slices.Equal(got, []string{guid(1)}) || rep.Stopped == nil || rep.Stopped.GUID != guid(2) {
		t.Fatalf("replayed %v, stopped at %+v; want guid 1 replayed and the run stopped at guid 2", got, rep.Stopped)
	}
	if want := (authority.DeliveryMark{At: first.DeliveredAt, GUID: first.GUID}); rep.To != want {
		t.Fatalf("cursor = %v, want %v: it must not pass the delivery that failed", rep.To, want)
	}
	rep = p.heal(t)
	if got := replayedGUIDs(rep); !slices.Equal(got, []string{guid(2)}) || rep.Stopped == nil || rep.Stopped.GUID != guid(3) {
		t.Fatalf("second run replayed %v, stopped at %+v; want guid 2, then a stop at guid 3 whose payload GitHub fails to give", got, rep.Stopped)
	}
	w.log.SetFetchStatus(third, 0)
	rep = p.heal(t)
	if got := replayedGUIDs(rep); !slices.Equal(got, []string{guid(3), guid(4)}) || rep.Stopped != nil {
		t.Fatalf("third run replayed %v, stopped at %+v; want guids 3 and 4", got, rep.Stopped)
	}
	w.onceEach(4)
}

// What is not replayed is reported, never skipped silently: a delivery older than GitHub's log
// keeps, a comment command or a protection rule gone stale, a payload GitHub no longer has, a
// payload the App refuses;
// and the cursor moves past them. An attempt of the last minute is left for the next run.
func TestNotReplayedIsReported(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.missed(1, 73*time.Hour)
	comment := fixture(t, "issue_comment.created.json")
	body, _ := json.Marshal(comment)
	w.log.Add(githubtest.LoggedDelivery{GUID: "stale-command", DeliveredAt: w.clock.Now().Add(-time.Hour), Event: "issue_comment", Action: "created", StatusCode: 502, Payload: body})
	gone := w.missed(2, 50*time.Minute)
	gone.FetchStatus = http.StatusNotFound
	rule, _ := json.Marshal(fixture(t, "deployment_protection_rule.requested.json"))
	w.log.Add(githubtest.LoggedDelivery{GUID: "stale-rule", DeliveredAt: w.clock.Now().Add(-45 * time.Minute), Event: "deployment_protection_rule", Action: "requested", StatusCode: 0, Payload: rule})
	w.log.Add(githubtest.LoggedDelivery{GUID: "not-an-object", DeliveredAt: w.clock.Now().Add(-40 * time.Minute), Event: "push", StatusCode: 500, Payload: json.RawMessage(`{"ref": 7}`)})
	replayed := w.missed(3, 30*time.Minute)
	w.missed(4, 20*time.Second) // not settled yet

	rep := w.process(heal.Options{}).heal(t)
	var why []string
	for _, m := range rep.NotReplayed {
		why = append(why, m.GUID)
	}
	if want := []string{guid(1), "stale-command", guid(2), "stale-rule", "not-an-object"}; !slices.Equal(why, want) {
		t.Fatalf("not replayed: %v, want %v (report %+v)", why, want, rep)
	}
	for _, m := range rep.NotReplayed {
		if m.Reason == "" {
			t.Errorf("%s is reported without a reason", m.GUID)
		}
	}
	if got := replayedGUIDs(rep); !slices.Equal(got, []string{guid(3)}) {
		t.Fatalf("replayed %v, want only guid 3", got)
	}
	if want := (authority.DeliveryMark{At: replayed.DeliveredAt, GUID: replayed.GUID}); rep.To != want {
		t.Fatalf("cursor = %v, want %v: past what was reported, short of the attempt that has not settled", rep.To, want)
	}
	w.clock.Advance(time.Minute)
	rep = w.process(heal.Options{}).heal(t)
	if got := replayedGUIDs(rep); !slices.Equal(got, []string{guid(4)}) {
		t.Fatalf("a minute later replayed %v, want guid 4", got)
	}
}

// A comment command given moments ago is carried out when its delivery was missed.
func TestFreshCommandIsReplayed(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	comment := fixture(t, "issue_comment.created.json")
	body, _ := json.Marshal(comment)
	w.log.Add(githubtest.LoggedDelivery{GUID: "fresh-command", DeliveredAt: w.clock.Now().Add(-2 * time.Minute), Event: "issue_comment", Action: "created", StatusCode: 0, Payload: body})
	rep := w.process(heal.Options{}).heal(t)
	if got := replayedGUIDs(rep); !slices.Equal(got, []string{"fresh-command"}) {
		t.Fatalf("replayed %v (report %+v), want the fresh command", got, rep)
	}
}

// The events replayed are exactly those the App acts on: a new event the App handles is replayed
// (or deliberately left out here), and nothing it ignores is fetched.
func TestReplayedEventsAreTheAppsOwn(t *testing.T) {
	t.Parallel()
	a, err := app.New(app.Options{Secret: secret, Authority: authority.New(memory.New()), Config: &app.FileConfig{Path: "unused.yml"}})
	if err != nil {
		t.Fatal(err)
	}
	var handled []string
	for _, ev := range append(github.MessageTypes(), "deployment_protection_rule") {
		res, err := a.Handle(context.Background(), app.Delivery{ID: "probe", Event: ev})
		if err != nil || res.Outcome != app.OutcomeIgnored || !strings.Contains(res.Message, "not used") {
			handled = append(handled, ev)
		}
	}
	slices.Sort(handled)
	if got := heal.ReplayedEvents(); !slices.Equal(got, slices.Compact(handled)) {
		t.Fatalf("replayed events %v, the App acts on %v", got, handled)
	}
}

// A delivery the App can never handle does not hold up those behind it until it leaves the log:
// once it has failed GiveUpAttempts times over GiveUpAfter, it is reported as given up and the
// cursor passes it.
func TestFailingDeliveryIsGivenUp(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.missed(1, 9*time.Minute)
	w.missed(2, 8*time.Minute)
	p := w.process(heal.Options{})
	p = w.process(heal.Options{App: &failing{Handler: p.app, guid: guid(1), times: 1 << 30}})
	for run, wait := range []time.Duration{0, 40 * time.Minute, 40 * time.Minute} {
		w.clock.Advance(wait)
		rep := p.heal(t)
		if run < 2 {
			if rep.Stopped == nil || rep.Stopped.GUID != guid(1) || len(rep.Replayed) != 0 {
				t.Fatalf("run %d: %+v; want it stopped at the failing delivery", run, rep)
			}
			continue
		}
		if len(rep.NotReplayed) != 1 || rep.NotReplayed[0].GUID != guid(1) || !strings.Contains(rep.NotReplayed[0].Reason, "given up") ||
			!slices.Equal(replayedGUIDs(rep), []string{guid(2)}) {
			t.Fatalf("after failing for 80 minutes: %+v; want it given up (reported) and the next one replayed", rep)
		}
	}
	w.acceptedOnce(1)
}

// Replayed deliveries are counted apart from the live ones, by event and by what the App answered:
// a scrape tells a platform team how much the App had missed, and the live counts stay what
// GitHub delivered.
func TestReplayedDeliveriesAreCounted(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	m := metrics.New()
	p := w.process(heal.Options{})
	f := &failing{Handler: p.app, guid: guid(3), times: 1}
	p = w.process(heal.Options{App: f, Replayed: m.Replayed})

	body := push(t, 1)
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	r := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-GitHub-Event", "push")
	r.Header.Set("X-GitHub-Delivery", guid(1))
	r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	rec := httptest.NewRecorder()
	m.Webhooks("/webhook", p.app).ServeHTTP(rec, r)
	if rec.Code != http.StatusOK {
		t.Fatalf("live push: %d", rec.Code)
	}
	w.log.Add(githubtest.LoggedDelivery{GUID: guid(1), DeliveredAt: w.clock.Now().Add(-10 * time.Minute), Event: "push", StatusCode: 200, Payload: body})
	w.missed(2, 9*time.Minute)
	w.log.Add(githubtest.LoggedDelivery{GUID: "not-an-object", DeliveredAt: w.clock.Now().Add(-8 * time.Minute), Event: "push", StatusCode: 500, Payload: json.RawMessage(`{"ref": 7}`)})
	w.missed(3, 7*time.Minute)

	if rep := p.heal(t); rep.Stopped == nil || rep.Stopped.GUID != guid(3) {
		t.Fatalf("first run stopped at %+v; want at guid 3, which fails once", rep.Stopped)
	}
	if got := replayedGUIDs(p.heal(t)); !slices.Equal(got, []string{guid(3)}) {
		t.Fatalf("second run replayed %v; want guid 3", got)
	}
	fams := metricstest.Scrape(t, m.Handler())
	for _, c := range []struct {
		outcome string
		want    float64
	}{{"accepted", 2}, {"refused", 1}, {"failed", 1}} {
		if got, _ := fams.Value("latestwins_replayed_deliveries_total", "event", "push", "outcome", c.outcome); got != c.want {
			t.Errorf("replayed pushes %s = %v; want %v", c.outcome, got, c.want)
		}
	}
	if got, _ := fams.Value("latestwins_deliveries_total", "event", "push", "outcome", "accepted"); got != 1 {
		t.Errorf("live pushes accepted = %v; want 1: a replay is not a delivery GitHub made", got)
	}
}
