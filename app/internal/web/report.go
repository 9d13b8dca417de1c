package web

import (
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// The delivery report's page: GET /report/ENV[?since=30d], the figures of GET .../report as tables
// and small bar charts, drawn here as SVG: the page needs no script, as the status page needs none.

type reportData struct {
	Since    string // as asked, for the links
	Delivery *report.Delivery
	Sections []reportSection // the environment as a whole, then each scope
	Error    string
}

// reportSection is one row's figures and its charts.
type reportSection struct {
	ID     string // "total" or "scope-NAME": the ids of its cells and charts
	Title  string
	F      report.Figures
	Charts []chart
}

// chart is a bar chart of one figure per day.
type chart struct {
	ID, Title, Unit string
	Width, Height   int
	Bars            []bar
	Max             string // the top of the scale, for its label
	First, Last     string // the first and last dates, for the axis
}

// bar is one day's bar: its box in the chart's coordinates, and its value.
type bar struct {
	X, Y, W, H float64
	Date       string
	Value      string // as the API has it: a count, or seconds
	Label      string // for people: "3 deploys", "20m"
}

const (
	chartW, chartH = 360, 96
	chartTop       = 14 // room for the scale's label
)

// newChart lays out one value per day as bars scaled to the largest.
func newChart(id, title, unit string, days []report.DayFigures, value func(report.DayFigures) float64, label func(float64) string) chart {
	c := chart{ID: id, Title: title, Unit: unit, Width: chartW, Height: chartH}
	if len(days) == 0 {
		return c
	}
	c.First, c.Last = days[0].Date, days[len(days)-1].Date
	top := 0.0
	for _, d := range days {
		top = max(top, value(d))
	}
	c.Max = label(top)
	slot := float64(chartW) / float64(len(days))
	for i, d := range days {
		v := value(d)
		h := 0.0
		if top > 0 {
			h = v / top * float64(chartH-chartTop)
		}
		c.Bars = append(c.Bars, bar{X: float64(i)*slot + slot*0.1, Y: float64(chartH) - h, W: slot * 0.8, H: h, Date: d.Date,
			Value: strconv.FormatFloat(v, 'f', -1, 64), Label: label(v)})
	}
	return c
}

func sectionOf(id, title string, f report.Figures) reportSection {
	count := func(what string) func(float64) string {
		return func(v float64) string { return fmt.Sprintf("%g %s", v, what) }
	}
	dur := func(v float64) string { return report.Approx(time.Duration(v * float64(time.Second))) }
	return reportSection{ID: id, Title: title, F: f, Charts: []chart{
		newChart(id+"-deploys", "Deploys per day", "count", f.Daily, func(d report.DayFigures) float64 { return float64(d.Deploys) }, count("deploys")),
		newChart(id+"-lead", "Lead time from acceptance, median per day", "seconds", f.Daily, func(d report.DayFigures) float64 { return d.LeadP50 }, dur),
		newChart(id+"-failures", "Change failures per day (terminal failures and rollbacks)", "count", f.Daily,
			func(d report.DayFigures) float64 { return float64(d.Failures + d.Rollbacks) }, count("change failures")),
		newChart(id+"-behind", "Time behind per day", "seconds", f.Daily, func(d report.DayFigures) float64 { return d.BehindSeconds }, dur),
	}}
}

var reportFuncs = template.FuncMap{
	"approx":  func(s float64) string { return report.Approx(time.Duration(s * float64(time.Second))) },
	"percent": func(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" },
	"fixed":   func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"num":     func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) },
	"px":      func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
}

var reportPage = template.Must(template.New("report").Funcs(reportFuncs).Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>latestwins delivery report{{with .Delivery}}: {{.Environment}}{{end}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #1f2328; }
table { border-collapse: collapse; margin: .5em 0 1em; }
th, td { text-align: left; padding: .25em .75em; border-bottom: 1px solid #d0d7de; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; margin-bottom: 2em; }
figure { margin: 0; } figcaption { font-size: 12px; color: #59636e; }
svg .bar { fill: #0969da; } svg .fail { fill: #cf222e; } svg .axis { stroke: #d0d7de; } svg text { font: 10px system-ui, sans-serif; fill: #59636e; }
.error { color: #cf222e; }
</style>
</head>
<body>
<h1><a href="/">latestwins</a></h1>
{{if .Error}}<p class="error" id="error">{{.Error}}</p>{{else}}{{with .Delivery}}
<h2 id="environment">{{.Environment}}: delivery over {{.Days}} day(s)</h2>
<p>From <span id="since">{{.Since.Format "2006-01-02"}}</span> to <span id="until">{{.Until.Format "2006-01-02 15:04 MST"}}</span>, the last day partial.
Last <a href="?since=7d">7</a>, <a href="?since=30d">30</a> or <a href="?since=90d">90</a> days.</p>
{{end}}<table id="figures">
<thead><tr><th></th><th>deploys</th><th>per day</th><th>commits per deploy</th><th>lead p50</th><th>lead p90</th><th>from commit p50</th><th>from commit p90</th><th>change failure rate</th><th>restore p50</th><th>restore p90</th><th>behind</th></tr></thead>
<tbody>
{{range .Sections}}{{$s := .}}<tr id="{{.ID}}">{{with .F}}
<th>{{$s.Title}}</th>
<td class="n" id="{{$s.ID}}-deploys" data-value="{{.Deploys}}">{{.Deploys}}</td>
<td class="n" data-value="{{num .DeploysPerDay}}">{{fixed .DeploysPerDay}}</td>
<td class="n" data-value="{{num .CommitsPerDeploy}}">{{if .Deploys}}{{fixed .CommitsPerDeploy}}{{else}}-{{end}} ({{.Commits}} commits)</td>
<td class="n" id="{{$s.ID}}-lead-p50" data-value="{{num .LeadFromAccept.P50Seconds}}">{{if .LeadFromAccept.Count}}{{approx .LeadFromAccept.P50Seconds}}{{else}}-{{end}}</td>
<td class="n" id="{{$s.ID}}-lead-p90" data-value="{{num .LeadFromAccept.P90Seconds}}">{{if .LeadFromAccept.Count}}{{approx .LeadFromAccept.P90Seconds}}{{else}}-{{end}}</td>
<td class="n" data-value="{{num .LeadFromCommit.P50Seconds}}">{{if .LeadFromCommit.Count}}{{approx .LeadFromCommit.P50Seconds}} ({{.LeadFromCommit.Count}} of {{.Commits}}){{else}}-{{end}}</td>
<td class="n" data-value="{{num .LeadFromCommit.P90Seconds}}">{{if .LeadFromCommit.Count}}{{approx .LeadFromCommit.P90Seconds}}{{else}}-{{end}}</td>
<td class="n" id="{{$s.ID}}-cfr" data-value="{{num .ChangeFailureRate}}">{{if .Deploys}}{{percent .ChangeFailureRate}}{{else}}-{{end}} ({{.Failures}} failed, {{.Rollbacks}} rolled back)</td>
<td class="n" data-value="{{num .Restore.P50Seconds}}">{{if .Restore.Count}}{{approx .Restore.P50Seconds}}{{else}}-{{end}}</td>
<td class="n" data-value="{{num .Restore.P90Seconds}}">{{if .Restore.Count}}{{approx .Restore.P90Seconds}}{{else}}-{{end}}</td>
<td class="n" id="{{$s.ID}}-behind" data-value="{{num .BehindSeconds}}">{{approx .BehindSeconds}} ({{percent .BehindShare}})</td>
{{end}}</tr>
{{end}}</tbody>
</table>
<p>Lead time runs to live from the push's acceptance by latestwins, and from the commit's own time where GitHub told it (of how many commits it is known).
Change failures are terminal failures and rollbacks, per deploy; restore runs from a change failure to the next deploy; behind is the time some accepted commit waited to go live.
Quantiles are within {{percent .Delivery.QuantileError}}. The same figures: <code>latestwins report {{.Delivery.Environment}} --since {{.Since}}</code>, or <code>GET /v1/environments/{{.Delivery.Environment}}/report</code>.</p>
{{range .Sections}}<h3>{{.Title}}</h3>
<div class="charts">
{{range .Charts}}<figure>
<svg xmlns="http://www.w3.org/2000/svg" id="chart-{{.ID}}" class="chart" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="{{.Title}}" data-unit="{{.Unit}}">
<line class="axis" x1="0" y1="{{.Height}}" x2="{{.Width}}" y2="{{.Height}}"></line>
<text x="0" y="10">max {{.Max}}</text>
{{range .Bars}}<rect class="bar" x="{{px .X}}" y="{{px .Y}}" width="{{px .W}}" height="{{px .H}}" data-date="{{.Date}}" data-value="{{.Value}}"><title>{{.Date}}: {{.Label}}</title></rect>
{{end}}</svg>
<figcaption>{{.Title}}, {{.First}} to {{.Last}}</figcaption>
</figure>
{{end}}</div>
{{end}}{{end}}
</body>
</html>
`))

// serveReport renders the delivery report of the environment the path names, to anyone on an
// open page (v nil), or to a viewer who may see it as the status page shows it.
func (a *Page) serveReport(w http.ResponseWriter, r *http.Request, v *viewer) {
	ctx := r.Context()
	env := r.PathValue("env")
	since := r.URL.Query().Get("since")
	if since == "" {
		since = "30d"
	}
	fail := func(status int, msg string) {
		var buf bytes.Buffer
		if err := reportPage.Execute(&buf, &reportData{Error: msg}); err != nil {
			http.Error(w, msg, status)
			return
		}
		writeHTML(w, status, buf.String())
	}
	d, err := report.ParseSince(since)
	if ie := (*authority.InputError)(nil); errors.As(err, &ie) {
		fail(http.StatusBadRequest, "since="+since+": "+ie.Fix)
		return
	}
	names, read, err := a.readEnvironments(ctx)
	if err != nil {
		a.Log.ErrorContext(ctx, "report page", "err", err)
		fail(http.StatusInternalServerError, "report unavailable: "+err.Error())
		return
	}
	// Only an environment the status page shows, to whoever it shows it to; any other is not found,
	// whether it exists or not.
	notFound := fmt.Sprintf("no environment %q to report on here: the status page lists the ones you can see", env)
	e := read[env]
	if !slices.Contains(names, env) || e == nil {
		fail(http.StatusNotFound, notFound)
		return
	}
	if v != nil {
		vis, _, err := a.visibleTo(ctx, v, env, e)
		if err != nil {
			a.Log.ErrorContext(ctx, "report page", "err", err)
			fail(http.StatusInternalServerError, "report unavailable: "+err.Error())
			return
		}
		if !vis {
			fail(http.StatusNotFound, notFound)
			return
		}
	}
	del, err := report.ReadDelivery(ctx, a.Auth, env, e, d, a.Now())
	if err != nil {
		a.Log.ErrorContext(ctx, "report page", "environment", env, "err", err)
		fail(http.StatusInternalServerError, "report unavailable: "+err.Error())
		return
	}
	data := &reportData{Since: since, Delivery: del, Sections: []reportSection{sectionOf("total", env+" (all scopes)", del.Total)}}
	for _, f := range del.Scopes {
		data.Sections = append(data.Sections, sectionOf("scope-"+f.Scope, f.Scope, f))
	}
	var buf bytes.Buffer
	if err := reportPage.Execute(&buf, data); err != nil {
		a.Log.ErrorContext(ctx, "report page", "err", err)
		http.Error(w, "report page failed to render", http.StatusInternalServerError)
		return
	}
	writeHTML(w, http.StatusOK, buf.String())
}
