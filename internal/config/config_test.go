package config

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/latestwins/latestwins/internal/authority"
)

const valid = `version: 1
environments:
  staging:
    scopes:
      api:
        repository: acme/api
        branch: main
        paths: [services/api/**, go.mod]
        workflow: deploy.yml
      web:
        repository: acme/web
        branch: main
  prod:
    policy: latest
    scopes:
      api:
        repository: acme/api
        branch: release
        workflow: deploy.yaml
  preview/pr-{number}:
    scopes:
      api:
        repository: acme/api
        branch: main
        workflow: preview.yml
`

func TestParseValid(t *testing.T) {
	t.Parallel()
	got, err := Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Environments: []Environment{
		{Name: "staging", Policy: PolicyLatest, Line: 3, Scopes: []Scope{
			{Name: "api", Repository: "acme/api", Branch: "main", Paths: []string{"services/api/**", "go.mod"}, Workflow: "deploy.yml", Line: 5},
			{Name: "web", Repository: "acme/web", Branch: "main", Line: 10},
		}},
		{Name: "prod", Policy: PolicyLatest, Line: 13, Scopes: []Scope{
			{Name: "api", Repository: "acme/api", Branch: "release", Workflow: "deploy.yaml", Line: 16},
		}},
		{Name: "preview/pr-{number}", Policy: PolicyLatest, Line: 20, Scopes: []Scope{
			{Name: "api", Repository: "acme/api", Branch: "main", Workflow: "preview.yml", Line: 22},
		}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

// The example in docs/config.md is what users copy: it must parse.
func TestDocumentedExampleParses(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	m := docBlock(t, b, "## Example")
	cfg, err := Parse(m)
	if err != nil {
		t.Fatalf("the documented example does not parse: %v", err)
	}
	if len(cfg.Environments) != 3 {
		t.Errorf("documented example: %d environments, want 3", len(cfg.Environments))
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	scope := "    scopes:\n      api:\n        repository: acme/api\n        branch: main\n"
	tests := []struct {
		name string
		in   string
		want []string // every problem, in order
	}{
		{"empty", "", []string{"the file is empty; define at least one environment under `environments:` (see docs/config.md)"}},
		{"not yaml", "environments: [\n", []string{`not valid YAML: line 1: did not find expected node content`}},
		{"root is a list", "- a\n", []string{"line 1: the top level must be a mapping of keys to values"}},
		{"no environments", "version: 1\n", []string{"line 1: no `environments:`; define at least one environment (see docs/config.md)"}},
		{"bad version", "version: 2\nenvironments:\n  staging:\n" + scope, []string{"line 1: version must be 1 (or left out)"}},
		{"unknown top key", "environment:\n  staging: {}\n", []string{
			`line 1: unknown key "environment" at the top level; allowed: version, environments, allowed-overrides`,
			"line 1: no `environments:`; define at least one environment (see docs/config.md)"}},
		{"empty environments", "environments: {}\n", []string{"line 1: environments is empty; define at least one environment"}},
		{"invalid environment name", "environments:\n  -staging:\n" + scope, []string{
			`line 2: environment name "-staging" is invalid: use 1-128 characters from A-Z a-z 0-9 . _ / -, starting with a letter or digit, without empty path segments (e.g. staging, preview/pr-803)`}},
		{"unknown placeholder", "environments:\n  preview/{pr}:\n" + scope, []string{
			`line 2: environment "preview/{pr}": the only placeholder is {number} (for pull request previews, e.g. preview/pr-{number})`}},
		{"placeholder twice", "environments:\n  pr-{number}-{number}:\n" + scope, []string{`line 2: environment "pr-{number}-{number}": use {number} at most once`}},
		{"environment twice", "environments:\n  staging:\n" + scope + "  staging:\n" + scope, []string{
			`line 7: environment "staging" is defined twice (first at line 2); merge them`}},
		{"unknown environment key", "environments:\n  staging:\n    polcy: queue\n" + scope, []string{
			`line 3: unknown key "polcy" in environment "staging"; allowed: policy, scopes, github-environment, allowed-overrides, requires, requires-ancestor, soak, approvals, approvers, pusher-may-approve, windows, break-glass, alert-after, alert-webhook, alert-issue`}},
		{"bad policy", "environments:\n  staging:\n    policy: fifo\n" + scope, []string{
			`line 3: environment "staging": policy "fifo" is not known; use latest (the default: the newest commit wins) or queue (every commit, in order)`}},
		{"barrier-paths not a list", "environments:\n  staging:\n    scopes:\n      api:\n        repository: acme/api\n        branch: main\n        barrier-paths: migrations/**\n", []string{
			`line 7: scope "api" of environment "staging": paths must be a list of glob patterns, e.g. [services/api/**]`}},
		{"bad barrier path", "environments:\n  staging:\n    scopes:\n      api:\n        repository: acme/api\n        branch: main\n        barrier-paths: [/migrations/**]\n", []string{
			`line 7: scope "api" of environment "staging": path "/migrations/**" must be relative to the repository root, without a leading / or ./`}},
		{"no scopes", "environments:\n  staging:\n    policy: latest\n", []string{`line 2: environment "staging" has no ` + "`scopes:`" + `; give it at least one scope`}},
		{"scopes not a mapping", "environments:\n  staging:\n    scopes: [api]\n", []string{`line 3: scopes of "staging" must be a mapping of keys to values`}},
		{"invalid scope name", "environments:\n  staging:\n    scopes:\n      a/b:\n        repository: acme/api\n        branch: main\n", []string{
			`line 4: scope name "a/b" in environment "staging" is invalid: use 1-64 characters from A-Z a-z 0-9 . _ -, starting with a letter or digit (e.g. api)`}},
		{"scope without repository", "environments:\n  staging:\n    scopes:\n      api:\n        branch: main\n", []string{
			`line 4: scope "api" of environment "staging" has no repository; say which repository it is built from (repository: OWNER/NAME)`}},
		{"scope without branch", "environments:\n  staging:\n    scopes:\n      api:\n        repository: acme/api\n", []string{
			`line 4: scope "api" of environment "staging" has no branch; say which branch deploys it (branch: main)`}},
		{"duplicate scope", "environments:\n  staging:\n" + scope + "      api:\n        repository: acme/web\n        branch: main\n", []string{
			`line 7: scope "api" of environment "staging" is defined twice (first at line 4); give each scope one entry`}},
		{"unknown scope key and typo", "environments:\n  staging:\n    scopes:\n      api:\n        repo: acme/api\n        branch: main\n", []string{
			`line 5: unknown key "repo" in scope "api" of environment "staging"; allowed: repository, branch, paths, barrier-paths, workflow`,
			`line 4: scope "api" of environment "staging" has no repository; say which repository it is built from (repository: OWNER/NAME)`}},
		{"bad repository", "environments:\n  staging:\n    scopes:\n      api:\n        repository: https://github.com/acme/api\n        branch: main\n", []string{
			`line 5: scope "api" of environment "staging": repository "https://github.com/acme/api" must be OWNER/NAME, e.g. acme/api`}},
		{"full ref as branch", "environments:\n  staging:\n    scopes:\n      api:\n        repository: acme/api\n        branch: refs/heads/main\n", []string{
			`line 6: scope "api" of environment "staging": write the branch name without refs/heads/ (e.g. main)`}},
		{"bad workflow", "environments:\n  staging:\n" + scope + "        workflow: .github/workflows/deploy.yml\n", []string{
			`line 7: scope "api" of environment "staging": workflow ".github/workflows/deploy.yml" must be a file name in .github/workflows ending in .yml or .yaml (e.g. deploy.yml)`}},
		{"paths not a list", "environments:\n  staging:\n" + scope + "        paths: services/api\n", []string{
			`line 7: scope "api" of environment "staging": paths must be a list of glob patterns, e.g. [services/api/**]`}},
		{"bad glob", "environments:\n  staging:\n" + scope + "        paths: ['svc/[a-']\n", []string{
			`line 7: scope "api" of environment "staging": path "svc/[a-" is not a valid glob pattern (segments separated by single slashes; * ? [a-z] and ** are allowed)`}},
		{"absolute path", "environments:\n  staging:\n" + scope + "        paths: [/svc]\n", []string{
			`line 7: scope "api" of environment "staging": path "/svc" must be relative to the repository root, without a leading / or ./`}},
		{"alias", "environments:\n  staging: &s\n" + scope + "  prod: *s\n", []string{
			`line 7: "prod": anchors and aliases are not supported; write the value out`}},
		{"repository as a list", "environments:\n  staging:\n    scopes:\n      api:\n        repository: [acme/api]\n        branch: main\n", []string{
			`line 5: repository must be a single value`,
			`line 4: scope "api" of environment "staging" has no repository; say which repository it is built from (repository: OWNER/NAME)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", cfg)
			}
			if !errors.Is(err, authority.ErrInvalidInput) {
				t.Errorf("error %v does not match authority.ErrInvalidInput", err)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *config.Error", err)
			}
			var got []string
			for _, p := range ce.Problems {
				got = append(got, p.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(err.Error(), ".github/latestwins.yml is invalid: ") {
				t.Errorf("message %q does not name the file", err)
			}
		})
	}
}

func TestScopesFor(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	type sel struct {
		Env    string
		Scopes []string
	}
	tests := []struct {
		name    string
		repo    string
		branch  string
		changed []string
		want    []sel
	}{
		{"api change on main", "acme/api", "main", []string{"services/api/main.go"}, []sel{{"staging", []string{"api"}}}},
		{"repository case does not matter", "ACME/Api", "main", []string{"go.mod"}, []sel{{"staging", []string{"api"}}}},
		{"unrelated path", "acme/api", "main", []string{"docs/readme.md"}, nil},
		{"changes unknown", "acme/api", "main", nil, []sel{{"staging", []string{"api"}}}},
		{"release branch", "acme/api", "release", []string{"anything"}, []sel{{"prod", []string{"api"}}}},
		{"web has no paths", "acme/web", "main", []string{"x/y"}, []sel{{"staging", []string{"web"}}}},
		{"other repository", "acme/other", "main", nil, nil},
		{"other branch", "acme/api", "feature", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []sel
			for _, s := range cfg.ScopesFor(tt.repo, tt.branch, tt.changed) {
				got = append(got, sel{s.Environment, s.ScopeNames()})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ScopesFor (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPreviewsFor(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.PreviewsFor("acme/api", "main", 803, nil)
	if len(got) != 1 || got[0].Environment != "preview/pr-803" || got[0].Scopes[0].Name != "api" {
		t.Errorf("PreviewsFor = %+v, want preview/pr-803 with api", got)
	}
	if got := cfg.PreviewsFor("acme/api", "release", 803, nil); got != nil {
		t.Errorf("PreviewsFor another base = %+v, want none", got)
	}
	for name, want := range map[string]string{"preview/pr-803": "preview/pr-{number}", "staging": "staging", "preview/pr-": "", "preview/pr-08": "", "preview/pr-x": ""} {
		got := ""
		if e, ok := cfg.Environment(name); ok {
			got = e.Name
		}
		if got != want {
			t.Errorf("Environment(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestMatchPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"services/api/**", "services/api/main.go", true},
		{"services/api/**", "services/api/x/y/z.go", true},
		{"services/api/**", "services/api", true},
		{"services/api/**", "services/web/main.go", false},
		{"**/*.go", "main.go", true},
		{"**/*.go", "a/b/main.go", true},
		{"**/*.go", "a/b/main.rs", false},
		{"go.mod", "go.mod", true},
		{"go.mod", "x/go.mod", false},
		{"*.md", "a/b.md", false},
		{"a/**/z", "a/z", true},
		{"a/**/z", "a/b/c/z", true},
		{"a/**/z", "a/b/c/y", false},
	}
	for _, tt := range tests {
		if got := matchPath(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchPath(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte("environments:\n  a: &x {scopes: {b: {repository: o/r, branch: m}}}\n  c: *x\n"))
	f.Add([]byte("<<: {a: b}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		// Whatever parses is valid by the domain's rules.
		for _, e := range cfg.Environments {
			if err := authority.ValidateEnvironment(e.For(1)); err != nil {
				t.Fatalf("accepted environment %q: %v", e.Name, err)
			}
			if len(e.Scopes) == 0 {
				t.Fatalf("accepted environment %q without scopes", e.Name)
			}
			for _, s := range e.Scopes {
				if err := authority.ValidateScope(s.Name); err != nil || s.Repository == "" || s.Branch == "" {
					t.Fatalf("accepted scope %+v: %v", s, err)
				}
			}
		}
	})
}

// docBlock is the first ```yaml block after heading in docs/config.md.
func docBlock(t *testing.T, doc []byte, heading string) []byte {
	t.Helper()
	_, after, ok := bytes.Cut(doc, []byte("\n"+heading+"\n"))
	if !ok {
		t.Fatalf("docs/config.md has no %q", heading)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(after)
	if m == nil {
		t.Fatalf("docs/config.md has no ```yaml example after %q", heading)
	}
	return m[1]
}

// The repository's own file documented in docs/config.md narrows the documented example.
func TestDocumentedOwnFileNarrows(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(docBlock(t, b, "## Example"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.Narrow("acme/api", docBlock(t, b, "## A repository's own file"), "acme/.github:.github/latestwins.yml")
	if err != nil {
		t.Fatalf("the documented repository file is refused: %v", err)
	}
	env, _ := got.Environment("staging")
	if env.Scopes[0].Workflow != "deploy-api.yml" {
		t.Errorf("staging/api workflow %q, want the repository's deploy-api.yml", env.Scopes[0].Workflow)
	}
}

// TestPolicyQueueAndBarriers: policy queue is accepted; barrier-paths are globs like paths, and a
// commit is a barrier in a scope when it touches one of them, or when its changes are unknown.
func TestPolicyQueueAndBarriers(t *testing.T) {
	t.Parallel()
	const file = `version: 1
environments:
  prod:
    policy: queue
    scopes:
      db:
        repository: acme/api
        branch: main
        barrier-paths: [migrations/**, schema.sql]
      api:
        repository: acme/api
        branch: main
`
	c, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	e := c.Environments[0]
	if e.Policy != PolicyQueue || !cmp.Equal(e.Scopes[0].BarrierPaths, []string{"migrations/**", "schema.sql"}) || e.Scopes[1].BarrierPaths != nil {
		t.Fatalf("parsed %+v", e)
	}
	sels := c.ScopesFor("acme/api", "main", []string{"migrations/2026/001_users.sql", "README.md"})
	if len(sels) != 1 || sels[0].Policy != PolicyQueue {
		t.Fatalf("selections %+v", sels)
	}
	for _, tt := range []struct {
		changed []string
		want    []string
	}{
		{[]string{"migrations/2026/001_users.sql"}, []string{"db"}},
		{[]string{"schema.sql", "api/main.go"}, []string{"db"}},
		{[]string{"api/main.go"}, nil},
		{nil, []string{"db"}}, // changes unknown: a barrier where the scope has barrier-paths
	} {
		if got := sels[0].Barriers(tt.changed); !cmp.Equal(got, tt.want) {
			t.Errorf("Barriers(%v) = %v, want %v", tt.changed, got, tt.want)
		}
	}
}

const promotion = `environments:
  staging:
    scopes:
      api: {repository: acme/api, branch: main}
  qa:
    scopes:
      api: {repository: acme/api, branch: main}
  prod:
    requires: [staging, qa]
    requires-ancestor: true
    scopes:
      api: {repository: acme/api, branch: main}
`

// TestPromotionRequirements: requires and requires-ancestor are read, and every selection of the
// environment carries them; one without requires carries an empty requirement, so that one removed
// from the file is removed from the environment.
func TestPromotionRequirements(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, promotion)
	got := map[string]*authority.Requirements{}
	for _, sel := range cfg.ScopesFor("acme/api", "main", nil) {
		got[sel.Environment] = sel.Requires
	}
	want := map[string]*authority.Requirements{
		"staging": {Environments: []string{}},
		"qa":      {Environments: []string{}},
		"prod":    {Environments: []string{"staging", "qa"}, Ancestor: true},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("requirements of the selections (-want +got):\n%s", diff)
	}
}

func TestPromotionRequirementProblems(t *testing.T) {
	t.Parallel()
	env := func(name, extra string) string {
		return "  " + name + ":\n" + extra + "    scopes:\n      api: {repository: acme/api, branch: main}\n"
	}
	tests := map[string]struct {
		file string
		want string
	}{
		"an environment the file does not define": {env("prod", "    requires: [stagign]\n"),
			`line 2: environment "prod" requires "stagign", which this file does not define`},
		"itself": {env("prod", "    requires: [prod]\n"), `environment "prod" requires itself`},
		"a cycle": {env("a", "    requires: [b]\n") + env("b", "    requires: [c]\n") + env("c", "    requires: [a]\n"),
			"environments require each other in a cycle (a requires b requires c requires a)"},
		"a preview": {env("staging", "") + env("preview/pr-{number}", "    requires: [staging]\n"),
			"pull request previews neither require nor are required"},
		"not a list":            {env("staging", "") + env("prod", "    requires: staging\n"), `environment "prod": requires must be a list`},
		"ancestor not a bool":   {env("staging", "") + env("prod", "    requires: [staging]\n    requires-ancestor: yes please\n"), "requires-ancestor must be true or false"},
		"ancestor without list": {env("prod", "    requires-ancestor: true\n"), `environment "prod": requires-ancestor without requires`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte("environments:\n" + tt.file))
			if err == nil || !errors.Is(err, authority.ErrInvalidInput) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse = %v; want an error saying %q", err, tt.want)
			}
		})
	}
}
