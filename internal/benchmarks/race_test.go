package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/demo"
)

// Simulated step durations of the A -> B -> C race benchmark.
const (
	raceBuild  = 200 * time.Millisecond
	raceDeploy = 100 * time.Millisecond
)

// raceTiming is the newest commit's time from arrival to live, and its own build plus deploy time.
type raceTiming struct {
	toLive, own time.Duration
}

func (r raceTiming) ratio() float64 { return float64(r.toLive) / float64(r.own) }

// latestWinsRace stages the race with the latest-wins protocol (internal/demo): A and B are held in
// their builds while C builds, deploys and goes live. It fails on any broken guarantee.
func latestWinsRace(ctx context.Context, a *authority.Authority, env string, build, deploy time.Duration) (raceTiming, error) {
	res, err := demo.Run(ctx, a, io.Discard, demo.Options{Environment: env, Scope: "api", Build: build, Deploy: deploy, LeaseTTL: time.Minute})
	if err != nil {
		return raceTiming{}, fmt.Errorf("latest-wins race: %w", err)
	}
	if len(res.Violations) > 0 {
		return raceTiming{}, fmt.Errorf("latest-wins race broke guarantees: %s", strings.Join(res.Violations, "; "))
	}
	return raceTiming{toLive: res.CToLive, own: res.COwnWork}, nil
}

// serializedRace stages the same arrivals under the serialized-lock model: one environment-wide
// lock (a named lease in the same store) held for each pass's whole build and deploy, granted in
// arrival order A, B, C. A arrives and starts building; B arrives and queues; C arrives and queues
// behind B. Each hand-off is immediate (no polling), so this is the model's best case. It checks
// that the lock went to A, B and C in that order with increasing tokens, and returns C's timing.
func serializedRace(ctx context.Context, a *authority.Authority, env string, build, deploy time.Duration) (raceTiming, error) {
	names := []string{"A", "B", "C"}
	lock := "env-lock/" + env
	turns := make([]chan struct{}, len(names)+1) // turns[i] closes when pass i may take the lock
	for i := range turns {
		turns[i] = make(chan struct{})
	}
	close(turns[0])
	arrived := make(chan struct{}, 1) // a pass is building (A) or queued (B, C): the next may arrive
	timings := make([]raceTiming, len(names))
	tokens := make([]int64, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		if i > 0 {
			select {
			case <-arrived:
			case <-ctx.Done():
				return raceTiming{}, ctx.Err()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(turns[i+1])
			start := time.Now()
			if i > 0 {
				arrived <- struct{}{}
			}
			select {
			case <-turns[i]:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			g, err := a.Acquire(ctx, lock, "pass-"+name, "build+deploy", time.Minute)
			if err != nil {
				errs[i] = fmt.Errorf("pass %s: take the environment lock: %w", name, err)
				if i == 0 {
					arrived <- struct{}{}
				}
				return
			}
			if i == 0 {
				arrived <- struct{}{}
			}
			work := time.Now()
			if err := pause(ctx, build); err != nil {
				errs[i] = err
				return
			}
			if err := pause(ctx, deploy); err != nil {
				errs[i] = err
				return
			}
			own := time.Since(work)
			if err := a.ReleaseNamed(ctx, g); err != nil {
				errs[i] = fmt.Errorf("pass %s: release the environment lock: %w", name, err)
				return
			}
			timings[i] = raceTiming{toLive: time.Since(start), own: own}
			tokens[i] = g.Tokens[lock]
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return raceTiming{}, fmt.Errorf("serialized-lock race: %w", err)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			return raceTiming{}, fmt.Errorf("serialized-lock race: lock tokens %v are not increasing in arrival order", tokens)
		}
	}
	return timings[len(names)-1], nil
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// TestRaceModels runs both models once on every store with short steps and checks their outcomes.
func TestRaceModels(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			a := authority.New(k.open(t)(t))
			if _, err := latestWinsRace(t.Context(), a, "race-latest", 20*time.Millisecond, 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if _, err := serializedRace(t.Context(), a, "race-lock", 20*time.Millisecond, 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// BenchmarkRaceToLive measures the newest commit's time to live in the A -> B -> C race (build
// 200 ms, deploy 100 ms) under the latest-wins protocol and under the serialized-lock model, in the
// same run on the same store. It reports the medians of C's time to live and of its ratio to C's own
// build+deploy time for each model; spec target: the latest-wins ratio within 1.10.
func BenchmarkRaceToLive(b *testing.B) {
	for _, k := range storeKinds {
		b.Run(k.name, func(b *testing.B) {
			a := authority.New(k.open(b)(b))
			var latestMs, latestRatio, lockMs, lockRatio []float64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				lw, err := latestWinsRace(b.Context(), a, fmt.Sprintf("race-latest-%d", i), raceBuild, raceDeploy)
				if err != nil {
					b.Fatal(err)
				}
				sl, err := serializedRace(b.Context(), a, fmt.Sprintf("race-lock-%d", i), raceBuild, raceDeploy)
				if err != nil {
					b.Fatal(err)
				}
				latestMs, latestRatio = append(latestMs, ms(lw.toLive)), append(latestRatio, lw.ratio())
				lockMs, lockRatio = append(lockMs, ms(sl.toLive)), append(lockRatio, sl.ratio())
			}
			b.StopTimer()
			b.ReportMetric(median(latestMs), "latest-C-ms")
			b.ReportMetric(median(latestRatio), "latest-C-ratio")
			b.ReportMetric(median(lockMs), "lock-C-ms")
			b.ReportMetric(median(lockRatio), "lock-C-ratio")
		})
	}
}
