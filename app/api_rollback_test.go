package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/apiclient"
	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/report"
)

// TestAPIRollbackAndUnfreeze: a workflow of the repository that builds staging/api rolls it back
// through the API: the older commit jumps ahead of what is pending, the scope's workflow is
// dispatched for the rollback's generation, and a repeat of the request does neither again. A newer
// commit's deploy gate is refused 409 locked with the freeze in the body (who, which commit, why),
// which the client turns back into "held by a freeze"; unfreeze lets it go, once.
func TestAPIRollbackAndUnfreeze(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	liveThenPending(t, h.harness, "staging", "api", "refs/heads/master")
	tok := h.token(t, "Codertocat/Hello-World")
	const base = "/v1/environments/staging/"

	req := apiclient.RollbackRequest{Scope: "api", Reason: "bbbbbbb breaks checkout", Request: "r1"}
	a := h.call(t, "POST", base+"rollback", tok, req)
	var res apiclient.RollbackResponse
	if err := json.Unmarshal(a.body, &res); a.status != http.StatusOK || err != nil {
		t.Fatalf("rollback: %d %s", a.status, a.body)
	}
	want := apiclient.RollbackResponse{Generation: 4, Sha: shaA,
		Dispatched: []apiclient.Dispatch{{Repository: "Codertocat/Hello-World", Workflow: "deploy.yml", Ref: "master"}}}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("rollback (-want +got):\n%s", diff)
	}
	wantDispatch := []core.DispatchRequest{{Repo: core.RepoRef{Owner: "Codertocat", Name: "Hello-World"}, Workflow: "deploy.yml", Ref: "master",
		Inputs: map[string]string{"environment": "staging", "generation": "4", "scopes": "api"}}}
	if diff := cmp.Diff(wantDispatch, h.disp.requests()); diff != "" {
		t.Errorf("dispatches (-want +got):\n%s", diff)
	}
	a = h.call(t, "POST", base+"rollback", tok, req)
	if err := json.Unmarshal(a.body, &res); a.status != http.StatusOK || err != nil || !res.Duplicate || res.Generation != 4 {
		t.Errorf("repeated rollback: %d %s", a.status, a.body)
	}
	if n := len(h.disp.requests()); n != 1 {
		t.Errorf("%d dispatches after the repeat, want 1", n)
	}

	// The rollback's run deploys A; then a newer commit's run claims and asks for the deploy gate.
	deployHead(t, h.harness, "staging", "api")
	if a := h.call(t, "POST", base+"claim", tok, intent("run-d", 'd', "api")); a.status != http.StatusOK {
		t.Fatalf("claim while frozen: %d %s", a.status, a.body)
	}
	gate := apiclient.GateRequest{Generation: 5, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-d", LeaseTTLMillis: 120_000}
	a = h.call(t, "POST", base+"gate", tok, gate)
	got := a.errorBody(t)
	if a.status != http.StatusConflict || got.Error != apiclient.CodeLocked || got.Frozen == nil ||
		got.Frozen.Sha != shaA || got.Frozen.Actor != "Codertocat" || got.Frozen.Reason != "bbbbbbb breaks checkout" {
		t.Fatalf("gate while frozen: %d %s; want 409 locked with the freeze", a.status, a.body)
	}
	srv := httptest.NewServer(h.app)
	t.Cleanup(srv.Close)
	client, err := apiclient.New(srv.URL, apiclient.StaticToken(tok), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Gate(context.Background(), authority.GateRequest{Environment: "staging", Generation: 5, Scopes: []string{"api"}, Phase: "deploy", Holder: "run-d", LeaseTTL: 2 * time.Minute})
	var held *authority.HeldError
	if !errors.As(err, &held) || !strings.HasPrefix(report.Waiting(held), "held by a freeze: rolled back to aaaaaaa by Codertocat") {
		t.Fatalf("the client's refusal %v; want a wait held by a freeze", err)
	}

	f, err := client.Unfreeze(context.Background(), authority.UnfreezeRequest{Environment: "staging", Scope: "api", Freeze: 4, Reason: "fixed forward", Request: "u1"})
	if err != nil || f.Generation != 4 || f.Sha != shaA {
		t.Fatalf("unfreeze: %+v, %v", f, err)
	}
	if _, err := client.Unfreeze(context.Background(), authority.UnfreezeRequest{Environment: "staging", Scope: "api", Freeze: 4, Reason: "again", Request: "u1"}); !errors.Is(err, authority.ErrRepeated) {
		t.Errorf("repeated unfreeze: %v; want ErrRepeated", err)
	}
	if _, err := client.Unfreeze(context.Background(), authority.UnfreezeRequest{Environment: "staging", Scope: "api", Reason: "again"}); !errors.Is(err, authority.ErrNotFrozen) {
		t.Errorf("unfreeze of a scope not frozen: %v; want ErrNotFrozen", err)
	}
	a = h.call(t, "POST", base+"gate", tok, gate)
	if a.status != http.StatusOK {
		t.Errorf("gate after unfreeze: %d %s", a.status, a.body)
	}
	e, _ := h.auth.Status(context.Background(), "staging")
	var unfrozen bool
	for _, ev := range e.Events {
		unfrozen = unfrozen || (ev.Kind == authority.EventUnfrozen && strings.Contains(ev.Message, "Unfrozen by Codertocat: fixed forward"))
	}
	if !unfrozen {
		t.Errorf("no unfreeze event by the token's actor in %+v", e.Events)
	}
}

// TestAPIUnfreezeNamesTheFreeze: rollback 1 deployed, then rollback 2 froze staging/api again. An
// unfreeze that names rollback 1's freeze, or none, is refused 409 freeze_mismatch with rollback
// 2's freeze in the body (and the client turns it back into the authority's error); naming
// rollback 2's lifts it.
func TestAPIUnfreezeNamesTheFreeze(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	liveThenPending(t, h.harness, "staging", "api", "refs/heads/master")
	tok := h.token(t, "Codertocat/Hello-World")
	const base = "/v1/environments/staging/"
	var first, second apiclient.RollbackResponse
	a := h.call(t, "POST", base+"rollback", tok, apiclient.RollbackRequest{Scope: "api", Reason: "incident 1", Request: "r1"})
	if err := json.Unmarshal(a.body, &first); a.status != http.StatusOK || err != nil {
		t.Fatalf("rollback 1: %d %s", a.status, a.body)
	}
	deployHead(t, h.harness, "staging", "api")
	a = h.call(t, "POST", base+"rollback", tok, apiclient.RollbackRequest{Scope: "api", To: shaB, Reason: "incident 2", Request: "r2"})
	if err := json.Unmarshal(a.body, &second); a.status != http.StatusOK || err != nil || second.Generation <= first.Generation {
		t.Fatalf("rollback 2: %d %s", a.status, a.body)
	}

	for name, body := range map[string]apiclient.UnfreezeRequest{
		"rollback 1's freeze": {Scope: "api", Freeze: first.Generation, Reason: "incident 1 fixed"},
		"no freeze":           {Scope: "api", Reason: "incident 1 fixed"},
	} {
		a = h.call(t, "POST", base+"unfreeze", tok, body)
		got := a.errorBody(t)
		if a.status != http.StatusConflict || got.Error != apiclient.CodeFreezeMismatch || got.Scope != "api" || got.Generation != body.Freeze ||
			got.Frozen == nil || got.Frozen.Generation != second.Generation || got.Frozen.Sha != shaB || got.Frozen.Reason != "incident 2" ||
			!strings.Contains(got.Message, fmt.Sprintf("frozen by freeze %d", second.Generation)) {
			t.Errorf("unfreeze naming %s: %d %s; want 409 freeze_mismatch naming freeze %d", name, a.status, a.body, second.Generation)
		}
	}
	if sc := scopeState(t, h.harness, "staging", "api"); sc.Freeze == nil || sc.Freeze.Generation != second.Generation {
		t.Fatalf("after the refused unfreeze: freeze %+v; want rollback 2's", sc.Freeze)
	}

	srv := httptest.NewServer(h.app)
	t.Cleanup(srv.Close)
	client, err := apiclient.New(srv.URL, apiclient.StaticToken(tok), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Unfreeze(context.Background(), authority.UnfreezeRequest{Environment: "staging", Scope: "api", Freeze: first.Generation, Reason: "incident 1 fixed"})
	var mismatch *authority.FreezeMismatchError
	if !errors.As(err, &mismatch) || mismatch.Named != first.Generation || mismatch.Current == nil || mismatch.Current.Generation != second.Generation {
		t.Fatalf("the client's refusal: %v; want a FreezeMismatchError naming freeze %d", err, second.Generation)
	}
	f, err := client.Unfreeze(context.Background(), authority.UnfreezeRequest{Environment: "staging", Scope: "api", Freeze: second.Generation, Reason: "incident 2 fixed", Request: "u2"})
	if err != nil || f.Generation != second.Generation {
		t.Fatalf("unfreeze naming rollback 2's freeze: %+v, %v", f, err)
	}
	if sc := scopeState(t, h.harness, "staging", "api"); sc.Freeze != nil {
		t.Errorf("after the unfreeze: freeze %+v; want none", sc.Freeze)
	}
}

// TestAPIRollbackOnlyScopesTheTokenFeeds: a repository may roll back and unfreeze only the scopes
// the configuration builds from it; a refusal writes nothing and dispatches nothing.
func TestAPIRollbackOnlyScopesTheTokenFeeds(t *testing.T) {
	t.Parallel()
	h := newAPIHarness(t)
	liveThenPending(t, h.harness, "staging", "api", "refs/heads/master")
	if _, err := h.auth.Rollback(context.Background(), authority.RollbackRequest{Environment: "staging", Scope: "api", Reason: "seed", Actor: "oncall"}); err != nil {
		t.Fatal(err)
	}
	before, _ := h.auth.Status(context.Background(), "staging")
	for _, tt := range []struct {
		verb string
		body any
	}{
		{"rollback", apiclient.RollbackRequest{Scope: "api", Reason: "not mine", To: shaB}},
		{"unfreeze", apiclient.UnfreezeRequest{Scope: "api", Reason: "not mine"}},
	} {
		a := h.call(t, "POST", "/v1/environments/staging/"+tt.verb, h.token(t, "acme/web"), tt.body)
		if got := a.errorBody(t); a.status != http.StatusForbidden || !strings.Contains(got.Message, "acme/web may not act on api of staging") {
			t.Errorf("%s by acme/web: %d %s; want 403", tt.verb, a.status, a.body)
		}
	}
	after, _ := h.auth.Status(context.Background(), "staging")
	if after.Desired != before.Desired || after.Scopes["api"].Freeze == nil || after.Scopes["api"].Freeze.Actor != "oncall" {
		t.Errorf("a refused request changed the scope: %+v", after.Scopes["api"])
	}
	if n := len(h.disp.requests()); n != 0 {
		t.Errorf("refused requests dispatched %d workflows", n)
	}
	a := h.call(t, "POST", "/v1/environments/staging/rollback", h.token(t, "Codertocat/Hello-World"), apiclient.RollbackRequest{Scope: "api", Reason: "x", To: "main"})
	if got := a.errorBody(t); a.status != http.StatusBadRequest || got.Field != "to" {
		t.Errorf("rollback to a branch name: %d %s; want 400 on to", a.status, a.body)
	}
}
