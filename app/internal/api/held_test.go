package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
)

// A gate's lasting hold crosses the API whole: the 409 body carries the reason, what the commit
// waits for and when the hold ends, and the client turns it back into the same refusal, so that a
// pass through the App ends held exactly when one on a store would.
func TestLastingHoldCrossesTheAPI(t *testing.T) {
	opens := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
	held := &authority.HeldError{Reason: authority.ReasonWindow, Resource: "prod/api", Generation: 3, HeadSha: "cccc333000000000000000000000000000000000",
		RetryAfter: 2 * time.Hour, Until: opens, Window: &authority.WindowWait{Opens: opens, Timezone: "Europe/Berlin"}}
	status, body := apiError(held)
	if status != http.StatusConflict || body.Wait != authority.ReasonWindow || body.Window == nil || !body.Until.Equal(opens) {
		t.Fatalf("the API's answer: %d %+v; want 409 with the window and when it opens", status, body)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	defer srv.Close()
	c, err := apiclient.New(srv.URL, apiclient.StaticToken("t"), srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Gate(t.Context(), authority.GateRequest{Environment: "prod", Generation: 3, Scopes: []string{"api"}, Phase: "deploy", Holder: "h", LeaseTTL: time.Minute})
	var got *authority.HeldError
	if !errors.As(err, &got) {
		t.Fatalf("the client's gate: %v; want the hold", err)
	}
	if diff := cmp.Diff(held.Window, got.Window); diff != "" || got.Why() != authority.ReasonWindow || !got.Until.Equal(opens) {
		t.Fatalf("the client read %+v (window diff %s); want the same hold", got, diff)
	}
	if !got.Outlasts(opens.Add(-time.Minute)) || got.Outlasts(opens.Add(time.Minute)) {
		t.Fatalf("a hold that ends at %s outlasts a wait until a minute before, and not one until a minute after", opens)
	}
	if authority.WaitText(got) != authority.WaitText(held) {
		t.Fatalf("the client words it %q, the App %q", authority.WaitText(got), authority.WaitText(held))
	}
}
