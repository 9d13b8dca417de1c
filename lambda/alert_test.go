package lambda_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/alert"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/lambda"
)

// A scheduled sweep tells the convergence alarms: a scope stuck past its alert-after is posted once.
func TestScheduledSweepTellsAlarms(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		posts []alert.Payload
	)
	secret := []byte("alarm secret")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get(alert.SignatureHeader) != alert.Sign(secret, body) {
			t.Errorf("unsigned or badly signed post")
		}
		var p alert.Payload
		_ = json.Unmarshal(body, &p)
		mu.Lock()
		posts = append(posts, p)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	cfg, err := config.Parse([]byte("environments:\n  staging:\n    alert-after: 30m\n    alert-webhook: " + srv.URL + "\n" +
		"    scopes:\n      api: {repository: Codertocat/Hello-World, branch: master, workflow: deploy.yml}\n"))
	if err != nil {
		t.Fatal(err)
	}
	hs := newHarness(t, func(o *lambda.Options) {
		n, err := alert.New(alert.Options{Authority: o.Authority, Trusted: func(context.Context) (*config.Config, error) { return cfg, nil },
			Secret: secret, Clock: o.Authority, Backoff: []time.Duration{0}})
		if err != nil {
			t.Fatal(err)
		}
		o.Alerts = n
	})
	stalled(t, hs)
	if _, err := sweep(t, hs.h); err != nil { // stores the file's alert-after; waiting
		t.Fatal(err)
	}
	hs.clock.Advance(30 * time.Minute)
	for range 2 {
		if _, err := sweep(t, hs.h); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posts) != 1 || posts[0].Environment != "staging" || posts[0].State != "stuck" {
		t.Fatalf("posts %+v; want one stuck post for staging", posts)
	}
}
