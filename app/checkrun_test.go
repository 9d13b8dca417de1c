package app

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

const checkRunSha = "d6fde92930d4715a2b49857d24b940956b26d2d3" // check_run.rerequested.json's head

func checkRunFixture(t *testing.T, name string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixture(t, "check_run.rerequested.json"), &m); err != nil {
		t.Fatal(err)
	}
	m["check_run"].(map[string]any)["name"] = name
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Re-running "latestwins / staging" redeploys the check run's head commit, even over a newer live one.
func TestCheckRunRerequestedRedeploys(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	const hwRepo = "/repos/github/hello-world"
	gh.On("POST", hwRepo+"/actions/workflows/deploy.yml/dispatches", http.StatusOK,
		githubtest.Example(t, "POST", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches", http.StatusOK, ""))
	cfg := `environments:
  staging:
    scopes:
      api:
        repository: github/hello-world
        branch: master
        workflow: deploy.yml
      web:
        repository: acme/web
        branch: main
        workflow: web.yml
`
	h := newHarness(t, cfg, withGitHub(inst))
	deployed(t, h, "staging", "newer", headSha, "api") // a newer commit is live: a re-run still redeploys the old one

	rec := h.post(t, "check_run", "d-rerun", checkRunFixture(t, "latestwins / staging"))
	res := decodeResult(t, rec)
	if rec.Code != http.StatusOK || res.Outcome != core.OutcomeAccepted {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	want := []core.DispatchRequest{{Installation: 1, Repo: core.RepoRef{Owner: "github", Name: "hello-world"}, Workflow: "deploy.yml", Ref: "master",
		Inputs: map[string]string{"environment": "staging", "generation": "2", "scopes": "api"}}}
	if diff := cmp.Diff(want, res.Dispatched); diff != "" {
		t.Errorf("dispatched (-want +got):\n%s", diff)
	}
	wantCalls := []call{{"POST", hwRepo + "/actions/workflows/deploy.yml/dispatches", map[string]any{"ref": "master",
		"inputs": map[string]any{"environment": "staging", "generation": "2", "scopes": "api"}}}}
	if diff := cmp.Diff(wantCalls, calls(gh.Requests())); diff != "" {
		t.Errorf("GitHub requests (-want +got):\n%s", diff)
	}
	env, err := h.auth.Status(context.Background(), "staging")
	if err != nil {
		t.Fatal(err)
	}
	if m := env.Scopes["api"].Mailbox; m == nil || m.Sha != checkRunSha || m.Ref != "refs/heads/master" {
		t.Errorf("api mailbox %+v, want %s on master", m, checkRunSha)
	}
	if _, ok := env.Scopes["web"]; ok {
		t.Error("web, built from another repository, was touched")
	}
}

func TestCheckRunOthersAreIgnoredOrRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		check   string
		status  int
		outcome core.Outcome
	}{
		{"another app's check run", "randscape", http.StatusAccepted, core.OutcomeIgnored},
		{"a name that is only a prefix", "latestwins", http.StatusAccepted, core.OutcomeIgnored},
		{"an environment the config no longer has", "latestwins / prod", http.StatusUnprocessableEntity, ""},
		{"an invalid environment name", "latestwins / ../etc", http.StatusUnprocessableEntity, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t) // no stubs: nothing may be called
			h := newHarness(t, testConfig, withGitHub(inst))
			rec := h.post(t, "check_run", "d1", checkRunFixture(t, tt.check))
			if rec.Code != tt.status {
				t.Errorf("%d %s, want %d", rec.Code, rec.Body, tt.status)
			}
			if tt.outcome != "" && decodeResult(t, rec).Outcome != tt.outcome {
				t.Errorf("%s, want outcome %s", rec.Body, tt.outcome)
			}
			if n := len(gh.Requests()); n != 0 {
				t.Errorf("%d GitHub calls, want none", n)
			}
		})
	}
}
