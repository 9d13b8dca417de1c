package app

import (
	"errors"
	"net/http"
	"testing"
)

func FuzzParseDelivery(f *testing.F) {
	f.Add("push", "id-1", []byte(`{"ref":"refs/heads/main","after":"abc"}`), true)
	f.Add("pull_request", "id-2", []byte(`{"action":"opened","number":1}`), true)
	f.Add("push", "id-3", []byte(`{"ref":`), true)
	f.Add("ping", "", []byte(`{}`), false)
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
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("signed delivery refused with %v, want a malformed error", err)
			}
			return
		}
		if d.ID != id || d.Event != event || d.ID == "" || d.Event == "" {
			t.Fatalf("delivery %+v from id %q event %q", d, id, event)
		}
	})
}
