package infra

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/store/dynamo"
)

const (
	githubIssuer = "https://token.actions.githubusercontent.com"
	stsAudience  = "sts.amazonaws.com"
)

// tokenClaim is the IAM condition key of a claim of GitHub's OIDC tokens.
func tokenClaim(c string) string { return "token.actions.githubusercontent.com:" + c }

// storeCalls are the DynamoDB calls the store adapter (internal/store/dynamo) makes through its API
// field, with why. A workflow with store: dynamodb:// makes exactly these, so the workflow role allows
// exactly these. TestStoreCallsAreTheCode reads the adapter's source: a new call without an entry
// here fails it, and an entry here without a permission fails the role tests.
var storeCalls = map[string]string{
	"GetItem":        "reads an environment's document",
	"PutItem":        "writes a document, conditioned on its version",
	"Query":          "the sweep's query of the sparse pending index",
	"BatchGetItem":   "reads history records and intent ids",
	"BatchWriteItem": "stores history records and intent ids",
	"UpdateItem":     "adds to a counter in one request (ADD)",
}

// storeActions are the IAM actions of storeCalls, sorted.
func storeActions() []string {
	var out []string
	for c := range storeCalls {
		out = append(out, "dynamodb:"+c)
	}
	sort.Strings(out)
	return out
}

// TestStoreCallsAreTheCode compares storeCalls with the calls the adapter's source makes on its api
// field (s.api.GetItem(...)), and with the methods of dynamo.API.
func TestStoreCallsAreTheCode(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("..", "internal", "store", "dynamo", "*.go"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no sources of the store adapter (%v)", err)
	}
	called := map[string]bool{}
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			m, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if field, ok := m.X.(*ast.SelectorExpr); ok && field.Sel.Name == "api" {
				called[m.Sel.Name] = true // s.api.GetItem(...)
			}
			// dynamodb.NewQueryPaginator(s.api, ...) calls Query.
			if pkg, ok := m.X.(*ast.Ident); ok && pkg.Name == "dynamodb" && strings.HasPrefix(m.Sel.Name, "New") && strings.HasSuffix(m.Sel.Name, "Paginator") && len(call.Args) > 0 {
				if arg, ok := call.Args[0].(*ast.SelectorExpr); ok && arg.Sel.Name == "api" {
					called[strings.TrimSuffix(strings.TrimPrefix(m.Sel.Name, "New"), "Paginator")] = true
				}
			}
			return true
		})
	}
	var fromCode, fromTable, fromAPI []string
	for c := range called {
		fromCode = append(fromCode, c)
	}
	for c := range storeCalls {
		fromTable = append(fromTable, c)
	}
	api := reflect.TypeFor[dynamo.API]()
	for i := range api.NumMethod() {
		fromAPI = append(fromAPI, api.Method(i).Name)
	}
	sort.Strings(fromCode)
	sort.Strings(fromTable)
	sort.Strings(fromAPI)
	if d := cmp.Diff(fromCode, fromTable); d != "" {
		t.Errorf("storeCalls differs from the calls internal/store/dynamo makes (-code +storeCalls):\n%s", d)
	}
	if d := cmp.Diff(fromAPI, fromTable); d != "" {
		t.Errorf("storeCalls differs from the methods of dynamo.API (-API +storeCalls):\n%s", d)
	}
}

// TestTemplateWorkflowRole checks the template's workflow role: created only with GitHubSubjects,
// trusted only by GitHub's tokens with the audience sts.amazonaws.com and a matching sub, allowed
// exactly the store's calls on the table and its index, its ARN the output LatestwinsRoleArn.
func TestTemplateWorkflowRole(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	for _, p := range templateWorkflowProblems(t, tpl) {
		t.Error(p)
	}
}

func templateWorkflowProblems(t *testing.T, tpl *template) []string {
	t.Helper()
	var p []string
	problem := func(format string, args ...any) { p = append(p, strings.TrimSpace(sprintf(format, args...))) }

	wantConditions := map[string]any{
		"GitHubSubjectsGiven": map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{
			map[string]any{"Fn::Join": []any{"", map[string]any{"Ref": "GitHubSubjects"}}}, ""}}}},
		"CreateOidcProvider": map[string]any{"Fn::And": []any{map[string]any{"Condition": "GitHubSubjectsGiven"},
			map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "GitHubOidcProviderArn"}, ""}}}},
	}
	for name, want := range wantConditions {
		if d := cmp.Diff(want, tpl.Conditions[name]); d != "" {
			problem("condition %s (-want +got):\n%s", name, d)
		}
	}
	if tpl.Parameters["GitHubSubjects"]["Type"] != "CommaDelimitedList" || tpl.Parameters["GitHubSubjects"]["Default"] != "" {
		problem("GitHubSubjects must be a CommaDelimitedList that defaults to empty (no role)")
	}

	if pat, ok := tpl.Parameters["GitHubSubjects"]["AllowedPattern"].(string); !ok {
		problem("GitHubSubjects has no AllowedPattern: a pattern * would let any repository's workflow assume the role")
	} else {
		re := regexp.MustCompile(pat)
		for _, s := range []string{"", "repo:acme/api:ref:refs/heads/main", "repo:acme/*:environment:production"} {
			if !re.MatchString(s) {
				problem("GitHubSubjects' AllowedPattern refuses %q", s)
			}
		}
		for _, s := range []string{"*", "*:ref:refs/heads/main", "?epo:acme/api"} {
			if re.MatchString(s) {
				problem("GitHubSubjects' AllowedPattern accepts %q, which any repository's workflow matches", s)
			}
		}
	}

	prov, ok := tpl.Resources["GitHubOidcProvider"]
	if !ok || prov.Type != "AWS::IAM::OIDCProvider" || prov.Condition != "CreateOidcProvider" {
		problem("want GitHubOidcProvider, an AWS::IAM::OIDCProvider with the condition CreateOidcProvider")
	} else if prov.Properties["Url"] != githubIssuer || !reflect.DeepEqual(prov.Properties["ClientIdList"], []any{stsAudience}) {
		problem("the identity provider must be %s with the client id %s", githubIssuer, stsAudience)
	}

	role, ok := tpl.Resources["WorkflowRole"]
	if !ok || role.Type != "AWS::IAM::Role" || role.Condition != "GitHubSubjectsGiven" {
		problem("want WorkflowRole, an AWS::IAM::Role with the condition GitHubSubjectsGiven")
		return p
	}
	trust := asList(at(t, role.Properties, "AssumeRolePolicyDocument", "Statement"))
	if len(trust) != 1 {
		problem("the trust policy has %d statements, want 1", len(trust))
	} else {
		want := map[string]any{
			"Effect": "Allow",
			"Principal": map[string]any{"Federated": map[string]any{"Fn::If": []any{"CreateOidcProvider",
				map[string]any{"Ref": "GitHubOidcProvider"}, map[string]any{"Ref": "GitHubOidcProviderArn"}}}},
			"Action": "sts:AssumeRoleWithWebIdentity",
			"Condition": map[string]any{
				"StringEquals": map[string]any{tokenClaim("aud"): stsAudience},
				"StringLike":   map[string]any{tokenClaim("sub"): map[string]any{"Ref": "GitHubSubjects"}},
			},
		}
		if d := cmp.Diff(want, trust[0]); d != "" {
			problem("the trust statement (-want +got):\n%s", d)
		}
	}
	sts := roleStatements(t, tpl, "WorkflowRole")
	var actions []string
	for _, s := range sts {
		actions = append(actions, s.Actions...)
	}
	sort.Strings(actions)
	if d := cmp.Diff(storeActions(), actions); d != "" {
		problem("the workflow role's actions (-store calls +policy):\n%s", d)
	}
	wantTable := []any{map[string]any{"Fn::GetAtt": []any{"Table", "Arn"}}, map[string]any{"Fn::Sub": "${Table.Arn}/index/" + dynamo.PendingIndex}}
	for _, s := range sts {
		if d := cmp.Diff(wantTable, s.Resources); d != "" || s.Condition != nil {
			problem("the workflow role's resources: the table and its pending index only (-want +got):\n%s", d)
		}
	}

	out := tpl.Outputs["LatestwinsRoleArn"]
	if out["Condition"] != "GitHubSubjectsGiven" || !reflect.DeepEqual(out["Value"], map[string]any{"Fn::GetAtt": []any{"WorkflowRole", "Arn"}}) ||
		!strings.Contains(sprintf("%v", out["Description"]), "LATESTWINS_ROLE_ARN") {
		problem("want the output LatestwinsRoleArn: the workflow role's ARN, saying it is LATESTWINS_ROLE_ARN")
	}
	return p
}

// templateMutants are broken templates TestTemplateWorkflowRole must refuse.
var templateMutants = map[string]struct{ from, to string }{
	"any audience": {"token.actions.githubusercontent.com:aud: sts.amazonaws.com", "token.actions.githubusercontent.com:aud: \"*\""},
	"any subject":  {"token.actions.githubusercontent.com:sub:\n                  Ref: GitHubSubjects", "token.actions.githubusercontent.com:sub: \"*\""},
	"a workflow may Scan": {"                  - dynamodb:UpdateItem\n                Resource:\n                  - Fn::GetAtt: [Table, Arn]\n                  - Fn::Sub: ${Table.Arn}/index/pending\n\nOutputs:",
		"                  - dynamodb:UpdateItem\n                  - dynamodb:Scan\n                Resource:\n                  - Fn::GetAtt: [Table, Arn]\n                  - Fn::Sub: ${Table.Arn}/index/pending\n\nOutputs:"},
	"any pattern allowed":     {"    AllowedPattern: \"^([^*?].*)?$\"\n", ""},
	"a role without patterns": {"    Type: AWS::IAM::Role\n    Condition: GitHubSubjectsGiven\n", "    Type: AWS::IAM::Role\n"},
}

func TestTemplateWorkflowMutantsAreCaught(t *testing.T) {
	t.Parallel()
	src := readTemplate(t)
	for name, m := range templateMutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(src, m.from) {
				t.Fatalf("latestwins.yaml no longer contains %q: update the mutant", m.from)
			}
			tpl := parseTemplate(t, []byte(strings.Replace(src, m.from, m.to, 1)))
			if len(templateWorkflowProblems(t, tpl)) == 0 {
				t.Errorf("TestTemplateWorkflowRole accepts a template with %s", name)
			}
		})
	}
}

// TestStatusPageModes checks that both stacks offer exactly the modes the function accepts.
func TestStatusPageModes(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	var modes []string
	for _, m := range asList(tpl.Parameters["StatusPage"]["AllowedValues"]) {
		modes = append(modes, m.(string))
		if _, err := app.ResolveStatusPage(m.(string), false); err != nil {
			t.Errorf("StatusPage allows %q, which the function refuses: %v", m, err)
		}
	}
	want := []string{app.StatusPageAuto, string(app.StatusPageOff), string(app.StatusPageOpen), string(app.StatusPageGitHub)}
	if !slices.Equal(modes, want) {
		t.Errorf("StatusPage allows %v, want %v", modes, want)
	}
	if d := tpl.Parameters["StatusPage"]["Default"]; d != string(app.StatusPageOff) {
		t.Errorf("StatusPage defaults to %v, want off (what the function does without it)", d)
	}
	cfg := parseTF(t, tfFiles(t, tfModule))
	var problems []string
	if v, ok := cfg.one(&problems, "variable", "status_page"); ok {
		val := v.nested("validation")
		var quoted []string
		for _, m := range want {
			quoted = append(quoted, q(m))
		}
		if len(val) != 1 || val[0].expr("condition") != "contains(["+strings.Join(quoted, ", ")+"], var.status_page)" {
			t.Errorf("variable status_page must allow exactly %v", want)
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
}
