package app

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/authority"
)

// A push whose dispatched run dies leaves its work pending; the sweep finds it stalled and the App
// dispatches the same workflows again, on the same branch, as the same generation.
func TestSweepRedrivesAPushThroughItsOrigin(t *testing.T) {
	h := newHarness(t, testConfig)
	ctx := context.Background()
	if w := h.post(t, "push", "delivery-1", fixture(t, "push.json")); w.Code != http.StatusOK {
		t.Fatalf("push: %d %s", w.Code, w.Body)
	}
	first := h.disp.requests()
	if len(first) != 1 {
		t.Fatalf("push dispatched %+v; want one dispatch", first)
	}
	// Nobody ran the workflow (the runner died before it claimed): the work stalls.
	h.clock.Advance(15 * time.Minute)
	rep, err := h.auth.Sweep(ctx, 10*time.Minute, 3, h.app.Redrive)
	if err != nil || len(rep.Failed) != 0 || len(rep.Redriven) != 1 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	all := h.disp.requests()
	if len(all) != 2 {
		t.Fatalf("dispatches after the sweep: %+v; want the push's and one re-drive", all)
	}
	if diff := cmp.Diff(first[0], all[1]); diff != "" {
		t.Fatalf("the re-drive differs from the first dispatch (-first +redrive):\n%s", diff)
	}
	e, err := h.auth.Status(ctx, "staging")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Redriven[0].Scopes {
		if m := e.Scopes[s].Mailbox; m == nil || m.Attempt != 1 || !strings.HasPrefix(m.Origin, "github:") {
			t.Fatalf("%s after the re-drive: %+v", s, m)
		}
	}
}

func TestRedriveRefusesWorkTheAppDidNotStart(t *testing.T) {
	h := newHarness(t, testConfig)
	err := h.app.Redrive(context.Background(), authority.StalledWork{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Attempt: 1})
	if err == nil || !strings.Contains(err.Error(), "not made by the App") {
		t.Fatalf("work without an origin: %v", err)
	}
	wf := "Codertocat/Hello-World/.github/workflows/deploy.yml@refs/heads/main"
	err = h.app.Redrive(context.Background(), authority.StalledWork{Environment: "staging", Generation: 1, Scopes: []string{"api"}, Attempt: 1,
		Origins: map[string]string{"api": "gha:" + wf}})
	if !errors.Is(err, authority.ErrPermanent) || !strings.Contains(err.Error(), "by the Action in the workflow "+wf) {
		t.Fatalf("work the Action accepted: %v; want a permanent error naming its workflow", err)
	}
	err = h.app.Redrive(context.Background(), authority.StalledWork{Environment: "gone", Generation: 1, Scopes: []string{"api"}, Attempt: 1,
		Origins: map[string]string{"api": core.OriginFor(7, "Codertocat/Hello-World", "master")}})
	if !errors.Is(err, authority.ErrInvalidInput) {
		t.Fatalf("an environment the config no longer has: %v; want invalid input", err)
	}
	if len(h.disp.requests()) != 0 {
		t.Fatalf("refused re-drives dispatched %+v", h.disp.requests())
	}
}

func TestOriginRoundTrip(t *testing.T) {
	inst, repo, branch, err := core.ParseOrigin(core.OriginFor(42, "acme/shop", "release/v2"))
	if err != nil || inst != 42 || repo.String() != "acme/shop" || branch != "release/v2" {
		t.Fatalf("round trip: %d %s %s %v", inst, repo, branch, err)
	}
	for _, bad := range []string{"", "gitlab:1:a/b@main", "github:x:a/b@main", "github:1:ab@main", "github:1:a/b@", "github:1:a/b"} {
		if _, _, _, err := core.ParseOrigin(bad); err == nil {
			t.Errorf("parseOrigin(%q) accepted it", bad)
		}
	}
}

// The sweep counts the attempt of a re-drive that cannot succeed however often it is tried; a
// re-drive that GitHub failed for now (a 5xx, a rate limit) stays transient.
func TestRedriveMarksPermanentFailures(t *testing.T) {
	t.Parallel()
	origin := core.OriginFor(fixtureInstallID, "Codertocat/Hello-World", "master")
	work := func(env, origin string) authority.StalledWork {
		w := authority.StalledWork{Environment: env, Generation: 1, Scopes: []string{"api"}, Attempt: 1}
		if origin != "" {
			w.Origins = map[string]string{"api": origin}
		}
		return w
	}
	noWorkflow := strings.Replace(testConfig, "        workflow: deploy.yml\n", "", 1)
	cases := map[string]struct {
		config    string
		work      authority.StalledWork
		status    int // GitHub's answer to the dispatch; 0: no dispatch is made
		permanent bool
	}{
		"no origin":                 {testConfig, work("staging", ""), 0, true},
		"unreadable origin":         {testConfig, work("staging", "github:x:a/b@main"), 0, true},
		"environment gone":          {testConfig, work("gone", origin), 0, true},
		"workflow gone from config": {noWorkflow, work("staging", origin), 0, true},
		"workflow gone from GitHub": {testConfig, work("staging", origin), http.StatusNotFound, true},
		"branch gone":               {testConfig, work("staging", origin), http.StatusUnprocessableEntity, true},
		"GitHub failing":            {testConfig, work("staging", origin), http.StatusBadGateway, false},
		"rate limited":              {testConfig, work("staging", origin), http.StatusTooManyRequests, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			if tc.status != 0 {
				st := gh.On("POST", fixtureRepo+"/actions/workflows/deploy.yml/dispatches", tc.status,
					`{"message":"refused","documentation_url":"https://docs.github.com/rest"}`)
				if tc.status == http.StatusTooManyRequests {
					st.Header("Retry-After", "30")
				}
			}
			h := newHarness(t, tc.config, withGitHub(inst))
			err := h.app.Redrive(context.Background(), tc.work)
			if err == nil {
				t.Fatal("the re-drive succeeded")
			}
			if got := errors.Is(err, authority.ErrPermanent); got != tc.permanent {
				t.Errorf("errors.Is(%v, ErrPermanent) = %v, want %v", err, got, tc.permanent)
			}
		})
	}
}
