package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// serveWebhook reads a capped body, verifies and parses it, hands it to Handle and writes the Result.
func (a *App) serveWebhook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", a.maxBody))
			return
		}
		writeError(w, http.StatusBadRequest, "reading the body: "+err.Error())
		return
	}
	d, err := ParseDelivery(a.secret, r.Header, body)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, ErrUnauthorized) {
			status = http.StatusUnauthorized
		}
		a.log.WarnContext(r.Context(), "webhook refused", "status", status, "err", err,
			"delivery_id", r.Header.Get("X-GitHub-Delivery"), "event", r.Header.Get("X-GitHub-Event"))
		writeError(w, status, err.Error())
		return
	}
	if d.Payload == nil {
		writeJSON(w, http.StatusAccepted, Result{Delivery: d.ID, Event: d.Event, Outcome: OutcomeIgnored,
			Message: fmt.Sprintf("event %q is not used by latestwins", d.Event)})
		return
	}
	res, err := a.Handle(r.Context(), d)
	if err != nil {
		status := StatusFor(err)
		if errors.Is(err, ErrMalformed) {
			status = http.StatusBadRequest
		}
		a.log.ErrorContext(r.Context(), "webhook failed", "delivery_id", d.ID, "event", d.Event, "status", status, "err", err)
		var refreshing *RefreshingError
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
