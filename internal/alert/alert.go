// Package alert tells people when an environment stops converging: on each sweep it judges every
// scope of the environments whose trusted configuration sets alert-after (authority.Judge), and on
// a change into behind or stuck, and on the recovery, posts a signed JSON webhook and keeps one
// GitHub issue per environment open while it lasts. What each channel was told is kept in the
// store, in the named lease that serializes notifiers (authority.AlarmLease), so that notifiers in
// several processes tell each change once.
package alert

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/report"
)

// SecretVariable holds the secret the webhook's posts are signed with.
const SecretVariable = "LATESTWINS_ALERT_SECRET"

// Issues keeps an environment's alarm issue in a repository (OWNER/NAME), as the App's
// installation there.
type Issues interface {
	Open(ctx context.Context, repo, title, body string) (int, error)
	Comment(ctx context.Context, repo string, number int, body string) error
	Close(ctx context.Context, repo string, number int, body string) error
}

// Options configure a Notifier.
type Options struct {
	Authority *authority.Authority
	// Trusted reads the trusted configuration: which environments alarm, and where to.
	Trusted func(ctx context.Context) (*config.Config, error)
	// Secret signs the webhook's posts (SecretVariable). Without one, no webhook is posted: an
	// unsigned alarm could be forged by anyone who can reach the receiver.
	Secret []byte
	// HTTP posts the webhooks; nil: a client with a 10-second timeout.
	HTTP *http.Client
	// Issues keeps the alarm issues; nil: none (an alert-issue is logged as not kept).
	Issues Issues
	// Holder names this notifier in the alarm leases; empty: "alert".
	Holder string
	Clock  authority.Clock // nil: the system clock
	Log    *slog.Logger    // nil: discard
	// Backoff is the wait before each retry of a failed post; nil: DefaultBackoff. The sweep's
	// context bounds them all.
	Backoff []time.Duration
}

// DefaultBackoff is the waits before the retries of a failed webhook post.
var DefaultBackoff = []time.Duration{time.Second, 3 * time.Second}

// leaseTTL bounds how long one notifier holds an environment's alarm: longer than its posts and
// issue calls take, short enough that a notifier that died is replaced by the next sweep.
const leaseTTL = 2 * time.Minute

// Notifier tells the alarms of every environment whose trusted configuration sets alert-after.
type Notifier struct {
	o Options
}

// New checks o and returns a Notifier.
func New(o Options) (*Notifier, error) {
	if o.Authority == nil || o.Trusted == nil {
		return nil, errors.New("alert: an Authority and the trusted configuration are needed")
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	o.Holder = cmp.Or(o.Holder, "alert")
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	return &Notifier{o: o}, nil
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Told is what one sweep told of one environment.
type Told struct {
	Environment string `json:"environment"`
	// Event is Late or Recovered.
	Event   string   `json:"event"`
	Scopes  []string `json:"scopes,omitempty"`
	Webhook bool     `json:"webhook,omitempty"`
	Issue   int      `json:"issue,omitempty"` // the issue opened, commented on or closed
}

// Events a notification tells.
const (
	EventLate      = "late"      // scopes became behind or stuck, or changed which
	EventRecovered = "recovered" // no scope is late any more
)

// Report is what a sweep of the notifier did.
type Report struct {
	Told []Told `json:"told,omitempty"`
	// Failed holds, by environment, what could not be told; the next sweep tries again.
	Failed map[string]string `json:"failed,omitempty"`
}

// Sweep judges every configured environment with alert-after and tells each change of its alarm.
// It first brings the stored alert-after in line with the trusted file's (so that status and the
// App's page judge by the same threshold). An environment another notifier is telling now is left
// to it. Failures are in the report, per environment, and are tried again by the next sweep.
func (n *Notifier) Sweep(ctx context.Context) (*Report, error) {
	cfg, err := n.o.Trusted(ctx)
	if err != nil {
		return nil, fmt.Errorf("alert: read the trusted configuration: %w", err)
	}
	rep := &Report{}
	for i := range cfg.Environments {
		ce := &cfg.Environments[i]
		if ce.Preview() {
			continue
		}
		told, err := n.environment(ctx, ce)
		switch {
		case err != nil:
			if rep.Failed == nil {
				rep.Failed = map[string]string{}
			}
			rep.Failed[ce.Name] = err.Error()
			n.o.Log.WarnContext(ctx, "alarm not told; the next sweep tries again", "environment", ce.Name, "err", err)
		case told != nil:
			rep.Told = append(rep.Told, *told)
		}
	}
	return rep, nil
}

// Tell is one sweep of n as every process that sweeps runs it, after its recovery sweep (serve's
// loop, the Lambda's schedule, `latestwins sweep`): what it could not tell is logged and in the
// report, and the next sweep tries again. A nil Notifier (no trusted configuration to read the
// alarms from) tells nothing.
func (n *Notifier) Tell(ctx context.Context) (*Report, error) {
	if n == nil {
		return nil, nil
	}
	rep, err := n.Sweep(ctx)
	if err != nil {
		n.o.Log.WarnContext(ctx, "alarms not told; the next sweep tries again", "err", err)
		return nil, err
	}
	return rep, nil
}

// environment brings one environment's stored alert-after in line with ce's, then tells what
// changed in its alarm.
func (n *Notifier) environment(ctx context.Context, ce *config.Environment) (*Told, error) {
	e, err := n.o.Authority.State(ctx, ce.Name)
	if err != nil || e == nil {
		return nil, err // nothing accepted yet: nothing to alarm about
	}
	if e.AlertAfter != ce.AlertAfter {
		if _, err := n.o.Authority.SetAlertAfter(ctx, ce.Name, ce.AlertAfter); err != nil {
			return nil, err
		}
		e.AlertAfter = ce.AlertAfter
		n.o.Log.InfoContext(ctx, "alert-after set from the trusted configuration", "environment", ce.Name, "alert_after", ce.AlertAfter)
	}
	if ce.AlertAfter == 0 || (ce.AlertWebhook == "" && ce.AlertIssue == "") {
		return nil, nil
	}
	name := authority.AlarmLease(ce.Name)
	prev, err := n.alarm(ctx, name)
	if err != nil {
		return nil, err
	}
	now := n.o.Clock.Now()
	st := report.NewStatus(e, now)
	late := lateScopes(st)
	if !n.pending(ce, prev, late) {
		return nil, nil
	}
	g, err := n.o.Authority.Acquire(ctx, name, n.o.Holder, "alert", leaseTTL)
	if errors.Is(err, authority.ErrLeaseHeld) {
		return nil, nil // another notifier tells it now
	}
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := n.o.Authority.ReleaseNamed(context.WithoutCancel(ctx), g); err != nil {
			n.o.Log.WarnContext(ctx, "alarm lease not released; it expires", "environment", ce.Name, "err", err)
		}
	}()
	// Read again under the lease: a notifier that held it may have told this very change.
	if prev, err = n.alarm(ctx, name); err != nil {
		return nil, err
	}
	if !n.pending(ce, prev, late) {
		return nil, nil
	}
	told := &Told{Environment: ce.Name, Event: EventLate}
	if len(late) == 0 {
		told.Event = EventRecovered
	}
	for _, s := range late {
		told.Scopes = append(told.Scopes, s.Scope)
	}
	next := prev
	var errs []error
	if ce.AlertWebhook != "" && !authority.SameAlarm(prev.Webhook, late) {
		if err := n.post(ctx, ce, st, prev.Webhook, late, now); err != nil {
			errs = append(errs, err)
		} else {
			next.Webhook, told.Webhook = late, true
		}
	}
	if ce.AlertIssue != "" && issuePending(prev, late) {
		if err := n.issue(ctx, ce, st, &next, late); err != nil {
			errs = append(errs, err)
		} else {
			told.Issue = cmp.Or(next.IssueNumber, prev.IssueNumber)
		}
	}
	if err := n.o.Authority.RecordAlarm(ctx, g, name, next); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return told, nil
}

// alarm reads what the notifiers told of an alarm; nothing when its lease was never taken.
func (n *Notifier) alarm(ctx context.Context, name string) (authority.Alarm, error) {
	nl, err := n.o.Authority.LeaseStatus(ctx, name)
	switch {
	case errors.Is(err, authority.ErrNotFound):
		return authority.Alarm{}, nil
	case err != nil:
		return authority.Alarm{}, err
	case nl.Alarm == nil:
		return authority.Alarm{}, nil
	}
	return *nl.Alarm, nil
}

// pending reports whether a channel of ce has not been told late yet.
func (n *Notifier) pending(ce *config.Environment, prev authority.Alarm, late []authority.AlarmScope) bool {
	return (ce.AlertWebhook != "" && !authority.SameAlarm(prev.Webhook, late)) || (ce.AlertIssue != "" && issuePending(prev, late))
}

// issuePending reports whether the issue is behind late: none open while a scope is late, one
// open that says other scopes, or one open after the recovery.
func issuePending(prev authority.Alarm, late []authority.AlarmScope) bool {
	if prev.IssueNumber == 0 {
		return len(late) > 0
	}
	return !authority.SameAlarm(prev.Issue, late)
}

// lateScopes lists the late scopes of st, by name.
func lateScopes(st *report.Status) []authority.AlarmScope {
	var out []authority.AlarmScope
	for _, r := range st.Rows {
		if c := r.Convergence; c.State.Late() {
			out = append(out, authority.AlarmScope{Scope: r.Scope, State: c.State.String(), Since: c.Since.UTC()})
		}
	}
	return out
}

// worst is the state an environment's alarm is named by: stuck when any scope is, else behind;
// current when none is late.
func worst(late []authority.AlarmScope) string {
	state := authority.ConvergenceCurrent.String()
	for _, s := range late {
		if s.State == authority.ConvergenceStuck.String() {
			return s.State
		}
		state = s.State
	}
	return state
}

// rowsOf is the rows of st for the scopes in late, in its order.
func rowsOf(st *report.Status, late []authority.AlarmScope) []report.Row {
	var out []report.Row
	for _, r := range st.Rows {
		if slices.ContainsFunc(late, func(s authority.AlarmScope) bool { return s.Scope == r.Scope }) {
			out = append(out, r)
		}
	}
	return out
}

func scopeNames(late []authority.AlarmScope) string {
	names := make([]string, len(late))
	for i, s := range late {
		names[i] = s.Scope
	}
	return strings.Join(names, ", ")
}
