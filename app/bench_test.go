package app

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkWebhookPush measures one signed push through the handler on the memory store: signature
// check, parsing, config selection, accept (one write) and a recorded dispatch. GitHub calls are
// excluded. Each delivery is a new intent on the same environment. Reports p50 and p99 latency.
func BenchmarkWebhookPush(b *testing.B) {
	h := newHarness(b, testConfig)
	shas := make([][]byte, 0, 64)
	prev := pushSha
	for i := range 64 {
		next := fmt.Sprintf("%040x", i+1)
		shas = append(shas, withPush(b, prev, next))
		prev = next
	}
	durations := make([]time.Duration, 0, b.N)
	for i := 0; b.Loop(); i++ {
		body := shas[i%len(shas)]
		r := newDelivery("push", fmt.Sprintf("bench-%d", i), body, sign(testSecret, body))
		start := time.Now()
		rec := h.do(r)
		durations = append(durations, time.Since(start))
		if rec.Code != http.StatusOK {
			b.Fatalf("push %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	b.StopTimer()
	slices.Sort(durations)
	pct := func(p float64) float64 { return float64(durations[int(p*float64(len(durations)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
