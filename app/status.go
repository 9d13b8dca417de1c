package app

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// timelineLen is how many recent events the page shows per environment.
const timelineLen = 12

type pageData struct {
	Now          time.Time
	Environments []envView
}

type envView struct {
	Name     string
	Missing  bool // configured, nothing accepted yet
	Observed int64
	Desired  int64
	Settled  bool
	Scopes   []scopeView
	Events   []eventView
}

type scopeView struct {
	Name        string
	LiveSha     string
	LiveShort   string
	LiveGen     int64
	DeployedAgo string
	Pending     string
	Owner       int64
	Lease       string
	LeaseHeld   bool
	Failure     string
}

type eventView struct {
	At         string
	Kind       string
	Scope      string
	Generation int64
	Message    string
}

var statusPage = template.Must(template.New("status").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>latestwins status</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #1f2328; }
table { border-collapse: collapse; margin: .5em 0 1.5em; }
th, td { text-align: left; padding: .25em .75em; border-bottom: 1px solid #d0d7de; }
code { font: 13px ui-monospace, monospace; }
.held { color: #9a6700; } .settled { color: #1a7f37; } .reconciling { color: #9a6700; } .error { color: #cf222e; }
</style>
</head>
<body>
<h1>latestwins</h1>
<p>Read-only status, from the store at {{.Now.Format "2006-01-02 15:04:05 MST"}}.</p>
{{range .Environments}}
<section id="env-{{.Name}}">
<h2>{{.Name}}</h2>
{{if .Missing}}<p>Nothing accepted yet.</p>{{else}}
<p>Observed/desired: <strong>{{.Observed}}/{{.Desired}}</strong>
{{if .Settled}}<span class="settled">settled</span>{{else}}<span class="reconciling">reconciling</span>{{end}}</p>
<table>
<thead><tr><th>scope</th><th>live sha</th><th>generation</th><th>deployed</th><th>pending</th><th>owner</th><th>lease</th></tr></thead>
<tbody>
{{range .Scopes}}<tr>
<td>{{.Name}}</td>
<td>{{if .LiveSha}}<code title="{{.LiveSha}}">{{.LiveShort}}</code>{{else}}-{{end}}</td>
<td>{{if .LiveGen}}{{.LiveGen}}{{else}}-{{end}}</td>
<td>{{.DeployedAgo}}</td>
<td>{{if .Failure}}<span class="error">{{.Failure}}</span>{{else}}{{.Pending}}{{end}}</td>
<td>{{if .Owner}}{{.Owner}}{{else}}-{{end}}</td>
<td{{if .LeaseHeld}} class="held"{{end}}>{{.Lease}}</td>
</tr>
{{end}}</tbody>
</table>
<h3>Recent timeline</h3>
{{if .Events}}<table>
<thead><tr><th>time</th><th>event</th><th>scope</th><th>generation</th><th>message</th></tr></thead>
<tbody>
{{range .Events}}<tr><td>{{.At}}</td><td>{{.Kind}}</td><td>{{.Scope}}</td><td>{{if .Generation}}{{.Generation}}{{end}}</td><td>{{.Message}}</td></tr>
{{end}}</tbody>
</table>{{else}}<p>No events.</p>{{end}}
{{end}}
</section>
{{else}}
<p>No environments yet: nothing is configured or pending.</p>
{{end}}
</body>
</html>
`))

// serveStatus renders the status page from the store's current state.
func (a *App) serveStatus(w http.ResponseWriter, r *http.Request) {
	data, err := a.statusData(r.Context())
	if err != nil {
		a.log.ErrorContext(r.Context(), "status page", "err", err)
		http.Error(w, "status unavailable: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := statusPage.Execute(&buf, data); err != nil {
		a.log.ErrorContext(r.Context(), "status page", "err", err)
		http.Error(w, "status page failed to render", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}

func (a *App) statusData(ctx context.Context) (*pageData, error) {
	configured, err := a.envs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list configured environments: %w", err)
	}
	pending, err := a.auth.Pending(ctx)
	if err != nil {
		return nil, err
	}
	names := append(slices.Clone(configured), pending...)
	sort.Strings(names)
	names = slices.Compact(names)
	now := a.now()
	data := &pageData{Now: now.UTC()}
	for _, name := range names {
		env, err := a.auth.Status(ctx, name)
		if errors.Is(err, authority.ErrInvalidInput) {
			data.Environments = append(data.Environments, envView{Name: name, Missing: true})
			continue
		}
		if err != nil {
			return nil, err
		}
		data.Environments = append(data.Environments, viewOf(env, now))
	}
	return data, nil
}

func viewOf(e *authority.Env, now time.Time) envView {
	v := envView{Name: e.Name, Observed: e.Observed, Desired: e.Desired, Settled: e.Observed >= e.Desired}
	names := make([]string, 0, len(e.Scopes))
	for n := range e.Scopes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		s := e.Scopes[n]
		sv := scopeView{Name: n, Owner: s.Owner, DeployedAgo: "-", Pending: "-", Lease: "free"}
		if s.Live != nil {
			sv.LiveSha, sv.LiveShort, sv.LiveGen = s.Live.Sha, report.ShortSha(s.Live.Sha), s.Live.Generation
			sv.DeployedAgo = report.Ago(now, s.Live.At)
		}
		if m := s.Mailbox; m != nil {
			sv.Pending = fmt.Sprintf("%s (generation %d)", report.ShortSha(m.Sha), m.Generation)
			if m.Attempt > 0 {
				sv.Pending += fmt.Sprintf(", %d failed attempt(s)", m.Attempt)
			}
		} else if f := s.Failure; f != nil {
			sv.Failure = fmt.Sprintf("ERROR at generation %d: %s", f.Generation, f.Message)
		}
		if l := s.Lease; l.Holder != "" {
			if left := l.ExpiresAt.Sub(now); left > 0 {
				sv.LeaseHeld = true
				sv.Lease = fmt.Sprintf("held by %s for %s, token %d, %s left", l.Holder, l.Purpose, l.Token, left.Round(time.Second))
			} else {
				sv.Lease = fmt.Sprintf("expired %s ago (was %s, token %d)", (-left).Round(time.Second), l.Holder, l.Token)
			}
		}
		v.Scopes = append(v.Scopes, sv)
	}
	for i := len(e.Events) - 1; i >= 0 && len(v.Events) < timelineLen; i-- {
		ev := e.Events[i]
		v.Events = append(v.Events, eventView{At: ev.At.UTC().Format("2006-01-02 15:04:05"), Kind: string(ev.Kind),
			Scope: ev.Scope, Generation: ev.Generation, Message: ev.Message})
	}
	return v
}
