package authority_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/store/memory"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// Shas stored abbreviated, before a sha had to be full, are read as they were written: status
// shows them, a rollback goes back to one (by default, or named by its own digits), and a promotion
// of one says what to do instead of calling it bad input of the caller's.
func TestAbbreviatedShasStoredEarlierStillRead(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC))
	st := memory.New()
	old := &authority.Doc{Key: authority.EnvKey("prod"), Env: &authority.Env{Name: "prod", Desired: 2, Observed: 2,
		Scopes: map[string]*authority.Scope{"api": {Owner: 2,
			Live:  &authority.Live{Sha: "bbbb222", Ref: "refs/heads/main", Generation: 2, Token: 2, At: clock.Now()},
			Prev:  &authority.Live{Sha: "aaaa111", Ref: "refs/heads/main"},
			Lease: authority.Lease{Token: 2}}}}}
	if _, err := st.Put(ctx, old); err != nil {
		t.Fatal(err)
	}
	a := authority.New(st, authority.WithClock(clock))
	e, err := a.Status(ctx, "prod")
	if err != nil || e.Scopes["api"].Live.Sha != "bbbb222" {
		t.Fatalf("status of a document with abbreviated shas: %+v, %v", e, err)
	}
	for prefix, want := range map[string]string{"aaaa111": "aaaa111", "bbbb222": "bbbb222"} {
		if c, err := a.ResolveCommit(ctx, "prod", "api", prefix); err != nil || c.Sha != want || c.Ref != "refs/heads/main" {
			t.Errorf("ResolveCommit(%s) = %+v, %v; want the stored %s", prefix, c, err, want)
		}
	}
	_, err = a.Promote(ctx, authority.PromoteRequest{Environment: "qa", Scope: "api", From: "prod", Actor: "oncall"})
	if !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), "abbreviated") || !strings.Contains(err.Error(), "deploy that commit there again") {
		t.Errorf("promote of an abbreviated live sha: %v; want bad input saying to deploy it again", err)
	}
	res, err := a.Rollback(ctx, authority.RollbackRequest{Environment: "prod", Scope: "api", Actor: "oncall", Reason: "b breaks checkout"})
	if err != nil {
		t.Fatalf("rollback to the stored abbreviated previous commit: %v", err)
	}
	if m := mustStatus(t, a, "prod").Scopes["api"].Mailbox; m == nil || m.Sha != "aaaa111" || m.Generation != res.Generation {
		t.Errorf("pending after the rollback: %+v; want aaaa111 at generation %d", m, res.Generation)
	}
}

func mustStatus(t *testing.T, a *authority.Authority, env string) *authority.Env {
	t.Helper()
	e, err := a.Status(context.Background(), env)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
