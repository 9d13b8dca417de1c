package ghadapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/latestwins/latestwins/internal/appport"
	"github.com/latestwins/latestwins/internal/githubapp"
)

// AppDeliveries reads the App's webhook delivery log as the App; *githubapp.Installations is one.
type AppDeliveries interface {
	HookDeliveries(ctx context.Context, cursor string, perPage int) ([]githubapp.HookDelivery, string, error)
	HookDeliveryRequest(ctx context.Context, id int64) (githubapp.HookRequest, error)
}

var _ AppDeliveries = (*githubapp.Installations)(nil)

// DeliveryLog is the App's webhook delivery log, read page by page (the most GitHub gives at once).
type DeliveryLog struct {
	App AppDeliveries
}

// Page returns one page of the log, newest first, and the cursor of the next ("" after the last).
func (l *DeliveryLog) Page(ctx context.Context, cursor string) ([]appport.LoggedDelivery, string, error) {
	ds, next, err := l.App.HookDeliveries(ctx, cursor, githubapp.MaxDeliveriesPerPage)
	if err != nil {
		return nil, "", err
	}
	page := make([]appport.LoggedDelivery, len(ds))
	for i, d := range ds {
		page[i] = appport.LoggedDelivery{ID: d.ID, GUID: d.GUID, DeliveredAt: d.DeliveredAt, Redelivery: d.Redelivery,
			StatusCode: d.StatusCode, Status: d.Status, Event: d.Event, Action: d.Action}
	}
	return page, next, nil
}

// Request returns what GitHub sent in attempt id; one GitHub no longer keeps matches
// appport.ErrDeliveryGone.
func (l *DeliveryLog) Request(ctx context.Context, id int64) (appport.DeliveryRequest, error) {
	r, err := l.App.HookDeliveryRequest(ctx, id)
	if errors.Is(err, githubapp.ErrNotFound) {
		return appport.DeliveryRequest{}, fmt.Errorf("%w: %w", appport.ErrDeliveryGone, err)
	}
	if err != nil {
		return appport.DeliveryRequest{}, err
	}
	return appport.DeliveryRequest{Header: r.Header, Payload: r.Payload}, nil
}
