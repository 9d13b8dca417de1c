package githubapp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/githubapp"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// The delivery log is read as the App, page by page through the Link header's cursor, newest
// first; an attempt's request gives the headers and the payload GitHub sent.
func TestHookDeliveries(t *testing.T) {
	t.Parallel()
	_, keyPEM := appKey(t)
	gh := githubtest.New(t)
	log := gh.DeliveryLog()
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	var want []githubapp.HookDelivery
	for i := range 5 {
		d := log.Add(githubtest.LoggedDelivery{GUID: fmt.Sprintf("guid-%d", i), DeliveredAt: at.Add(time.Duration(i) * time.Minute),
			Event: "push", StatusCode: 502, Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
		want = append([]githubapp.HookDelivery{{ID: d.ID, GUID: d.GUID, DeliveredAt: d.DeliveredAt, Status: d.Status, StatusCode: 502, Event: "push"}}, want...)
	}
	inst, err := githubapp.NewInstallations(42, keyPEM, gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []githubapp.HookDelivery
	cursor, pages := "", 0
	for {
		page, next, err := inst.HookDeliveries(ctx, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		got, pages = append(got, page...), pages+1
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" || pages != 3 {
		t.Errorf("%d pages of deliveries (-want +got):\n%s", pages, diff)
	}
	req, err := inst.HookDeliveryRequest(ctx, want[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("X-GitHub-Delivery") != "guid-4" || req.Header.Get("X-GitHub-Event") != "push" || string(req.Payload) != `{"n":4}` {
		t.Errorf("request = %v %s", req.Header, req.Payload)
	}
}

// An attempt GitHub no longer keeps is ErrNotFound.
func TestHookDeliveryGone(t *testing.T) {
	t.Parallel()
	_, keyPEM := appKey(t)
	gh := githubtest.New(t)
	d := gh.DeliveryLog().Add(githubtest.LoggedDelivery{GUID: "g", DeliveredAt: time.Now(), Event: "push", FetchStatus: http.StatusNotFound})
	inst, err := githubapp.NewInstallations(42, keyPEM, gh.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := inst.HookDeliveries(context.Background(), "", 100); err != nil {
		t.Fatal(err)
	}
	if _, err := inst.HookDeliveryRequest(context.Background(), d.ID); !errors.Is(err, githubapp.ErrNotFound) {
		t.Fatalf("HookDeliveryRequest of a gone attempt: %v, want ErrNotFound", err)
	}
}
