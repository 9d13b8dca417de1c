// Package intake is the App's webhook door: deliveries read within bounds of memory and count
// (intake.go), their signatures checked before anything is parsed (delivery.go, ParseDelivery is
// pure), each handed to the handler of its event (Webhook.Handle, a table the App gives), and the
// repository events it handles itself: push, pull_request and installation (events.go).
package intake

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/latestwins/latestwins/app/internal/core"
)

// Handler acts on one verified delivery of the event it is registered for, and says what it did in
// res. An error is a failure to act.
type Handler func(ctx context.Context, log *slog.Logger, d core.Delivery, res *core.Result) error

// Webhook serves POST /webhook: it verifies each delivery as its body streams in, within the bounds
// of the intake, and hands it to the handler of its event.
type Webhook struct {
	*core.App
	secret   []byte
	maxBody  int64
	limits   *limiter
	handlers map[string]Handler
}

// Options configure a Webhook.
type Options struct {
	// Secret is the webhook secret; required.
	Secret []byte
	// MaxBodyBytes caps a webhook body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// Deliveries caps the deliveries in flight; 0 means MaxDeliveriesInFlight.
	Deliveries int
	// Bytes caps the memory their bodies take; 0 means InFlightBytes(MaxBodyBytes).
	Bytes int64
	// Handlers act on the deliveries of each event (X-GitHub-Event); an event without one is
	// acknowledged as not used.
	Handlers map[string]Handler
}

// New is the webhook door of app.
func New(app *core.App, o Options) *Webhook {
	w := &Webhook{App: app, secret: o.Secret, maxBody: cmp.Or(o.MaxBodyBytes, DefaultMaxBodyBytes), handlers: o.Handlers}
	w.limits = newLimiter(w.maxBody, cmp.Or(o.Deliveries, MaxDeliveriesInFlight), cmp.Or(o.Bytes, InFlightBytes(w.maxBody)))
	return w
}

// InFlight is how many deliveries are being read, verified or handled, and how many pages of
// memory their bodies hold.
func (a *Webhook) InFlight() (deliveries, pages int) {
	a.limits.mu.Lock()
	defer a.limits.mu.Unlock()
	return a.limits.inFlight, a.limits.reserved
}

// Events handles the events of the repositories themselves: push, pull_request and installation.
type Events struct{ *core.App }

// Handle acts on a verified delivery through the handler of its event. An error is a failure to
// act (the store, the config source, a dispatch); a delivery it does not act on is a Result with
// OutcomeIgnored.
func (a *Webhook) Handle(ctx context.Context, d core.Delivery) (core.Result, error) {
	res := core.Result{Status: http.StatusOK, Delivery: d.ID, Event: d.Event}
	log := a.Log.With("delivery_id", d.ID, "event", d.Event)
	var err error
	if h, ok := a.handlers[d.Event]; ok {
		err = h(ctx, log, d, &res)
	} else {
		res.Outcome, res.Status = core.OutcomeIgnored, http.StatusAccepted
		res.Message = fmt.Sprintf("event %q is not used by latestwins", d.Event)
	}
	if err != nil {
		return res, err
	}
	log.InfoContext(ctx, "webhook handled", "outcome", res.Outcome, "intents", len(res.Intents), "dispatched", len(res.Dispatched))
	return res, nil
}
