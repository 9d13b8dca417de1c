package app

import (
	"strings"
	"testing"
)

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
