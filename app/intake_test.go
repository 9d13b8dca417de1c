package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-github/v60/github"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/intake"
)

// limit gives the App's webhook door other bounds of what is in flight.
func (a *App) limit(deliveries int, bytes int64) {
	o := a.hook
	o.Deliveries, o.Bytes = deliveries, bytes
	a.webhook = intake.New(a.core, o)
}

// writeJSON and writeError answer as the webhook door does.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// checkIntakeIdle fails the test unless every delivery gave its share of the intake back.
func checkIntakeIdle(t *testing.T, a *App) {
	t.Helper()
	if inFlight, reserved := a.webhook.InFlight(); inFlight != 0 || reserved != 0 {
		t.Errorf("intake after every delivery ended: %d in flight, %d pages reserved; want none", inFlight, reserved)
	}
}

// GitHub's examples of events the App does not use that go-github cannot parse are acknowledged
// (202), unread: they used to be refused 400.
func TestUnusedEventsAreAcknowledgedUnread(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("..", "testdata", "webhooks", "unused", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/webhooks/unused (%v): run scripts/gen-webhook-fixtures", err)
	}
	for _, f := range files {
		name := "unused/" + filepath.Base(f)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			body := fixture(t, name)
			event := eventOf(filepath.Base(f))
			if _, err := github.ParseWebHook(event, body); err == nil {
				t.Fatalf("go-github parses %s now: the fixture no longer shows an unparsable example", name)
			}
			h := newHarness(t, testConfig)
			rec := h.post(t, event, "d-"+name, body)
			res := decodeResult(t, rec)
			if rec.Code != http.StatusAccepted || res.Outcome != core.OutcomeIgnored || !strings.Contains(res.Message, "not used by latestwins") {
				t.Errorf("%s: %d %s, want 202 ignored", name, rec.Code, rec.Body)
			}
			checkIntakeIdle(t, h.app)
		})
	}
	t.Run("not JSON", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, testConfig)
		for i, body := range []string{"", "null", "not json", "[1,2"} {
			if rec := h.post(t, "discussion", fmt.Sprint("d", i), []byte(body)); rec.Code != http.StatusAccepted {
				t.Errorf("discussion %q: %d %s, want 202", body, rec.Code, rec.Body)
			}
		}
		checkIntakeIdle(t, h.app)
	})
}

// A signed delivery of an event the App uses must carry a JSON object: `null` and the like are
// malformed (400), never "not used" (they used to be answered 202).
func TestUsedEventsNeedAnObject(t *testing.T) {
	t.Parallel()
	events := slices.Sorted(func(yield func(string) bool) {
		for e := range intake.UsedEvents {
			if !yield(e) {
				return
			}
		}
	})
	for _, event := range events {
		t.Run(event, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, testConfig)
			for _, body := range []string{"null", " \n null ", "[]", `"push"`, "1", "", "   ", "{", `{"ref":"refs/heads/master"} {}`} {
				rec := h.post(t, event, "d1", []byte(body))
				if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), event+" payload") {
					t.Errorf("%s %q: %d %s, want 400 naming the %s payload", event, body, rec.Code, rec.Body, event)
				}
			}
			form := []byte("payload=null")
			r := newDelivery(event, "d2", form, sign(testSecret, form))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if rec := h.do(r); rec.Code != http.StatusBadRequest {
				t.Errorf("%s form payload=null: %d %s, want 400", event, rec.Code, rec.Body)
			}
			checkIntakeIdle(t, h.app)
		})
	}
}

// intake.UsedEvents is exactly the set of events Handle acts on: every other event go-github knows falls
// to Handle's "not used" branch, and none of intake.UsedEvents does.
func TestUsedEventsAreThoseHandled(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	events := append(github.MessageTypes(), core.EventProtectionRule)
	for event := range intake.UsedEvents {
		if !slices.Contains(events, event) {
			t.Errorf("used event %q is neither go-github's nor the protection rule's", event)
		}
	}
	for _, event := range events {
		payload, err := intake.ParseEvent(event, []byte("{}"))
		if err != nil {
			t.Fatalf("parse %s {}: %v", event, err)
		}
		res, err := h.app.Handle(context.Background(), core.Delivery{ID: "d-" + event, Event: event, Payload: payload})
		notUsed := err == nil && res.Outcome == core.OutcomeIgnored && strings.Contains(res.Message, "is not used by latestwins")
		if notUsed == intake.UsedEvents[event] {
			t.Errorf("event %s: in intake.UsedEvents %v, but Handle answered %+v, %v", event, intake.UsedEvents[event], res, err)
		}
	}
}

// reading is how a test request's body reaches the App.
type reading struct {
	name     string
	chunked  bool // no Content-Length
	readerOf func(io.Reader) io.Reader
}

var readings = []reading{
	{"whole", false, func(r io.Reader) io.Reader { return r }},
	{"one byte at a time", false, iotest.OneByteReader},
	{"chunked, half reads", true, iotest.HalfReader},
	{"chunked, data with EOF", true, iotest.DataErrReader},
}

// request is a delivery whose body is read as rd says.
func (rd reading) request(event, id string, body []byte, signature string) *http.Request {
	r := newDelivery(event, id, nil, signature)
	r.Body = io.NopCloser(rd.readerOf(strings.NewReader(string(body))))
	r.ContentLength = int64(len(body))
	if rd.chunked {
		r.ContentLength = -1
	}
	return r
}

// The streaming intake answers every delivery as ParseDelivery judges its whole body, however the
// body arrives: with or without a Content-Length, in any pieces.
func TestStreamingMatchesWholeBody(t *testing.T) {
	t.Parallel()
	type delivery struct {
		name, event string
		body        []byte
		signature   func([]byte) string
	}
	signed := func(b []byte) string { return sign(testSecret, b) }
	var cases []delivery
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "webhooks", "*.json"))
	unused, _ := filepath.Glob(filepath.Join("..", "testdata", "webhooks", "unused", "*.json"))
	for _, f := range append(files, unused...) {
		rel, _ := filepath.Rel(filepath.Join("..", "testdata", "webhooks"), f)
		cases = append(cases, delivery{rel, eventOf(filepath.Base(f)), fixture(t, rel), signed})
	}
	push := fixture(t, "push.json")
	cases = append(cases,
		delivery{"badly signed push", "push", push, func(b []byte) string { return sign([]byte("other"), b) }},
		delivery{"push signed for one byte less", "push", push, func(b []byte) string { return sign(testSecret, b[:len(b)-1]) }},
		delivery{"badly signed ping", "ping", []byte(`{"zen":"x"}`), func(b []byte) string { return sign([]byte("other"), b) }},
		delivery{"null push", "push", []byte("null"), signed},
		delivery{"empty push", "push", nil, signed},
		delivery{"short hex", "push", push, func([]byte) string { return "sha256=abcd" }},
	)
	for _, rd := range readings {
		t.Run(rd.name, func(t *testing.T) {
			t.Parallel()
			whole, streamed := newHarness(t, testConfig), newHarness(t, testConfig)
			for _, c := range cases {
				sig := c.signature(c.body)
				want := whole.app.serveWhole(newDelivery(c.event, "d-"+c.name, c.body, sig))
				got := streamed.do(rd.request(c.event, "d-"+c.name, c.body, sig))
				if got.Code != want.Code || got.Body.String() != want.Body.String() {
					t.Errorf("%s: streamed %d %s, whole body %d %s", c.name, got.Code, got.Body, want.Code, want.Body)
				}
			}
			checkIntakeIdle(t, streamed.app)
		})
	}
}

// serveWhole answers a delivery by reading its whole body and calling ParseDelivery, as the App did
// before its intake streamed: the reference the streaming intake is held to.
func (a *App) serveWhole(r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		panic(err)
	}
	d, err := intake.ParseDelivery(a.hook.Secret, r.Header, body)
	if err != nil {
		status := http.StatusBadRequest
		if strings.HasPrefix(err.Error(), "webhook signature rejected") {
			status = http.StatusUnauthorized
		}
		writeError(w, status, err.Error())
		return w
	}
	if d.Payload == nil {
		writeJSON(w, http.StatusAccepted, core.Result{Delivery: d.ID, Event: d.Event, Outcome: core.OutcomeIgnored,
			Message: fmt.Sprintf("event %q is not used by latestwins", d.Event)})
		return w
	}
	res, err := a.Handle(r.Context(), d)
	if err != nil {
		writeError(w, core.StatusFor(err), err.Error())
		return w
	}
	writeJSON(w, res.Status, res)
	return w
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// What can be refused before the body is read is refused unread: no signature, a malformed
// signature, a declared body over the cap.
func TestRefusedUnread(t *testing.T) {
	t.Parallel()
	body := fixture(t, "push.json")
	tests := []struct {
		name      string
		signature string
		declared  int64
		status    int
		contains  string
	}{
		{"no signature", "", int64(len(body)), http.StatusUnauthorized, "no X-Hub-Signature-256 header"},
		{"sha1 in the sha256 header", "sha1=0123456789abcdef0123456789abcdef01234567", int64(len(body)), http.StatusUnauthorized, "must be sha256=HEX"},
		{"signature not hex", "sha256=zz", int64(len(body)), http.StatusUnauthorized, "does not match the body"},
		{"signature too short", "sha256=abcd", int64(len(body)), http.StatusUnauthorized, "does not match the body"},
		{"declared over the cap", sign(testSecret, body), 4097, http.StatusRequestEntityTooLarge, "body over 4096 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, testConfig, func(o *Options) { o.MaxBodyBytes = 4096 })
			cr := &countingReader{r: strings.NewReader(string(body))}
			r := newDelivery("push", "d1", nil, tt.signature)
			r.Body, r.ContentLength = io.NopCloser(cr), tt.declared
			rec := h.do(r)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.contains) {
				t.Errorf("got %d %s, want %d containing %q", rec.Code, rec.Body, tt.status, tt.contains)
			}
			if cr.n != 0 {
				t.Errorf("%d bytes of the body were read before it was refused", cr.n)
			}
			checkIntakeIdle(t, h.app)
		})
	}
}

// Bodies that do not keep to their length or the cap are refused once read that far.
func TestBodyLengths(t *testing.T) {
	t.Parallel()
	body := fixture(t, "push.json") // 8.8 KB
	tests := []struct {
		name     string
		declared int64 // -1: chunked
		body     []byte
		status   int
		contains string
	}{
		{"chunked over the cap", -1, body, http.StatusRequestEntityTooLarge, "body over 4096 bytes"},
		{"unused event chunked over the cap", -1, body, http.StatusRequestEntityTooLarge, "body over 4096 bytes"},
		{"longer than declared", 10, body[:20], http.StatusBadRequest, "longer than its Content-Length"},
		{"shorter than declared", 100, body[:50], http.StatusBadRequest, "ended after 50 of its 100 bytes"},
		{"exactly the cap, chunked", -1, body[:4096], http.StatusUnauthorized, "does not match the body"},
		{"exactly the cap", 4096, body[:4096], http.StatusUnauthorized, "does not match the body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, testConfig, func(o *Options) { o.MaxBodyBytes = 4096 })
			event := "push"
			if strings.HasPrefix(tt.name, "unused") {
				event = "ping"
			}
			r := newDelivery(event, "d1", nil, sign(testSecret, body))
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader(string(tt.body))), tt.declared
			rec := h.do(r)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.contains) {
				t.Errorf("got %d %s, want %d containing %q", rec.Code, rec.Body, tt.status, tt.contains)
			}
			checkIntakeIdle(t, h.app)
		})
	}
}

// heldDelivery is a delivery whose handler is reading a body the test has not finished writing.
type heldDelivery struct {
	body *io.PipeWriter
	done chan *httptest.ResponseRecorder
}

// hold starts a delivery of event with a body of declared bytes (-1: chunked) and writes first
// into it; it returns once the handler has read that, and so holds its share of the intake.
func hold(t *testing.T, h *harness, event, id string, declared int64, first []byte) *heldDelivery {
	t.Helper()
	pr, pw := io.Pipe()
	r := newDelivery(event, id, nil, "sha256="+strings.Repeat("0", 64))
	r.Body, r.ContentLength = pr, declared
	d := &heldDelivery{body: pw, done: make(chan *httptest.ResponseRecorder, 1)}
	go func() { d.done <- h.do(r) }()
	wrote := make(chan error, 1)
	go func() {
		_, err := pw.Write(first) // returns once the handler has read it all
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("writing the held body: %v", err)
		}
	case rec := <-d.done:
		_ = pr.Close()
		t.Fatalf("the delivery to hold was answered %d %s before reading its body", rec.Code, rec.Body)
	}
	return d
}

// finish writes the rest of the body, closes it and returns the answer.
func (d *heldDelivery) finish(t *testing.T, rest []byte) *httptest.ResponseRecorder {
	t.Helper()
	if _, err := d.body.Write(rest); err != nil {
		t.Fatalf("writing the rest of the held body: %v", err)
	}
	_ = d.body.Close()
	return <-d.done
}

func checkBusy(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "5" || !strings.Contains(rec.Body.String(), "too many webhook deliveries in flight") {
		t.Errorf("%s: %d (Retry-After %q) %s, want 503 with Retry-After 5", what, rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}

// Beyond MaxDeliveriesInFlight deliveries at once, the next is refused 503 with Retry-After
// before its body is read; once one ends, deliveries are taken again.
func TestIntakeCapsDeliveriesInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig)
	h.app.limit(2, intake.InFlightBytes(intake.DefaultMaxBodyBytes))
	first := hold(t, h, "push", "held-1", -1, []byte("{"))
	second := hold(t, h, "ping", "held-2", 1000, []byte("{"))
	cr := &countingReader{r: strings.NewReader("{}")}
	r := newDelivery("ping", "d3", nil, sign(testSecret, []byte("{}")))
	r.Body = io.NopCloser(cr)
	checkBusy(t, "a third delivery", h.do(r))
	if cr.n != 0 {
		t.Errorf("the refused delivery's body was read (%d bytes)", cr.n)
	}
	if rec := first.finish(t, []byte("}")); rec.Code != http.StatusUnauthorized {
		t.Errorf("the first held delivery: %d %s, want 401 (signature of zeros)", rec.Code, rec.Body)
	}
	if rec := h.post(t, "ping", "d4", []byte("{}")); rec.Code != http.StatusAccepted {
		t.Errorf("a delivery once one ended: %d %s, want 202", rec.Code, rec.Body)
	}
	if rec := second.finish(t, []byte(strings.Repeat(" ", 998)+"}")); rec.Code != http.StatusUnauthorized {
		t.Errorf("the second held delivery: %d %s, want 401", rec.Code, rec.Body)
	}
	checkIntakeIdle(t, h.app)
}

// The bodies kept in flight are capped: a declared body is reserved whole before it is read, a
// chunked one page by page; what does not fit is refused 503 with Retry-After.
func TestIntakeCapsBytesInFlight(t *testing.T) {
	t.Parallel()
	const maxBody = 2 * intake.PageSize
	small := []byte(`{"zen":"x"}`)
	t.Run("declared", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, testConfig, func(o *Options) { o.MaxBodyBytes = maxBody })
		h.app.limit(8, maxBody)
		held := hold(t, h, "push", "held", maxBody, []byte("{"))
		checkBusy(t, "a used event with every page reserved", h.post(t, "push", "d2", small))
		checkBusy(t, "an unused event with every page reserved", h.post(t, "ping", "d3", small))
		if rec := held.finish(t, make([]byte, maxBody-1)); rec.Code != http.StatusUnauthorized {
			t.Errorf("the held delivery: %d %s, want 401", rec.Code, rec.Body)
		}
		if rec := h.post(t, "ping", "d4", small); rec.Code != http.StatusAccepted {
			t.Errorf("once the held delivery ended: %d %s, want 202", rec.Code, rec.Body)
		}
		checkIntakeIdle(t, h.app)
	})
	t.Run("chunked grows into the budget", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, testConfig, func(o *Options) { o.MaxBodyBytes = maxBody })
		h.app.limit(8, maxBody)
		held := hold(t, h, "push", "held", intake.PageSize, []byte("{")) // one page reserved
		pr, pw := io.Pipe()
		r := newDelivery("push", "chunked", nil, "sha256="+strings.Repeat("0", 64))
		r.Body, r.ContentLength = pr, -1
		done := make(chan *httptest.ResponseRecorder, 1)
		go func() { done <- h.do(r) }()
		go func() {
			// The second page it needs does not fit: the handler stops reading, and the write ends
			// when the test closes the pipe.
			_, _ = pw.Write(make([]byte, intake.PageSize+1))
			_ = pw.Close()
		}()
		checkBusy(t, "a chunked body past the budget", <-done)
		_ = pr.Close()
		if rec := held.finish(t, make([]byte, intake.PageSize-1)); rec.Code != http.StatusUnauthorized {
			t.Errorf("the held delivery: %d %s, want 401", rec.Code, rec.Body)
		}
		checkIntakeIdle(t, h.app)
	})
}
