package intake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"testing"

	"github.com/latestwins/latestwins/app/internal/core"
)

var testSecret = []byte("It's a Secret to Everybody")

func sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func FuzzParseDelivery(f *testing.F) {
	f.Add("push", "id-1", []byte(`{"ref":"refs/heads/main","after":"abc"}`), true)
	f.Add("pull_request", "id-2", []byte(`{"action":"opened","number":1}`), true)
	f.Add("push", "id-3", []byte(`{"ref":`), true)
	f.Add("ping", "", []byte(`{}`), false)
	f.Add("push", "id-4", []byte(`null`), true)
	f.Add("deployment_protection_rule", "id-5", []byte(` null`), true)
	f.Add("discussion", "id-6", []byte(`{"action":"answered","discussion":{"answer_chosen_by":{"login":"x"}}}`), true)
	f.Add("package", "id-7", []byte(`not json`), true)
	f.Fuzz(func(t *testing.T, event, id string, body []byte, signed bool) {
		h := http.Header{}
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", id)
		sig := "sha256=0000"
		if signed {
			sig = sign(testSecret, body)
		}
		h.Set("X-Hub-Signature-256", sig)
		d, err := ParseDelivery(testSecret, h, body)
		if !signed {
			if !errors.Is(err, ErrUnauthorized) {
				t.Fatalf("unsigned delivery: %+v, %v", d, err)
			}
			return
		}
		if err != nil {
			if !errors.Is(err, core.ErrMalformed) {
				t.Fatalf("signed delivery refused with %v, want a malformed error", err)
			}
			if _, headers := parseSigned(h, nil); !UsedEvents[event] && headers == nil {
				t.Fatalf("signed delivery of %q, an event the App does not use, refused for its body: %v", event, err)
			}
			return
		}
		if d.ID != id || d.Event != event || d.ID == "" || d.Event == "" {
			t.Fatalf("delivery %+v from id %q event %q", d, id, event)
		}
		if (d.Payload != nil) != UsedEvents[event] {
			t.Fatalf("event %q (used: %v) parsed to payload %T", event, UsedEvents[event], d.Payload)
		}
	})
}

// A delivery that fits the budget once nothing else is in flight is taken: the budget admits a
// body of the largest size.
func TestBudgetAdmitsTheLargestBody(t *testing.T) {
	t.Parallel()
	for _, maxBody := range []int64{1, 4096, PageSize, PageSize + 1, DefaultMaxBodyBytes} {
		in := newLimiter(maxBody, MaxDeliveriesInFlight, InFlightBytes(maxBody))
		tk, err := in.enter()
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.reserve(pagesFor(maxBody)); err != nil {
			t.Errorf("max body %d: a body of that size does not fit the budget: %v", maxBody, err)
		}
		tk.done()
	}
	if DefaultMaxBodyBytes < 25_000_000 {
		t.Errorf("DefaultMaxBodyBytes %d is under GitHub's cap on a payload (25 MB): GitHub's largest deliveries would be refused", DefaultMaxBodyBytes)
	}
}
