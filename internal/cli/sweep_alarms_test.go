package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/alert"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/bolt"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// alarmReceiver is an alert-webhook on loopback that keeps the posts whose signature is right.
type alarmReceiver struct {
	t      *testing.T
	secret []byte
	url    string
	mu     sync.Mutex
	posts  []alert.Payload
}

func newAlarmReceiver(t *testing.T, secret string) *alarmReceiver {
	r := &alarmReceiver{t: t, secret: []byte(secret)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if req.Header.Get(alert.SignatureHeader) != alert.Sign(r.secret, body) {
			t.Errorf("alarm post without the right signature")
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var p alert.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("alarm post is not JSON: %v", err)
		}
		r.mu.Lock()
		r.posts = append(r.posts, p)
		r.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func (r *alarmReceiver) got() []alert.Payload {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]alert.Payload(nil), r.posts...)
}

// stuckStaging leaves staging/api with an intent accepted two hours ago that nothing deploys, and
// writes a trusted file whose staging alarms after 30m to hook.
func stuckStaging(t *testing.T, h *harness, hook string) string {
	t.Helper()
	st, err := bolt.Open(strings.TrimPrefix(h.store, "bolt://"))
	if err != nil {
		t.Fatal(err)
	}
	past := authority.New(st, authority.WithClock(storetest.NewClock(time.Now().Add(-2*time.Hour))))
	if _, err := past.Accept(context.Background(), authority.Intent{ID: "i1", Environment: "staging", Scopes: []string{"api"},
		Sha: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}, false); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(h.dir, "latestwins.yml")
	if err := os.WriteFile(cfg, []byte("environments:\n  staging:\n    alert-after: 30m\n    alert-webhook: "+hook+"\n"+
		"    scopes:\n      api: {repository: Codertocat/Hello-World, branch: master, workflow: deploy.yml}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// `latestwins sweep` tells the convergence alarms of the trusted file it is given, as serve's and
// the Lambda's sweeps do: a stuck scope is posted once, signed, in a dry run as in a re-drive; and
// without a trusted file it tells nothing.
func TestSweepTellsAlarms(t *testing.T) {
	h := newHarness(t)
	hook := newAlarmReceiver(t, "alarm secret")
	cfg := stuckStaging(t, h, hook.url)
	h.vars["LATESTWINS_ALERT_SECRET"] = "alarm secret"

	h.must(ExitOK, "sweep")
	if p := hook.got(); len(p) != 0 {
		t.Fatalf("a sweep without a trusted file posted %+v", p)
	}

	o := h.must(ExitOK, "sweep", "--config", cfg)
	if !strings.Contains(o.stdout, "alarm: told staging late (api) to alert-webhook") || !strings.Contains(o.stdout, "dry run") {
		t.Errorf("sweep output does not say what it told:\n%s", o.stdout)
	}
	p := hook.got()
	if len(p) != 1 || p[0].Event != alert.EventLate || p[0].Environment != "staging" || p[0].State != "stuck" ||
		len(p[0].Scopes) != 1 || p[0].Scopes[0].Scope != "api" {
		t.Fatalf("posts %+v; want one stuck post for staging/api", p)
	}

	// Told once: the next sweeps, a re-drive among them, see the same alarm and post nothing.
	h.vars["LATESTWINS_CONFIG"] = cfg
	h.must(ExitOK, "sweep")
	o = h.must(ExitOK, "sweep", "--json", "--stall", "1ns", "--", "true")
	var out struct {
		Redriven []authority.StalledWork `json:"redriven"`
		Alarms   *alert.Report           `json:"alarms"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &out); err != nil {
		t.Fatalf("sweep --json: %v\n%s", err, o.stdout)
	}
	if len(out.Redriven) != 1 || out.Alarms == nil || len(out.Alarms.Told) != 0 {
		t.Errorf("sweep --json = %s; want one re-drive and alarms that told nothing new", o.stdout)
	}
	if p := hook.got(); len(p) != 1 {
		t.Errorf("%d posts after three sweeps; want the one", len(p))
	}
}

// An alarm the sweep cannot tell fails it, and says what to set: a webhook post is never sent
// unsigned.
func TestSweepFailsOnAnAlarmItCannotTell(t *testing.T) {
	h := newHarness(t)
	hook := newAlarmReceiver(t, "alarm secret")
	cfg := stuckStaging(t, h, hook.url)

	o := h.must(ExitError, "sweep", "--config", cfg)
	if !strings.Contains(o.stdout, "alarm of staging not told") || !strings.Contains(o.stdout, alert.SecretVariable+" is not set") ||
		!strings.Contains(o.stderr, "could not be told") {
		t.Errorf("sweep without the alarm secret:\nstdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
	}
	if p := hook.got(); len(p) != 0 {
		t.Errorf("posted without a secret: %+v", p)
	}

	// Once the secret is there, the next sweep tells it.
	h.vars["LATESTWINS_ALERT_SECRET"] = "alarm secret"
	h.must(ExitOK, "sweep", "--config", cfg)
	if p := hook.got(); len(p) != 1 {
		t.Errorf("%d posts once the secret is set; want 1", len(p))
	}

	// A trusted file that cannot be used is bad input, before the store is touched.
	if o := h.must(ExitUsage, "sweep", "--config", filepath.Join(h.dir, "missing.yml")); !strings.Contains(o.stderr, "missing.yml") {
		t.Errorf("sweep with a missing trusted file: %s", o.stderr)
	}
}
