package apiclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
	"github.com/latestwins/latestwins/internal/store/memory"
)

// guard bounds a wait on the code under test, so that a bug fails the test rather than holding it
// for the long poll's whole wait (apiclient.MaxLongPoll). It is never how long something is
// expected to take.
const guard = 10 * time.Second

// gateCounter counts the gate requests that go through it.
type gateCounter struct {
	n atomic.Int64
}

func (g *gateCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/gate") {
		g.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// claimAndHold claims intent id for staging/api and, when hold, takes its deploy lease as holder.
func claimAndHold(ctx context.Context, tb testing.TB, c *apiclient.Client, id string, hold bool) (authority.GateRequest, *authority.Grant) {
	tb.Helper()
	res, err := c.Claim(ctx, authority.Intent{ID: id, Environment: "staging", Scopes: []string{"api"}, Sha: fmt.Sprintf("%040x", len(id)*7919+int(id[len(id)-1]))})
	if err != nil {
		tb.Fatalf("claim %s: %v", id, err)
	}
	req := authority.GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: id, LeaseTTL: time.Minute}
	if !hold {
		return req, nil
	}
	g, err := c.Gate(ctx, req)
	if err != nil {
		tb.Fatalf("gate of %s: %v", id, err)
	}
	return req, g
}

// TestGateWaitIsHeldUntilTheRelease: where the App long-polls (serve), it says so in every gate
// answer, and a gate request that meets a held lease is answered only once the holder released
// it, with the grant, in that one request; where it does not (the Lambda), a gate is answered at
// once.
func TestGateWaitIsHeldUntilTheRelease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	counter := &gateCounter{}
	c, auth, _, _ := serveAPI(t, cfg, time.Minute, &http.Client{Transport: counter}, nil)
	_, g := claimAndHold(ctx, t, c, "a", true)
	if c.LongPoll() != time.Minute {
		t.Fatalf("the client learned a long poll of %s, want the App's 1m0s", c.LongPoll())
	}
	req, _ := claimAndHold(ctx, t, c, "b", false)
	// The waiter's refusal is recorded (a write) before the App waits: then the holder releases.
	refused := auth.Changed("staging")
	before := counter.n.Load()
	type answer struct {
		g   *authority.Grant
		err error
	}
	done := make(chan answer, 1)
	go func() {
		g, err := c.GateWait(ctx, req, time.Minute)
		done <- answer{g, err}
	}()
	select {
	case <-refused:
	case a := <-done:
		t.Fatalf("the gate answered before the holder released: %+v, %v", a.g, a.err)
	}
	if err := c.Release(ctx, g); err != nil {
		t.Fatalf("release: %v", err)
	}
	a := <-done
	if a.err != nil || a.g == nil || a.g.Tokens["api"] == 0 {
		t.Fatalf("the waiting gate: %+v, %v; want the lease once released", a.g, a.err)
	}
	if n := counter.n.Load() - before; n != 1 {
		t.Errorf("the waiter sent %d gate requests, want the one the App held", n)
	}

	plain, _, _, _ := serveAPI(t, cfg, 0, nil, nil)
	_, _ = claimAndHold(ctx, t, plain, "a", true)
	req, _ = claimAndHold(ctx, t, plain, "b", false)
	var held *authority.HeldError
	if _, err := plain.GateWait(ctx, req, time.Minute); !errors.As(err, &held) || plain.LongPoll() != 0 {
		t.Fatalf("an App without long poll: %v (long poll %s); want the refusal at once", err, plain.LongPoll())
	}
}

// BenchmarkAPIHandover measures release-to-grant time through the App's API in one process: a
// waiter in pass.Gate against an App that long-polls (serve) and one that answers at once (the
// Lambda's, where the client polls), the holder releasing after each hold.
func BenchmarkAPIHandover(b *testing.B) {
	holds := []time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 300 * time.Millisecond, 450 * time.Millisecond, 600 * time.Millisecond}
	for _, mode := range []struct {
		name     string
		longPoll time.Duration
	}{{"long-poll", apiclient.MaxLongPoll}, {"polling", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			ctx := b.Context()
			c, auth, _, _ := serveAPI(b, cfg, mode.longPoll, nil, nil)
			var all []time.Duration
			n := 0
			for b.Loop() {
				for _, hold := range holds {
					n++
					_, g := claimAndHold(ctx, b, c, fmt.Sprintf("h%d", n), true)
					req, _ := claimAndHold(ctx, b, c, fmt.Sprintf("w%d", n), false)
					refused := auth.Changed("staging")
					got := make(chan time.Time, 1)
					var wg *authority.Grant
					var werr error
					go func() {
						wg, werr = pass.Gate(ctx, c, req, time.Minute, nil)
						got <- time.Now()
					}()
					<-refused
					time.Sleep(hold) // the holder's step, not a synchronisation
					released := time.Now()
					if err := c.Release(ctx, g); err != nil {
						b.Fatal(err)
					}
					at := <-got
					if werr != nil {
						b.Fatal(werr)
					}
					all = append(all, at.Sub(released))
					if err := c.Release(ctx, wg); err != nil {
						b.Fatal(err)
					}
				}
			}
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
		})
	}
}

// TestGateWaitEndsWhenTheServerStops: a gate request held by the long poll is answered with its
// refusal as soon as the server starts shutting down, instead of holding the shutdown.
func TestGateWaitEndsWhenTheServerStops(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	stopping := make(chan struct{})
	c, auth, _, _ := serveAPI(t, cfg, time.Minute, nil, stopping)
	claimAndHold(ctx, t, c, "a", true)
	req, _ := claimAndHold(ctx, t, c, "b", false)
	refused := auth.Changed("staging")
	done := make(chan error, 1)
	go func() {
		_, err := c.GateWait(ctx, req, time.Minute)
		done <- err
	}()
	<-refused // the waiter's refusal is recorded: it waits
	close(stopping)
	var held *authority.HeldError
	select {
	case err := <-done:
		if !errors.As(err, &held) {
			t.Fatalf("the waiting gate when the server stops: %v; want its refusal", err)
		}
	case <-time.After(guard):
		t.Fatalf("the waiting gate was still held %s after the server began to stop", guard)
	}
}

// TestMovedEnvironmentIsRefusedWithWhereItWent: over the API a moved environment is refused as
// moved, with where its state went, not as the App being unavailable.
func TestMovedEnvironmentIsRefusedWithWhereItWent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c, auth, _, _ := serveAPI(t, cfg, 0, nil, nil)
	claimAndHold(ctx, t, c, "a", false)
	if _, err := auth.Move(ctx, "staging", "dynamodb://elsewhere", memory.New()); err != nil {
		t.Fatal(err)
	}
	_, err := c.Status(ctx, "staging")
	if !errors.Is(err, authority.ErrMoved) || !strings.Contains(err.Error(), "dynamodb://elsewhere") {
		t.Fatalf("status of a moved environment over the API: %v; want it refused as moved, saying where", err)
	}
}

// TestOverviewLeavesAMovedEnvironmentOut: what is live where still answers when one of the
// environments was moved to another store: the others, without the moved one.
func TestOverviewLeavesAMovedEnvironmentOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const two = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
  production:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
`
	c, auth, _, _ := serveAPI(t, two, 0, nil, nil)
	for _, env := range []string{"staging", "production"} {
		if _, err := c.Claim(ctx, authority.Intent{ID: "push-" + env, Environment: env, Scopes: []string{"api"}, Sha: strings.Repeat("a", 40)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := auth.Move(ctx, "production", "dynamodb://elsewhere", memory.New()); err != nil {
		t.Fatal(err)
	}
	o, err := c.Overview(ctx)
	if err != nil {
		t.Fatalf("the overview with production moved: %v; want staging's", err)
	}
	if strings.Join(o.Environments, ",") != "staging" {
		t.Errorf("the overview shows %v; want staging alone", o.Environments)
	}
}
