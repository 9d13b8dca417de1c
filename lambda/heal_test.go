package lambda_test

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/heal"
	"github.com/latestwins/latestwins/lambda"
)

// A push GitHub failed to deliver (a cold start that failed, say) is replayed by the next
// scheduled sweep, through the App, before the sweep looks for stalled work; the sweep's answer
// reports it. A delivery the function could not handle makes the invocation fail, so that it shows
// in the error metrics, and the next sweep replays it.
func TestScheduledSweepReplaysMissedDeliveries(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(t)
	payload, err := os.ReadFile(testdata(t, "webhooks", "push.json"))
	if err != nil {
		t.Fatal(err)
	}
	hs := newHarness(t, func(o *lambda.Options) {
		inst, err := githubapp.NewInstallations(42, []byte(testKeyPEM(t)), gh.URL)
		if err != nil {
			t.Fatal(err)
		}
		o.Healer, err = heal.New(heal.Options{Log: &ghadapter.DeliveryLog{App: inst}, App: o.HTTP.(*app.App), Cursor: o.Authority,
			Secret: testSecret, Clock: o.Authority})
		if err != nil {
			t.Fatal(err)
		}
	})
	missed := gh.DeliveryLog().Add(githubtest.LoggedDelivery{GUID: "cold-start-failed", DeliveredAt: hs.clock.Now().Add(-5 * time.Minute),
		Event: "push", StatusCode: http.StatusBadGateway, Payload: json.RawMessage(payload), FetchStatus: http.StatusBadGateway})
	if _, err := sweep(t, hs.h); err == nil {
		t.Fatal("a sweep whose missed delivery GitHub would not give succeeded, want an error")
	}
	gh.DeliveryLog().SetFetchStatus(missed, 0)
	got, err := sweep(t, hs.h)
	if err != nil {
		t.Fatal(err)
	}
	if got.Deliveries == nil || len(got.Deliveries.Replayed) != 1 || got.Deliveries.Replayed[0].GUID != "cold-start-failed" ||
		got.Deliveries.Replayed[0].Outcome != app.OutcomeAccepted {
		t.Fatalf("sweep answer %+v, want the missed push replayed and accepted", got.Deliveries)
	}
	if len(hs.disp.reqs) != 1 {
		t.Fatalf("dispatched %d workflows, want the missed push's one", len(hs.disp.reqs))
	}
}
