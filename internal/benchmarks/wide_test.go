package benchmarks

import (
	"fmt"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// BenchmarkWidePush: what the App does for a push that touches n scopes of an environment whose
// scopes are all live: one accept of an intent naming all n (the workflows it dispatches claim
// later). Bytes written, requests and latency per push, on both layouts: the single document at
// its cap of 64, the per-scope layout at 64 and 300.
func BenchmarkWidePush(b *testing.B) {
	for _, ss := range scaleStores(b) {
		for _, l := range []struct {
			name  string
			opts  []authority.Option
			sizes []int
		}{
			{"single", nil, []int{64}},
			{"per-scope", []authority.Option{authority.WithScopeDocuments()}, []int{64, 300}},
		} {
			for _, n := range l.sizes {
				b.Run(fmt.Sprintf("%s/%s/scopes=%d", ss.name, l.name, n), func(b *testing.B) {
					ctx := b.Context()
					var c counts
					store := &countingStore{Store: ss.client(b), c: &c}
					env := fmt.Sprintf("wide-%d-%d", n, runs.Add(1))
					scopes := scopeNames(n)
					if err := deployAll(ctx, authority.New(store, l.opts...), env, scopes); err != nil {
						b.Fatal(err)
					}
					before := c.snapshot()
					i := 0
					for b.Loop() {
						// A new process per push, as a Lambda instance may be.
						a := authority.New(store, l.opts...)
						if _, err := a.Accept(ctx, authority.Intent{ID: fmt.Sprintf("%s-push-%d", env, i), Environment: env, Scopes: scopes,
							Sha: fmt.Sprintf("%040x", i+1), Ref: "refs/heads/main", Source: "push"}, false); err != nil {
							b.Fatal(err)
						}
						i++
					}
					s := c.snapshot().since(before)
					b.ReportMetric(float64(s.bytes)/float64(i), "B-written/push")
					b.ReportMetric(float64(s.requests())/float64(i), "req/push")
				})
			}
		}
	}
}

// BenchmarkMoveToScopes: moving a full environment of the single document (64 scopes, all live)
// to the per-scope layout: requests and time per environment.
func BenchmarkMoveToScopes(b *testing.B) {
	for _, ss := range scaleStores(b) {
		b.Run(ss.name+"/scopes=64", func(b *testing.B) {
			ctx := b.Context()
			var c counts
			store := &countingStore{Store: ss.client(b), c: &c}
			var moved snapshot
			i := 0
			for b.Loop() {
				b.StopTimer()
				env := fmt.Sprintf("move-%d", runs.Add(1))
				if err := deployAll(ctx, authority.New(store), env, scopeNames(64)); err != nil {
					b.Fatal(err)
				}
				before := c.snapshot()
				b.StartTimer()
				if _, err := authority.New(store).MoveToScopes(ctx, env); err != nil {
					b.Fatal(err)
				}
				s := c.snapshot().since(before)
				moved.gets, moved.puts, moved.putRecs, moved.getRecs, moved.bytes = moved.gets+s.gets, moved.puts+s.puts, moved.putRecs+s.putRecs, moved.getRecs+s.getRecs, moved.bytes+s.bytes
				i++
			}
			b.ReportMetric(float64(moved.requests())/float64(i), "req/env")
			b.ReportMetric(float64(moved.bytes)/float64(i), "B-written/env")
		})
	}
}
