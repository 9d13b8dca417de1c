package githubapp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// NewApp is a GitHub App just registered from a manifest, with the credentials GitHub shows once.
type NewApp struct {
	ID            int64
	Slug          string
	Name          string
	Owner         string
	HTMLURL       string // the App's page on GitHub, where it is installed
	ClientID      string
	ClientSecret  string
	WebhookSecret string
	PrivateKey    string // PEM
}

// ConvertManifest completes GitHub's App manifest flow: it exchanges the code GitHub gave the
// manifest's redirect URL for the new App's id and credentials (POST /app-manifests/{code}/conversions,
// which needs no authentication). A code works once, within an hour.
func (c *Client) ConvertManifest(ctx context.Context, code string) (NewApp, error) {
	const op = "convert the App manifest"
	if strings.TrimSpace(code) == "" {
		return NewApp{}, errors.New(op + ": the code is empty")
	}
	cfg, _, err := c.gh.Apps.CompleteAppManifest(ctx, url.PathEscape(code))
	if err != nil {
		return NewApp{}, c.wrap(op, err)
	}
	app := NewApp{
		ID: cfg.GetID(), Slug: cfg.GetSlug(), Name: cfg.GetName(), Owner: cfg.GetOwner().GetLogin(), HTMLURL: cfg.GetHTMLURL(),
		ClientID: cfg.GetClientID(), ClientSecret: cfg.GetClientSecret(), WebhookSecret: cfg.GetWebhookSecret(), PrivateKey: cfg.GetPEM(),
	}
	if app.ID == 0 || app.PrivateKey == "" {
		return NewApp{}, fmt.Errorf("%s: GitHub's answer has no App id or private key", op)
	}
	return app, nil
}
