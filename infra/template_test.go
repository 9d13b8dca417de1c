// Package infra holds the App's AWS stacks: the CloudFormation template (latestwins.yaml) and the
// Terraform module (terraform/). Its tests read both and check them against the code, so that they
// cannot drift apart silently.
package infra

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
	"github.com/latestwins/latestwins/lambda"
)

func TestMain(m *testing.M) { dynalitetest.Main(m) }

type template struct {
	Parameters map[string]map[string]any `yaml:"Parameters"`
	Conditions map[string]any            `yaml:"Conditions"`
	Resources  map[string]resource       `yaml:"Resources"`
	Outputs    map[string]map[string]any `yaml:"Outputs"`
}

type resource struct {
	Type           string         `yaml:"Type"`
	DeletionPolicy string         `yaml:"DeletionPolicy"`
	Condition      string         `yaml:"Condition"`
	Properties     map[string]any `yaml:"Properties"`
}

func load(t *testing.T) *template {
	t.Helper()
	return parseTemplate(t, []byte(readTemplate(t)))
}

func readTemplate(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("latestwins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parseTemplate(t *testing.T, b []byte) *template {
	t.Helper()
	var tpl template
	if err := yaml.Unmarshal(b, &tpl); err != nil {
		t.Fatalf("latestwins.yaml: %v", err)
	}
	return &tpl
}

// one returns the only resource of a type.
func (tpl *template) one(t *testing.T, typ string) (string, resource) {
	t.Helper()
	var names []string
	for name, r := range tpl.Resources {
		if r.Type == typ {
			names = append(names, name)
		}
	}
	if len(names) != 1 {
		t.Fatalf("want exactly one %s, found %v", typ, names)
	}
	return names[0], tpl.Resources[names[0]]
}

// at walks a path of map keys and list indexes.
func at(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %v: %v is not a map", path, v)
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("at %v: %v is not a list with an element %d", path, v, k)
			}
			v = l[k]
		}
	}
	return v
}

// keySchema renders a key schema as "name HASH, name RANGE".
func keySchema(t *testing.T, v any) string {
	t.Helper()
	var parts []string
	for _, e := range v.([]any) {
		parts = append(parts, fmt.Sprintf("%v %v", at(t, e, "AttributeName"), at(t, e, "KeyType")))
	}
	return strings.Join(parts, ", ")
}

// TestTableMatchesMigrate creates the table with the code (Store.Migrate, on dynalite) and compares
// its description with the template's table.
func TestTableMatchesMigrate(t *testing.T) {
	tpl := load(t)
	_, table := tpl.one(t, "AWS::DynamoDB::Table")
	p := table.Properties

	fromTemplate := tableShape{Billing: at(t, p, "BillingMode").(string), Key: keySchema(t, p["KeySchema"]), Indexes: map[string]string{}}
	for _, a := range p["AttributeDefinitions"].([]any) {
		fromTemplate.Attributes = append(fromTemplate.Attributes, fmt.Sprintf("%v %v", at(t, a, "AttributeName"), at(t, a, "AttributeType")))
	}
	for _, idx := range p["GlobalSecondaryIndexes"].([]any) {
		fromTemplate.Indexes[at(t, idx, "IndexName").(string)] = keySchema(t, at(t, idx, "KeySchema")) + "; " + at(t, idx, "Projection", "ProjectionType").(string)
	}
	sort.Strings(fromTemplate.Attributes)

	fromCode := migratedShape(t)
	if diff := cmp.Diff(fromCode, fromTemplate); diff != "" {
		t.Fatalf("the template's table differs from the one Migrate creates (-migrate +template):\n%s", diff)
	}
}

func TestTableSettings(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	_, table := tpl.one(t, "AWS::DynamoDB::Table")
	p := table.Properties
	got := map[string]any{
		"billing":        p["BillingMode"],
		"ttl attribute":  at(t, p, "TimeToLiveSpecification", "AttributeName"),
		"ttl enabled":    at(t, p, "TimeToLiveSpecification", "Enabled"),
		"pitr":           at(t, p, "PointInTimeRecoverySpecification", "PointInTimeRecoveryEnabled"),
		"index":          at(t, p, "GlobalSecondaryIndexes", 0, "IndexName"),
		"deletion":       table.DeletionPolicy,
		"stored on pk":   at(t, p, "KeySchema", 0, "AttributeName"),
		"only one index": len(p["GlobalSecondaryIndexes"].([]any)),
	}
	want := map[string]any{
		"billing": "PAY_PER_REQUEST", "ttl attribute": dynamo.TTLAttribute, "ttl enabled": true, "pitr": true,
		"index": dynamo.PendingIndex, "deletion": "Retain", "stored on pk": "pk", "only one index": 1,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("table (-want +got):\n%s", d)
	}
}

type statement struct {
	Sid       string
	Actions   []string
	Resources []any
	Condition any
	If        string // the template condition under which the statement exists, if any
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// roleStatements returns the statements of a role's inline policies. A statement written as
// Fn::If [CONDITION, STATEMENT, Ref AWS::NoValue] is returned with If set to CONDITION.
func roleStatements(t *testing.T, tpl *template, name string) []statement {
	t.Helper()
	r, ok := tpl.Resources[name]
	if !ok || r.Type != "AWS::IAM::Role" {
		t.Fatalf("no role %s", name)
	}
	var out []statement
	for _, pol := range r.Properties["Policies"].([]any) {
		for _, s := range at(t, pol, "PolicyDocument", "Statement").([]any) {
			cond := ""
			if f := at(t, s, "Fn::If"); f != nil {
				branches := asList(f)
				if len(branches) != 3 || !reflect.DeepEqual(branches[2], map[string]any{"Ref": "AWS::NoValue"}) {
					t.Fatalf("role %s: a conditional statement is Fn::If [CONDITION, STATEMENT, Ref AWS::NoValue], not %v", name, f)
				}
				cond, s = fmt.Sprint(branches[0]), branches[1]
			}
			{
				st := statement{Sid: fmt.Sprint(at(t, s, "Sid")), Condition: at(t, s, "Condition"), If: cond}
				if at(t, s, "Effect") != "Allow" {
					t.Errorf("role %s statement %s: only Allow statements are expected", name, st.Sid)
				}
				if v := at(t, s, "NotAction"); v != nil {
					t.Errorf("role %s statement %s: NotAction grants everything else", name, st.Sid)
				}
				for _, a := range asList(at(t, s, "Action")) {
					st.Actions = append(st.Actions, a.(string))
				}
				st.Resources = asList(at(t, s, "Resource"))
				out = append(out, st)
			}
		}
	}
	return out
}

// statements are the function role's.
func statements(t *testing.T, tpl *template) []statement { return roleStatements(t, tpl, "Role") }

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

// TestLeastPrivilege checks the function's role: no wildcard action, DynamoDB access exactly the
// calls the store makes (the methods of dynamo.API) on the table and its pending index, the two
// parameters (and the sign-in's two, only when the status page signs users in; the alarms' and the
// git store's token, each only when named), KMS only through SSM, and logs. The workflow role is TestTemplateWorkflowRole's.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	sts := statements(t, tpl)
	var all []string
	bySid := map[string]statement{}
	for _, s := range sts {
		bySid[s.Sid] = s
		for _, a := range s.Actions {
			if strings.Contains(a, "*") {
				t.Errorf("statement %s: wildcard action %q", s.Sid, a)
			}
			all = append(all, a)
		}
		for _, r := range s.Resources {
			if r == "*" {
				t.Errorf("statement %s: resource \"*\"", s.Sid)
			}
		}
	}
	api := reflect.TypeFor[dynamo.API]()
	var wantDynamo []string
	for i := range api.NumMethod() {
		wantDynamo = append(wantDynamo, "dynamodb:"+api.Method(i).Name)
	}
	want := append(wantDynamo, "kms:Decrypt", "logs:CreateLogStream", "logs:PutLogEvents", "ssm:GetParameter", "ssm:GetParameter", "ssm:GetParameter", "ssm:GetParameter")
	sort.Strings(all)
	sort.Strings(want)
	if d := cmp.Diff(want, all); d != "" {
		t.Errorf("the role's actions (-want +got):\n%s", d)
	}

	tableName, _ := tpl.one(t, "AWS::DynamoDB::Table")
	wantTable := []any{map[string]any{"Fn::GetAtt": []any{tableName, "Arn"}}, map[string]any{"Fn::Sub": "${" + tableName + ".Arn}/index/" + dynamo.PendingIndex}}
	if d := cmp.Diff(wantTable, bySid["Table"].Resources); d != "" {
		t.Errorf("DynamoDB resources: the table and its pending index only (-want +got):\n%s", d)
	}
	for sid, want := range map[string][]string{"Secrets": {"WebhookSecretParameter", "AppPrivateKeyParameter"}, "SignInSecrets": {"AppClientSecretParameter", "SessionKeyParameter"},
		"AlertSecret": {"AlertSecretParameter"}, "GitToken": {"GitTokenParameter"}} {
		var params []string
		for _, r := range bySid[sid].Resources {
			s := at(t, r, "Fn::Sub").(string)
			m := regexp.MustCompile(`:parameter\$\{(\w+)\}$`).FindStringSubmatch(s)
			if m == nil {
				t.Errorf("SSM resource %q is not one named parameter", s)
				continue
			}
			params = append(params, m[1])
		}
		if d := cmp.Diff(want, params); d != "" {
			t.Errorf("statement %s: ssm:GetParameter resources (-want +got):\n%s", sid, d)
		}
	}
	// The sign-in's secrets are readable only when the status page signs users in.
	if c := bySid["SignInSecrets"].If; c != "StatusPageSignIn" {
		t.Errorf("statement SignInSecrets exists under condition %q, want StatusPageSignIn", c)
	}
	if d := cmp.Diff(map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "StatusPage"}, "github"}}, tpl.Conditions["StatusPageSignIn"]); d != "" {
		t.Errorf("condition StatusPageSignIn (-want +got):\n%s", d)
	}
	// The alarms' secret is readable only when one is named.
	if c := bySid["AlertSecret"].If; c != "AlertSecretGiven" {
		t.Errorf("statement AlertSecret exists under condition %q, want AlertSecretGiven", c)
	}
	if d := cmp.Diff(map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "AlertSecretParameter"}, ""}}}},
		tpl.Conditions["AlertSecretGiven"]); d != "" {
		t.Errorf("condition AlertSecretGiven (-want +got):\n%s", d)
	}
	// The git store's token is readable only when one is named.
	if c := bySid["GitToken"].If; c != "GitTokenGiven" {
		t.Errorf("statement GitToken exists under condition %q, want GitTokenGiven", c)
	}
	if d := cmp.Diff(map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "GitTokenParameter"}, ""}}}},
		tpl.Conditions["GitTokenGiven"]); d != "" {
		t.Errorf("condition GitTokenGiven (-want +got):\n%s", d)
	}
	for _, s := range sts {
		if s.If != "" && s.Sid != "SignInSecrets" && s.Sid != "AlertSecret" && s.Sid != "GitToken" {
			t.Errorf("statement %s is conditional (%s): only the sign-in's, the alarms' and the git token's are expected to be", s.Sid, s.If)
		}
	}
	if via := at(t, bySid["DecryptSecretsThroughSSM"].Condition, "StringEquals", "kms:ViaService", "Fn::Sub"); via != "ssm.${AWS::Region}.amazonaws.com" {
		t.Errorf("kms:Decrypt condition kms:ViaService is %v, want SSM of the region", via)
	}
}

func TestFunction(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	fnName, fn := tpl.one(t, "AWS::Lambda::Function")
	p := fn.Properties
	got := map[string]any{
		"architectures": p["Architectures"], "runtime": p["Runtime"], "handler": p["Handler"],
		"code": p["Code"],
	}
	want := map[string]any{
		"architectures": []any{"arm64"}, "runtime": "provided.al2023", "handler": "bootstrap",
		"code": map[string]any{"S3Bucket": map[string]any{"Ref": "CodeBucket"}, "S3Key": map[string]any{"Ref": "CodeKey"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("function (-want +got):\n%s", d)
	}

	// Every variable is one the function reads; the store URL is one it accepts.
	known := []string{lambda.EnvStore, lambda.EnvConfig, lambda.EnvWebhookSecret, lambda.EnvWebhookSecretSSM, lambda.EnvAppID,
		lambda.EnvAppPrivateKey, lambda.EnvAppPrivateKeySSM, lambda.EnvGitHubAPIURL, lambda.EnvMaxBody, lambda.EnvSweepStall, lambda.EnvMaxAttempts, lambda.EnvConfigRepo,
		lambda.EnvStatusPage, lambda.EnvPublicURL, lambda.EnvClientID, lambda.EnvClientSecretSSM, lambda.EnvSessionKeySSM, lambda.EnvGitHubURL,
		lambda.EnvOIDCIssuer, lambda.EnvOIDCAudience, lambda.EnvRetention, lambda.EnvAlertSecretSSM, lambda.EnvGitTokenSSM}
	vars := at(t, p, "Environment", "Variables").(map[string]any)
	// The alarms' secret is passed only when a parameter is named: an empty name would be no secret.
	wantAlert := map[string]any{"Fn::If": []any{"AlertSecretGiven", map[string]any{"Ref": "AlertSecretParameter"}, map[string]any{"Ref": "AWS::NoValue"}}}
	if d := cmp.Diff(wantAlert, vars[lambda.EnvAlertSecretSSM]); d != "" {
		t.Errorf("variable %s (-want +got):\n%s", lambda.EnvAlertSecretSSM, d)
	}
	// So is the git store's token.
	wantGitToken := map[string]any{"Fn::If": []any{"GitTokenGiven", map[string]any{"Ref": "GitTokenParameter"}, map[string]any{"Ref": "AWS::NoValue"}}}
	if d := cmp.Diff(wantGitToken, vars[lambda.EnvGitTokenSSM]); d != "" {
		t.Errorf("variable %s (-want +got):\n%s", lambda.EnvGitTokenSSM, d)
	}
	for k := range vars {
		if !slices.Contains(known, k) {
			t.Errorf("variable %s is not read by the function", k)
		}
	}
	for _, k := range []string{lambda.EnvWebhookSecretSSM, lambda.EnvAppPrivateKeySSM, lambda.EnvStore, lambda.EnvStatusPage,
		lambda.EnvPublicURL, lambda.EnvClientID, lambda.EnvClientSecretSSM, lambda.EnvSessionKeySSM, lambda.EnvGitHubURL,
		lambda.EnvOIDCIssuer, lambda.EnvOIDCAudience, lambda.EnvRetention} {
		if vars[k] == nil {
			t.Errorf("variable %s is not set", k)
		}
	}
	// The store is GitStore when given, else the table.
	if c := at(t, vars, lambda.EnvStore, "Fn::If", 0); c != "GitStoreGiven" || !reflect.DeepEqual(at(t, vars, lambda.EnvStore, "Fn::If", 1), map[string]any{"Ref": "GitStore"}) {
		t.Errorf("variable %s is %v, want GitStore under GitStoreGiven, else the table", lambda.EnvStore, vars[lambda.EnvStore])
	}
	if d := cmp.Diff(map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "GitStore"}, ""}}}}, tpl.Conditions["GitStoreGiven"]); d != "" {
		t.Errorf("condition GitStoreGiven (-want +got):\n%s", d)
	}
	store := strings.NewReplacer("${Table}", "latestwins", "${AWS::Region}", "eu-west-1").Replace(at(t, vars, lambda.EnvStore, "Fn::If", 2, "Fn::Sub").(string))
	if _, err := dynamo.ParseURL(store); err != nil {
		t.Errorf("%s: %v", lambda.EnvStore, err)
	}
	if d := cmp.Diff(vars[lambda.EnvStore], at(t, tpl.Outputs["StoreUrl"], "Value")); d != "" {
		t.Errorf("output StoreUrl is not the function's store (-function +output):\n%s", d)
	}

	_, url := tpl.one(t, "AWS::Lambda::Url")
	if a := url.Properties["AuthType"]; a != "NONE" {
		t.Errorf("Function URL auth %v, want NONE (the webhook signature and OIDC authenticate)", a)
	}
	_, rule := tpl.one(t, "AWS::Events::Rule")
	if target := at(t, rule.Properties, "Targets", 0, "Arn", "Fn::GetAtt", 0); target != fnName {
		t.Errorf("the schedule targets %v, want %s", target, fnName)
	}
	if _, ok := at(t, rule.Properties, "ScheduleExpression").(map[string]any); !ok {
		t.Errorf("the rule has no schedule expression")
	}
	perms := map[string]bool{}
	for _, r := range tpl.Resources {
		if r.Type == "AWS::Lambda::Permission" {
			perms[fmt.Sprintf("%v %v", r.Properties["Action"], r.Properties["Principal"])] = true
		}
	}
	for _, p := range []string{"lambda:InvokeFunctionUrl *", "lambda:InvokeFunction *", "lambda:InvokeFunction events.amazonaws.com"} {
		if !perms[p] {
			t.Errorf("no permission %q (have %v)", p, perms)
		}
	}
}

// TestReferencesResolve checks that every Ref, Fn::GetAtt and ${...} in Fn::Sub names a parameter,
// a resource or a pseudo parameter.
func TestReferencesResolve(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	declared := map[string]bool{}
	for n := range tpl.Parameters {
		declared[n] = true
	}
	for n := range tpl.Resources {
		if declared[n] {
			t.Errorf("%s is both a parameter and a resource", n)
		}
		declared[n] = true
	}
	sub := regexp.MustCompile(`\$\{([^}!]+)\}`)
	var walk func(path string, v any)
	check := func(path, name string) {
		name, _, _ = strings.Cut(name, ".")
		if !declared[name] && !strings.HasPrefix(name, "AWS::") {
			t.Errorf("%s refers to %q, which is not declared", path, name)
		}
	}
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				switch k {
				case "Ref":
					check(path, e.(string))
				case "Fn::GetAtt":
					check(path, at(t, e, 0).(string))
				case "Fn::Sub":
					for _, m := range sub.FindAllStringSubmatch(e.(string), -1) {
						check(path, m[1])
					}
				}
				walk(path+"."+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		}
	}
	for n, r := range tpl.Resources {
		walk(n, r.Properties)
	}
	for n, o := range tpl.Outputs {
		walk("Outputs."+n, o)
	}
}
