package main

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkGateProcess times `latestwins gate` as a whole process, startup included: the deploy
// phase with its lease, each time for a new pass (claimed before and completed after, outside the
// timer: a completed pass has nothing left to deploy), and the build phase, a pure authority check.
// It reports the median and p90 wall time in milliseconds.
func BenchmarkGateProcess(b *testing.B) {
	stores := []struct {
		name string
		open func(testing.TB) *fixture
	}{
		{"dynamodb", newDynamoFixture},
		{"bolt", newBoltFixture},
	}
	for _, st := range stores {
		b.Run("deploy/"+st.name, func(b *testing.B) {
			f := st.open(b)
			state := f.path("pass.json")
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				f.must(0, "claim", "--environment", "bench", "--scopes", "api", "--sha", fmt.Sprintf("%040x", i+1),
					"--intent-id", fmt.Sprintf("bench-%d", i+1), "--state", state)
				b.StartTimer()
				start := time.Now()
				r := f.run("gate", "--state", state, "--phase", "deploy", "--holder", fmt.Sprintf("bench-holder-%d", i))
				times = append(times, time.Since(start))
				b.StopTimer()
				if r.code != 0 {
					b.Fatalf("gate deploy: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
				}
				f.must(0, "complete", "--state", state, "--outcome", "success")
				b.StartTimer()
			}
			b.StopTimer()
			reportLatency(b, times)
			if api := f.scope("bench", "api"); api.Lease.Token != int64(b.N) || api.Lease.Holder != "" {
				b.Fatalf("after %d gates the lease is %+v: want token %d, released", b.N, api.Lease, b.N)
			}
		})
		b.Run("build/"+st.name, func(b *testing.B) {
			f := st.open(b)
			state := f.path("pass.json")
			f.must(0, "claim", "--environment", "bench", "--scopes", "api", "--sha", shaA, "--intent-id", "bench-1", "--state", state)
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				r := f.run("gate", "--state", state, "--phase", "build")
				times = append(times, time.Since(start))
				if r.code != 0 {
					b.Fatalf("gate build: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
				}
			}
			b.StopTimer()
			reportLatency(b, times)
		})
	}
}

func reportLatency(b *testing.B, times []time.Duration) {
	slices.Sort(times)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(percentile(times, 50)), "median-ms")
	b.ReportMetric(ms(percentile(times, 90)), "p90-ms")
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p/100 * n)
	return sorted[max(rank, 1)-1]
}
