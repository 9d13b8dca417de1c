package cli

import (
	"context"
	"flag"
	"time"

	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
)

// stateReader reads an environment's state, and the clock to render it with.
type stateReader interface {
	Status(ctx context.Context, env string) (*authority.Env, error)
	History(ctx context.Context, env string, before int64, limit int) (*authority.HistoryPage, error)
	Now() time.Time
}

var (
	_ stateReader    = (*authority.Authority)(nil)
	_ stateReader    = (*apiclient.Client)(nil)
	_ pass.Authority = (*apiclient.Client)(nil)
)

// apiFlags registers the flags of the App's HTTP API, which the verbs of a pass and the read-only
// commands may go through instead of a store (spec section 4: --api URL).
func (c *cmdEnv) apiFlags() {
	c.str(&c.s.api, "api", "", "the App's URL: go through its HTTP API instead of a store (https, or http on loopback)")
	c.secret(&c.s.apiToken, "api-token", "token for --api outside a GitHub Actions job with id-token: write (prefer the variable: flags show in process lists)")
	c.str(&c.s.apiAudience, "api-audience", apiclient.Audience, "audience of the OIDC token asked of the Actions runner for --api (the App's --oidc-audience)")
}

// connect opens what the command works on: the App's API when --api is given, else the store.
func (c *cmdEnv) connect(ctx context.Context) error {
	if c.s.api == "" {
		if err := c.open(ctx); err != nil {
			return err
		}
		c.pass, c.view = pass.Local(c.auth), c.auth
		return nil
	}
	if c.storeGiven() {
		return usageErrorf("both --api and --store (or LATESTWINS_STORE) are given: use one, the App's API or a store")
	}
	tokens, err := c.apiTokens()
	if err != nil {
		return err
	}
	client, err := apiclient.New(c.s.api, tokens, nil)
	if err != nil {
		return err
	}
	c.pass, c.view, c.where = client, client, "the App at "+c.s.api
	return nil
}

// storeGiven reports whether a store was named, by flag or variable, rather than defaulted.
func (c *cmdEnv) storeGiven() bool {
	given := c.env("store") != ""
	c.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "store" })
	return given
}

// apiTokens is the token sent to the API: the workflow's OIDC token from the Actions runner when the
// job may ask for one, else --api-token.
func (c *cmdEnv) apiTokens() (apiclient.TokenSource, error) {
	if c.io.Getenv("ACTIONS_ID_TOKEN_REQUEST_URL") != "" {
		return apiclient.NewActionsToken(c.io.Getenv, c.s.apiAudience, nil)
	}
	if c.s.apiToken == "" {
		return nil, &authority.InputError{Field: "api-token",
			Fix: "--api needs a token: run in a GitHub Actions job with `permissions: id-token: write`, or give --api-token (LATESTWINS_API_TOKEN) an OIDC token the App accepts"}
	}
	return apiclient.StaticToken(c.s.apiToken), nil
}
