package report

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// Histogram counts durations in fixed logarithmic buckets: bucket 0 holds everything under a
// second, and from there each doubling of the duration is split into histogramSteps buckets, up to
// histogramBuckets (beyond about 2,000 years everything lands in the last). A quantile is read as
// the geometric middle of its bucket, so it is within HistogramError of a duration in that bucket:
// about 2.2%. Its size is bounded by the number of buckets whatever it counts, and two histograms
// merge by adding their counts, so it is what a rollup keeps for lead times and restores.
//
// In JSON it is sparse: bucket number to count, and the exact total and extremes.
type Histogram struct {
	Counts map[string]uint64 `json:"counts,omitempty"` // bucket number (decimal) -> count
	Count  uint64            `json:"count"`
	// SumSeconds, MinSeconds and MaxSeconds are exact.
	SumSeconds float64 `json:"sum_seconds"`
	MinSeconds float64 `json:"min_seconds,omitempty"`
	MaxSeconds float64 `json:"max_seconds,omitempty"`
}

const (
	histogramSteps   = 16
	histogramBuckets = 36 * histogramSteps
)

// HistogramError is the bound of a quantile's relative error: half a bucket's width.
var HistogramError = math.Pow(2, 1/(2.0*histogramSteps)) - 1

// bucketNames are the buckets' JSON keys, made once.
var bucketNames = func() []string {
	names := make([]string, histogramBuckets)
	for i := range names {
		names[i] = strconv.Itoa(i)
	}
	return names
}()

func bucketOf(d time.Duration) int {
	s := d.Seconds()
	if s < 1 {
		return 0
	}
	b := 1 + int(math.Floor(math.Log2(s)*histogramSteps))
	return min(b, histogramBuckets-1)
}

// bucketMiddle is the geometric middle of bucket b: [2^((b-1)/steps), 2^(b/steps)) seconds.
func bucketMiddle(b int) time.Duration {
	if b == 0 {
		return 0
	}
	s := math.Pow(2, (float64(b)-0.5)/histogramSteps)
	return time.Duration(s * float64(time.Second))
}

// Add counts one duration (a negative one, from clocks that disagree, counts as zero).
func (h *Histogram) Add(d time.Duration) {
	d = max(d, 0)
	if h.Counts == nil {
		h.Counts = map[string]uint64{}
	}
	h.Counts[bucketNames[bucketOf(d)]]++
	s := d.Seconds()
	if h.Count == 0 || s < h.MinSeconds {
		h.MinSeconds = s
	}
	h.MaxSeconds = max(h.MaxSeconds, s)
	h.Count++
	h.SumSeconds += s
}

// Merge adds o's counts to h's.
func (h *Histogram) Merge(o Histogram) {
	if o.Count == 0 {
		return
	}
	if h.Counts == nil {
		h.Counts = map[string]uint64{}
	}
	for b, n := range o.Counts {
		h.Counts[b] += n
	}
	if h.Count == 0 || o.MinSeconds < h.MinSeconds {
		h.MinSeconds = o.MinSeconds
	}
	h.MaxSeconds = max(h.MaxSeconds, o.MaxSeconds)
	h.Count += o.Count
	h.SumSeconds += o.SumSeconds
}

// Quantile is the duration below which a fraction q of the counted ones fall (the nearest rank),
// within HistogramError, clamped to the exact extremes; 0 when nothing was counted.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	type bucket struct {
		b int
		n uint64
	}
	bs := make([]bucket, 0, len(h.Counts))
	for k, n := range h.Counts {
		b, err := strconv.Atoi(k)
		if err != nil || n == 0 {
			continue
		}
		bs = append(bs, bucket{b, n})
	}
	slices.SortFunc(bs, func(x, y bucket) int { return x.b - y.b })
	rank := uint64(math.Ceil(q * float64(h.Count)))
	rank = max(rank, 1)
	var seen uint64
	for _, x := range bs {
		seen += x.n
		if seen >= rank {
			d := bucketMiddle(x.b)
			lo, hi := seconds(h.MinSeconds), seconds(h.MaxSeconds)
			return min(max(d, lo), hi)
		}
	}
	return seconds(h.MaxSeconds)
}

// Mean is the exact mean of what was counted; 0 when nothing was.
func (h *Histogram) Mean() time.Duration {
	if h.Count == 0 {
		return 0
	}
	return seconds(h.SumSeconds / float64(h.Count))
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
