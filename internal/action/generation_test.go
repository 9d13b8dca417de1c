package action

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

// rollback rolls env/scope back to the commit live before, on the world's store.
func (w *world) rollback(env, scope string) int64 {
	w.t.Helper()
	auth := w.auth
	if auth == nil {
		st, closeFn, err := openBolt(context.Background(), w.store)
		if err != nil {
			w.t.Fatal(err)
		}
		defer closeFn()
		auth = authority.New(st)
	}
	res, err := auth.Rollback(context.Background(), authority.RollbackRequest{Environment: env, Scope: scope, Actor: "oncall", Reason: "b breaks checkout"})
	if err != nil {
		w.t.Fatal(err)
	}
	return res.Generation
}

// TestDispatchedRunClaimsItsGeneration: a workflow dispatched for a generation (here a rollback's)
// runs on its branch, whose head is another commit; with the generation input the Action claims
// that generation, says which commit it deploys (the sha output, for the checkout), and deploys it.
// A run dispatched for a generation the rollback superseded stops cleanly. On a store and through
// the App's API alike.
func TestDispatchedRunClaimsItsGeneration(t *testing.T) {
	t.Parallel()
	for name, newW := range map[string]func(*testing.T) *world{"store": newWorld, "api-url": newAPIWorld} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newW(t)
			for i, c := range []byte{'a', 'b'} {
				j := w.job(string(c), fmt.Sprint(301+i), "push", pushEvent, pushOf(sha(byte('0'+i)), sha(c)))
				if r := j.step(map[string]string{"command": "run", "environment": "staging", "scopes": "api", "run": "true"}); r.err != nil {
					t.Fatalf("%c: %v\n%s", c, r.err, r.log)
				}
			}
			gen := w.rollback("staging", "api")

			stale := w.job("stale", "310", "workflow_dispatch", pushEvent, nil)
			r := stale.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "api", "generation": "2"})
			if r.err != nil || r.outputs["outcome"] != "superseded" || r.outputs["superseded-by"] != fmt.Sprint(gen) || r.outputs["authorized"] != "false" {
				t.Errorf("a run dispatched for generation 2: %v %v\n%s", r.err, r.outputs, r.log)
			}

			j := w.job("rollback", "311", "workflow_dispatch", pushEvent, nil) // GITHUB_SHA is the branch's head, ffff...
			r = j.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "api", "generation": fmt.Sprint(gen)})
			if r.err != nil {
				t.Fatalf("claim: %v\n%s", r.err, r.log)
			}
			if diff := cmp.Diff(outputsOf(fmt.Sprint(gen), "true", "", "", `["api"]`, "claimed", sha('a')), r.outputs); diff != "" {
				t.Errorf("claim outputs (-want +got):\n%s", diff)
			}
			r = j.step(map[string]string{"command": "run", "environment": "staging", "run": "true"})
			if r.err != nil || r.outputs["outcome"] != "deployed" || r.outputs["sha"] != sha('a') {
				t.Fatalf("run: %v %v\n%s", r.err, r.outputs, r.log)
			}
			if live := w.status("staging").Scopes["api"].Live; live == nil || live.Sha != sha('a') || live.Generation != gen {
				t.Errorf("live after the rollback's run: %+v; want %s at generation %d", live, sha('a')[:7], gen)
			}

			r = w.job("bad", "312", "workflow_dispatch", pushEvent, nil).step(map[string]string{"command": "claim", "environment": "staging", "scopes": "api", "generation": "3", "sha": sha('c')})
			if r.err == nil || r.outputs["outcome"] != "invalid" {
				t.Errorf("generation with a sha: %v %v", r.err, r.outputs)
			}
		})
	}
}
