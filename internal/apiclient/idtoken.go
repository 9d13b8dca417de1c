package apiclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
)

// StaticToken is a TokenSource of one token given by hand (latestwins --api-token), such as an OIDC
// token fetched by another step. Surrounding white space is ignored.
type StaticToken string

var _ TokenSource = StaticToken("")

// Token returns the token; an empty one is a *authority.InputError.
func (t StaticToken) Token(context.Context) (string, error) {
	tok := strings.TrimSpace(string(t))
	if tok == "" {
		return "", &authority.InputError{Field: "api-token", Fix: "give the OIDC token to send to the App's API"}
	}
	return tok, nil
}

// ActionsToken is a TokenSource of GitHub Actions OIDC tokens: it asks the runner's token endpoint
// (ACTIONS_ID_TOKEN_REQUEST_URL with ACTIONS_ID_TOKEN_REQUEST_TOKEN) for a token of the audience,
// and keeps it until a minute before it expires.
type ActionsToken struct {
	url      *url.URL
	bearer   string
	audience string
	hc       *http.Client

	mu    sync.Mutex
	token string
	exp   time.Time
}

var _ TokenSource = (*ActionsToken)(nil)

// NewActionsToken reads the runner's token endpoint through getenv. The variables are set only for
// jobs with `permissions: id-token: write`; without them it returns a *authority.InputError that
// says so. hc nil: a client with a 30 s timeout.
func NewActionsToken(getenv func(string) string, audience string, hc *http.Client) (*ActionsToken, error) {
	raw, bearer := getenv("ACTIONS_ID_TOKEN_REQUEST_URL"), getenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
	if raw == "" || bearer == "" {
		return nil, &authority.InputError{Field: "id-token",
			Fix: "api-url needs the workflow's OIDC token: give the job `permissions: id-token: write` (ACTIONS_ID_TOKEN_REQUEST_URL and _TOKEN are unset)"}
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, &authority.InputError{Field: "ACTIONS_ID_TOKEN_REQUEST_URL", Value: raw, Fix: "the runner sets it to its token endpoint; do not override it"}
	}
	if audience == "" {
		audience = Audience
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &ActionsToken{url: u, bearer: bearer, audience: audience, hc: hc}, nil
}

// Token returns a token valid for at least another minute.
func (t *ActionsToken) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && time.Until(t.exp) > time.Minute {
		return t.token, nil
	}
	u := *t.url
	q := u.Query()
	q.Set("audience", t.audience)
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("request an OIDC token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+t.bearer)
	req.Header.Set("Accept", "application/json")
	resp, err := t.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("request an OIDC token: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("read the OIDC token: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("request an OIDC token: the runner answered %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var body struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Value == "" {
		return "", fmt.Errorf("request an OIDC token: the runner's answer holds no token")
	}
	t.token, t.exp = body.Value, expiry(body.Value)
	return t.token, nil
}

// expiry reads a JWT's exp without verifying it (the App verifies); unknown: one minute from now,
// so that the next call asks again.
func expiry(jwt string) time.Time {
	parts := strings.Split(jwt, ".")
	if len(parts) == 3 {
		if b, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			var c struct {
				Exp int64 `json:"exp"`
			}
			if json.Unmarshal(b, &c) == nil && c.Exp > 0 {
				return time.Unix(c.Exp, 0)
			}
		}
	}
	return time.Now().Add(time.Minute)
}
