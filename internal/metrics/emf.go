package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// CloudWatch names of the figures the Lambda writes as Embedded Metric Format lines: the same
// families as /metrics, in the namespace EMFNamespace, each series a metric with its labels as
// dimensions. The stacks' alarms name these.
const (
	EMFNamespace = "latestwins"
	// BehindMetric is the behind figure of a scope; written with dimensions environment and scope,
	// and without any (the largest of all scopes), which the stacks' alarm watches.
	BehindMetric = "latestwins_scope_behind_seconds"
	// SweepsMetric counts sweeps, with dimension result (ok, error).
	SweepsMetric = "latestwins_sweeps_total"
)

// EMF writes the families of a Gatherer as Embedded Metric Format lines, one JSON object per
// series, for CloudWatch to turn into metrics from the function's log. Counters are written as
// what they counted since the last Write (a CloudWatch metric sums what each line says), gauges as
// they are, histograms as their count and sum since the last Write. A series that counted nothing
// since is left out.
type EMF struct {
	g    prometheus.Gatherer
	mu   sync.Mutex
	last map[string]float64 // series -> the cumulative value written last
}

// NewEMF writes g's families.
func NewEMF(g prometheus.Gatherer) *EMF { return &EMF{g: g, last: map[string]float64{}} }

// Write writes one line per series that changed.
func (e *EMF) Write(w io.Writer, now time.Time) error {
	fams, err := e.g.Gather()
	if err != nil {
		return fmt.Errorf("gather metrics: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), Namespace+"_") {
			continue // Go's runtime and the process: CloudWatch has its own
		}
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				if err := e.delta(w, now, f.GetName(), m, m.GetCounter().GetValue()); err != nil {
					return err
				}
			case dto.MetricType_GAUGE:
				if err := writeLine(w, now, f.GetName(), m.GetLabel(), m.GetGauge().GetValue(), unitOf(f.GetName()), false); err != nil {
					return err
				}
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				if err := e.delta(w, now, f.GetName()+"_count", m, float64(h.GetSampleCount())); err != nil {
					return err
				}
				if err := e.delta(w, now, f.GetName()+"_sum", m, h.GetSampleSum()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// delta writes what the counter name of series m counted since the last Write.
func (e *EMF) delta(w io.Writer, now time.Time, name string, m *dto.Metric, total float64) error {
	key := name + "\x00" + seriesKey(m.GetLabel())
	d := total - e.last[key]
	if d <= 0 {
		return nil
	}
	if err := writeLine(w, now, name, m.GetLabel(), d, unitOf(name), false); err != nil {
		return err
	}
	e.last[key] = total
	return nil
}

// WriteBehind writes the behind figure of each scope, and the largest of them without dimensions
// (what an alarm on any scope watches).
func WriteBehind(w io.Writer, now time.Time, figures []ScopeBehind) error {
	var worst time.Duration
	for _, f := range figures {
		labels := []*dto.LabelPair{label("environment", f.Environment), label("scope", f.Scope)}
		if err := writeLine(w, now, BehindMetric, labels, f.Behind.Seconds(), "Seconds", false); err != nil {
			return err
		}
		worst = max(worst, f.Behind)
	}
	return writeLine(w, now, BehindMetric, nil, worst.Seconds(), "Seconds", true)
}

func label(name, value string) *dto.LabelPair { return &dto.LabelPair{Name: &name, Value: &value} }

func seriesKey(labels []*dto.LabelPair) string {
	var b strings.Builder
	for _, l := range labels {
		b.WriteString(l.GetName() + "=" + l.GetValue() + "\x00")
	}
	return b.String()
}

func unitOf(name string) string {
	if strings.Contains(name, "_seconds") && !strings.HasSuffix(name, "_count") {
		return "Seconds"
	}
	return "Count"
}

// writeLine writes one EMF object: the metric name with value, its labels as dimensions (an empty
// dimension set when there are none, or when aggregate says so).
func writeLine(w io.Writer, now time.Time, name string, labels []*dto.LabelPair, value float64, unit string, aggregate bool) error {
	obj := map[string]any{}
	dims := []string{}
	for _, l := range labels {
		obj[l.GetName()] = l.GetValue()
		dims = append(dims, l.GetName())
	}
	slices.Sort(dims)
	if aggregate {
		dims = []string{}
	}
	obj[name] = value
	obj["_aws"] = map[string]any{
		"Timestamp": now.UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  EMFNamespace,
			"Dimensions": [][]string{dims},
			"Metrics":    []any{map[string]string{"Name": name, "Unit": unit}},
		}},
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode an EMF line: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
