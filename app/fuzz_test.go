package app

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/app/internal/core"
)

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
			if _, headers := parseSigned(h, nil); !usedEvents[event] && headers == nil {
				t.Fatalf("signed delivery of %q, an event the App does not use, refused for its body: %v", event, err)
			}
			return
		}
		if d.ID != id || d.Event != event || d.ID == "" || d.Event == "" {
			t.Fatalf("delivery %+v from id %q event %q", d, id, event)
		}
		if (d.Payload != nil) != usedEvents[event] {
			t.Fatalf("event %q (used: %v) parsed to payload %T", event, usedEvents[event], d.Payload)
		}
	})
}

// FuzzStreamingIntake holds the streaming intake to ParseDelivery over the whole body: the same
// answer however the body arrives, and every share of the intake given back.
func FuzzStreamingIntake(f *testing.F) {
	f.Add("push", []byte(`{"ref":"refs/heads/master","after":"abc","repository":{"full_name":"Codertocat/Hello-World"}}`), true, uint8(0))
	f.Add("push", []byte(`null`), true, uint8(1))
	f.Add("discussion", []byte(`{"action":"answered"}`), true, uint8(2))
	f.Add("ping", []byte(`{}`), false, uint8(3))
	f.Add("installation", []byte(`{"action":"created","installation":{"id":1}}`), true, uint8(2))
	f.Add("check_run", []byte(`{"action":"rerequested"`), true, uint8(1))
	whole, streamed := newHarness(f, testConfig), newHarness(f, testConfig)
	n := 0
	f.Fuzz(func(t *testing.T, event string, body []byte, signed bool, mode uint8) {
		n++
		id := "fuzz-" + string(rune('a'+n%26)) + "-" + event
		sig := "sha256=" + strings.Repeat("0", 64)
		if signed {
			sig = sign(testSecret, body)
		}
		rd := readings[int(mode)%len(readings)]
		want := whole.app.serveWhole(newDelivery(event, id, body, sig))
		got := streamed.do(rd.request(event, id, body, sig))
		if got.Code != want.Code {
			t.Fatalf("%s, read %s: streamed %d %s, whole body %d %s", event, rd.name, got.Code, got.Body, want.Code, want.Body)
		}
		checkIntakeIdle(t, streamed.app)
	})
}
