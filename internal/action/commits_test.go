package action

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/internal/authority"
)

// bothScopesConfig lets the workflow's repository deploy api and web to staging.
const bothScopesConfig = `environments:
  staging:
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
      web:
        repository: Codertocat/Hello-World
        branch: master
`

// accept accepts in on the world's store, as another door (a push to the App, the command line)
// would.
func (w *world) accept(in authority.Intent) int64 {
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
	res, err := auth.Accept(context.Background(), in, false)
	if err != nil {
		w.t.Fatal(err)
	}
	return res.Generation
}

// TestRunGivesTheCommandTheCommitItDeploys: the run command's command learns the commit it deploys
// as the pass claimed it, as `latestwins run` tells its command: LATESTWINS_SHA and LATESTWINS_REF,
// and LATESTWINS_SHAS with every scope's commit (LATESTWINS_SHA empty when they differ), whatever
// this process inherited. On a store and through the App's API alike.
func TestRunGivesTheCommandTheCommitItDeploys(t *testing.T) {
	t.Parallel()
	worlds := map[string]func(*testing.T) *world{
		"store":   newWorld,
		"api-url": func(t *testing.T) *world { return newAPIWorldOf(t, bothScopesConfig) },
	}
	for name, newW := range worlds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newW(t)
			seen := filepath.Join(w.dir, "seen")
			tell := `echo "sha=$LATESTWINS_SHA ref=$LATESTWINS_REF shas=$LATESTWINS_SHAS" > ` + seen
			inherited := Deps{Env: append(os.Environ(), "LATESTWINS_SHA="+sha('f'), "LATESTWINS_REF=refs/heads/other")}
			saw := func(what string) string {
				t.Helper()
				b, err := os.ReadFile(seen)
				if err != nil {
					t.Fatalf("%s: the command wrote nothing: %v", what, err)
				}
				return strings.TrimSpace(string(b))
			}

			j := w.job("a", "401", "push", pushEvent, pushOf(sha('0'), sha('a')))
			if r := j.step(map[string]string{"command": "run", "environment": "staging", "scopes": "api,web", "run": tell}, inherited); r.err != nil {
				t.Fatalf("run of a: %v\n%s", r.err, r.log)
			}
			if got, want := saw("run of a"), "sha="+sha('a')+" ref=refs/heads/master shas=api="+sha('a')+",web="+sha('a'); got != want {
				t.Errorf("the command of a's run saw %q, want %q", got, want)
			}

			// api is asked for at a again, web moves on to b: a pass of generation 3 deploys both,
			// each at its own commit.
			w.accept(authority.Intent{ID: "api-again", Environment: "staging", Scopes: []string{"api"}, Sha: sha('a'), Ref: "refs/heads/master", Redeploy: true})
			gen := w.accept(authority.Intent{ID: "web-b", Environment: "staging", Scopes: []string{"web"}, Sha: sha('b'), Ref: "refs/heads/master"})
			d := w.job("dispatched", "402", "workflow_dispatch", pushEvent, nil)
			r := d.step(map[string]string{"command": "run", "environment": "staging", "scopes": "api,web", "generation": fmt.Sprint(gen), "run": tell}, inherited)
			if r.err != nil || r.outputs["outcome"] != "deployed" {
				t.Fatalf("run of generation %d: %v %v\n%s", gen, r.err, r.outputs, r.log)
			}
			if got, want := saw("run of both"), "sha= ref=refs/heads/master shas=api="+sha('a')+",web="+sha('b'); got != want {
				t.Errorf("the command of a pass deploying two commits saw %q, want %q", got, want)
			}

			// A rollback's generation, claimed in one step and run in the next, deploys the
			// rollback's commit, not the branch's head (GITHUB_SHA).
			back := w.rollback("staging", "web")
			rb := w.job("rollback", "403", "workflow_dispatch", pushEvent, nil)
			if r := rb.step(map[string]string{"command": "claim", "environment": "staging", "scopes": "web", "generation": fmt.Sprint(back)}); r.err != nil {
				t.Fatalf("claim of the rollback: %v\n%s", r.err, r.log)
			}
			if r := rb.step(map[string]string{"command": "run", "environment": "staging", "run": tell}, inherited); r.err != nil || r.outputs["outcome"] != "deployed" {
				t.Fatalf("run of the rollback: %v %v\n%s", r.err, r.outputs, r.log)
			}
			if got, want := saw("run of the rollback"), "sha="+sha('a')+" ref=refs/heads/master shas=web="+sha('a'); got != want {
				t.Errorf("the command of the rollback's run saw %q, want %q", got, want)
			}
		})
	}
}
