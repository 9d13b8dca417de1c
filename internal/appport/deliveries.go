package appport

import (
	"errors"
	"net/http"
	"time"
)

// ErrDeliveryGone: GitHub no longer keeps an attempt of the App's delivery log (it keeps three days).
var ErrDeliveryGone = errors.New("webhook delivery no longer in GitHub's log")

// LoggedDelivery is one attempt in the App's webhook delivery log. GitHub lists every attempt,
// redeliveries included, each with an id of its own; GUID is the delivery's, the X-GitHub-Delivery
// every attempt of it carries.
type LoggedDelivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery,omitempty"`
	// StatusCode is what the App answered, 0 when it did not (no connection, a timeout); Status
	// says it in GitHub's words.
	StatusCode int    `json:"status_code"`
	Status     string `json:"status"`
	Event      string `json:"event"`
	Action     string `json:"action,omitempty"`
}

// Answered reports whether the App took the attempt: it answered 2xx.
func (d LoggedDelivery) Answered() bool { return d.StatusCode >= 200 && d.StatusCode < 300 }

// DeliveryRequest is what GitHub sent in an attempt: its headers and its JSON payload.
type DeliveryRequest struct {
	Header  http.Header
	Payload []byte
}
