package intake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app/internal/core"
)

// Categories of refused deliveries; the handler maps them to HTTP statuses with errors.Is.
var (
	// ErrUnauthorized: the signature is missing or wrong (401). Nothing of the body was parsed.
	ErrUnauthorized = errors.New("webhook signature rejected")
)

// SignatureError says why a delivery's signature was refused.
type SignatureError struct{ Reason string }

func (e *SignatureError) Error() string { return "webhook signature rejected: " + e.Reason }

// Is matches ErrUnauthorized.
func (e *SignatureError) Is(target error) bool { return target == ErrUnauthorized }

const maxDeliveryIDLen = 100

// UsedEvents are the events Handle acts on. Only their payloads are parsed: every other event,
// known to go-github or not, is acknowledged unread, so an example GitHub sends that go-github
// cannot parse (discussion, package) is never refused.
var UsedEvents = map[string]bool{
	"push":                   true,
	"pull_request":           true,
	"installation":           true,
	"issue_comment":          true,
	"check_run":              true,
	core.EventProtectionRule: true,
	"deployment_status":      true,
}

// ParseDelivery verifies and parses a webhook delivery. The signature (X-Hub-Signature-256, with a
// non-empty secret) is checked in constant time over the raw body before anything is parsed; SHA-1
// signatures are not accepted. The payload of an event the App uses must be a JSON object; that
// of any other event is not read.
func ParseDelivery(secret []byte, h http.Header, body []byte) (core.Delivery, error) {
	want, err := signatureOf(secret, h)
	if err != nil {
		return core.Delivery{}, err
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if err := checkSignature(mac, want); err != nil {
		return core.Delivery{}, err
	}
	return parseSigned(h, body)
}

// signatureOf returns the HMAC-SHA256 that X-Hub-Signature-256 claims, refusing a delivery that
// cannot be signed before any of its body is read.
func signatureOf(secret []byte, h http.Header) ([]byte, error) {
	if len(secret) == 0 {
		// go-github would accept an unsigned payload with an empty secret: never get that far.
		return nil, &SignatureError{Reason: "no webhook secret is configured"}
	}
	sig := h.Get(github.SHA256SignatureHeader)
	if sig == "" {
		return nil, &SignatureError{Reason: "no X-Hub-Signature-256 header; set a secret on the webhook"}
	}
	hexSum, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return nil, &SignatureError{Reason: "X-Hub-Signature-256 must be sha256=HEX"}
	}
	sum, err := hex.DecodeString(hexSum)
	if err != nil || len(sum) != sha256.Size {
		return nil, errSignatureMismatch
	}
	return sum, nil
}

var errSignatureMismatch = &SignatureError{Reason: "X-Hub-Signature-256 does not match the body; check that the webhook secret is the App's"}

// checkSignature compares, in constant time, the HMAC of the whole body with the one claimed.
func checkSignature(mac hash.Hash, want []byte) error {
	if !hmac.Equal(mac.Sum(nil), want) {
		return errSignatureMismatch
	}
	return nil
}

// parseSigned reads the headers and, for an event the App uses, the payload of a delivery whose
// signature was checked. body is not read for any other event (it may be nil).
func parseSigned(h http.Header, body []byte) (core.Delivery, error) {
	d := core.Delivery{ID: h.Get(github.DeliveryIDHeader), Event: h.Get(github.EventTypeHeader)}
	if d.ID == "" || len(d.ID) > maxDeliveryIDLen || strings.ContainsFunc(d.ID, isControlOrSpace) {
		return core.Delivery{}, &core.MalformedError{Reason: fmt.Sprintf("X-GitHub-Delivery must be a delivery id of 1-%d printable characters", maxDeliveryIDLen)}
	}
	if d.Event == "" {
		return core.Delivery{}, &core.MalformedError{Reason: "no X-GitHub-Event header"}
	}
	if !UsedEvents[d.Event] {
		return d, nil // signed but not used: acknowledged and ignored
	}
	payload, err := jsonBody(h.Get("Content-Type"), body)
	if err != nil {
		return core.Delivery{}, err
	}
	if trimmed := bytes.TrimLeft(payload, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return core.Delivery{}, &core.MalformedError{Reason: fmt.Sprintf("%s payload must be a JSON object", d.Event)}
	}
	ev, err := ParseEvent(d.Event, payload)
	if err != nil {
		return core.Delivery{}, &core.MalformedError{Reason: fmt.Sprintf("%s payload: %v", d.Event, err)}
	}
	d.Payload = ev
	return d, nil
}

// ParseEvent is github.ParseWebHook, except for deployment_protection_rule, whose sha and ref
// go-github v60 does not read: it becomes a *ProtectionRuleEvent.
func ParseEvent(event string, payload []byte) (any, error) {
	if event == core.EventProtectionRule {
		ev := &core.ProtectionRuleEvent{}
		if err := json.Unmarshal(payload, ev); err != nil {
			return nil, err
		}
		return ev, nil
	}
	return github.ParseWebHook(event, payload)
}

// jsonBody returns the JSON payload of a body sent as application/json or as a form (payload=...).
func jsonBody(contentType string, body []byte) ([]byte, error) {
	mt := "application/json"
	if contentType != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(contentType); err != nil {
			return nil, &core.MalformedError{Reason: fmt.Sprintf("Content-Type %q: %v", contentType, err)}
		}
	}
	switch mt {
	case "application/json":
		return body, nil
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, &core.MalformedError{Reason: fmt.Sprintf("form body: %v", err)}
		}
		if !form.Has("payload") {
			// A JSON body sent without its content type (curl --data sends this one) is no form.
			return nil, &core.MalformedError{Reason: fmt.Sprintf("Content-Type %s without a payload field: send the JSON payload as Content-Type: application/json", mt)}
		}
		return []byte(form.Get("payload")), nil
	}
	return nil, &core.MalformedError{Reason: fmt.Sprintf("Content-Type %q: send application/json", mt)}
}

func isControlOrSpace(r rune) bool { return r <= ' ' || r == 0x7f }
