package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
)

const trustedName = "acme/.github:.github/latestwins.yml"

// trusted is an organization's trusted file: production is fed by acme/api's release branch only.
const trusted = `
allowed-overrides: [paths, workflow]
environments:
  staging:
    scopes:
      api:
        repository: acme/api
        branch: main
        paths: [services/**]
        workflow: deploy.yml
      web:
        repository: acme/web
        branch: main
  production:
    allowed-overrides: []
    scopes:
      api:
        repository: acme/api
        branch: release
        workflow: deploy.yml
`

func mustParse(t *testing.T, s string) *Config {
	t.Helper()
	c, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNarrowRefusesWhatOnlyTheTrustedFileMaySet(t *testing.T) {
	t.Parallel()
	base := mustParse(t, trusted)
	tests := []struct {
		name, repo, file string
		want             []string // each must appear in the message
	}{
		{"a per-repository file that defines production (the old form)", "acme/intruder", `
environments:
  production:
    scopes:
      api:
        repository: acme/intruder
        branch: main
`, []string{`line 5: scope "api" of environment "production" is built from acme/api, not acme/intruder`}},
		{"a new environment", "acme/api", "environments:\n  prod-eu:\n    scopes:\n      api:\n        paths: [x/**]\n",
			[]string{`line 2: environment "prod-eu" is not defined in the trusted file`}},
		{"a new scope", "acme/api", "environments:\n  staging:\n    scopes:\n      worker:\n        workflow: w.yml\n",
			[]string{`line 4: scope "worker" of environment "staging" is not defined in the trusted file`}},
		{"another repository's scope", "acme/api", "environments:\n  staging:\n    scopes:\n      web:\n        paths: [x/**]\n",
			[]string{`scope "web" of environment "staging" is built from acme/web, not acme/api`}},
		{"its own scope's branch", "acme/api", "environments:\n  staging:\n    scopes:\n      api:\n        branch: feature\n",
			[]string{`line 5: scope "api" of environment "staging": "branch" may only be set in the trusted file`}},
		{"a policy", "acme/api", "environments:\n  staging:\n    policy: latest\n",
			[]string{`environment "staging": "policy" may only be set in the trusted file`}},
		{"an override the environment does not allow", "acme/api", "environments:\n  production:\n    scopes:\n      api:\n        workflow: other.yml\n",
			[]string{`the trusted file does not allow overriding workflow in "production" (allowed-overrides: [])`}},
		{"a promotion requirement", "acme/api", "environments:\n  production:\n    requires: []\n    requires-ancestor: false\n",
			[]string{`line 3: environment "production": "requires" may only be set in the trusted file`,
				`line 4: environment "production": "requires-ancestor" may only be set in the trusted file`}},
		{"a top-level key", "acme/api", "allowed-overrides: [paths]\n", []string{`"allowed-overrides" may only be set in the trusted file`}},
		{"not YAML", "acme/api", "environments: [", []string{"not valid YAML"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := base.Narrow(tt.repo, []byte(tt.file), trustedName)
			var ne *NarrowError
			if !errors.As(err, &ne) || !errors.Is(err, authority.ErrInvalidInput) {
				t.Fatalf("Narrow = %v, %v; want a *NarrowError matching ErrInvalidInput", got, err)
			}
			msg := err.Error()
			for _, w := range append(tt.want, trustedName, tt.repo) {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
		})
	}
	if diff := cmp.Diff(mustParse(t, trusted), base); diff != "" {
		t.Errorf("Narrow changed the trusted configuration (-before +after):\n%s", diff)
	}
}

func TestNarrowOwnScopes(t *testing.T) {
	t.Parallel()
	base := mustParse(t, trusted)
	got, err := base.Narrow("ACME/api", []byte(`
environments:
  staging:
    scopes:
      api:
        paths: [services/api/**]
        workflow: deploy-api.yml
`), trustedName)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := got.Environment("staging")
	api := env.Scopes[0]
	if api.Workflow != "deploy-api.yml" || api.WorkflowFrom != "ACME/api" {
		t.Errorf("workflow = %q from %q; want deploy-api.yml from the repository's file", api.Workflow, api.WorkflowFrom)
	}
	// The repository's paths narrow the trusted ones: a change must touch both.
	for _, tt := range []struct {
		changed []string
		want    bool
	}{
		{[]string{"services/api/main.go"}, true},
		{[]string{"services/web/main.go"}, false}, // trusted paths match, the repository's do not
		{[]string{"README.md"}, false},
		{nil, true}, // changes unknown: every scope of the branch
	} {
		sel := got.ScopesFor("acme/api", "main", tt.changed)
		if (len(sel) == 1) != tt.want {
			t.Errorf("ScopesFor(%v) = %v; want selected=%v", tt.changed, sel, tt.want)
		}
	}
	// Only the repository's own view changed.
	if env, _ := base.Environment("staging"); env.Scopes[0].Workflow != "deploy.yml" || env.Scopes[0].NarrowPaths != nil {
		t.Errorf("the trusted configuration changed: %+v", env.Scopes[0])
	}
}

// TestNarrowPathsNeverWiden: a repository's own file with paths: ["**"] does not widen the trusted
// services/**: a change that only its ** matches feeds no scope, one under services/ still does.
func TestNarrowPathsNeverWiden(t *testing.T) {
	t.Parallel()
	base := mustParse(t, trusted)
	got, err := base.Narrow("acme/api", []byte("environments:\n  staging:\n    scopes:\n      api:\n        paths: [\"**\"]\n"), trustedName)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		changed []string
		want    bool
	}{
		{[]string{"README.md"}, false},
		{[]string{"docs/api/index.md", "go.mod"}, false},
		{[]string{"services/api/main.go"}, true},
		{[]string{"README.md", "services/api/main.go"}, true},
	} {
		sel := got.ScopesFor("acme/api", "main", tt.changed)
		if (len(sel) == 1) != tt.want {
			t.Errorf("ScopesFor(%v) with the repository's paths [\"**\"] = %v; want selected=%v (the trusted paths are [services/**])", tt.changed, sel, tt.want)
		}
	}
}

func TestNarrowEmptyFileChangesNothing(t *testing.T) {
	t.Parallel()
	base := mustParse(t, trusted)
	for _, f := range []string{"", "# nothing here\n", "version: 1\n"} {
		got, err := base.Narrow("acme/api", []byte(f), trustedName)
		if err != nil {
			t.Fatalf("Narrow(%q): %v", f, err)
		}
		if diff := cmp.Diff(base, got); diff != "" {
			t.Errorf("Narrow(%q) changed (-want +got):\n%s", f, diff)
		}
	}
}

func TestAllowedOverridesParse(t *testing.T) {
	t.Parallel()
	c := mustParse(t, trusted)
	for env, want := range map[string][]string{"staging": {"paths", "workflow"}, "production": {}} {
		e, _ := c.Environment(env)
		if diff := cmp.Diff(want, e.AllowedOverrides); diff != "" {
			t.Errorf("%s allowed-overrides (-want +got):\n%s", env, diff)
		}
	}
	_, err := Parse([]byte("allowed-overrides: [branch]\nenvironments:\n  s:\n" + ghScope))
	if err == nil || !strings.Contains(err.Error(), `allowed-overrides may list paths, workflow; "branch" is not one of them`) {
		t.Errorf("allowed-overrides: [branch] gave %v", err)
	}
}
