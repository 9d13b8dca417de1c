// Package heal replays the webhook deliveries the App missed. GitHub does not deliver a failed
// delivery again by itself, so a push that reached the App while it was down (a deploy, a Lambda
// that failed its cold start) would be lost, and with it an intent. The App's delivery log keeps
// every attempt for three days: a Healer reads it as the App, newest first, back to a cursor kept
// in the store, and hands every delivery that no attempt delivered to the App's Handle, the same
// path a live one takes, oldest first. Accepting is idempotent per delivery id (the intent id is
// the X-GitHub-Delivery), so a delivery processed live, or replayed by two healers at once, or
// arriving live while it is replayed, is accepted once.
//
// The cursor moves only past deliveries that were handled: processed, or reported as not
// replayed (older than the log, a comment command gone stale, a payload the App refuses as it
// would live, one that kept failing for an hour). A failure to process one stops the cursor before
// it, and the next run tries again.
package heal

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/appport"
	"github.com/latestwins/latestwins/internal/authority"
)

// Defaults of Options.
const (
	// DefaultWindow is how long GitHub keeps the delivery log.
	DefaultWindow = 72 * time.Hour
	// DefaultSettle is how long the log is given to show an attempt: an attempt still in flight
	// (GitHub waits 10 seconds for an answer) may be listed after later ones.
	DefaultSettle = time.Minute
	// DefaultMaxReplays is how many payloads one run fetches and replays at most.
	DefaultMaxReplays = 50
	// DefaultMaxPages is how many pages of the log (100 attempts each) one run reads at most.
	DefaultMaxPages = 100
	// DefaultGiveUpAfter is how long a delivery may fail (GiveUpAttempts times at least) before it
	// is reported as given up and the cursor passes it, so that one delivery the App can never
	// handle does not hold up every one behind it until it leaves the log.
	DefaultGiveUpAfter = time.Hour
	// GiveUpAttempts is how many times a delivery fails at least before it is given up.
	GiveUpAttempts = 3
	// DefaultCommandsWithin is how old a comment command, a check run re-run or a deployment
	// protection rule may be and still be replayed.
	DefaultCommandsWithin = 15 * time.Minute
)

// Log is the App's webhook delivery log (internal/ghadapter.DeliveryLog reads GitHub's).
type Log interface {
	// Page returns one page, newest first, and the cursor of the next page ("" after the last).
	Page(ctx context.Context, cursor string) ([]appport.LoggedDelivery, string, error)
	// Request returns what GitHub sent in attempt id; one no longer kept matches
	// appport.ErrDeliveryGone.
	Request(ctx context.Context, id int64) (appport.DeliveryRequest, error)
}

// Handler acts on a verified delivery; *app.App is one.
type Handler interface {
	Handle(ctx context.Context, d app.Delivery) (app.Result, error)
}

var _ Handler = (*app.App)(nil)

// Cursor is where the log has been handled up to, and the delivery after it that fails;
// *authority.Authority keeps it in the store.
type Cursor interface {
	DeliveryCursor(ctx context.Context) (authority.DeliveryCursor, error)
	AdvanceDeliveries(ctx context.Context, m authority.DeliveryMark) (authority.DeliveryMark, error)
	DeliveryFailed(ctx context.Context, m authority.DeliveryMark, reason string) (authority.DeliveryFailure, error)
}

var _ Cursor = (*authority.Authority)(nil)

// Options configure a Healer.
type Options struct {
	Log    Log     // required
	App    Handler // required
	Cursor Cursor  // required
	// Secret is the webhook secret: a payload read from the log is signed with it and parsed by
	// app.ParseDelivery, as a live one is. Required.
	Secret []byte
	Clock  authority.Clock // required; the Authority is one
	// Window, Settle, MaxReplays, MaxPages, CommandsWithin and GiveUpAfter default to the Default
	// constants.
	GiveUpAfter    time.Duration
	Window         time.Duration
	Settle         time.Duration
	MaxReplays     int
	MaxPages       int
	CommandsWithin time.Duration
	Logger         *slog.Logger
	// Replayed, when set, is told of each delivery handed to the App (or refused before it, as a
	// live one would be), with its event and the status a live delivery would have been answered
	// with; metrics.Metrics.Replayed counts them apart from the live ones.
	Replayed func(event string, status int)
}

// Healer replays missed deliveries. It keeps no state between runs besides the cursor in the
// store, so any number of processes may run one.
type Healer struct {
	o   Options
	log *slog.Logger
}

// New checks the options.
func New(o Options) (*Healer, error) {
	switch {
	case o.Log == nil, o.App == nil, o.Cursor == nil, o.Clock == nil:
		return nil, errors.New("heal: a Log, an App, a Cursor and a Clock are required")
	case len(o.Secret) == 0:
		return nil, errors.New("heal: no webhook secret")
	case o.Window < 0, o.Settle < 0, o.MaxReplays < 0, o.MaxPages < 0, o.CommandsWithin < 0, o.GiveUpAfter < 0:
		return nil, errors.New("heal: negative limits")
	}
	o.Window = cmp.Or(o.Window, DefaultWindow)
	o.Settle = cmp.Or(o.Settle, DefaultSettle)
	o.MaxReplays = cmp.Or(o.MaxReplays, DefaultMaxReplays)
	o.MaxPages = cmp.Or(o.MaxPages, DefaultMaxPages)
	o.CommandsWithin = cmp.Or(o.CommandsWithin, DefaultCommandsWithin)
	o.GiveUpAfter = cmp.Or(o.GiveUpAfter, DefaultGiveUpAfter)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Healer{o: o, log: log}, nil
}

// Report is what one run did.
type Report struct {
	// From and To are the cursor before and after the run.
	From authority.DeliveryMark `json:"from"`
	To   authority.DeliveryMark `json:"to"`
	// Listed is how many attempts of the log the run read, newer than the cursor.
	Listed int `json:"listed"`
	// Replayed are the deliveries handed to the App, oldest first.
	Replayed []Replayed `json:"replayed,omitempty"`
	// NotReplayed are deliveries the cursor moved past without replaying them, each with why.
	NotReplayed []Missed `json:"not_replayed,omitempty"`
	// Stopped is the delivery whose failure stopped the cursor before it; the next run tries it again.
	Stopped *Missed `json:"stopped,omitempty"`
	// Deferred counts the deliveries left for the next run because the run used its budget of
	// replays (MaxReplays).
	Deferred int `json:"deferred,omitempty"`
	// Unchecked says that the cursor was older than GitHub's log: deliveries made between the two,
	// if any, could not be checked.
	Unchecked bool `json:"unchecked,omitempty"`
}

// Replayed is one delivery handed to the App.
type Replayed struct {
	GUID    string      `json:"guid"`
	Event   string      `json:"event"`
	At      time.Time   `json:"delivered_at"`
	Outcome app.Outcome `json:"outcome"`
	Status  int         `json:"status"`
}

// Missed is a delivery that was not replayed, and why.
type Missed struct {
	GUID   string    `json:"guid"`
	Event  string    `json:"event"`
	Action string    `json:"action,omitempty"`
	At     time.Time `json:"delivered_at"`
	Reason string    `json:"reason"`
}

// Replayed events are those the App acts on. Pushes and pull requests are intents, which accept
// orders by the payload's facts, so a late one never replaces newer work; a deployment status
// records what a job deployed; an installation is bookkeeping.
var replayed = map[string]bool{
	"push": true, "pull_request": true, "installation": true, "deployment_status": true, "deployment_protection_rule": true,
	"issue_comment": true, "check_run": true,
}

// ReplayedEvents lists the events a Healer replays, sorted.
func ReplayedEvents() []string { return slices.Sorted(maps.Keys(replayed)) }

// freshOnly are the events replayed only within CommandsWithin of their delivery, and why. A comment
// command or a check run re-run carried out hours later could roll back or redeploy after its
// author did something else. A deployment protection rule is answered from the store as it stands,
// which is right at any time, but only while its job waits: once someone answered it by hand, or
// the run was cancelled, GitHub refuses the answer, and replaying it would fail again until it left
// the log.
var freshOnly = map[string]string{
	"issue_comment":              "a command",
	"check_run":                  "a check run re-run",
	"deployment_protection_rule": "a deployment protection rule",
}

// Run reads the log back to the cursor, replays what no attempt delivered, and moves the cursor
// past what it handled. An error says the log or the cursor could not be read or written; a
// delivery that could not be handled is the report's Stopped.
func (h *Healer) Run(ctx context.Context) (*Report, error) {
	now := h.o.Clock.Now()
	cur, err := h.o.Cursor.DeliveryCursor(ctx)
	if err != nil {
		return nil, err
	}
	from := cur.Handled
	rep := &Report{From: from, To: from}
	attempts, answered, err := h.read(ctx, from, now, rep)
	if err != nil {
		return rep, err
	}
	settled := now.Add(-h.o.Settle)
	done := map[string]bool{} // guids replayed (or reported) in this run
	handled := from           // every attempt at or before it is handled
	replays := 0
	for i, d := range attempts {
		switch why := h.notReplayed(d, now); {
		case d.DeliveredAt.After(settled):
			// Not settled: an attempt in flight may yet be listed before it. The next run sees it.
			return rep, h.advance(ctx, rep, handled)
		case answered[d.GUID] || done[d.GUID] || !replayed[d.Event]:
		case why != "":
			h.miss(ctx, rep, d, why)
		case replays == h.o.MaxReplays:
			rep.Deferred = deferred(attempts[i:], answered, done)
			h.log.WarnContext(ctx, "missed deliveries left for the next run: the run replayed as many as it may", "deferred", rep.Deferred, "max_replays", h.o.MaxReplays)
			return rep, h.advance(ctx, rep, handled)
		default:
			replays++
			if err := h.handle(ctx, rep, d); err != nil {
				f, ferr := h.o.Cursor.DeliveryFailed(ctx, mark(d), err.Error())
				if ferr != nil {
					return rep, errors.Join(err, ferr)
				}
				if f.Attempts >= GiveUpAttempts && now.Sub(f.Since) >= h.o.GiveUpAfter {
					h.miss(ctx, rep, d, fmt.Sprintf("given up: it failed %d times over %s; the last time: %v",
						f.Attempts, now.Sub(f.Since).Round(time.Second), err))
					if err := h.advance(ctx, rep, mark(d)); err != nil {
						return rep, err
					}
					break // handled: reported
				}
				rep.Stopped = &Missed{GUID: d.GUID, Event: d.Event, Action: d.Action, At: d.DeliveredAt, Reason: err.Error()}
				h.log.WarnContext(ctx, "missed delivery not handled: the cursor stays before it and the next run tries again",
					"delivery_id", d.GUID, "event", d.Event, "delivered_at", d.DeliveredAt, "err", err)
				return rep, h.advance(ctx, rep, handled)
			}
			// Stored after each replay: a process stopped in the middle of a run leaves the next
			// one little to replay again.
			if err := h.advance(ctx, rep, mark(d)); err != nil {
				return rep, err
			}
		}
		done[d.GUID] = true
		handled = mark(d)
	}
	return rep, h.advance(ctx, rep, handled)
}

// notReplayed says why an attempt is passed without a replay, or "".
func (h *Healer) notReplayed(d appport.LoggedDelivery, now time.Time) string {
	switch {
	case d.DeliveredAt.Before(now.Add(-h.o.Window)):
		return "older than GitHub's delivery log keeps (three days): it cannot be read back"
	case freshOnly[d.Event] != "" && now.Sub(d.DeliveredAt) > h.o.CommandsWithin:
		return fmt.Sprintf("%s is replayed only within %s of its delivery; give it again (a command, a re-run) or answer it by hand (a protection rule)",
			freshOnly[d.Event], h.o.CommandsWithin)
	}
	return ""
}

// handle replays d and reports it: replayed, or passed with why the App refused it. An error
// means it was not handled.
func (h *Healer) handle(ctx context.Context, rep *Report, d appport.LoggedDelivery) error {
	r, refused, err := h.replay(ctx, d)
	switch {
	case err != nil:
		return err
	case refused != "":
		h.miss(ctx, rep, d, refused)
	default:
		rep.Replayed = append(rep.Replayed, r)
		h.log.InfoContext(ctx, "missed delivery replayed", "delivery_id", d.GUID, "event", d.Event,
			"delivered_at", d.DeliveredAt, "outcome", r.Outcome, "status", r.Status)
	}
	return nil
}

// read walks the log from its newest page back to the cursor (or past the window) and returns the
// attempts newer than the cursor, oldest first, and the guids some attempt delivered.
func (h *Healer) read(ctx context.Context, from authority.DeliveryMark, now time.Time, rep *Report) ([]appport.LoggedDelivery, map[string]bool, error) {
	var attempts []appport.LoggedDelivery
	answered := map[string]bool{}
	// The log is in the order of its attempt ids, which follows delivery times closely but not
	// exactly; reading a settle period past the cursor finds an attempt listed a little late.
	stopAt := from.At.Add(-h.o.Settle)
	edge := now.Add(-h.o.Window)
	cursor, reachedCursor := "", false
	for pages := 0; ; pages++ {
		if pages == h.o.MaxPages {
			return nil, nil, fmt.Errorf("the delivery log has more than %d pages after the cursor (%s): not replayed, since the cursor cannot move past deliveries it has not read", h.o.MaxPages, from)
		}
		page, next, err := h.o.Log.Page(ctx, cursor)
		if err != nil {
			return nil, nil, fmt.Errorf("read the App's delivery log: %w", err)
		}
		older := false
		for _, d := range page {
			if d.GUID == "" || d.DeliveredAt.IsZero() {
				continue
			}
			d.DeliveredAt = d.DeliveredAt.UTC()
			if d.Answered() {
				answered[d.GUID] = true
			}
			if !from.IsZero() && d.DeliveredAt.Before(stopAt) {
				older, reachedCursor = true, true
				continue
			}
			if d.DeliveredAt.Before(edge.Add(-h.o.Settle)) {
				older = true
			}
			if from.Before(mark(d)) {
				attempts = append(attempts, d)
			}
		}
		if older || next == "" {
			break
		}
		cursor = next
	}
	if !from.IsZero() && !reachedCursor && from.At.Before(edge) {
		rep.Unchecked = true
		h.log.WarnContext(ctx, "the delivery cursor is older than GitHub's delivery log: deliveries made between the two cannot be checked",
			"cursor", from.String(), "log_starts", edge)
	}
	slices.SortFunc(attempts, func(a, b appport.LoggedDelivery) int {
		if ma, mb := mark(a), mark(b); ma.Before(mb) {
			return -1
		} else if mb.Before(ma) {
			return 1
		}
		return 0
	})
	rep.Listed = len(attempts)
	return attempts, answered, nil
}

// replay fetches an attempt's payload and hands it to the App. It returns why the delivery is not
// replayed when the App refuses it as it would refuse it live (a 4xx: it would refuse it again),
// and an error when the App failed to act (a 5xx: worth another try) or the payload could not be
// read.
func (h *Healer) replay(ctx context.Context, d appport.LoggedDelivery) (Replayed, string, error) {
	req, err := h.o.Log.Request(ctx, d.ID)
	if errors.Is(err, appport.ErrDeliveryGone) {
		return Replayed{}, "GitHub no longer keeps its payload", nil
	}
	if err != nil {
		return Replayed{}, "", fmt.Errorf("read the payload of %s: %w", d.GUID, err)
	}
	delivery, err := h.parse(d, req)
	if err != nil {
		h.counted(d.Event, statusOf(err))
		return Replayed{}, fmt.Sprintf("the App refuses it: %v", err), nil
	}
	res, err := h.o.App.Handle(ctx, delivery)
	if err != nil {
		status := statusOf(err)
		h.counted(d.Event, status)
		if status < 500 {
			return Replayed{}, fmt.Sprintf("the App refuses it (%d): %v", status, err), nil
		}
		return Replayed{}, "", fmt.Errorf("%s: %w", d.GUID, err)
	}
	h.counted(d.Event, cmp.Or(res.Status, http.StatusOK))
	if res.Status >= 400 { // a refusal the App answers with a result: a full queue
		return Replayed{}, fmt.Sprintf("the App refuses it (%d, %s): %s", res.Status, res.Outcome, res.Message), nil
	}
	return Replayed{GUID: d.GUID, Event: d.Event, At: d.DeliveredAt, Outcome: res.Outcome, Status: res.Status}, "", nil
}

// statusOf is the status the App answers a live delivery with when handling it ended in err.
func statusOf(err error) int {
	if errors.Is(err, app.ErrMalformed) {
		return http.StatusBadRequest
	}
	return app.StatusFor(err)
}

// counted tells Options.Replayed of a replayed delivery.
func (h *Healer) counted(event string, status int) {
	if h.o.Replayed != nil {
		h.o.Replayed(event, status)
	}
}

// parse makes the Delivery a live request would have given: GitHub's headers, the delivery's guid
// and event from the log, and the payload signed with the App's own secret (the log's copy was read
// with the App's credentials, and its original signature was over bytes the log does not keep).
func (h *Healer) parse(d appport.LoggedDelivery, req appport.DeliveryRequest) (app.Delivery, error) {
	hdr := req.Header.Clone()
	if hdr == nil {
		hdr = http.Header{}
	}
	for name, want := range map[string]string{github.DeliveryIDHeader: d.GUID, github.EventTypeHeader: d.Event} {
		if got := hdr.Get(name); got != "" && got != want {
			return app.Delivery{}, fmt.Errorf("its %s header is %q, the log says %q", name, got, want)
		}
		hdr.Set(name, want)
	}
	hdr.Set("Content-Type", "application/json") // the log keeps the payload as JSON, whatever the webhook's content type
	mac := hmac.New(sha256.New, h.o.Secret)
	mac.Write(req.Payload)
	hdr.Set(github.SHA256SignatureHeader, "sha256="+hex.EncodeToString(mac.Sum(nil)))
	hdr.Del(github.SHA1SignatureHeader)
	return app.ParseDelivery(h.o.Secret, hdr, req.Payload)
}

func (h *Healer) miss(ctx context.Context, rep *Report, d appport.LoggedDelivery, reason string) {
	rep.NotReplayed = append(rep.NotReplayed, Missed{GUID: d.GUID, Event: d.Event, Action: d.Action, At: d.DeliveredAt, Reason: reason})
	h.log.WarnContext(ctx, "missed delivery not replayed", "delivery_id", d.GUID, "event", d.Event, "action", d.Action,
		"delivered_at", d.DeliveredAt, "reason", reason)
}

// advance moves the stored cursor to m, when m is past it.
func (h *Healer) advance(ctx context.Context, rep *Report, m authority.DeliveryMark) error {
	if !rep.To.Before(m) {
		return nil
	}
	to, err := h.o.Cursor.AdvanceDeliveries(ctx, m)
	if err != nil {
		return err
	}
	rep.To = to
	return nil
}

// deferred counts the deliveries among attempts a later run will replay.
func deferred(attempts []appport.LoggedDelivery, answered, done map[string]bool) int {
	seen := map[string]bool{}
	for _, d := range attempts {
		if !answered[d.GUID] && !done[d.GUID] && replayed[d.Event] {
			seen[d.GUID] = true
		}
	}
	return len(seen)
}

func mark(d appport.LoggedDelivery) authority.DeliveryMark {
	return authority.DeliveryMark{At: d.DeliveredAt.UTC(), GUID: d.GUID}
}
