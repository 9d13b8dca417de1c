package app

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/web"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

var testSecret = []byte("It's a Secret to Everybody")

// testConfig matches the fixtures: Codertocat/Hello-World, branch master, a push changing README.md.
const testConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: deploy.yml
      docs:
        repository: Codertocat/Hello-World
        branch: master
        paths: [docs/**]
        workflow: deploy.yml
      web:
        repository: acme/web
        branch: master
        workflow: web.yml
  preview/pr-{number}:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
        workflow: preview.yml
`

// sign computes X-Hub-Signature-256 for body.
func sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "webhooks", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// eventOf is the X-GitHub-Event of a fixture file EVENT[.ACTION].json.
func eventOf(name string) string {
	ev, _, _ := strings.Cut(strings.TrimSuffix(name, ".json"), ".")
	return ev
}

// staticConfig is a ConfigSource with one configuration for every repository.
type staticConfig struct{ cfg *config.Config }

func (s staticConfig) Config(context.Context, int64, core.RepoRef, string) (*config.Config, error) {
	return s.cfg, nil
}

var _ core.ConfigSource = staticConfig{}

// recorder is a Dispatcher that records its requests and answers err.
type recorder struct {
	mu   sync.Mutex
	reqs []core.DispatchRequest
	err  error
}

var _ core.Dispatcher = (*recorder)(nil)

func (r *recorder) Dispatch(_ context.Context, req core.DispatchRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return r.err
}

func (r *recorder) requests() []core.DispatchRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.DispatchRequest(nil), r.reqs...)
}

type harness struct {
	app   *App
	auth  *authority.Authority
	disp  *recorder
	clock *storetest.Clock
}

func newHarness(t testing.TB, cfgYAML string, opts ...func(*Options)) *harness {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	h := &harness{auth: authority.New(memory.New(), authority.WithClock(clock)), disp: &recorder{}, clock: clock}
	o := Options{Secret: testSecret, Authority: h.auth, Config: staticConfig{cfg}, Dispatcher: h.disp, StatusPage: web.StatusPageOpen,
		Environments: func(context.Context) ([]string, error) { return []string{"staging"}, nil }}
	for _, f := range opts {
		f(&o)
	}
	if h.app, err = New(o); err != nil {
		t.Fatal(err)
	}
	return h
}

// post sends a signed delivery to the handler.
func (h *harness) post(t testing.TB, event, id string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	return h.do(newDelivery(event, id, body, sign(testSecret, body)))
}

func (h *harness) do(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.app.ServeHTTP(w, r)
	return w
}

func newDelivery(event, id string, body []byte, signature string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	if event != "" {
		r.Header.Set("X-GitHub-Event", event)
	}
	if id != "" {
		r.Header.Set("X-GitHub-Delivery", id)
	}
	if signature != "" {
		r.Header.Set("X-Hub-Signature-256", signature)
	}
	return r
}

func decodeResult(t testing.TB, w *httptest.ResponseRecorder) core.Result {
	t.Helper()
	var res core.Result
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil {
		t.Fatalf("response %q: %v", w.Body.String(), err)
	}
	return res
}

// withPush returns the push fixture with other before/after commits.
func withPush(t testing.TB, before, after string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixture(t, "push.json"), &m); err != nil {
		t.Fatal(err)
	}
	m["before"], m["after"] = before, after
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
