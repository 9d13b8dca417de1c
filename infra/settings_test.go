package infra

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/latestwins/latestwins/lambda"
)

// noValue is what Ref AWS::NoValue resolves to: the property or list element is left out.
var noValue = &struct{ noValue bool }{true}

// Pseudo parameters, as one stack in one account would see them.
const (
	testRegion    = "eu-west-1"
	testAccount   = "123456789012"
	testStackName = "latestwins"
)

// cfnEval resolves the template's values for given parameters as CloudFormation would, as far as
// the function's environment and role need: Ref, Fn::Sub, Fn::If, Fn::Equals, Fn::Not, Fn::And,
// Fn::Or, Fn::Join, Condition and the pseudo parameters. A resource's Ref is its TableName (the
// table) or its logical name; its Fn::GetAtt is a placeholder ARN.
type cfnEval struct {
	t      *testing.T
	tpl    *template
	params map[string]any
}

// newCFNEval fills in the parameters' defaults; a parameter without a default must be given.
func newCFNEval(t *testing.T, tpl *template, given map[string]string) *cfnEval {
	t.Helper()
	e := &cfnEval{t: t, tpl: tpl, params: map[string]any{}}
	for name, p := range tpl.Parameters {
		v, ok := given[name]
		if !ok {
			d, has := p["Default"]
			if !has {
				t.Fatalf("parameter %s has no default: give it", name)
			}
			v = fmt.Sprint(d)
		}
		if p["Type"] == "CommaDelimitedList" {
			var l []any
			for _, s := range strings.Split(v, ",") {
				l = append(l, s)
			}
			e.params[name] = l
		} else {
			e.params[name] = v
		}
	}
	for name := range given {
		if _, ok := tpl.Parameters[name]; !ok {
			t.Fatalf("the template has no parameter %s", name)
		}
	}
	return e
}

func (e *cfnEval) ref(name string) any {
	switch name {
	case "AWS::NoValue":
		return noValue
	case "AWS::Region":
		return testRegion
	case "AWS::AccountId":
		return testAccount
	case "AWS::Partition":
		return "aws"
	case "AWS::StackName":
		return testStackName
	}
	if v, ok := e.params[name]; ok {
		return v
	}
	r, ok := e.tpl.Resources[name]
	if !ok {
		e.t.Fatalf("Ref %s: no such parameter or resource", name)
	}
	if n, ok := r.Properties["TableName"]; ok {
		return e.eval(n)
	}
	return name
}

func (e *cfnEval) condition(name string) bool {
	c, ok := e.tpl.Conditions[name]
	if !ok {
		e.t.Fatalf("no condition %s", name)
	}
	b, ok := e.eval(c).(bool)
	if !ok {
		e.t.Fatalf("condition %s is not a boolean", name)
	}
	return b
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

func (e *cfnEval) eval(v any) any {
	switch x := v.(type) {
	case []any:
		var out []any
		for _, el := range x {
			if r := e.eval(el); r != noValue {
				out = append(out, r)
			}
		}
		return out
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if r, ok := e.function(k, arg); ok {
					return r
				}
			}
		}
		out := map[string]any{}
		for k, el := range x {
			if r := e.eval(el); r != noValue {
				out[k] = r
			}
		}
		return out
	}
	return v
}

// function applies an intrinsic function; ok is false when k names none.
func (e *cfnEval) function(k string, arg any) (any, bool) {
	args, _ := arg.([]any)
	switch k {
	case "Ref":
		return e.ref(arg.(string)), true
	case "Condition":
		return e.condition(arg.(string)), true
	case "Fn::If":
		if e.condition(args[0].(string)) {
			return e.eval(args[1]), true
		}
		return e.eval(args[2]), true
	case "Fn::Equals":
		return fmt.Sprint(e.eval(args[0])) == fmt.Sprint(e.eval(args[1])), true
	case "Fn::Not":
		return !e.eval(args[0]).(bool), true
	case "Fn::And", "Fn::Or":
		all, some := true, false
		for _, a := range args {
			b := e.eval(a).(bool)
			all, some = all && b, some || b
		}
		return k == "Fn::And" && all || k == "Fn::Or" && some, true
	case "Fn::Join":
		var parts []string
		for _, p := range asList(e.eval(args[1])) {
			parts = append(parts, fmt.Sprint(p))
		}
		return strings.Join(parts, args[0].(string)), true
	case "Fn::GetAtt":
		return fmt.Sprintf("arn:aws:test:%s:%s:%v/%v", testRegion, testAccount, args[0], args[1]), true
	case "Fn::Sub":
		return subVar.ReplaceAllStringFunc(arg.(string), func(m string) string {
			name := m[2 : len(m)-1]
			if res, attr, ok := strings.Cut(name, "."); ok {
				r, _ := e.function("Fn::GetAtt", []any{res, attr})
				return r.(string)
			}
			return fmt.Sprint(e.ref(name))
		}), true
	}
	return nil, false
}

// functionEnv is the function's environment the template gives it for the parameters.
func (e *cfnEval) functionEnv() map[string]string {
	_, fn := e.tpl.one(e.t, "AWS::Lambda::Function")
	env := map[string]string{}
	for k, v := range e.eval(at(e.t, fn.Properties, "Environment", "Variables")).(map[string]any) {
		s, ok := v.(string)
		if !ok {
			e.t.Fatalf("variable %s resolves to %v, not a string", k, v)
		}
		env[k] = s
	}
	return env
}

// readableParameters are the SSM parameters the function's role may read: the resources of its
// ssm:GetParameter statements.
func (e *cfnEval) readableParameters() []string {
	role := e.eval(e.tpl.Resources["Role"].Properties).(map[string]any)
	var out []string
	for _, pol := range role["Policies"].([]any) {
		for _, st := range asList(at(e.t, pol, "PolicyDocument", "Statement")) {
			if !slices.Contains(asList(at(e.t, st, "Action")), any("ssm:GetParameter")) {
				continue
			}
			for _, r := range asList(at(e.t, st, "Resource")) {
				out = append(out, r.(string))
			}
		}
	}
	return out
}

// parameterStore is SSM Parameter Store holding the given SecureString values, recording the names
// it was asked for.
type parameterStore struct {
	values map[string]string
	read   []string
}

func (p *parameterStore) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	name := aws.ToString(in.Name)
	p.read = append(p.read, name)
	v, ok := p.values[name]
	if !ok || !aws.ToBool(in.WithDecryption) {
		return nil, &ssmtypes.ParameterNotFound{Message: aws.String(name)}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: in.Name, Value: aws.String(v), Type: ssmtypes.ParameterTypeSecureString}}, nil
}

var _ lambda.ParameterReader = (*parameterStore)(nil)

// TestTemplateStartsTheFunction deploys the template in thought: for each set of parameters, it
// resolves the function's environment and role as CloudFormation would, starts the function's
// settings (lambda.LoadSettings) on that environment with Parameter Store holding the secrets, and
// checks that they load, that the function uses the store the parameters say (and StoreUrl names
// it), and that its role may read exactly the parameters it reads.
func TestTemplateStartsTheFunction(t *testing.T) {
	t.Parallel()
	for _, p := range startProblems(t, load(t)) {
		t.Error(p)
	}
}

// startMutants are broken templates TestTemplateStartsTheFunction must refuse: each replaces the
// first occurrence of a text.
var startMutants = map[string]struct{ from, to string }{
	"git token not passed":   {"LATESTWINS_GIT_TOKEN_SSM_PARAMETER:", "LATESTWINS_GIT_TOKEN_SSM:"},
	"git token not readable": {"parameter${GitTokenParameter}", "parameter${AlertSecretParameter}"},
	"git token read with the alarms' secret": {"                  - GitTokenGiven\n                  - Sid: GitToken",
		"                  - AlertSecretGiven\n                  - Sid: GitToken"},
	"the store always the table": {"              - GitStoreGiven\n              - Ref: GitStore\n",
		"              - GitStoreGiven\n              - Fn::Sub: dynamodb://${Table}?region=${AWS::Region}\n"},
	"StoreUrl always the table":   {"        - GitStoreGiven\n        - Ref: GitStore\n", "        - GitStoreGiven\n        - Fn::Sub: dynamodb://${Table}?region=${AWS::Region}\n"},
	"webhook secret not readable": {"parameter${WebhookSecretParameter}", "parameter${SessionKeyParameter}"},
}

func TestTemplateStartMutantsAreCaught(t *testing.T) {
	t.Parallel()
	src := readTemplate(t)
	for name, m := range startMutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if !strings.Contains(src, m.from) {
				t.Fatalf("latestwins.yaml no longer contains %q: update the mutant", m.from)
			}
			if len(startProblems(t, parseTemplate(t, []byte(strings.Replace(src, m.from, m.to, 1))))) == 0 {
				t.Errorf("TestTemplateStartsTheFunction accepts a template with %s", name)
			}
		})
	}
}

// startProblems is what TestTemplateStartsTheFunction finds wrong with tpl.
func startProblems(t *testing.T, tpl *template) []string {
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
	for _, c := range []struct {
		name            string
		params          map[string]string
		store, gitToken string
	}{
		{name: "the defaults", params: map[string]string{}, store: "dynamodb://latestwins?region=" + testRegion},
		{name: "a git store on GitHub", params: map[string]string{"GitStore": "github://octo-org/deploy-state", "GitTokenParameter": "/latestwins/git-token"},
			store: "github://octo-org/deploy-state", gitToken: secrets["/latestwins/git-token"]},
		{name: "a git store elsewhere and every secret", params: map[string]string{
			"GitStore": "git+https://git.example.com/octo-org/deploy-state.git", "GitTokenParameter": "/latestwins/git-token",
			"StatusPage": "github", "PublicUrl": "https://abc.lambda-url.eu-west-1.on.aws/", "AppClientId": "Iv1.0123456789abcdef",
			"AlertSecretParameter": "/latestwins/alert-secret", "TableName": "state"},
			store: "git+https://git.example.com/octo-org/deploy-state.git", gitToken: secrets["/latestwins/git-token"]},
	} {
		params := map[string]string{"CodeBucket": "bucket", "CodeKey": "latestwins.zip", "AppId": "12345"}
		maps.Copy(params, c.params)
		e := newCFNEval(t, tpl, params)
		env := e.functionEnv()
		ps := &parameterStore{values: secrets}
		s, err := lambda.LoadSettings(context.Background(), func(k string) string { return env[k] }, ps)
		if err != nil {
			problem("%s: the function does not start on the template's environment %v: %v", c.name, env, err)
			continue
		}
		if s.Store != c.store || s.GitToken != c.gitToken {
			problem("%s: the function's store is %q with the git token %q; want %q with %q", c.name, s.Store, s.GitToken, c.store, c.gitToken)
		}
		if out := at(t, e.eval(tpl.Outputs["StoreUrl"]), "Value"); out != s.Store {
			problem("%s: output StoreUrl is %v, the function's store %s", c.name, out, s.Store)
		}
		var read []string
		for _, name := range ps.read {
			read = append(read, fmt.Sprintf("arn:aws:ssm:%s:%s:parameter%s", testRegion, testAccount, name))
		}
		read = slices.Compact(slices.Sorted(slices.Values(read)))
		if d := cmp.Diff(read, slices.Sorted(slices.Values(e.readableParameters()))); d != "" {
			problem("%s: the parameters the role may read are not the ones the function reads (-read +readable):\n%s", c.name, d)
		}
	}
	return p
}

// gitStores are store URLs the GitStore parameter (and git_store variable) must take; ones it must
// refuse because the function would refuse them at every cold start; and ones the function takes
// that the stacks refuse on purpose.
var gitStores = struct{ good, bad, notHere []string }{
	good: []string{"github://octo-org/deploy-state", "github://Octo/state.git", "github://user_corp/.github", "github://o1/repo_name-2.x",
		"git+https://git.example.com/octo-org/state.git", "git+https://git.example.com:8443/state.git"},
	bad: []string{"github://octo-org", "github://octo-org/", "github://octo-org/state/extra", "github://-octo/state", "github://oc--to/state",
		"github://octo/st ate", "github://x-access-token:t@octo/state", "github://octo/state?ref=main",
		"git+file:///srv/state.git", "git+ssh://git.example.com/state.git",
		"git+https://user:pw@git.example.com/state.git", "git+https://git.example.com/state.git?ref=main",
		"bolt:///tmp/state.db", "memory://"},
	notHere: []string{
		"dynamodb://latestwins?region=eu-west-1", // the table is what an empty GitStore means
		"git+http://git.example.com/state.git",   // the token would cross the network in the clear
	},
}

// tfRegex is the pattern of the regex() call in a variable's validation condition.
func tfRegex(t *testing.T, cfg tfConfig, variable string) string {
	t.Helper()
	var problems []string
	v, ok := cfg.one(&problems, "variable", variable)
	if !ok {
		t.Fatal(problems)
	}
	val := v.nested("validation")
	if len(val) != 1 {
		t.Fatalf("variable %s has %d validations, want one", variable, len(val))
	}
	var pattern string
	diags := hclsyntax.VisitAll(val[0].body.Attributes["condition"].Expr, func(n hclsyntax.Node) hcl.Diagnostics {
		if call, ok := n.(*hclsyntax.FunctionCallExpr); ok && call.Name == "regex" && len(call.Args) == 2 {
			if p, diags := call.Args[0].Value(nil); !diags.HasErrors() {
				pattern = p.AsString()
			}
		}
		return nil
	})
	if diags.HasErrors() || pattern == "" {
		t.Fatalf("variable %s: no regex(PATTERN, ...) with a literal pattern in its validation", variable)
	}
	return pattern
}

// TestGitStoreParameters checks that both stacks take the git store URLs the function takes and
// refuse the ones it refuses, with the same pattern, and that their git token parameter names are
// the ones of the stacks' other secrets.
func TestGitStoreParameters(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	cfg := parseTF(t, tfFiles(t, tfModule))
	pattern := fmt.Sprint(tpl.Parameters["GitStore"]["AllowedPattern"])
	if tf := tfRegex(t, cfg, "git_store"); tf != pattern {
		t.Errorf("git_store's pattern %q is not GitStore's %q", tf, pattern)
	}
	re := regexp.MustCompile(pattern)
	start := func(store string) error {
		env := map[string]string{lambda.EnvStore: store, lambda.EnvWebhookSecret: "a webhook secret", lambda.EnvGitTokenSSM: "/latestwins/git-token"}
		ps := &parameterStore{values: map[string]string{"/latestwins/git-token": "a token"}}
		_, err := lambda.LoadSettings(context.Background(), func(k string) string { return env[k] }, ps)
		return err
	}
	for _, s := range gitStores.good {
		if !re.MatchString(s) {
			t.Errorf("GitStore refuses %q", s)
		}
		if err := start(s); err != nil {
			t.Errorf("the function refuses the store %q: %v", s, err)
		}
	}
	for _, s := range gitStores.bad {
		if re.MatchString(s) {
			t.Errorf("GitStore takes %q", s)
		}
		if err := start(s); err == nil {
			t.Errorf("the function takes the store %q: move it to gitStores.good or notHere", s)
		}
	}
	for _, s := range gitStores.notHere {
		if re.MatchString(s) {
			t.Errorf("GitStore takes %q", s)
		}
		if err := start(s); err != nil {
			t.Errorf("the function refuses the store %q: move it to gitStores.bad (%v)", s, err)
		}
	}

	// The token's parameter is named as the alarms' secret is, in both stacks: empty, or a name.
	if got, want := tpl.Parameters["GitTokenParameter"]["AllowedPattern"], tpl.Parameters["AlertSecretParameter"]["AllowedPattern"]; got != want {
		t.Errorf("GitTokenParameter's pattern %v is not AlertSecretParameter's %v", got, want)
	}
	if got, want := tfRegex(t, cfg, "git_token_parameter"), tfRegex(t, cfg, "alert_secret_parameter"); got != want {
		t.Errorf("git_token_parameter's pattern %q is not alert_secret_parameter's %q", got, want)
	}
	for _, v := range []string{"git_token_parameter", "alert_secret_parameter"} {
		bs := cfg.find("variable", v)
		if len(bs) != 1 || bs[0].nested("validation")[0].expr("condition") != fmt.Sprintf(`var.%s == "" || can(regex(%q, var.%s))`, v, tfRegex(t, cfg, v), v) {
			t.Errorf("variable %s's validation must take an empty name or one that matches its pattern", v)
		}
	}
}
