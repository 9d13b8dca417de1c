package intake

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/latestwins/latestwins/app/internal/core"
)

// ServeWebhook verifies a delivery as its body streams in (within the intake's bounds), parses it,
// hands it to Handle and writes the Result.
func (a *Webhook) ServeWebhook(w http.ResponseWriter, r *http.Request) {
	d, t, err := a.readDelivery(w, r)
	defer t.done()
	if err != nil {
		status := http.StatusBadRequest
		var tooBig *http.MaxBytesError
		switch {
		case errors.Is(err, ErrUnauthorized):
			status = http.StatusUnauthorized
		case errors.As(err, &tooBig):
			status = http.StatusRequestEntityTooLarge
			err = fmt.Errorf("body over %d bytes", a.maxBody)
		case errors.Is(err, errBusy):
			status = http.StatusServiceUnavailable
			w.Header().Set("Retry-After", fmt.Sprint(int64(BusyRetryAfter.Seconds())))
			err = fmt.Errorf("%w: retry later", err)
		case !errors.Is(err, core.ErrMalformed):
			err = fmt.Errorf("reading the body: %w", err)
		}
		a.Log.WarnContext(r.Context(), "webhook refused", "status", status, "err", err,
			"delivery_id", r.Header.Get("X-GitHub-Delivery"), "event", r.Header.Get("X-GitHub-Event"))
		writeError(w, status, err.Error())
		return
	}
	if d.Payload == nil {
		writeJSON(w, http.StatusAccepted, core.Result{Delivery: d.ID, Event: d.Event, Outcome: core.OutcomeIgnored,
			Message: fmt.Sprintf("event %q is not used by latestwins", d.Event)})
		return
	}
	res, err := a.Handle(r.Context(), d)
	if err != nil {
		status := core.StatusFor(err)
		if errors.Is(err, core.ErrMalformed) {
			status = http.StatusBadRequest
		}
		a.Log.ErrorContext(r.Context(), "webhook failed", "delivery_id", d.ID, "event", d.Event, "status", status, "err", err)
		var refreshing *core.RefreshingError
		if errors.As(err, &refreshing) {
			w.Header().Set("Retry-After", fmt.Sprint(int64(refreshing.RetryAfter.Seconds())))
		}
		writeError(w, status, err.Error())
		return
	}
	writeJSON(w, res.Status, res)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
