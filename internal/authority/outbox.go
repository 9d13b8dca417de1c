package authority

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// DefaultRetention is how long events and intent ids are kept: a re-delivered webhook or a re-run
// of a workflow run within it is recognised as a repeat.
const DefaultRetention = 90 * 24 * time.Hour

// outboxBatch is how many events and intents the outbox gathers before a write stores them as
// records ahead of itself (a pass's last write stores them whatever their number): a single-scope
// pass makes about six, so its records go in one batch.
const outboxBatch = 8

// outboxSoftLimit is how many events and intents a retry after a conflict leaves in the outbox for
// a later write to store, before it stores them itself.
const outboxSoftLimit = 24

// outboxLen is how many events and intents e's outbox holds (0 for no environment).
func (e *Env) outboxLen() int {
	if e == nil {
		return 0
	}
	return len(e.Outbox) + len(e.Accepts)
}

// maxRecordsPerRead bounds the keys of one GetRecords call.
const maxRecordsPerRead = 100

// storedMark is what this process knows to be stored as records of one environment's outbox:
// every event up to seq, and the intents named.
type storedMark struct {
	seq     int64
	intents map[string]bool
}

// records turns what e's outbox holds into records, expiring after the retention.
func (a *Authority) records(e *Env) []Record {
	recs := make([]Record, 0, len(e.Outbox)+len(e.Accepts))
	for i := range e.Outbox {
		ev := e.Outbox[i]
		recs = append(recs, Record{Key: e.eventKey(ev), ExpiresAt: ev.At.Add(a.retention), Event: &ev})
	}
	for i := range e.Accepts {
		in := e.Accepts[i]
		recs = append(recs, Record{Key: IntentKey(e.Name, in.ID), ExpiresAt: in.At.Add(a.retention), Intent: &in})
	}
	return recs
}

// archive stores d's outbox as records, unless this process already did, and remembers it did.
func (a *Authority) archive(ctx context.Context, d *Doc) error {
	e := d.Env
	if e == nil || (len(e.Outbox) == 0 && len(e.Accepts) == 0) {
		return nil
	}
	a.mu.Lock()
	m := a.stored[d.Key]
	known := m != nil
	if known {
		for _, ev := range e.Outbox {
			known = known && ev.Seq <= m.seq
		}
		for _, in := range e.Accepts {
			known = known && m.intents[in.ID]
		}
	}
	a.mu.Unlock()
	if known {
		return nil
	}
	if err := a.store.PutRecords(ctx, a.records(e)); err != nil {
		return fmt.Errorf("store the records of %s: %w", d.Key, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	m = a.stored[d.Key]
	if m == nil {
		if len(a.stored) >= maxRemembered {
			for k := range a.stored { // forget one: it costs one repeated PutRecords, never a loss
				delete(a.stored, k)
				break
			}
		}
		m = &storedMark{intents: map[string]bool{}}
		a.stored[d.Key] = m
	}
	for _, ev := range e.Outbox {
		m.seq = max(m.seq, ev.Seq)
	}
	for _, in := range e.Accepts {
		m.intents[in.ID] = true
	}
	return nil
}

// trim drops from e's outbox what this process knows to be stored as records.
func (a *Authority) trim(key string, e *Env) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.stored[key]
	if m == nil {
		return
	}
	e.Outbox = slices.DeleteFunc(e.Outbox, func(ev Event) bool { return ev.Seq <= m.seq })
	e.Accepts = slices.DeleteFunc(e.Accepts, func(in IntentRecord) bool { return m.intents[in.ID] })
	// Only ids still in an outbox need remembering.
	for id := range m.intents {
		if !slices.ContainsFunc(e.Accepts, func(in IntentRecord) bool { return in.ID == id }) {
			delete(m.intents, id)
		}
	}
}

// HistoryPage is one page of an environment's timeline, oldest first.
type HistoryPage struct {
	Events []Event `json:"events"`
	// Before is the value to pass for the next, older page; 0 when this page reaches the oldest
	// event kept.
	Before int64 `json:"before,omitempty"`
	// Newest is the number of the environment's newest event.
	Newest int64 `json:"newest"`
	// Timed: Before is a time (Unix nanoseconds), not an event number. An environment in the
	// per-scope layout numbers its events per scope, so its timeline pages by time.
	Timed bool `json:"timed,omitempty"`
}

// History returns up to limit events of env's timeline numbered below before (0: the newest),
// oldest first: the whole timeline within the retention, page by page.
func (a *Authority) History(ctx context.Context, env string, before int64, limit int) (*HistoryPage, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, &InputError{Field: "limit", Value: fmt.Sprint(limit), Fix: "ask for at least one event"}
	}
	if before < 0 {
		return nil, &InputError{Field: "before", Value: fmt.Sprint(before), Fix: "give an event number from an earlier page, or 0 for the newest"}
	}
	d, err := a.readEnv(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", env, err)
	}
	if d.Env == nil {
		return nil, &InputError{Field: "environment", Value: env, Fix: "unknown environment: nothing was ever accepted for it; check the name"}
	}
	if err := movedError(d); err != nil {
		return nil, err
	}
	page, err := a.history(ctx, d.Env, before, limit)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", env, err)
	}
	return page, nil
}

// history is timeline for either layout: in the per-scope layout, before is a time (Unix
// nanoseconds) rather than an event number (splitTimeline).
func (a *Authority) history(ctx context.Context, e *Env, before int64, limit int) (*HistoryPage, error) {
	if e.Split {
		return a.splitTimeline(ctx, e, before, limit)
	}
	return a.timeline(ctx, e, before, limit)
}

// timeline reads the events numbered from before-limit to before-1 (before 0: the newest), from the
// outbox and the records.
func (a *Authority) timeline(ctx context.Context, e *Env, before int64, limit int) (*HistoryPage, error) {
	to := e.EventSeq
	if before > 0 {
		to = min(to, before-1)
	}
	from := max(1, to-int64(limit)+1)
	page := &HistoryPage{Events: []Event{}, Newest: e.EventSeq}
	if to < 1 {
		return page, nil
	}
	have := map[int64]bool{}
	for _, ev := range e.Outbox {
		if ev.Seq >= from && ev.Seq <= to {
			page.Events = append(page.Events, ev)
			have[ev.Seq] = true
		}
	}
	var keys []string
	for seq := from; seq <= to; seq++ {
		if !have[seq] {
			keys = append(keys, EventKey(e.Name, seq))
		}
	}
	now := a.clock.Now()
	for chunk := range slices.Chunk(keys, maxRecordsPerRead) {
		recs, err := a.store.GetRecords(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("read events: %w", err)
		}
		for _, r := range recs {
			if r.Event != nil && now.Before(r.ExpiresAt) && !have[r.Event.Seq] {
				page.Events = append(page.Events, *r.Event)
				have[r.Event.Seq] = true
			}
		}
	}
	sort.Slice(page.Events, func(i, j int) bool { return page.Events[i].Seq < page.Events[j].Seq })
	if from > 1 {
		page.Before = from
	}
	return page, nil
}

// Compact empties an environment's outbox: its events and intents are stored as records, and the
// document is written without them (in the current layout, whatever layout it was read in). It
// reports whether it wrote. latestwins migrate runs it on every environment; running it again
// changes nothing.
func (a *Authority) Compact(ctx context.Context, env string) (bool, error) {
	if err := ValidateEnvironment(env); err != nil {
		return false, err
	}
	wrote := false
	d, err := a.updateFlush(ctx, EnvKey(env), func(d *Doc, _ time.Time) (bool, error) {
		wrote = d.Env != nil && (len(d.Env.Outbox) > 0 || len(d.Env.Accepts) > 0)
		return wrote, nil
	})
	if err != nil {
		return false, fmt.Errorf("compact %s: %w", env, err)
	}
	if wrote && d.Env != nil && (len(d.Env.Outbox) > 0 || len(d.Env.Accepts) > 0) {
		// The write went through but the records did not: the store refuses them (on DynamoDB,
		// most likely a role without BatchWriteItem).
		return false, fmt.Errorf("compact %s: %d events and %d intents could not be stored as records; check that the store takes them (DynamoDB: dynamodb:BatchWriteItem and dynamodb:BatchGetItem on the table)",
			env, len(d.Env.Outbox), len(d.Env.Accepts))
	}
	return wrote, nil
}

// Intents returns the records of those of ids that env remembers within the retention: from the
// document's outbox, then from the records (in that order, as Accept reads them).
func (a *Authority) Intents(ctx context.Context, env string, ids []string) (map[string]IntentRecord, error) {
	if err := ValidateEnvironment(env); err != nil {
		return nil, err
	}
	d, err := a.readEnv(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("intents of %s: %w", env, err)
	}
	out := map[string]IntentRecord{}
	var keys []string
	for _, id := range ids {
		if r := a.outboxIntent(d.Env, id); r != nil {
			out[id] = *r
			continue
		}
		keys = append(keys, IntentKey(env, id))
	}
	now := a.clock.Now()
	for chunk := range slices.Chunk(keys, maxRecordsPerRead) {
		recs, err := a.store.GetRecords(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("intents of %s: %w", env, err)
		}
		for _, r := range recs {
			if r.Intent != nil && now.Before(r.ExpiresAt) {
				out[r.Intent.ID] = *r.Intent
			}
		}
	}
	return out, nil
}

// Report is how a deployment that latestwins did not run itself ended: a job gated only by the
// deployment protection rule, as GitHub's deployment status tells it.
type Report struct {
	ID          string // the delivery that reports it: a repeat changes nothing
	Environment string
	Scopes      []string
	Sha         string
	// Deployment is GitHub's id of the deployment: only one the protection rule approved
	// (Approve) counts.
	Deployment  int64
	Success     bool
	Run         string // where it ran (a URL), recorded with the live state
	Message     string
	MaxAttempts int // a failure on this attempt is terminal (0: 3)
}

// Report records the outcome of such a deployment. It counts only for a deployment the protection
// rule approved (Approve) for that commit, since anyone who may write to the repository can create
// a deployment and its statuses through GitHub's API: any other is recorded once as an unapproved
// report (ResultUnapproved), shown as the scope's warning, and changes nothing else. It carries no
// fencing token, so it applies only to a scope whose pending intent is that very commit (the newest
// accepted, which the protection rule approved): it can never overwrite a newer live state or end
// a newer intent. A success makes the commit live; a failure counts an attempt, terminal on the
// last one. Other scopes are reported superseded.
func (a *Authority) Report(ctx context.Context, r Report) (*CompleteResult, error) {
	if err := ValidateEnvironment(r.Environment); err != nil {
		return nil, err
	}
	if err := validateScopes(r.Scopes, true); err != nil {
		return nil, err
	}
	if err := ValidateSha(r.Sha); err != nil {
		return nil, err
	}
	if r.ID == "" || len(r.ID) > maxIDLen {
		return nil, &InputError{Field: "report id", Value: truncate(r.ID, 40), Fix: "give the delivery id that reports the outcome"}
	}
	if r.MaxAttempts < 1 {
		r.MaxAttempts = 3
	}
	id := "report:" + r.ID
	var done, approved *IntentRecord
	findDone := a.findRequest(r.Environment, id, &done)
	findApproval := a.findRequest(r.Environment, approvalID(r.Deployment), &approved)
	prepare := func(ctx context.Context, d *Doc) error {
		if err := findDone(ctx, d); err != nil {
			return err
		}
		if r.Deployment <= 0 {
			approved = nil
			return nil
		}
		return findApproval(ctx, d)
	}
	var res *CompleteResult
	_, err := a.updatePrepared(ctx, EnvKey(r.Environment), prepare, func(d *Doc, now time.Time) (bool, error) {
		res = &CompleteResult{Results: map[string]Result{}}
		if d.Env == nil {
			for _, s := range r.Scopes {
				res.Results[s] = ResultSuperseded
			}
			return false, nil
		}
		before := d.Env.EventSeq
		if approved == nil || approved.Sha != r.Sha {
			d.Env.reportUnapproved(&r, done != nil, res, now)
		} else {
			for _, name := range r.Scopes {
				res.Results[name] = d.Env.report(name, &r, done != nil, now)
			}
		}
		if d.Env.EventSeq == before {
			return false, nil
		}
		d.Env.Accepts = append(d.Env.Accepts, IntentRecord{ID: id, At: now})
		d.Env.settle()
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("report the deployment of %s in %s: %w", shortSha(r.Sha), r.Environment, err)
	}
	return res, nil
}

// reportUnapproved records, once per delivery, the outcome of a deployment nobody approved as the
// warning of each scope where its commit goes next, unless a pass deploys it under its lease (whose
// own completion records it): it never makes anything live nor counts an attempt. A commit that is
// live already, or not what goes next, is reported as before and warned of nowhere.
func (e *Env) reportUnapproved(r *Report, repeat bool, res *CompleteResult, now time.Time) {
	for _, name := range r.Scopes {
		sc := e.Scopes[name]
		switch {
		case sc == nil:
			res.Results[name] = ResultSuperseded
			continue
		case sc.Live != nil && sc.Live.Sha == r.Sha && (sc.Mailbox == nil || sc.Mailbox.Sha != r.Sha):
			res.Results[name] = ResultDeployed // recorded before, by the pass that deployed it
			continue
		case liveLease(&sc.Lease, now, 0) && sc.Lease.Sha == r.Sha:
			res.Results[name] = ResultRetry // the pass deploying it under its lease records its outcome
			continue
		case sc.Mailbox == nil || sc.Mailbox.Sha != r.Sha:
			res.Results[name] = ResultSuperseded // not what goes next: it could change nothing anyway
			continue
		}
		res.Results[name] = ResultUnapproved
		if repeat {
			continue
		}
		u := &Unapproved{Sha: r.Sha, Deployment: r.Deployment, Success: r.Success, At: now}
		sc.Unapproved = u
		e.record(now, Event{Kind: EventUnapproved, Scope: name, Sha: r.Sha,
			Message: fmt.Sprintf("Warning: %s", u.Text())})
	}
}

// report applies one reported outcome to one scope.
func (e *Env) report(name string, r *Report, repeat bool, now time.Time) Result {
	sc := e.Scopes[name]
	if sc == nil {
		return ResultSuperseded
	}
	if sc.Live != nil && sc.Live.Sha == r.Sha && (sc.Mailbox == nil || sc.Mailbox.Sha != r.Sha) {
		return ResultDeployed // it was recorded before
	}
	m := sc.Mailbox
	if m == nil || m.Sha != r.Sha {
		return ResultSuperseded
	}
	if m.Failed {
		return ResultFailed // it blocks: a decision, not a report, moves it
	}
	if repeat {
		return ResultRetry // this delivery was counted before
	}
	sc.ActiveAt = now
	if r.Success {
		sc.setLive(&Live{Sha: m.Sha, Ref: m.Ref, Generation: m.Generation, Run: r.Run, Before: m.Before, Order: m.Order, At: now})
		sc.Owner = max(sc.Owner, m.Generation)
		sc.Failure = nil
		e.endEntry(sc, 0, false, now)
		e.record(now, Event{Kind: EventDeployed, Scope: name, Generation: m.Generation, Sha: m.Sha,
			Message: fmt.Sprintf("Deployed %s (generation %d), reported by GitHub's deployment status", shortSha(m.Sha), m.Generation)})
		return ResultDeployed
	}
	m.Attempt++
	msg := r.Message
	if strings.TrimSpace(msg) == "" {
		msg = "the deployment failed"
	}
	if m.Attempt >= r.MaxAttempts {
		sc.Failure = &Failure{Generation: m.Generation, Sha: m.Sha, Message: truncate(msg, maxMessageSize), Attempt: m.Attempt, MaxAttempts: r.MaxAttempts, At: now}
		e.endEntry(sc, 0, true, now)
		e.record(now, Event{Kind: EventFailed, Scope: name, Generation: m.Generation, Sha: m.Sha,
			Message: fmt.Sprintf("Failed on the final attempt (%d of %d), reported by GitHub's deployment status: %s", m.Attempt, r.MaxAttempts, msg)})
		return ResultFailed
	}
	e.record(now, Event{Kind: EventFailed, Scope: name, Generation: m.Generation, Sha: m.Sha,
		Message: fmt.Sprintf("Attempt %d of %d failed; will retry (reported by GitHub's deployment status): %s", m.Attempt, r.MaxAttempts, msg)})
	return ResultRetry
}
