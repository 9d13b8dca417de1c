package infra

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"

	"github.com/latestwins/latestwins/lambda"
)

// tfEval evaluates the module's expressions for given variables as Terraform would plan them, as far
// as the function's environment and role need: the variables (defaults filled in), the locals, and
// the data sources and resources they name, each as the placeholder its attributes would be, and
// the one function the locals call (length).
type tfEval struct {
	ctx *hcl.EvalContext
}

func newTFEval(t *testing.T, cfg tfConfig, given map[string]cty.Value) (*tfEval, error) {
	t.Helper()
	vars := map[string]cty.Value{}
	for _, v := range cfg.find("variable") {
		name := v.labels[0]
		if val, ok := given[name]; ok {
			vars[name] = val
			continue
		}
		a, ok := v.body.Attributes["default"]
		if !ok {
			return nil, fmt.Errorf("variable %s has no default: give it", name)
		}
		val, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			return nil, fmt.Errorf("variable %s's default: %v", name, diags)
		}
		vars[name] = val
	}
	for name := range given {
		if _, ok := vars[name]; !ok {
			return nil, fmt.Errorf("the module has no variable %s", name)
		}
	}
	arn := func(service, what string) cty.Value {
		return cty.StringVal(fmt.Sprintf("arn:aws:%s:%s:%s:%s", service, testRegion, testAccount, what))
	}
	table := vars["table_name"].AsString()
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{
		"var": cty.ObjectVal(vars),
		"data": cty.ObjectVal(map[string]cty.Value{
			"aws_partition":       cty.ObjectVal(map[string]cty.Value{"current": cty.ObjectVal(map[string]cty.Value{"partition": cty.StringVal("aws")})}),
			"aws_region":          cty.ObjectVal(map[string]cty.Value{"current": cty.ObjectVal(map[string]cty.Value{"region": cty.StringVal(testRegion)})}),
			"aws_caller_identity": cty.ObjectVal(map[string]cty.Value{"current": cty.ObjectVal(map[string]cty.Value{"account_id": cty.StringVal(testAccount)})}),
		}),
		"aws_dynamodb_table":              cty.ObjectVal(map[string]cty.Value{"state": cty.ObjectVal(map[string]cty.Value{"name": cty.StringVal(table), "arn": arn("dynamodb", "table/"+table)})}),
		"aws_cloudwatch_log_group":        cty.ObjectVal(map[string]cty.Value{"function": cty.ObjectVal(map[string]cty.Value{"arn": arn("logs", "log-group:/aws/lambda/latestwins")})}),
		"aws_iam_openid_connect_provider": cty.ObjectVal(map[string]cty.Value{"github": cty.TupleVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"arn": arn("iam", "oidc-provider")})})}),
	}, Functions: map[string]function.Function{"length": stdlib.LengthFunc}}
	// Locals may name each other: evaluate them until none is left that can be.
	var problems []string
	if locals := cfg.find("locals"); len(locals) == 1 {
		pending := maps.Clone(locals[0].body.Attributes)
		values := map[string]cty.Value{}
		for len(pending) > 0 {
			before := len(pending)
			problems = problems[:0]
			for name, a := range pending {
				ctx.Variables["local"] = cty.ObjectVal(values)
				v, diags := a.Expr.Value(ctx)
				if diags.HasErrors() {
					problems = append(problems, fmt.Sprintf("local %s: %v", name, diags))
					continue
				}
				values[name] = v
				delete(pending, name)
			}
			if len(pending) == before {
				return nil, fmt.Errorf("locals that cannot be evaluated: %s", strings.Join(problems, "; "))
			}
		}
		ctx.Variables["local"] = cty.ObjectVal(values)
	}
	return &tfEval{ctx: ctx}, nil
}

func (e *tfEval) value(b tfBlock, attr string) (cty.Value, error) {
	a, ok := b.body.Attributes[attr]
	if !ok {
		return cty.NilVal, fmt.Errorf("no attribute %s", attr)
	}
	v, diags := a.Expr.Value(e.ctx)
	if diags.HasErrors() {
		return cty.NilVal, fmt.Errorf("%s: %v", attr, diags)
	}
	return v, nil
}

// listOf is a list or tuple of strings.
func listOf(v cty.Value) []string {
	var out []string
	for it := v.ElementIterator(); it.Next(); {
		_, el := it.Element()
		out = append(out, el.AsString())
	}
	return out
}

// functionEnv is the function's environment for the variables; a null or empty value is no
// variable, as the function reads it.
func (e *tfEval) functionEnv(cfg tfConfig) (map[string]string, error) {
	fns := cfg.find("resource", "aws_lambda_function")
	if len(fns) != 1 || len(fns[0].nested("environment")) != 1 {
		return nil, fmt.Errorf("want one function with one environment block")
	}
	v, err := e.value(fns[0].nested("environment")[0], "variables")
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for k, val := range v.AsValueMap() {
		if !val.IsNull() {
			env[k] = val.AsString()
		}
	}
	return env, nil
}

// readableParameters are the resources of the function policy's ssm:GetParameter statements,
// static and dynamic (those whose for_each is not empty).
func (e *tfEval) readableParameters(cfg tfConfig) ([]string, error) {
	docs := cfg.find("data", "aws_iam_policy_document", "function")
	if len(docs) != 1 {
		return nil, fmt.Errorf("want one function policy document")
	}
	var statements []tfBlock
	for _, b := range docs[0].body.Blocks {
		blk := tfBlock{typ: b.Type, labels: b.Labels, body: b.Body, src: docs[0].src}
		switch {
		case b.Type == "statement":
			statements = append(statements, blk)
		case b.Type == "dynamic" && slices.Equal(b.Labels, []string{"statement"}):
			each, err := e.value(blk, "for_each")
			if err != nil {
				return nil, err
			}
			if each.LengthInt() > 0 {
				statements = append(statements, blk.nested("content")...)
			}
		}
	}
	var out []string
	for _, st := range statements {
		actions, err := e.value(st, "actions")
		if err != nil {
			return nil, err
		}
		if !slices.Contains(listOf(actions), "ssm:GetParameter") {
			continue
		}
		res, err := e.value(st, "resources")
		if err != nil {
			return nil, err
		}
		out = append(out, listOf(res)...)
	}
	return out, nil
}

// tfStartProblems is TestTemplateStartsTheFunction's check for the module: for each set of
// variables, the function's settings load on the environment it gets, its store is the one the
// variables say (and store_url names it), and its role may read exactly the parameters it reads.
func tfStartProblems(t *testing.T, cfg tfConfig) []string {
	t.Helper()
	var p []string
	problem := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	secrets := map[string]string{
		"/latestwins/webhook-secret":    "a webhook secret",
		"/latestwins/app-private-key":   "-----BEGIN RSA PRIVATE KEY-----\n...\n-----END RSA PRIVATE KEY-----\n",
		"/latestwins/app-client-secret": "a client secret",
		"/latestwins/session-key":       strings.Repeat("k", 48),
		"/latestwins/alert-secret":      "an alert secret",
		"/latestwins/git-token":         "github_pat_" + strings.Repeat("z", 30),
	}
	s := cty.StringVal
	for _, c := range []struct {
		name            string
		vars            map[string]cty.Value
		store, gitToken string
	}{
		{name: "the defaults", vars: map[string]cty.Value{}, store: "dynamodb://latestwins?region=" + testRegion},
		{name: "a git store on GitHub", vars: map[string]cty.Value{"git_store": s("github://octo-org/deploy-state"), "git_token_parameter": s("/latestwins/git-token")},
			store: "github://octo-org/deploy-state", gitToken: secrets["/latestwins/git-token"]},
		{name: "a git store elsewhere and every secret", vars: map[string]cty.Value{
			"git_store": s("git+https://git.example.com/octo-org/deploy-state.git"), "git_token_parameter": s("/latestwins/git-token"),
			"status_page": s("github"), "public_url": s("https://abc.lambda-url.eu-west-1.on.aws/"), "app_client_id": s("Iv1.0123456789abcdef"),
			"alert_secret_parameter": s("/latestwins/alert-secret"), "table_name": s("state")},
			store: "git+https://git.example.com/octo-org/deploy-state.git", gitToken: secrets["/latestwins/git-token"]},
	} {
		vars := map[string]cty.Value{"package_file": s("latestwins-lambda-arm64.zip"), "app_id": s("12345")}
		maps.Copy(vars, c.vars)
		e, err := newTFEval(t, cfg, vars)
		if err != nil {
			problem("%s: %v", c.name, err)
			continue
		}
		env, err := e.functionEnv(cfg)
		if err != nil {
			problem("%s: the function's environment: %v", c.name, err)
			continue
		}
		ps := &parameterStore{values: secrets}
		st, err := lambda.LoadSettings(context.Background(), func(k string) string { return env[k] }, ps)
		if err != nil {
			problem("%s: the function does not start on the module's environment %v: %v", c.name, env, err)
			continue
		}
		if st.Store != c.store || st.GitToken != c.gitToken {
			problem("%s: the function's store is %q with the git token %q; want %q with %q", c.name, st.Store, st.GitToken, c.store, c.gitToken)
		}
		if outs := cfg.find("output", "store_url"); len(outs) != 1 {
			problem("no output store_url")
		} else if v, err := e.value(outs[0], "value"); err != nil || v.AsString() != st.Store {
			problem("%s: output store_url is %#v (%v), the function's store %s", c.name, v, err, st.Store)
		}
		readable, err := e.readableParameters(cfg)
		if err != nil {
			problem("%s: the function's policy: %v", c.name, err)
			continue
		}
		var read []string
		for _, name := range ps.read {
			read = append(read, fmt.Sprintf("arn:aws:ssm:%s:%s:parameter%s", testRegion, testAccount, name))
		}
		read = slices.Compact(slices.Sorted(slices.Values(read)))
		if d := cmp.Diff(read, slices.Sorted(slices.Values(readable))); d != "" {
			problem("%s: the parameters the role may read are not the ones the function reads (-read +readable):\n%s", c.name, d)
		}
	}
	return p
}

// TestTerraformStartsTheFunction is TestTemplateStartsTheFunction for the Terraform module.
func TestTerraformStartsTheFunction(t *testing.T) {
	t.Parallel()
	for _, p := range tfStartProblems(t, parseTF(t, tfFiles(t, tfModule))) {
		t.Error(p)
	}
}

// tfStartMutants are broken modules TestTerraformStartsTheFunction must refuse.
var tfStartMutants = map[string]struct{ file, from, to string }{
	"git token not passed":        {"main.tf", "LATESTWINS_GIT_TOKEN_SSM_PARAMETER         =", "LATESTWINS_GIT_TOKEN_SSM                   ="},
	"git token not readable":      {"main.tf", "parameter${var.git_token_parameter}", "parameter${var.alert_secret_parameter}"},
	"git token read with alarms":  {"main.tf", `for_each = var.git_token_parameter != "" ? [1] : []`, `for_each = var.alert_secret_parameter != "" ? [1] : []`},
	"the store always the table":  {"main.tf", `store                = var.git_store != "" ? var.git_store : `, `store                = `},
	"store_url always the table":  {"outputs.tf", "value       = local.store", `value       = "dynamodb://${aws_dynamodb_table.state.name}?region=${local.region}"`},
	"webhook secret not readable": {"main.tf", "parameter${var.webhook_secret_parameter}", "parameter${var.session_key_parameter}"},
}

func TestTerraformStartMutantsAreCaught(t *testing.T) {
	t.Parallel()
	files := tfFiles(t, tfModule)
	for name, m := range tfStartMutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(tfModule, m.file)
			if !strings.Contains(string(files[path]), m.from) {
				t.Fatalf("%s no longer contains %q: update the mutant", path, m.from)
			}
			broken := maps.Clone(files)
			broken[path] = []byte(strings.Replace(string(files[path]), m.from, m.to, 1))
			if len(tfStartProblems(t, parseTF(t, broken))) == 0 {
				t.Errorf("TestTerraformStartsTheFunction accepts a module with %s", name)
			}
		})
	}
}
