package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
	"github.com/latestwins/latestwins/internal/store/storetest"
)

// chainedPush is GitHub's example push payload rewritten as push number i of a chain: commit i on
// top of commit i-1, repository.pushed_at pushedAt, head_commit.timestamp committedAt.
func chainedPush(t *testing.T, i int, pushedAt, committedAt time.Time) []byte {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(fixture(t, "push.json"), &p); err != nil {
		t.Fatal(err)
	}
	p["before"], p["after"] = chainSha(i-1), chainSha(i)
	p["forced"] = false
	p["repository"].(map[string]any)["pushed_at"] = pushedAt.Unix()
	head := p["head_commit"].(map[string]any)
	head["id"], head["timestamp"] = chainSha(i), committedAt.Format(time.RFC3339)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func chainSha(i int) string { return fmt.Sprintf("%040x", 0xc0ffee000+i) }

// TestPushesInEveryArrivalOrder: the pushes of a chain, each a second after the previous one,
// delivered to the App in every order (all 6 of three pushes, all 120 of five), leave the newest
// pending; the others are recorded as superseded or arrived out of order.
func TestPushesInEveryArrivalOrder(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	for _, n := range []int{3, 5} {
		bodies := make([][]byte, n)
		for i := range bodies {
			bodies[i] = chainedPush(t, i+1, base.Add(time.Duration(i)*time.Second), base.Add(time.Duration(i)*time.Minute))
		}
		orders := 0
		storetest.Permutations(n, func(order []int) {
			orders++
			h := newHarness(t, testConfig)
			for _, k := range order {
				if w := h.post(t, "push", fmt.Sprintf("delivery-%d", k), bodies[k]); w.Code != http.StatusAccepted && w.Code != http.StatusOK {
					t.Fatalf("order %v: push %d: %d %s", order, k, w.Code, w.Body)
				}
			}
			e, err := h.auth.Status(t.Context(), "staging")
			if err != nil {
				t.Fatal(err)
			}
			if m := e.Scopes["api"].Mailbox; m == nil || m.Sha != chainSha(n) {
				t.Fatalf("arrival order %v of %d pushes: pending %+v; want the newest push %s", order, n, m, chainSha(n))
			}
		})
		t.Logf("%d pushes: %d arrival orders", n, orders)
	}
}

// TestEqualPushTimesAskGitHub: two pushes of one branch in the same second, neither on top of the
// other, with the same commit time: the App asks GitHub's compare API, and its answer decides.
func TestEqualPushTimesAskGitHub(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		status      string
		wantPending string
	}{
		{"behind", chainSha(5)}, // the late push is older: the first one stays pending
		{"ahead", chainSha(9)},  // the late push is newer: it replaces the first one
	} {
		t.Run(tc.status, func(t *testing.T) {
			gh, inst := newGitHub(t)
			h := newHarness(t, testConfig, withGitHub(inst), func(o *Options) {
				o.Dispatcher = &recorder{}
				o.Commits = &ghadapter.Commits{Installations: inst}
			})
			first := chainedPush(t, 5, at, at)
			late := chainedPush(t, 9, at, at)
			answer := githubtest.Example(t, "GET", "/repos/{owner}/{repo}/compare/{basehead}", http.StatusOK, "")
			answer["status"] = tc.status
			cmp := gh.On("GET", fixtureRepo+"/compare/"+chainSha(5)+"..."+chainSha(9), http.StatusOK, answer)
			h.post(t, "push", "first", first)
			if w := h.post(t, "push", "late", late); w.Code >= 300 {
				t.Fatalf("late push: %d %s", w.Code, w.Body)
			}
			if len(cmp.Requests()) != 1 {
				t.Fatalf("compare asked %d times; want once", len(cmp.Requests()))
			}
			e, err := h.auth.Status(t.Context(), "staging")
			if err != nil {
				t.Fatal(err)
			}
			if m := e.Scopes["api"].Mailbox; m == nil || m.Sha != tc.wantPending {
				t.Fatalf("GitHub says the late push is %s: pending %+v; want %s", tc.status, m, tc.wantPending)
			}
		})
	}
}
