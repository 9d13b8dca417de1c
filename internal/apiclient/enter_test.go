package apiclient_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/pass"
)

var _ pass.Enterer = (*apiclient.Client)(nil)

// TestClaimEntersOverTheAPI: a claim over the App's API that asks to enter the deploy phase gets
// the grant in its answer when nothing holds the scope, in one request and no gate request, and
// its tokens complete the deploy; a claim whose scope another pass holds gets none, and its
// gate then waits as before. A lease length of 0 is refused before anything is written.
func TestClaimEntersOverTheAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	counter := &gateCounter{}
	c, auth, _, _ := serveAPI(t, cfg, 0, &http.Client{Transport: counter}, nil)
	first, err := c.ClaimAndEnter(ctx, authority.Intent{ID: "a", Environment: "staging", Scopes: []string{"api"}, Sha: fmt.Sprintf("%040x", 1)}, "run-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	g := first.Entered
	if g == nil || g.Tokens["api"] == 0 || g.RequestedAt.IsZero() || counter.n.Load() != 0 {
		t.Fatalf("the claim of a free scope answered %+v (grant %+v) after %d gate requests; want the grant, and no gate request", first, g, counter.n.Load())
	}
	state, err := auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if l := state.Scopes["api"].Lease; l.Token != g.Tokens["api"] || l.Generation != first.Generation {
		t.Fatalf("api's lease after the claim entered: %+v; want the grant's token %d", l, g.Tokens["api"])
	}

	second, err := c.ClaimAndEnter(ctx, authority.Intent{ID: "b", Environment: "staging", Scopes: []string{"api"}, Sha: fmt.Sprintf("%040x", 2)}, "run-b", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if second.Entered != nil {
		t.Fatalf("a claim of a scope another pass holds entered %+v", second.Entered)
	}
	_, err = c.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: second.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-b", LeaseTTL: time.Minute})
	if !errors.Is(err, authority.ErrLeaseHeld) {
		t.Fatalf("the second pass's gate: %v; want it to wait for the lease", err)
	}

	out, err := c.Complete(ctx, authority.Completion{Environment: "staging", Generation: first.Generation, Scopes: []string{"api"}, Holder: g.Holder,
		Tokens: g.Tokens, Outcome: authority.OutcomeSuccess})
	if err != nil || out.Overall() != authority.ResultDeployed {
		t.Fatalf("complete under the claim's grant: %+v, %v; want deployed", out, err)
	}

	_, err = c.ClaimAndEnter(ctx, authority.Intent{ID: "c", Environment: "staging", Scopes: []string{"api"}, Sha: fmt.Sprintf("%040x", 3)}, "run-c", 0)
	var in *authority.InputError
	if !errors.As(err, &in) || in.Field != "enter.lease_ttl_ms" {
		t.Fatalf("a claim entering with no lease length: %v; want an input error on enter.lease_ttl_ms", err)
	}
}

// earlierApp answers every claim that asks to enter as an App of an earlier release does: it
// decodes the body strictly into the request it knew, and refuses the unknown field before it
// writes anything. Everything else goes through.
type earlierApp struct{ refused atomic.Int64 }

func (e *earlierApp) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || !strings.HasSuffix(r.URL.Path, "/claim") {
		return http.DefaultTransport.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var known struct {
		Intent     authority.Intent `json:"intent"`
		Generation int64            `json:"generation,omitempty"`
		Scopes     []string         `json:"scopes,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&known); err != nil {
		e.refused.Add(1)
		b, _ := json.Marshal(apiclient.ErrorBody{Error: apiclient.CodeInvalid, Message: "invalid body", Field: "body",
			Fix: fmt.Sprintf("send a JSON object of the endpoint's shape (docs/api.md): %v", err)})
		return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(bytes.NewReader(b)), Request: r}, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return http.DefaultTransport.RoundTrip(r)
}

// TestClaimEntersAnEarlierApp: against an App of an earlier release, which refuses the enter
// field, the claim is made again without it, and the pass goes on as before: no grant in the
// answer, and the gate's own request grants.
func TestClaimEntersAnEarlierApp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	earlier := &earlierApp{}
	c, _, _, _ := serveAPI(t, cfg, 0, &http.Client{Transport: earlier}, nil)
	res, err := c.ClaimAndEnter(ctx, authority.Intent{ID: "a", Environment: "staging", Scopes: []string{"api"}, Sha: fmt.Sprintf("%040x", 1)}, "run-a", time.Minute)
	if err != nil {
		t.Fatalf("claim against an earlier App: %v", err)
	}
	if earlier.refused.Load() != 1 || res.Entered != nil || res.Claim == nil || len(res.Claim.Claimed) != 1 {
		t.Fatalf("claim against an earlier App (%d refused): %+v; want it claimed without entering, after one refusal", earlier.refused.Load(), res)
	}
	if _, err := c.Gate(ctx, authority.GateRequest{Environment: "staging", Generation: res.Generation, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-a", LeaseTTL: time.Minute}); err != nil {
		t.Fatalf("the gate after the claim: %v", err)
	}
}
