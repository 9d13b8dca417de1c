package alert

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/report"
)

// Headers of a webhook post.
const (
	// SignatureHeader carries "sha256=" and the hex HMAC-SHA256 of the body under the secret, as
	// GitHub's X-Hub-Signature-256 does.
	SignatureHeader = "X-Latestwins-Signature-256"
	// DeliveryHeader names the notification: the same for every retry of it, so that a receiver
	// can drop a repeat.
	DeliveryHeader = "X-Latestwins-Delivery"
	// EventHeader is the payload's event: late or recovered.
	EventHeader = "X-Latestwins-Event"
)

// Payload is the JSON body of a webhook post.
type Payload struct {
	Event       string `json:"event"` // EventLate or EventRecovered
	Environment string `json:"environment"`
	// State is the environment's worst: stuck when a scope is, else behind; current on recovery.
	State string `json:"state"`
	// Since is when the longest-waiting late scope began to wait; zero on recovery.
	Since             time.Time `json:"since,omitzero"`
	AlertAfterSeconds int64     `json:"alert_after_seconds"`
	// Scopes are the late scopes; Recovered those told late before that are not any more.
	Scopes    []PayloadScope `json:"scopes"`
	Recovered []string       `json:"recovered,omitempty"`
	At        time.Time      `json:"at"`
}

// PayloadScope is one late scope of a post.
type PayloadScope struct {
	Scope          string    `json:"scope"`
	State          string    `json:"state"`
	Since          time.Time `json:"since"`
	WaitingSeconds int64     `json:"waiting_seconds"`
	Generation     int64     `json:"generation"`
	Sha            string    `json:"sha"` // the newest pending commit: what the scope should reach
	Text           string    `json:"text"`
}

// Sign is the value of SignatureHeader for body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// newPayload is the post that tells late, what was told before being told.
func newPayload(ce *config.Environment, st *report.Status, before, late []authority.AlarmScope, now time.Time) Payload {
	p := Payload{Event: EventLate, Environment: ce.Name, State: worst(late), AlertAfterSeconds: int64(ce.AlertAfter / time.Second),
		Scopes: []PayloadScope{}, At: now.UTC()}
	if len(late) == 0 {
		p.Event = EventRecovered
	}
	for _, r := range rowsOf(st, late) {
		c := r.Convergence
		p.Scopes = append(p.Scopes, PayloadScope{Scope: r.Scope, State: c.State.String(), Since: c.Since.UTC(),
			WaitingSeconds: int64(c.Waited / time.Second), Generation: c.Generation, Sha: c.Sha, Text: r.Late})
		if p.Since.IsZero() || c.Since.Before(p.Since) {
			p.Since = c.Since.UTC()
		}
	}
	for _, b := range before {
		if !slices.ContainsFunc(late, func(s authority.AlarmScope) bool { return s.Scope == b.Scope }) {
			p.Recovered = append(p.Recovered, b.Scope)
		}
	}
	return p
}

// deliveryID names a notification by what it tells, so that its retries, from any process, carry
// the same id.
func deliveryID(env string, late []authority.AlarmScope) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", env)
	for _, s := range late {
		fmt.Fprintf(h, "%s %s %d\n", s.Scope, s.State, s.Since.UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// post tells ce's webhook, retrying with back-off within ctx.
func (n *Notifier) post(ctx context.Context, ce *config.Environment, st *report.Status, before, late []authority.AlarmScope, now time.Time) error {
	if len(n.o.Secret) == 0 {
		return fmt.Errorf("alert-webhook of %s: %s is not set; posts are signed with it, and an unsigned one is not sent", ce.Name, SecretVariable)
	}
	body, err := json.Marshal(newPayload(ce, st, before, late, now))
	if err != nil {
		return err
	}
	id, event := deliveryID(ce.Name, late), EventLate
	if len(late) == 0 {
		event = EventRecovered
	}
	var last error
	for attempt := 0; ; attempt++ {
		if last = n.send(ctx, ce.AlertWebhook, body, id, event); last == nil {
			n.o.Log.InfoContext(ctx, "alarm posted", "environment", ce.Name, "event", event, "delivery", id, "attempt", attempt+1)
			return nil
		}
		if attempt >= len(n.o.Backoff) {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("alert-webhook of %s: %w (then %w)", ce.Name, last, ctx.Err())
		case <-time.After(n.o.Backoff[attempt]):
		}
	}
	return fmt.Errorf("alert-webhook of %s: %w", ce.Name, last)
}

// send makes one post; a 2xx answer is a delivery.
func (n *Notifier) send(ctx context.Context, raw string, body []byte, id, event string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, raw, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post to %s: %w", redact(raw), err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "latestwins-alert")
	req.Header.Set(SignatureHeader, Sign(n.o.Secret, body))
	req.Header.Set(DeliveryHeader, id)
	req.Header.Set(EventHeader, event)
	resp, err := n.o.HTTP.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // its message holds the whole URL, whose path may be a credential
		}
		return fmt.Errorf("post to %s: %w", redact(raw), err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post to %s: answered %s", redact(raw), resp.Status)
	}
	return nil
}

// redact is a webhook's URL for logs: its scheme and host, never its path or query, which some
// receivers make a credential.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "the alert-webhook"
	}
	return u.Scheme + "://" + u.Host + "/…"
}
