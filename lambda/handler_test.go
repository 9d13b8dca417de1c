package lambda_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	awslambda "github.com/aws/aws-lambda-go/lambda"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
	"github.com/latestwins/latestwins/lambda"
)

// testSecret signs testdata/lambda/function-url-push.json (scripts/gen-lambda-fixtures).
var testSecret = []byte("It's a Secret to Everybody")

const pushSha = "6113728f27ae82c7b1a177c8d03f9e96e0adf246"

func testdata(t testing.TB, parts ...string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(append([]string{"..", "testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(testdata(t, "lambda", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recorder is an app.Dispatcher that records its requests.
type recorder struct {
	mu   sync.Mutex
	reqs []app.DispatchRequest
}

var _ app.Dispatcher = (*recorder)(nil)

func (r *recorder) Dispatch(_ context.Context, req app.DispatchRequest) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	return nil
}

type harness struct {
	h     *lambda.Handler
	auth  *authority.Authority
	clock *storetest.Clock
	disp  *recorder
}

// newHarness is the App (on a memory store, with the test configuration and a recording
// dispatcher) behind the Lambda adapter.
func newHarness(t testing.TB, opts ...func(*lambda.Options)) *harness {
	t.Helper()
	clock := storetest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	hs := &harness{auth: authority.New(memory.New(), authority.WithClock(clock)), clock: clock, disp: &recorder{}}
	a, err := app.New(app.Options{Secret: testSecret, Authority: hs.auth, Dispatcher: hs.disp,
		Config: &app.FileConfig{Path: testdata(t, "lambda", "latestwins.yml")}})
	if err != nil {
		t.Fatal(err)
	}
	o := lambda.Options{HTTP: a, Authority: hs.auth}
	for _, f := range opts {
		f(&o)
	}
	if hs.h, err = lambda.New(o); err != nil {
		t.Fatal(err)
	}
	return hs
}

// invoke calls the handler the way the Lambda runtime does, with a raw payload.
func invoke(ctx context.Context, h *lambda.Handler, payload []byte) ([]byte, error) {
	return awslambda.NewHandler(h.Handle).Invoke(ctx, payload)
}

func invokeHTTP(t testing.TB, h *lambda.Handler, payload []byte) events.APIGatewayV2HTTPResponse {
	t.Helper()
	out, err := invoke(context.Background(), h, payload)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	var res events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("response %s: %v", out, err)
	}
	return res
}

// withEvent returns the fixture with its decoded event changed by edit.
func withEvent(t testing.TB, name string, edit func(ev *events.APIGatewayV2HTTPRequest)) []byte {
	t.Helper()
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(fixture(t, name), &ev); err != nil {
		t.Fatal(err)
	}
	edit(&ev)
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func decodedBody(t testing.TB, ev *events.APIGatewayV2HTTPRequest) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(ev.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFixtureCarriesThePushPayload(t *testing.T) {
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(fixture(t, "function-url-push.json"), &ev); err != nil {
		t.Fatal(err)
	}
	push, err := os.ReadFile(testdata(t, "webhooks", "push.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !ev.IsBase64Encoded || string(decodedBody(t, &ev)) != string(push) {
		t.Fatal("testdata/lambda/function-url-push.json does not carry testdata/webhooks/push.json base64-encoded: run scripts/gen-lambda-fixtures")
	}
	for k := range ev.Headers {
		if k != strings.ToLower(k) {
			t.Errorf("header %q: Function URLs deliver header names lowercase", k)
		}
	}
}

func TestFunctionURLWebhook(t *testing.T) {
	t.Parallel()
	wantAccepted := app.Result{Delivery: "72d3162e-cc78-11e3-81ab-4c9367dc0958", Event: "push", Outcome: app.OutcomeAccepted,
		Intents: []app.IntentInfo{{Environment: "staging", Generation: 1, Accepted: []string{"api"}}},
		Dispatched: []app.DispatchRequest{{Installation: 1, Repo: app.RepoRef{Owner: "Codertocat", Name: "Hello-World"},
			Workflow: "deploy.yml", Ref: "master", Inputs: map[string]string{"environment": "staging", "generation": "1", "scopes": "api"}}}}
	tests := []struct {
		name       string
		payload    func(t testing.TB) []byte
		wantStatus int
		want       *app.Result // nil: an error body
		wantError  string
	}{
		{name: "base64 body, as Function URLs send it", payload: func(t testing.TB) []byte { return fixture(t, "function-url-push.json") },
			wantStatus: http.StatusOK, want: &wantAccepted},
		{name: "plain body", wantStatus: http.StatusOK, want: &wantAccepted,
			payload: func(t testing.TB) []byte {
				return withEvent(t, "function-url-push.json", func(ev *events.APIGatewayV2HTTPRequest) {
					ev.Body, ev.IsBase64Encoded = string(decodedBody(t, ev)), false
				})
			}},
		{name: "tampered body", wantStatus: http.StatusUnauthorized, wantError: "does not match the body",
			payload: func(t testing.TB) []byte {
				return withEvent(t, "function-url-push.json", func(ev *events.APIGatewayV2HTTPRequest) {
					b := decodedBody(t, ev)
					ev.Body = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(b), "master", "main", 1)))
				})
			}},
		{name: "no signature", wantStatus: http.StatusUnauthorized, wantError: "no X-Hub-Signature-256 header",
			payload: func(t testing.TB) []byte {
				return withEvent(t, "function-url-push.json", func(ev *events.APIGatewayV2HTTPRequest) {
					delete(ev.Headers, "x-hub-signature-256")
				})
			}},
		{name: "body flagged base64 but not", wantStatus: http.StatusBadRequest, wantError: "the event says its body is base64 but it is not",
			payload: func(t testing.TB) []byte {
				return withEvent(t, "function-url-push.json", func(ev *events.APIGatewayV2HTTPRequest) {
					ev.Body = "{not base64}"
				})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hs := newHarness(t)
			res := invokeHTTP(t, hs.h, tt.payload(t))
			if res.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", res.StatusCode, tt.wantStatus, res.Body)
			}
			if res.IsBase64Encoded {
				t.Fatalf("a JSON answer came back base64-encoded: %s", res.Body)
			}
			if got := res.Headers["Content-Type"]; got != "application/json" {
				t.Errorf("Content-Type %q, want application/json", got)
			}
			if tt.want == nil {
				var e struct{ Error string }
				if err := json.Unmarshal([]byte(res.Body), &e); err != nil || !strings.Contains(e.Error, tt.wantError) {
					t.Fatalf("body %s: want an error saying %q", res.Body, tt.wantError)
				}
				if env, err := hs.auth.Status(context.Background(), "staging"); err == nil && env.Desired != 0 {
					t.Fatalf("a refused delivery changed the store: desired %d", env.Desired)
				}
				return
			}
			var got app.Result
			if err := json.Unmarshal([]byte(res.Body), &got); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(*tt.want, got); d != "" {
				t.Fatalf("result (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.want.Dispatched, hs.disp.reqs); d != "" {
				t.Fatalf("dispatches (-want +got):\n%s", d)
			}
			env, err := hs.auth.Status(context.Background(), "staging")
			if err != nil {
				t.Fatal(err)
			}
			if m := env.Scopes["api"].Mailbox; m == nil || m.Sha != pushSha || m.Generation != 1 {
				t.Fatalf("mailbox of staging/api is %+v, want %s at generation 1", m, pushSha)
			}
		})
	}
}

func TestRedeliveryThroughFunctionURLIsIdempotent(t *testing.T) {
	t.Parallel()
	hs := newHarness(t)
	payload := fixture(t, "function-url-push.json")
	first := invokeHTTP(t, hs.h, payload)
	second := invokeHTTP(t, hs.h, payload)
	var got app.Result
	if err := json.Unmarshal([]byte(second.Body), &got); err != nil {
		t.Fatal(err)
	}
	if first.StatusCode != http.StatusOK || second.StatusCode != http.StatusOK || got.Outcome != app.OutcomeDuplicate {
		t.Fatalf("first %d, second %d %s: want 200 and a duplicate", first.StatusCode, second.StatusCode, second.Body)
	}
	if len(hs.disp.reqs) != 1 {
		t.Fatalf("%d dispatches, want the first delivery's one", len(hs.disp.reqs))
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	res := invokeHTTP(t, newHarness(t).h, fixture(t, "function-url-healthz.json"))
	want := events.APIGatewayV2HTTPResponse{StatusCode: http.StatusOK, Headers: map[string]string{"Content-Type": "text/plain; charset=utf-8"}, Body: "ok\n"}
	if d := cmp.Diff(want, res); d != "" {
		t.Fatalf("response (-want +got):\n%s", d)
	}
}

// echo answers with what the request carried, to check the translation both ways.
type echo struct{ got *http.Request }

func (e *echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.got = r
	w.Header().Add("Set-Cookie", "a=1")
	w.Header().Add("Set-Cookie", "b=2")
	w.Header().Add("Vary", "Accept")
	w.Header().Add("Vary", "Cookie")
	w.WriteHeader(http.StatusTeapot)
	_, _ = w.Write([]byte{0xff, 0x00, 0xfe})
}

func TestRequestAndResponseTranslation(t *testing.T) {
	t.Parallel()
	e := &echo{}
	h, err := lambda.New(lambda.Options{HTTP: e, Authority: authority.New(memory.New())})
	if err != nil {
		t.Fatal(err)
	}
	payload := withEvent(t, "function-url-healthz.json", func(ev *events.APIGatewayV2HTTPRequest) {
		ev.RawPath, ev.RawQueryString = "/a%2Fb/c", "x=1&y=two"
		ev.Cookies = []string{"s=1", "t=2"}
		ev.Headers["x-github-event"] = "push"
	})
	res := invokeHTTP(t, h, payload)
	want := events.APIGatewayV2HTTPResponse{StatusCode: http.StatusTeapot, Headers: map[string]string{"Vary": "Accept, Cookie"},
		Cookies: []string{"a=1", "b=2"}, Body: base64.StdEncoding.EncodeToString([]byte{0xff, 0x00, 0xfe}), IsBase64Encoded: true}
	if d := cmp.Diff(want, res); d != "" {
		t.Errorf("response (-want +got):\n%s", d)
	}
	r := e.got
	type seen struct{ Method, Path, EscapedPath, Query, Host, RemoteAddr, Event, Cookie, UserAgent string }
	got := seen{r.Method, r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery, r.Host, r.RemoteAddr,
		r.Header.Get("X-GitHub-Event"), r.Header.Get("Cookie"), r.UserAgent()}
	wantSeen := seen{"GET", "/a/b/c", "/a%2Fb/c", "x=1&y=two", "abcdefghijklmnopqrstuvwxyz012345.lambda-url.us-east-1.on.aws",
		"140.82.115.1", "push", "s=1; t=2", "curl/8.5.0"}
	if d := cmp.Diff(wantSeen, got); d != "" {
		t.Errorf("request (-want +got):\n%s", d)
	}
}

// deadlineProbe records the deadline of the request it gets.
type deadlineProbe struct {
	deadline time.Time
	ok       bool
}

func (p *deadlineProbe) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.deadline, p.ok = r.Context().Deadline()
	w.WriteHeader(http.StatusNoContent)
}

func TestWorkStopsBeforeTheInvocationDeadline(t *testing.T) {
	t.Parallel()
	p := &deadlineProbe{}
	h, err := lambda.New(lambda.Options{HTTP: p, Authority: authority.New(memory.New()), Reserve: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	if _, err := invoke(ctx, h, fixture(t, "function-url-healthz.json")); err != nil {
		t.Fatal(err)
	}
	if want := deadline.Add(-300 * time.Millisecond); !p.ok || !p.deadline.Equal(want) {
		t.Fatalf("the App's deadline is %v (set %v), want the invocation's less the reserve, %v", p.deadline, p.ok, want)
	}
}

func TestUnsupportedEvent(t *testing.T) {
	t.Parallel()
	h := newHarness(t).h
	for _, payload := range []string{`{"Records":[{"eventSource":"aws:sqs"}]}`, `"hello"`} {
		_, err := h.Handle(context.Background(), json.RawMessage(payload))
		if !errors.Is(err, lambda.ErrUnsupportedEvent) {
			t.Errorf("payload %s: error %v, want ErrUnsupportedEvent", payload, err)
		}
		if _, err := invoke(context.Background(), h, []byte(payload)); err == nil || !strings.Contains(err.Error(), "unsupported Lambda event") {
			t.Errorf("payload %s through the runtime's handler: error %v, want one saying the event is unsupported", payload, err)
		}
	}
}
