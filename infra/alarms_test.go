package infra

import (
	"maps"
	"slices"
	"testing"

	"github.com/latestwins/latestwins/internal/metrics"
)

// The alarms of both stacks watch what the function writes (internal/metrics, EMF lines): the
// largest behind time of any scope, written without dimensions, and the failed sweeps.
var wantAlarms = map[string]struct {
	dims map[string]string
	stat string
}{
	metrics.BehindMetric: {dims: map[string]string{}, stat: "Maximum"},
	metrics.SweepsMetric: {dims: map[string]string{"result": "error"}, stat: "Sum"},
}

func TestTemplateAlarmsWatchWhatTheFunctionWrites(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	seen := map[string]bool{}
	for name, r := range tpl.Resources {
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		p := r.Properties
		metric, _ := p["MetricName"].(string)
		want, ok := wantAlarms[metric]
		if !ok || p["Namespace"] != metrics.EMFNamespace || p["Statistic"] != want.stat {
			t.Errorf("alarm %s watches %v/%v (%v): not a figure the function writes", name, p["Namespace"], metric, p["Statistic"])
			continue
		}
		dims := map[string]string{}
		if list, ok := p["Dimensions"].([]any); ok {
			for _, d := range list {
				d := d.(map[string]any)
				dims[d["Name"].(string)] = d["Value"].(string)
			}
		}
		if !maps.Equal(dims, want.dims) {
			t.Errorf("alarm %s dimensions %v, want %v (the function writes no other)", name, dims, want.dims)
		}
		seen[metric] = true
	}
	if got := slices.Sorted(maps.Keys(seen)); len(got) != len(wantAlarms) {
		t.Errorf("alarms on %v, want one on each of %v", got, slices.Sorted(maps.Keys(wantAlarms)))
	}
}

func TestTerraformAlarmsWatchWhatTheFunctionWrites(t *testing.T) {
	t.Parallel()
	cfg := parseTF(t, tfFiles(t, tfModule))
	seen := map[string]bool{}
	for _, b := range cfg.find("resource", "aws_cloudwatch_metric_alarm") {
		metric := unq(b.expr("metric_name"))
		want, ok := wantAlarms[metric]
		if !ok || unq(b.expr("namespace")) != metrics.EMFNamespace || unq(b.expr("statistic")) != want.stat {
			t.Errorf("alarm %v watches %s/%s: not a figure the function writes", b.labels, b.expr("namespace"), metric)
			continue
		}
		dims := map[string]string{}
		for k, v := range b.object("dimensions") {
			dims[k] = unq(v)
		}
		if !maps.Equal(dims, want.dims) {
			t.Errorf("alarm %v dimensions %v, want %v", b.labels, dims, want.dims)
		}
		seen[metric] = true
	}
	if len(seen) != len(wantAlarms) {
		t.Errorf("alarms on %v, want one on each of %v", slices.Sorted(maps.Keys(seen)), slices.Sorted(maps.Keys(wantAlarms)))
	}
}

func unq(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}
