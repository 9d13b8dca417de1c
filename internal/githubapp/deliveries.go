package githubapp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-github/v60/github"
)

// MaxDeliveriesPerPage is the most deliveries GitHub lists on one page of the App's delivery log.
const MaxDeliveriesPerPage = 100

// HookDelivery is one attempt in the App's webhook delivery log: GitHub lists every attempt,
// redeliveries included, each with an id of its own and the guid of the delivery (the
// X-GitHub-Delivery the attempt carried).
type HookDelivery struct {
	ID          int64
	GUID        string
	DeliveredAt time.Time
	Redelivery  bool
	// Status and StatusCode are what the App answered: "OK" and 200, or why the attempt failed
	// ("failed to connect", a status of 400 and above, 0 when there was no answer).
	Status     string
	StatusCode int
	Event      string
	Action     string
}

// HookRequest is what GitHub sent in one attempt: its headers and its JSON payload.
type HookRequest struct {
	Header  http.Header
	Payload json.RawMessage
}

// HookDeliveries lists one page of the App's webhook delivery log, newest first, as the App (its
// JWT). cursor is "" for the newest page, or the one the previous page returned; next is "" after
// the last page.
func (i *Installations) HookDeliveries(ctx context.Context, cursor string, perPage int) (page []HookDelivery, next string, err error) {
	perPage = min(max(perPage, 1), MaxDeliveriesPerPage)
	ds, resp, err := i.app.gh.Apps.ListHookDeliveries(ctx, &github.ListCursorOptions{Cursor: cursor, PerPage: perPage})
	if err != nil {
		return nil, "", i.app.wrap("list the App's webhook deliveries (GET /app/hook/deliveries)", err)
	}
	page = make([]HookDelivery, 0, len(ds))
	for _, d := range ds {
		page = append(page, HookDelivery{ID: d.GetID(), GUID: d.GetGUID(), DeliveredAt: d.GetDeliveredAt().Time.UTC(),
			Redelivery: d.GetRedelivery(), Status: d.GetStatus(), StatusCode: d.GetStatusCode(), Event: d.GetEvent(), Action: d.GetAction()})
	}
	return page, resp.Cursor, nil
}

// HookDeliveryRequest reads what GitHub sent in the attempt id of the App's delivery log, as the
// App. GitHub keeps the log for three days; an older attempt is an error matching ErrNotFound.
func (i *Installations) HookDeliveryRequest(ctx context.Context, id int64) (HookRequest, error) {
	op := fmt.Sprintf("read the App's webhook delivery %d (GET /app/hook/deliveries/%d)", id, id)
	d, resp, err := i.app.gh.Apps.GetHookDelivery(ctx, id)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return HookRequest{}, fmt.Errorf("%s: %w (GitHub keeps its delivery log for three days): %w", op, ErrNotFound, err)
		}
		return HookRequest{}, i.app.wrap(op, err)
	}
	req := d.GetRequest()
	if req == nil || req.RawPayload == nil {
		return HookRequest{}, fmt.Errorf("%s: GitHub answered no request payload", op)
	}
	h := http.Header{}
	for k, v := range req.Headers {
		h.Set(k, v)
	}
	return HookRequest{Header: h, Payload: *req.RawPayload}, nil
}
