package config

import (
	"errors"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const ghScope = "    scopes:\n      api:\n        repository: acme/api\n        branch: main\n"

func TestForGitHubEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte("environments:\n" +
		"  staging:\n" + ghScope +
		"  prod:\n    github-environment: Production\n" + ghScope +
		"  preview/pr-{number}:\n" + ghScope +
		"  review/{number}:\n    github-environment: review-app-{number}\n" + ghScope))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		github string
		want   string // the latestwins environment; "" when none answers
	}{
		{"staging", "staging"},
		{"STAGING", "staging"}, // GitHub compares environment names without regard to case
		{"production", "prod"},
		{"prod", ""}, // prod answers Production only
		{"preview/pr-803", "preview/pr-803"},
		{"review-app-12", "review/12"},
		{"Review-App-12", "review/12"},
		{"review-app-0", ""},
		{"review-app-012", ""},
		{"preview/pr-", ""},
		{"qa", ""},
	}
	for _, tt := range tests {
		got, env, ok := cfg.ForGitHubEnvironment(tt.github)
		if ok != (tt.want != "") || got != tt.want {
			t.Errorf("ForGitHubEnvironment(%q) = %q, %v; want %q", tt.github, got, ok, tt.want)
		}
		if ok && (env == nil || len(env.Scopes) != 1) {
			t.Errorf("ForGitHubEnvironment(%q) gave environment %+v", tt.github, env)
		}
	}
}

func TestGitHubEnvironmentProblems(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "environments:\n  prod:\n    github-environment: ''\n" + ghScope, []string{
			`line 3: environment "prod": github-environment "" must be a GitHub environment name of 1-255 characters`}},
		{"a list", "environments:\n  prod:\n    github-environment: [a, b]\n" + ghScope, []string{
			`line 3: github-environment must be a single value`}},
		{"preview without the placeholder", "environments:\n  preview/pr-{number}:\n    github-environment: preview\n" + ghScope, []string{
			`line 3: environment "preview/pr-{number}": github-environment "preview" must hold {number} once, like the environment's name (e.g. preview-{number}), so that each pull request has its own`}},
		{"placeholder outside a preview", "environments:\n  prod:\n    github-environment: prod-{number}\n" + ghScope, []string{
			`line 3: environment "prod": github-environment "prod-{number}" may hold {number} only in a preview environment (one whose name holds it)`}},
		{"two environments answer one", "environments:\n  production:\n" + ghScope + "  prod:\n    github-environment: Production\n" + ghScope, []string{
			`line 7: environments "production" (line 2) and "prod" both answer the GitHub environment "Production" (names are compared without regard to case); set a different github-environment on one of them`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.in))
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error = %v, want a *config.Error", err)
			}
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// The protection rules example in docs/config.md parses and maps as it says.
func TestDocumentedGitHubEnvironmentExample(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(docBlock(t, b, "## Deployment protection rules"))
	if err != nil {
		t.Fatalf("the documented example does not parse: %v", err)
	}
	for github, want := range map[string]string{"production": "prod", "preview-803": "preview/pr-803"} {
		if got, _, ok := cfg.ForGitHubEnvironment(github); !ok || got != want {
			t.Errorf("ForGitHubEnvironment(%q) = %q, %v; want %q", github, got, ok, want)
		}
	}
}
