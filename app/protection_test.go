package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app/internal/configsource"
	"github.com/latestwins/latestwins/app/internal/core"
	"github.com/latestwins/latestwins/app/internal/surfaces"
	"github.com/latestwins/latestwins/internal/config"
	"github.com/latestwins/latestwins/internal/ghadapter"
	"github.com/latestwins/latestwins/internal/githubapp/githubtest"
)

// What deployment_protection_rule.requested.json asks: may workflow run 1589141559 of
// Codertocat/Hello-World deploy commit protectedSha to the GitHub environment "production"?
const (
	protectedSha   = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
	newerSha       = "abc1234def5678901234567890abcdef01234567"
	reviewPath     = fixtureRepo + "/actions/runs/1589141559/deployment_protection_rule"
	deploymentPath = fixtureRepo + "/deployments/145988746/statuses"
)

// protectionConfig maps the GitHub environment production to prod, whose api and docs scopes are
// built from the fixture's repository.
const protectionConfig = `environments:
  prod:
    github-environment: production
    scopes:
      api:
        repository: Codertocat/Hello-World
        branch: master
      docs:
        repository: Codertocat/Hello-World
        branch: master
        paths: [docs/**]
      web:
        repository: acme/web
        branch: master
`

func withReviewer(inst ghadapter.Installations) func(*Options) {
	return func(o *Options) { o.Reviewer = &ghadapter.Reviewer{Installations: inst} }
}

func stubReview(gh *githubtest.Server) *githubtest.Stub {
	return gh.On("POST", reviewPath, http.StatusNoContent, nil)
}

func review(state, comment string) call {
	body := map[string]any{"environment_name": "production", "state": state}
	if comment != "" {
		body["comment"] = comment
	}
	return call{"POST", reviewPath, body}
}

func protectionFixture(t *testing.T, edit func(m map[string]any)) []byte {
	t.Helper()
	body := fixture(t, "deployment_protection_rule.requested.json")
	if edit == nil {
		return body
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The requests table, against the strict fake GitHub: state in the store, then the one delivery.
func TestProtectionRule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		config  string
		setup   func(t *testing.T, h *harness)
		outcome core.Outcome
		calls   []call
	}{
		{
			name:   "approves the newest accepted commit",
			config: protectionConfig,
			setup: func(t *testing.T, h *harness) {
				deployed(t, h, "prod", "old", newerSha, "api", "docs") // an older deploy, live
				pending(t, h, "prod", "push", protectedSha, "api")     // the job's commit, pending for api only (docs/** untouched)
			},
			outcome: surfaces.OutcomeApproved,
			calls:   []call{review("approved", "f95f852 is the newest commit accepted for prod (api, docs) at generation 2")},
		},
		{
			name:   "approves the live commit when nothing newer is pending",
			config: protectionConfig,
			setup: func(t *testing.T, h *harness) {
				deployed(t, h, "prod", "push", protectedSha, "api", "docs")
			},
			outcome: surfaces.OutcomeApproved,
			calls:   []call{review("approved", "f95f852 is the newest commit accepted for prod (api, docs) at generation 1")},
		},
		{
			name:   "rejects a superseded commit and marks its deployment inactive",
			config: protectionConfig,
			setup: func(t *testing.T, h *harness) {
				pending(t, h, "prod", "push", protectedSha, "api", "docs")
				pending(t, h, "prod", "newer", newerSha, "api")
			},
			outcome: surfaces.OutcomeRejected,
			calls: []call{
				review("rejected", "Superseded by generation 2 (abc1234)"),
				{"POST", deploymentPath, map[string]any{"state": "inactive", "description": "Superseded by generation 2 (abc1234)"}},
			},
		},
		{
			name:   "rejects when a scope it was not accepted for has newer work",
			config: protectionConfig,
			setup: func(t *testing.T, h *harness) {
				pending(t, h, "prod", "push", protectedSha, "api")
				pending(t, h, "prod", "docs-change", newerSha, "docs")
			},
			outcome: surfaces.OutcomeRejected,
			calls: []call{
				review("rejected", "Superseded by generation 2 (abc1234)"),
				{"POST", deploymentPath, map[string]any{"state": "inactive", "description": "Superseded by generation 2 (abc1234)"}},
			},
		},
		{
			name:   "rejects a commit latestwins never accepted",
			config: protectionConfig,
			setup: func(t *testing.T, h *harness) {
				pending(t, h, "prod", "other", newerSha, "api")
			},
			outcome: surfaces.OutcomeRejected,
			calls: []call{review("rejected", "latestwins has not accepted f95f852 for prod (api, docs), so it cannot tell whether it is the newest commit. "+
				"Pushes to the branch configured for these scopes are accepted; re-run this job once its push is, or deploy the commit through latestwins.")},
		},
		{
			name:    "rejects a GitHub environment no latestwins environment answers",
			config:  testConfig,
			outcome: surfaces.OutcomeRejected,
			calls: []call{review("rejected", `No latestwins environment answers the GitHub environment "production": in .github/latestwins.yml of Codertocat/Hello-World, `+
				"name an environment \"production\", or set `github-environment: production` on the one it deploys (docs/config.md, \"Deployment protection rules\").")},
		},
		{
			name:    "rejects an environment with no scope from the repository",
			config:  "environments:\n  production:\n    scopes:\n      web:\n        repository: acme/web\n        branch: main\n",
			outcome: surfaces.OutcomeRejected,
			calls: []call{review("rejected", "The latestwins environment production has no scope built from Codertocat/Hello-World: "+
				`add one to .github/latestwins.yml, or remove latestwins from the protection rules of the GitHub environment "production".`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t)
			for _, c := range tt.calls {
				gh.On(c.Method, c.Path, statusOf(c), exampleOf(t, c))
			}
			h := newHarness(t, tt.config, withReviewer(inst))
			if tt.setup != nil {
				tt.setup(t, h)
			}
			rec := h.post(t, core.EventProtectionRule, "d-protect", protectionFixture(t, nil))
			res := decodeResult(t, rec)
			if rec.Code != http.StatusOK || res.Outcome != tt.outcome {
				t.Errorf("%d %s, want 200 %s", rec.Code, rec.Body, tt.outcome)
			}
			if diff := cmp.Diff(tt.calls, calls(gh.Requests())); diff != "" {
				t.Errorf("GitHub requests (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]int64{fixtureInstallID}, inst.asked()[:1]); diff != "" {
				t.Errorf("installation (-want +got):\n%s", diff)
			}
		})
	}
}

func statusOf(c call) int {
	if c.Path == reviewPath {
		return http.StatusNoContent
	}
	return http.StatusCreated
}

func exampleOf(t *testing.T, c call) any {
	if c.Path == reviewPath {
		return nil
	}
	return githubtest.Example(t, "POST", "/repos/{owner}/{repo}/deployments/{deployment_id}/statuses", http.StatusCreated, "")
}

// A re-delivery answers the same and changes nothing more in the store than the first answer did
// (it recorded its approval), and a newer commit accepted in between turns the answer.
func TestProtectionRuleReplay(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	stubReview(gh).Times(2)
	h := newHarness(t, protectionConfig, withReviewer(inst))
	pending(t, h, "prod", "push", protectedSha, "api", "docs")
	ctx := context.Background()
	body := protectionFixture(t, nil)
	first := h.post(t, core.EventProtectionRule, "d-protect", body)
	before, err := h.auth.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	again := h.post(t, core.EventProtectionRule, "d-protect", body)
	if first.Code != http.StatusOK || first.Body.String() != again.Body.String() {
		t.Errorf("first %d %s, again %d %s: want the same 200", first.Code, first.Body, again.Code, again.Body)
	}
	after, err := h.auth.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("answering changed the store (-before +after):\n%s", diff)
	}
	approved := review("approved", "f95f852 is the newest commit accepted for prod (api, docs) at generation 1")
	if diff := cmp.Diff([]call{approved, approved}, calls(gh.Requests())); diff != "" {
		t.Errorf("GitHub requests (-want +got):\n%s", diff)
	}
}

func TestProtectionRuleRefusedOrIgnored(t *testing.T) {
	t.Parallel()
	body := protectionFixture(t, nil)
	tests := []struct {
		name     string
		sign     func([]byte) string
		body     []byte
		status   int
		contains string
	}{
		{"bad signature", func(b []byte) string { return sign([]byte("not the secret"), b) }, body, http.StatusUnauthorized, "does not match the body"},
		{"unsigned", func([]byte) string { return "" }, body, http.StatusUnauthorized, "no X-Hub-Signature-256 header"},
		{"another action", nil, protectionFixture(t, func(m map[string]any) { m["action"] = "completed" }), http.StatusAccepted, `"outcome":"ignored"`},
		{"a callback URL of another repository", nil, protectionFixture(t, func(m map[string]any) {
			m["deployment_callback_url"] = "https://api.github.com/repos/acme/web/actions/runs/1/deployment_protection_rule"
		}), http.StatusBadRequest, "the deployment callback URL names acme/web, the event Codertocat/Hello-World"},
		{"a callback URL that is not one", nil, protectionFixture(t, func(m map[string]any) {
			m["deployment_callback_url"] = "https://example.com/hook"
		}), http.StatusBadRequest, "want .../repos/OWNER/REPO/actions/runs/RUN_ID/deployment_protection_rule"},
		{"no commit", nil, protectionFixture(t, func(m map[string]any) { delete(m, "sha"); m["deployment"] = nil }), http.StatusBadRequest, "names no commit"},
		{"no environment", nil, protectionFixture(t, func(m map[string]any) { delete(m, "environment") }), http.StatusBadRequest, "names no environment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gh, inst := newGitHub(t) // no stubs: nothing may be called
			h := newHarness(t, protectionConfig, withReviewer(inst))
			sig := sign(testSecret, tt.body)
			if tt.sign != nil {
				sig = tt.sign(tt.body)
			}
			rec := h.do(newDelivery(core.EventProtectionRule, "d1", tt.body, sig))
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.contains) {
				t.Errorf("%d %s, want %d containing %q", rec.Code, rec.Body, tt.status, tt.contains)
			}
			if n := len(gh.Requests()); n != 0 {
				t.Errorf("%d GitHub calls, want none", n)
			}
		})
	}
}

// failingConfig is a ConfigSource that answers err.
type failingConfig struct{ err error }

func (f failingConfig) Config(context.Context, int64, core.RepoRef, string) (*config.Config, error) {
	return nil, f.err
}

var _ core.ConfigSource = failingConfig{}

// Bad configuration rejects with what to fix (a waiting job helps nobody); a failure to read it is
// a 5xx worth a re-delivery, and nothing is answered.
func TestProtectionRuleConfigErrors(t *testing.T) {
	t.Parallel()
	_, bad := config.Parse([]byte("environments:\n  prod:\n    polcy: latest\n"))
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		gh, inst := newGitHub(t)
		want := review("rejected", fmt.Sprintf("latestwins cannot check this deployment: configuration of Codertocat/Hello-World at the default branch: %s", bad))
		stubReview(gh)
		h := newHarness(t, protectionConfig, withReviewer(inst), func(o *Options) { o.Config = failingConfig{bad} })
		rec := h.post(t, core.EventProtectionRule, "d1", protectionFixture(t, nil))
		if rec.Code != http.StatusOK || decodeResult(t, rec).Outcome != surfaces.OutcomeRejected {
			t.Errorf("%d %s, want 200 rejected", rec.Code, rec.Body)
		}
		if diff := cmp.Diff([]call{want}, calls(gh.Requests())); diff != "" {
			t.Errorf("GitHub requests (-want +got):\n%s", diff)
		}
	})
	t.Run("unreadable", func(t *testing.T) {
		t.Parallel()
		gh, inst := newGitHub(t)
		h := newHarness(t, protectionConfig, withReviewer(inst), func(o *Options) { o.Config = failingConfig{fmt.Errorf("GitHub answered 502")} })
		rec := h.post(t, core.EventProtectionRule, "d1", protectionFixture(t, nil))
		if rec.Code != http.StatusInternalServerError {
			t.Errorf("%d %s, want 500", rec.Code, rec.Body)
		}
		if n := len(gh.Requests()); n != 0 {
			t.Errorf("%d GitHub calls, want none", n)
		}
	})
}

// The rule reads the repository's own file on its default branch, never at the gated job's commit:
// a branch could otherwise narrow its scopes differently for its own deployment.
func TestProtectionRuleReadsTheDefaultBranchConfiguration(t *testing.T) {
	t.Parallel()
	gh, inst := newGitHub(t)
	contents := stubConfig(t, gh, ownFile)
	stubReview(gh)
	h := newHarness(t, protectionConfig, withReviewer(inst))
	files, err := ghadapter.NewFiles(inst, h.auth, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "latestwins.yml")
	if err := os.WriteFile(path, []byte("allowed-overrides: [paths]\n"+protectionConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if h.app.core.Config, err = configsource.NewTrusted(configsource.TrustedOptions{Path: path, Files: files}); err != nil {
		t.Fatal(err)
	}
	deployed(t, h, "prod", "push", protectedSha, "api", "docs")
	if rec := h.post(t, core.EventProtectionRule, "d-protect", protectionFixture(t, nil)); rec.Code != http.StatusOK {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	for _, r := range contents.Requests() {
		if ref, ok := r.Query["ref"]; ok {
			t.Errorf("configuration read at ref %q, want the default branch (no ref)", ref)
		}
	}
}
