package web

import (
	"bytes"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"time"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// timelineLen is how many recent events the page shows per environment.
const timelineLen = 12

type pageData struct {
	Now          time.Time
	Environments []envView
	// Viewer is the signed-in user (StatusPageGitHub), nil on an open page.
	Viewer *viewer
	// Actions: some row has a button, so the tables get a column for them.
	Actions bool
	// Overview is what is live where, across the environments shown.
	Overview *report.Overview
}

type envView struct {
	Name    string
	Missing bool           // configured, nothing accepted yet
	Status  *report.Status // nil when Missing
	Scopes  []scopeView
	Events  []eventView
	// Needs, for an environment larger than report.DefaultStatusRows, counts its scopes by need
	// ("64 scopes: 1 stuck, 63 settled"); its rows are then listed by need.
	Needs string
}

// scopeView is a scope's row as every rendering has it, and the page's own button.
type scopeView struct {
	report.Row
	// Redeploy is set when the viewer may redeploy the scope: the form's one-time request id.
	Redeploy string
	// Rollback is set when the viewer may roll the scope back to RollbackTo, the commit live before
	// the current one: the form's one-time request id.
	Rollback   string
	RollbackTo string
	// Unfreeze is set when the scope is frozen and the viewer may unfreeze it: the form's one-time
	// request id. Freeze is the freeze the form names (its rollback's generation): the one shown,
	// so that a page shown before a newer rollback cannot lift the newer freeze.
	Unfreeze string
	Freeze   int64
	// Promote is set when the environment requires another (PromoteFrom, the first it requires),
	// something is live in the scope there, and the viewer may promote the scope: the form's
	// one-time request id.
	Promote     string
	PromoteFrom string
	// Approve is set when the head waits for approvals and the viewer may push to the scope's
	// repository: the form's one-time request id. ApproveSha is the commit the form approves, the
	// one shown.
	Approve    string
	ApproveSha string
	// BreakGlass is set when the head waits for a soak, approvals or a change window and the viewer
	// may push to the scope's repository: the form's one-time request id. BreakGlassSha is the
	// commit it lets through, the one shown. The handler checks the environment's break-glass
	// permission.
	BreakGlass    string
	BreakGlassSha string
}

// overviewRow is one scope of the overview: its placement in each environment of the overview, in
// order (nil where the environment has no such scope).
type overviewRow struct {
	Scope string
	Cells []*report.Placement
}

// OverviewRows lays the overview out as a table: a row per scope, a column per environment.
func (d *pageData) OverviewRows() []overviewRow {
	if d.Overview == nil {
		return nil
	}
	var rows []overviewRow
	for _, s := range d.Overview.Scopes {
		r := overviewRow{Scope: s.Scope, Cells: make([]*report.Placement, len(d.Overview.Environments))}
		for i := range s.Places {
			p := &s.Places[i]
			if j := slices.Index(d.Overview.Environments, p.Environment); j >= 0 {
				r.Cells[j] = p
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// ShortTo is RollbackTo cut to seven characters, for the button.
func (v scopeView) ShortTo() string { return report.ShortSha(v.RollbackTo) }

type eventView struct {
	At         string
	Kind       string
	Scope      string
	Generation int64
	Message    string
}

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{"short": report.ShortSha}).Parse(`<!doctype html>
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
form { margin: 0; } .who { float: right; }
td ol { margin: .25em 0 0; padding-left: 1.5em; }
.held { color: #9a6700; } .settled { color: #1a7f37; } .reconciling { color: #9a6700; } .error { color: #cf222e; }
</style>
</head>
<body>
<h1>latestwins</h1>
{{with .Viewer}}<form method="post" action="/signout" class="who">Signed in as <strong id="login">{{.Login}}</strong>
<input type="hidden" name="csrf" value="{{.CSRF}}"> <button type="submit">Sign out</button></form>
{{end}}<p>{{if not .Actions}}Read-only status{{else}}Status{{end}}, from the store at {{.Now.Format "2006-01-02 15:04:05 MST"}}.</p>
{{with .OverviewRows}}<section id="overview">
<h2>What is live where</h2>
<table>
<thead><tr><th>scope</th>{{range $.Overview.Environments}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .}}<tr id="overview-{{.Scope}}">
<td>{{.Scope}}</td>
{{range .Cells}}<td>{{if .}}{{with .Live}}<code title="{{.Sha}}">{{.Short}}</code> {{.Ago}}{{else}}nothing live{{end}}
{{- if .Behind}}<br><span class="held">{{.Behind}} behind: newest {{.Newest | short}}, accepted {{.Age}}</span>{{else}}<br><span class="settled">up to date</span>{{end}}
{{- if .Frozen}}<br><span class="error">{{.Frozen}}</span>{{end}}
{{- if .Waiting}}<br><span class="held">{{.Waiting}}</span>{{end}}{{else}}-{{end}}</td>
{{end}}</tr>
{{end}}</tbody>
</table>
</section>
{{end}}{{range $env := .Environments}}
<section id="env-{{.Name}}">
<h2>{{.Name}}</h2>
{{if .Missing}}<p>Nothing accepted yet.</p>{{else}}<p class="report"><a href="/report/{{.Name}}" id="report-{{.Name}}">Delivery report</a></p>
{{with .Status}}
<p>Observed/desired: <strong>{{.Observed}}/{{.Desired}}</strong>
{{if .Settled}}<span class="settled">settled</span>{{else}}<span class="reconciling">reconciling</span>{{end}}</p>
{{with .PolicyNote}}<p class="policy">Policy: <strong>{{.}}</strong></p>
{{end}}{{end}}{{with .Needs}}<p class="needs" id="needs-{{$env.Name}}">{{.}}, listed by need: what is behind first.</p>
{{end}}<table>
<thead><tr><th>scope</th><th>live sha</th><th>generation</th><th>deployed</th><th>pending</th><th>owner</th><th>lease</th>{{if $.Actions}}<th></th>{{end}}</tr></thead>
<tbody>
{{range .Scopes}}<tr>
<td>{{.Scope}}</td>
<td>{{with .Live}}<code title="{{.Sha}}">{{.Short}}</code>{{else}}-{{end}}</td>
<td>{{with .Live}}{{.Generation}}{{else}}-{{end}}</td>
<td>{{with .Live}}{{.Ago}}{{else}}-{{end}}</td>
<td>{{with .Head}}{{.Short}} (generation {{.Generation}}){{if .Attempts}}, {{.Attempts}} failed attempt(s){{end}}{{if .Rollback}}, rollback{{else if .Barrier}}, barrier{{end}}{{else}}{{with .Failure}}<span class="error">ERROR at generation {{.Generation}}: {{.Message}}</span>{{else}}-{{end}}{{end}}
{{- if .Frozen}}<br><span class="error">{{.Frozen}}</span>{{end}}
{{- if .Promotion}}<br><span class="held">{{.Promotion}}</span>{{end}}
{{- if .Approval}}<br><span class="held" id="approval-{{$env.Name}}/{{.Scope}}">{{.Approval}}</span>{{else}}{{with .Head}}{{with .ApprovedBy}}<br><span class="settled">approved by {{range $i, $a := .}}{{if $i}}, {{end}}{{$a}}{{end}}</span>{{end}}{{end}}{{end}}
{{- if .Blocked}}<br><span class="error">{{.Blocked}}{{with .BlockingFailure}}; error: {{.Message}}{{end}}</span>{{end}}
{{- if .Warning}}<br><span class="error">warning: {{.Warning}}</span>{{end}}
{{- if .Late}}<br><span class="error">{{.Convergence.State}}: {{.Late}}</span>{{end}}
{{- with .Waiting}}<ol start="2">{{range .}}<li>{{.Short}} (generation {{.Generation}}{{if .Barrier}}, barrier{{end}}), {{.Wait}}</li>{{end}}</ol>{{end}}</td>
<td>{{if .Owner}}{{.Owner}}{{else}}-{{end}}</td>
{{with .Lease}}<td{{if .Held}} class="held"{{end}}>{{if not .Holder}}free{{else if .Held}}held by {{.Holder}} for {{.Purpose}}, token {{.Token}}, {{.Left}} left{{else}}expired {{.Left}} ago (was {{.Holder}}, token {{.Token}}){{end}}</td>{{end}}
{{if $.Actions}}<td>{{if .Redeploy}}<form method="post" action="/redeploy">
<input type="hidden" name="csrf" value="{{$.Viewer.CSRF}}"><input type="hidden" name="environment" value="{{$env.Name}}">
<input type="hidden" name="scope" value="{{.Scope}}"><input type="hidden" name="request" value="{{.Redeploy}}">
<button type="submit" id="redeploy-{{$env.Name}}/{{.Scope}}">Redeploy</button></form>{{end}}
{{- if .Rollback}}<form method="post" action="/rollback">
<input type="hidden" name="csrf" value="{{$.Viewer.CSRF}}"><input type="hidden" name="environment" value="{{$env.Name}}">
<input type="hidden" name="scope" value="{{.Scope}}"><input type="hidden" name="request" value="{{.Rollback}}"><input type="hidden" name="to" value="{{.RollbackTo}}">
<input type="text" name="reason" required maxlength="200" placeholder="why roll back" aria-label="why roll back {{.Scope}}" id="reason-{{$env.Name}}/{{.Scope}}">
<button type="submit" id="rollback-{{$env.Name}}/{{.Scope}}">Roll back to {{.ShortTo}}</button></form>{{end}}
{{- if .Unfreeze}}<form method="post" action="/unfreeze">
<input type="hidden" name="csrf" value="{{$.Viewer.CSRF}}"><input type="hidden" name="environment" value="{{$env.Name}}">
<input type="hidden" name="scope" value="{{.Scope}}"><input type="hidden" name="request" value="{{.Unfreeze}}"><input type="hidden" name="freeze" value="{{.Freeze}}">
<button type="submit" id="unfreeze-{{$env.Name}}/{{.Scope}}">Unfreeze (freeze {{.Freeze}})</button></form>{{end}}
{{- if .Promote}}<form method="post" action="/promote">
<input type="hidden" name="csrf" value="{{$.Viewer.CSRF}}"><input type="hidden" name="environment" value="{{$env.Name}}">
<input type="hidden" name="scope" value="{{.Scope}}"><input type="hidden" name="request" value="{{.Promote}}">
<button type="submit" id="promote-{{$env.Name}}/{{.Scope}}">Promote from {{.PromoteFrom}}</button></form>{{end}}
{{- if .Approve}}<form method="post" action="/approve">
<input type="hidden" name="csrf" value="{{$.Viewer.CSRF}}"><input type="hidden" name="environment" value="{{$env.Name}}">
<input type="hidden" name="scope" value="{{.Scope}}"><input type="hidden" name="request" value="{{.Approve}}"><input type="hidden" name="sha" value="{{.ApproveSha}}">
<button type="submit" id="approve-{{$env.Name}}/{{.Scope}}">Approve {{short .ApproveSha}}</button></form>{{end}}
{{- if .BreakGlass}}<form method="post" action="/break-glass">
<input type="hidden" name="csrf" value="{{$.Viewer.CSRF}}"><input type="hidden" name="environment" value="{{$env.Name}}">
<input type="hidden" name="scope" value="{{.Scope}}"><input type="hidden" name="request" value="{{.BreakGlass}}"><input type="hidden" name="sha" value="{{.BreakGlassSha}}">
<input type="text" name="reason" required maxlength="200" placeholder="why waive the gates" aria-label="why waive the gates of {{.Scope}}" id="glass-reason-{{$env.Name}}/{{.Scope}}">
<button type="submit" id="break-glass-{{$env.Name}}/{{.Scope}}">Break glass for {{short .BreakGlassSha}}</button></form>{{end}}</td>{{end}}
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
<p>{{if .Viewer}}No environment you can see: none is fed by a repository you can read.{{else}}No environments yet: nothing is configured or pending.{{end}}</p>
{{end}}
</body>
</html>
`))

// serveStatus renders the status page from the store's current state: every environment on an
// open page (v nil), or those v may see.
func (a *Page) serveStatus(w http.ResponseWriter, r *http.Request, v *viewer) {
	data, err := a.statusData(r.Context(), v)
	if err != nil {
		a.Log.ErrorContext(r.Context(), "status page", "err", err)
		http.Error(w, "status unavailable: "+err.Error(), http.StatusInternalServerError)
		return
	}
	var buf bytes.Buffer
	if err := statusPage.Execute(&buf, data); err != nil {
		a.Log.ErrorContext(r.Context(), "status page", "err", err)
		http.Error(w, "status page failed to render", http.StatusInternalServerError)
		return
	}
	writeHTML(w, http.StatusOK, buf.String())
}

// statusData is the page's content: every environment (v nil: an open page), or those v may see
// (signin.go's rules), with what is live where across them.
func (a *Page) statusData(ctx context.Context, v *viewer) (*pageData, error) {
	names, read, err := a.readEnvironments(ctx)
	if err != nil {
		return nil, err
	}
	now := a.Now()
	data := &pageData{Now: now.UTC(), Viewer: v}
	visible := map[string]bool{}
	writes := map[string]map[string]bool{}
	for _, name := range names {
		if v != nil {
			vis, w, err := a.visibleTo(ctx, v, name, read[name])
			if err != nil {
				return nil, err
			}
			if !vis {
				continue
			}
			writes[name] = w
		}
		visible[name] = true
	}
	data.Overview = core.OverviewOf(read, visible, now)
	for _, name := range names {
		if !visible[name] {
			continue
		}
		env := read[name]
		if env == nil {
			data.Environments = append(data.Environments, envView{Name: name, Missing: true})
			continue
		}
		required, err := a.RequiredOf(ctx, env, read)
		if err != nil {
			return nil, err
		}
		ev := viewOf(env, now, required, func(env string) bool { return visible[env] })
		write := writes[name]
		for i := range ev.Scopes {
			sv := &ev.Scopes[i]
			sc := env.Scopes[sv.Scope]
			if !write[sv.Scope] || sc == nil {
				continue
			}
			for _, b := range []struct {
				show bool
				id   *string
			}{{sv.Live != nil, &sv.Redeploy}, {sc.Prev != nil, &sv.Rollback}, {sc.Freeze != nil, &sv.Unfreeze}, {promotable(env, required, sv.Scope), &sv.Promote},
				{sv.ApprovalWait != nil, &sv.Approve}, {sv.Gated, &sv.BreakGlass}} {
				if !b.show {
					continue
				}
				if *b.id, err = randomToken(16); err != nil {
					return nil, err
				}
				data.Actions = true
			}
			if sc.Prev != nil {
				sv.RollbackTo = sc.Prev.Sha
			}
			if sc.Freeze != nil {
				sv.Freeze = sc.Freeze.Generation
			}
			if sv.Promote != "" {
				sv.PromoteFrom = env.Requires.Environments[0]
			}
			if sv.Approve != "" {
				sv.ApproveSha = sv.ApprovalWait.Sha
			}
			if sv.BreakGlass != "" {
				sv.BreakGlassSha = sc.Mailbox.Sha
			}
		}
		data.Environments = append(data.Environments, ev)
	}
	return data, nil
}

// promotable reports whether scope of e can be promoted from the first environment e requires:
// something is live in that scope there (required holds the states of those e requires).
func promotable(e *authority.Env, required map[string]*authority.Env, scope string) bool {
	if e.Requires == nil || len(e.Requires.Environments) == 0 {
		return false
	}
	re := required[e.Requires.Environments[0]]
	return re != nil && re.Scopes[scope] != nil && re.Scopes[scope].Live != nil
}

// readEnvironments reads the environments the page shows: those configured (no preview template)
// and those with pending work, sorted, each read once (nil: nothing accepted there yet).
func (a *Page) readEnvironments(ctx context.Context) ([]string, map[string]*authority.Env, error) {
	configured, err := a.Envs(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list configured environments: %w", err)
	}
	return a.ReadThese(ctx, configured)
}

// visibleTo reports whether the viewer may see the environment (they can read a repository that
// feeds one of its scopes) and, per scope, whether they may redeploy, roll back, unfreeze and
// promote it (they can push to its repository).
func (a *Page) visibleTo(ctx context.Context, v *viewer, name string, env *authority.Env) (bool, map[string]bool, error) {
	log := a.Log.With("login", v.Login, "environment", name)
	feeds, err := a.scopeFeeds(ctx, log, name, env)
	if err != nil {
		return false, nil, err
	}
	visible, write := false, map[string]bool{}
	for scope, f := range feeds {
		acc, err := a.repoAccess(ctx, v.sess, f.repo)
		if err != nil {
			// Fail closed: what GitHub does not confirm is not shown.
			log.WarnContext(ctx, "status page: GitHub did not say what the user may read; not shown", "repo", f.repo.String(), "err", err)
			continue
		}
		visible = visible || acc.read
		write[scope] = acc.write
	}
	return visible, write, nil
}

// viewOf is an environment's section of the page: its status, as every rendering has it (with what
// the heads wait for in the environments it requires, given their states), and its newest events,
// newest first, each as the viewer may read it (nil: everything).
func viewOf(e *authority.Env, now time.Time, required map[string]*authority.Env, viewer report.Viewer) envView {
	st := viewer.Status(report.NewStatusWith(e, now, required))
	v := envView{Name: e.Name, Status: st}
	rows := st.Rows
	if len(rows) > report.DefaultStatusRows {
		// A large environment lists what is behind first, and says how many scopes are in each state.
		rows, v.Needs = st.ByNeed(), st.NeedCounts()
	}
	for _, r := range rows {
		v.Scopes = append(v.Scopes, scopeView{Row: r})
	}
	for i := len(e.Events) - 1; i >= 0 && len(v.Events) < timelineLen; i-- {
		ev := viewer.Event(e.Events[i])
		v.Events = append(v.Events, eventView{At: ev.At.UTC().Format("2006-01-02 15:04:05"), Kind: string(ev.Kind),
			Scope: ev.Scope, Generation: ev.Generation, Message: ev.Message})
	}
	return v
}
