package infra

import (
	"encoding/json"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	"github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	"github.com/awslabs/goformation/v7/cloudformation/events"
	"github.com/awslabs/goformation/v7/cloudformation/iam"
	"github.com/awslabs/goformation/v7/cloudformation/lambda"
	"github.com/awslabs/goformation/v7/cloudformation/logs"
	"github.com/awslabs/goformation/v7/intrinsics"
	"gopkg.in/yaml.v3"
)

// specTypes are goformation's types, generated from the resource specification, of the resource
// types the template uses. Only these packages are imported: the whole specification is 7,000 files
// and would add a minute and a half to a cold build of this test.
var specTypes = map[string]func() any{
	"AWS::CloudWatch::Alarm":         func() any { return &cloudwatch.Alarm{} },
	"AWS::DynamoDB::Table":           func() any { return &dynamodb.Table{} },
	"AWS::Logs::LogGroup":            func() any { return &logs.LogGroup{} },
	"AWS::IAM::Role":                 func() any { return &iam.Role{} },
	"AWS::IAM::OIDCProvider":         func() any { return &iam.OIDCProvider{} },
	"AWS::Lambda::Function":          func() any { return &lambda.Function{} },
	"AWS::Lambda::Url":               func() any { return &lambda.Url{} },
	"AWS::Lambda::Permission":        func() any { return &lambda.Permission{} },
	"AWS::Lambda::EventInvokeConfig": func() any { return &lambda.EventInvokeConfig{} },
	"AWS::Events::Rule":              func() any { return &events.Rule{} },
}

// newerThanSpec lists properties the template uses that the resource specification of the pinned
// goformation does not know yet, by resource type. Each one is checked to be present in the template
// and still unknown to goformation, so that a newer goformation removes the exception.
var newerThanSpec = map[string][]string{
	// Since October 2025, a public Function URL needs lambda:InvokeFunction limited to calls made
	// through the URL, besides lambda:InvokeFunctionUrl.
	"AWS::Lambda::Permission": {"InvokedViaFunctionUrl"},
}

// specProblems parses a template (YAML) with goformation, whose resource types are generated from
// AWS's CloudFormation resource specification and refuse unknown properties and values of the wrong
// type. It returns why the template does not match, or "" when it does.
func specProblems(t *testing.T, src []byte) string {
	t.Helper()
	var doc map[string]any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return "not YAML: " + err.Error()
	}
	resources, _ := doc["Resources"].(map[string]any)
	for _, r := range resources {
		res, _ := r.(map[string]any)
		typ, _ := res["Type"].(string)
		props, _ := res["Properties"].(map[string]any)
		for _, p := range newerThanSpec[typ] {
			delete(props, p)
		}
		// goformation reads a resource's Condition attribute as the Condition function and puts the
		// condition's value in the resource's place: drop it (the resource is checked regardless).
		delete(res, "Condition")
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	// Parameters without a default get a value, so that every Ref resolves to something typed; the
	// conditional resources and statements are made to exist (a workflow role with a new identity
	// provider, the sign-in's secrets), so that they are checked too.
	processed, err := intrinsics.ProcessJSON(js, &intrinsics.ProcessorOptions{ParameterOverrides: map[string]any{
		"CodeBucket": "bucket", "CodeKey": "latestwins/latestwins-lambda-arm64.zip", "AppId": "123456",
		"GitHubSubjects": []any{"repo:acme/api:ref:refs/heads/main"}, "StatusPage": "github",
	}, EvaluateConditions: true})
	if err != nil {
		return "intrinsic functions: " + err.Error()
	}
	var tpl struct {
		Resources map[string]json.RawMessage
	}
	if err := json.Unmarshal(processed, &tpl); err != nil {
		return err.Error()
	}
	var problems []string
	for name, raw := range tpl.Resources {
		var head struct{ Type string }
		if err := json.Unmarshal(raw, &head); err != nil {
			return name + ": " + err.Error()
		}
		typed, ok := specTypes[head.Type]
		if !ok {
			problems = append(problems, name+": "+head.Type+" is not in specTypes: add goformation's type for it")
			continue
		}
		// goformation's types refuse unknown fields and values of the wrong type.
		if err := json.Unmarshal(raw, typed()); err != nil {
			problems = append(problems, name+" ("+head.Type+"): "+err.Error())
		}
	}
	sort.Strings(problems)
	return strings.Join(problems, "; ")
}

// TestTemplateMatchesResourceSpecification checks every resource of latestwins.yaml against
// CloudFormation's resource specification: property names, nesting and value types.
func TestTemplateMatchesResourceSpecification(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("latestwins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p := specProblems(t, src); p != "" {
		t.Fatalf("latestwins.yaml does not match the CloudFormation resource specification: %s", p)
	}

	// The exceptions are real: the template uses each, and goformation still refuses it.
	for typ, props := range newerThanSpec {
		for _, p := range props {
			if !strings.Contains(string(src), "      "+p+":") {
				t.Errorf("latestwins.yaml no longer sets %s on %s: drop the exception", p, typ)
			}
			probe := `{"Type": "` + typ + `", "Properties": {"` + p + `": true}}`
			if err := json.Unmarshal([]byte(probe), specTypes[typ]()); err == nil || !strings.Contains(err.Error(), p) {
				t.Errorf("goformation now knows %s of %s (%v): drop the exception", p, typ, err)
			}
		}
	}
}

// TestSpecificationCheckCatches keeps broken templates the specification check must refuse.
func TestSpecificationCheckCatches(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("latestwins.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]struct{ from, to string }{
		"a misspelled property":         {"PointInTimeRecoverySpecification:", "PointInTimeRecoverySpec:"},
		"a property of the wrong type":  {"      MemorySize: 256", "      MemorySize: [256]"},
		"a property at the wrong level": {"      BillingMode: PAY_PER_REQUEST", "      BillingMode: PAY_PER_REQUEST\n      Enabled: true"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(string(src), m.from) {
				t.Fatalf("latestwins.yaml no longer contains %q: update the case", m.from)
			}
			if specProblems(t, []byte(strings.Replace(string(src), m.from, m.to, 1))) == "" {
				t.Errorf("the check accepts a template with %s", name)
			}
		})
	}
}
