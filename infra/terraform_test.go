package infra

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"

	"github.com/latestwins/latestwins/internal/store/dynamo"
	"github.com/latestwins/latestwins/lambda"
)

const tfModule = "terraform"

// tfFiles reads the .tf files of a directory, by name.
func tfFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no .tf files in %s (%v)", dir, err)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[p] = b
	}
	return files
}

// tfBlock is one block of a Terraform configuration, with the source it was parsed from, so that
// expressions can be compared as written ("aws_dynamodb_table.state.arn").
type tfBlock struct {
	typ    string
	labels []string
	body   *hclsyntax.Body
	src    []byte
}

// tfConfig is every top-level block of a module.
type tfConfig []tfBlock

func parseTF(t *testing.T, files map[string][]byte) tfConfig {
	t.Helper()
	var cfg tfConfig
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f, diags := hclsyntax.ParseConfig(files[n], n, hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", n, diags)
		}
		for _, b := range f.Body.(*hclsyntax.Body).Blocks {
			cfg = append(cfg, tfBlock{typ: b.Type, labels: b.Labels, body: b.Body, src: files[n]})
		}
	}
	return cfg
}

// find returns the blocks of a type whose labels start with labels.
func (c tfConfig) find(typ string, labels ...string) []tfBlock {
	var out []tfBlock
	for _, b := range c {
		if b.typ == typ && len(b.labels) >= len(labels) && slices.Equal(b.labels[:len(labels)], labels) {
			out = append(out, b)
		}
	}
	return out
}

// one returns the only block of a type and labels, or records a problem.
func (c tfConfig) one(problems *[]string, typ string, labels ...string) (tfBlock, bool) {
	bs := c.find(typ, labels...)
	if len(bs) != 1 {
		*problems = append(*problems, fmt.Sprintf("want exactly one %s %v, found %d", typ, labels, len(bs)))
		return tfBlock{}, false
	}
	return bs[0], true
}

// nested returns the body's blocks of a type.
func (b tfBlock) nested(typ string) []tfBlock {
	var out []tfBlock
	for _, n := range b.body.Blocks {
		if n.Type == typ {
			out = append(out, tfBlock{typ: n.Type, labels: n.Labels, body: n.Body, src: b.src})
		}
	}
	return out
}

// expr returns an attribute's expression as written, or "" when the attribute is not set.
func (b tfBlock) expr(name string) string {
	a, ok := b.body.Attributes[name]
	if !ok {
		return ""
	}
	r := a.Expr.Range()
	return string(b.src[r.Start.Byte:r.End.Byte])
}

// list returns the elements of a tuple attribute as written (quotes kept for strings).
func (b tfBlock) list(name string) []string {
	a, ok := b.body.Attributes[name]
	if !ok {
		return nil
	}
	tuple, ok := a.Expr.(*hclsyntax.TupleConsExpr)
	if !ok {
		return []string{b.expr(name)}
	}
	var out []string
	for _, e := range tuple.Exprs {
		r := e.Range()
		out = append(out, string(b.src[r.Start.Byte:r.End.Byte]))
	}
	return out
}

// objectKeys returns the keys of an object attribute ({ A = ..., B = ... }) with their expressions.
func (b tfBlock) object(name string) map[string]string {
	a, ok := b.body.Attributes[name]
	if !ok {
		return nil
	}
	obj, ok := a.Expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return nil
	}
	out := map[string]string{}
	for _, item := range obj.Items {
		kr, vr := item.KeyExpr.Range(), item.ValueExpr.Range()
		out[string(b.src[kr.Start.Byte:kr.End.Byte])] = string(b.src[vr.Start.Byte:vr.End.Byte])
	}
	return out
}

func q(s string) string { return `"` + s + `"` }

// wantRoleActions is what the function's role must allow and nothing more: the calls the DynamoDB
// store makes (the methods of dynamo.API), reading the two parameters, decrypting them through SSM,
// and writing logs.
func wantRoleActions() []string {
	api := reflect.TypeFor[dynamo.API]()
	var want []string
	for i := range api.NumMethod() {
		want = append(want, "dynamodb:"+api.Method(i).Name)
	}
	want = append(want, "kms:Decrypt", "logs:CreateLogStream", "logs:PutLogEvents", "ssm:GetParameter")
	sort.Strings(want)
	return want
}

// tfProblems checks the module against the code and returns what is wrong.
func tfProblems(t *testing.T, cfg tfConfig) []string {
	t.Helper()
	var p []string
	problem := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }

	// The table, as `latestwins migrate` creates it (the shape is compared with Migrate's on dynalite
	// by TestTerraformTableMatchesMigrate).
	if table, ok := cfg.one(&p, "resource", "aws_dynamodb_table"); ok {
		if got := table.expr("billing_mode"); got != q("PAY_PER_REQUEST") {
			problem("table billing_mode %s, want PAY_PER_REQUEST", got)
		}
		ttl := table.nested("ttl")
		if len(ttl) != 1 || ttl[0].expr("attribute_name") != q(dynamo.TTLAttribute) || ttl[0].expr("enabled") != "true" {
			problem("table ttl: want attribute %s enabled", dynamo.TTLAttribute)
		}
		pitr := table.nested("point_in_time_recovery")
		if len(pitr) != 1 || pitr[0].expr("enabled") != "true" {
			problem("table point_in_time_recovery is not enabled")
		}
		lc := table.nested("lifecycle")
		if len(lc) != 1 || lc[0].expr("prevent_destroy") != "true" {
			problem("table lifecycle: prevent_destroy must be true (the CloudFormation table is Retain)")
		}
		if idx := table.nested("global_secondary_index"); len(idx) != 1 || idx[0].expr("name") != q(dynamo.PendingIndex) {
			problem("table: want exactly one index, %s", dynamo.PendingIndex)
		}
	}

	// The role: exactly the actions the code needs, on the resources it needs them on.
	doc, ok := cfg.one(&p, "data", "aws_iam_policy_document", "function")
	if ok {
		var actions []string
		bySid := map[string]tfBlock{}
		for _, st := range doc.nested("statement") {
			sid := strings.Trim(st.expr("sid"), `"`)
			bySid[sid] = st
			if e := st.expr("effect"); e != q("Allow") {
				problem("statement %s: effect %s, only Allow is expected", sid, e)
			}
			if st.expr("not_actions") != "" || st.expr("not_resources") != "" {
				problem("statement %s: not_actions and not_resources grant everything else", sid)
			}
			for _, a := range st.list("actions") {
				if strings.Contains(a, "*") {
					problem("statement %s: wildcard action %s", sid, a)
				}
				actions = append(actions, strings.Trim(a, `"`))
			}
			for _, r := range st.list("resources") {
				if r == q("*") {
					problem(`statement %s: resource "*"`, sid)
				}
			}
		}
		sort.Strings(actions)
		if d := cmp.Diff(wantRoleActions(), actions); d != "" {
			problem("the role's actions (-want +got):\n%s", d)
		}
		wantTable := []string{"aws_dynamodb_table.state.arn", q("${aws_dynamodb_table.state.arn}/index/" + dynamo.PendingIndex)}
		if d := cmp.Diff(wantTable, bySid["Table"].list("resources")); bySid["Table"].body == nil || d != "" {
			problem("DynamoDB resources: the table and its pending index only (-want +got):\n%s", d)
		}
		if got := bySid["Secrets"].expr("resources"); got != "local.parameter_arns" {
			problem("ssm:GetParameter resources %s, want local.parameter_arns", got)
		}
		if kms := bySid["DecryptSecretsThroughSSM"]; kms.body == nil {
			problem("no DecryptSecretsThroughSSM statement")
		} else if c := kms.nested("condition"); len(c) != 1 || c[0].expr("variable") != q("kms:ViaService") ||
			!slices.Equal(c[0].list("values"), []string{q("ssm.${local.region}.amazonaws.com")}) {
			problem("kms:Decrypt must be conditioned on kms:ViaService = SSM of the region")
		}
	}
	if locals, ok := cfg.one(&p, "locals"); ok {
		arns := locals.list("parameter_arns")
		want := []string{
			q("arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.webhook_secret_parameter}"),
			q("arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.app_private_key_parameter}"),
		}
		if d := cmp.Diff(want, arns); d != "" {
			problem("the parameters the role may read (-want +got):\n%s", d)
		}
	}
	if pol, ok := cfg.one(&p, "resource", "aws_iam_role_policy", "function"); ok && pol.expr("policy") != "data.aws_iam_policy_document.function.json" {
		problem("the role's policy is %s, not the checked document", pol.expr("policy"))
	}
	if len(cfg.find("resource", "aws_iam_role_policy_attachment")) > 0 || len(cfg.find("resource", "aws_iam_policy")) > 0 {
		problem("the role gets policies besides the checked document")
	}

	// The sign-in's secrets: readable only when the status page signs users in; the alarms' secret
	// and the git store's token only when one is named.
	if doc.body != nil {
		conditional := map[string]tfBlock{}
		n := 0
		for _, b := range doc.body.Blocks {
			if b.Type == "dynamic" && slices.Equal(b.Labels, []string{"statement"}) {
				d := tfBlock{typ: b.Type, labels: b.Labels, body: b.Body, src: doc.src}
				conditional[d.expr("for_each")] = d
				n++
			}
		}
		for _, want := range []struct{ forEach, resources, what string }{
			{`var.status_page == "github" ? [1] : []`, "local.sign_in_parameter_arns", "the sign-in's secrets"},
			{`var.alert_secret_parameter != "" ? [1] : []`, "local.alert_parameter_arns", "the alarms' secret"},
			{`var.git_token_parameter != "" ? [1] : []`, "local.git_token_parameter_arns", "the git store's token"},
		} {
			d, ok := conditional[want.forEach]
			if !ok {
				problem("want a dynamic statement for %s, for_each = %s", want.what, want.forEach)
			} else if c := d.nested("content"); len(c) != 1 || !slices.Equal(c[0].list("actions"), []string{q("ssm:GetParameter")}) ||
				c[0].expr("resources") != want.resources || c[0].expr("effect") != q("Allow") {
				problem("the statement for %s must allow only ssm:GetParameter on %s", want.what, want.resources)
			}
		}
		if n != 3 {
			problem("%d dynamic statements; want the sign-in's, the alarms' and the git token's only", n)
		}
	}
	if locals, ok := cfg.one(&p, "locals"); ok {
		want := []string{
			q("arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.app_client_secret_parameter}"),
			q("arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.session_key_parameter}"),
		}
		if d := cmp.Diff(want, locals.list("sign_in_parameter_arns")); d != "" {
			problem("the sign-in parameters the role may read (-want +got):\n%s", d)
		}
		want = []string{q("arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.alert_secret_parameter}")}
		if d := cmp.Diff(want, locals.list("alert_parameter_arns")); d != "" {
			problem("the alarms' parameter the role may read (-want +got):\n%s", d)
		}
		want = []string{q("arn:${local.partition}:ssm:${local.region}:${local.account}:parameter${var.git_token_parameter}")}
		if d := cmp.Diff(want, locals.list("git_token_parameter_arns")); d != "" {
			problem("the git token's parameter the role may read (-want +got):\n%s", d)
		}
		// The store is git_store when given, else the table.
		const tableStore = "dynamodb://${aws_dynamodb_table.state.name}?region=${local.region}"
		if got, want := locals.expr("store"), `var.git_store != "" ? var.git_store : `+q(tableStore); got != want {
			problem("local store = %s, want %s", got, want)
		}
		if _, err := dynamo.ParseURL(strings.NewReplacer("${aws_dynamodb_table.state.name}", "latestwins", "${local.region}", "eu-west-1").Replace(tableStore)); err != nil {
			problem("the table's store URL: %v", err)
		}
		for name, want := range map[string]string{
			"workflow_role":        "length(var.github_subjects) > 0",
			"create_oidc_provider": `local.workflow_role && var.github_oidc_provider_arn == ""`,
			"oidc_provider_arn":    "local.create_oidc_provider ? aws_iam_openid_connect_provider.github[0].arn : var.github_oidc_provider_arn",
		} {
			if got := locals.expr(name); got != want {
				problem("local %s = %s, want %s", name, got, want)
			}
		}
	}
	p = append(p, tfWorkflowProblems(cfg)...)

	// The function.
	if fn, ok := cfg.one(&p, "resource", "aws_lambda_function"); ok {
		for attr, want := range map[string]string{"runtime": q("provided.al2023"), "handler": q("bootstrap"), "architectures": `["arm64"]`} {
			if got := fn.expr(attr); got != want {
				problem("function %s = %s, want %s", attr, got, want)
			}
		}
		known := []string{lambda.EnvStore, lambda.EnvConfig, lambda.EnvWebhookSecret, lambda.EnvWebhookSecretSSM, lambda.EnvAppID,
			lambda.EnvAppPrivateKey, lambda.EnvAppPrivateKeySSM, lambda.EnvGitHubAPIURL, lambda.EnvMaxBody, lambda.EnvSweepStall, lambda.EnvMaxAttempts, lambda.EnvConfigRepo,
			lambda.EnvStatusPage, lambda.EnvPublicURL, lambda.EnvClientID, lambda.EnvClientSecretSSM, lambda.EnvSessionKeySSM, lambda.EnvGitHubURL,
			lambda.EnvOIDCIssuer, lambda.EnvOIDCAudience, lambda.EnvRetention, lambda.EnvAlertSecretSSM, lambda.EnvGitTokenSSM}
		var vars map[string]string
		if env := fn.nested("environment"); len(env) == 1 {
			vars = env[0].object("variables")
		}
		for k := range vars {
			if !slices.Contains(known, k) {
				problem("variable %s is not read by the function", k)
			}
		}
		for _, k := range []string{lambda.EnvWebhookSecretSSM, lambda.EnvAppPrivateKeySSM, lambda.EnvStore, lambda.EnvAppID, lambda.EnvStatusPage,
			lambda.EnvPublicURL, lambda.EnvClientID, lambda.EnvClientSecretSSM, lambda.EnvSessionKeySSM, lambda.EnvGitHubURL,
			lambda.EnvOIDCIssuer, lambda.EnvOIDCAudience, lambda.EnvRetention} {
			if vars[k] == "" {
				problem("variable %s is not set", k)
			}
		}
		if got := vars[lambda.EnvAlertSecretSSM]; got != "var.alert_secret_parameter" {
			problem("variable %s = %s, want var.alert_secret_parameter (empty: no secret)", lambda.EnvAlertSecretSSM, got)
		}
		if got := vars[lambda.EnvGitTokenSSM]; got != "var.git_token_parameter" {
			problem("variable %s = %s, want var.git_token_parameter (empty: no token)", lambda.EnvGitTokenSSM, got)
		}
		if got := vars[lambda.EnvStore]; got != "local.store" {
			problem("variable %s = %s, want local.store", lambda.EnvStore, got)
		}
		if out, ok := cfg.one(&p, "output", "store_url"); ok && out.expr("value") != "local.store" {
			problem("output store_url is %s, want the function's store (local.store)", out.expr("value"))
		}
	}
	if url, ok := cfg.one(&p, "resource", "aws_lambda_function_url"); ok && url.expr("authorization_type") != q("NONE") {
		problem("function URL authorization %s, want NONE (the webhook signature and OIDC authenticate)", url.expr("authorization_type"))
	}
	if rule, ok := cfg.one(&p, "resource", "aws_cloudwatch_event_rule"); ok && rule.expr("schedule_expression") == "" {
		problem("the sweep rule has no schedule")
	}
	if target, ok := cfg.one(&p, "resource", "aws_cloudwatch_event_target"); ok && target.expr("arn") != "aws_lambda_function.app.arn" {
		problem("the schedule targets %s, want the function", target.expr("arn"))
	}
	perms := map[string]bool{}
	for _, perm := range cfg.find("resource", "aws_lambda_permission") {
		key := perm.expr("action") + " " + perm.expr("principal")
		perms[key] = true
		// Anyone may invoke the function only through its URL, whose requests the App authenticates.
		if perm.expr("principal") == q("*") && perm.expr("action") == q("lambda:InvokeFunction") && perm.expr("invoked_via_function_url") != "true" {
			problem("permission %v lets anyone invoke the function directly: set invoked_via_function_url = true", perm.labels)
		}
		if perm.expr("principal") == q("*") && perm.expr("action") == q("lambda:InvokeFunctionUrl") && perm.expr("function_url_auth_type") != q("NONE") {
			problem("permission %v: function_url_auth_type must be NONE", perm.labels)
		}
	}
	for _, want := range []string{`"lambda:InvokeFunctionUrl" "*"`, `"lambda:InvokeFunction" "*"`, `"lambda:InvokeFunction" "events.amazonaws.com"`} {
		if !perms[want] {
			problem("no permission %s", want)
		}
	}
	return p
}

// tfWorkflowProblems checks the workflow role: trusted only by GitHub's OIDC tokens with the audience
// sts.amazonaws.com and a sub matching the given patterns, allowed exactly the store's calls on the
// table and its index, and created only when patterns are given.
func tfWorkflowProblems(cfg tfConfig) []string {
	var p []string
	problem := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if prov, ok := cfg.one(&p, "resource", "aws_iam_openid_connect_provider"); ok {
		if prov.expr("url") != q(githubIssuer) || !slices.Equal(prov.list("client_id_list"), []string{q(stsAudience)}) {
			problem("the identity provider must be %s with the client id %s", githubIssuer, stsAudience)
		}
		if prov.expr("count") != "local.create_oidc_provider ? 1 : 0" {
			problem("the identity provider's count is %s, want local.create_oidc_provider ? 1 : 0", prov.expr("count"))
		}
	}
	if v, ok := cfg.one(&p, "variable", "github_subjects"); ok {
		val := v.nested("validation")
		if v.expr("default") != "[]" || len(val) != 1 || val[0].expr("condition") != `alltrue([for s in var.github_subjects : can(regex("^[^*?]", s))])` {
			problem("variable github_subjects must default to [] (no role) and refuse patterns that start with a wildcard")
		}
	}
	if role, ok := cfg.one(&p, "resource", "aws_iam_role", "workflow"); ok {
		if role.expr("count") != "local.workflow_role ? 1 : 0" {
			problem("the workflow role's count is %s, want local.workflow_role ? 1 : 0", role.expr("count"))
		}
		if role.expr("assume_role_policy") != "data.aws_iam_policy_document.workflow_assume[0].json" {
			problem("the workflow role's trust policy is %s, not the checked document", role.expr("assume_role_policy"))
		}
	}
	if pol, ok := cfg.one(&p, "resource", "aws_iam_role_policy", "workflow"); ok {
		if pol.expr("policy") != "data.aws_iam_policy_document.workflow.json" || pol.expr("role") != "aws_iam_role.workflow[0].id" {
			problem("the workflow role's policy is %s on %s, not the checked document on the workflow role", pol.expr("policy"), pol.expr("role"))
		}
	}
	if trust, ok := cfg.one(&p, "data", "aws_iam_policy_document", "workflow_assume"); ok {
		sts := trust.nested("statement")
		if len(sts) != 1 {
			problem("the workflow role's trust policy has %d statements, want 1", len(sts))
		} else {
			st := sts[0]
			if st.expr("effect") != q("Allow") || !slices.Equal(st.list("actions"), []string{q("sts:AssumeRoleWithWebIdentity")}) {
				problem("the trust statement must allow sts:AssumeRoleWithWebIdentity only")
			}
			pr := st.nested("principals")
			if len(pr) != 1 || pr[0].expr("type") != q("Federated") || !slices.Equal(pr[0].list("identifiers"), []string{"local.oidc_provider_arn"}) {
				problem("the trust statement's principal must be the GitHub identity provider only (local.oidc_provider_arn)")
			}
			conds := map[string]string{}
			for _, c := range st.nested("condition") {
				conds[strings.Trim(c.expr("variable"), `"`)] = strings.Trim(c.expr("test"), `"`) + " " + c.expr("values")
			}
			want := map[string]string{
				tokenClaim("aud"): "StringEquals " + `["` + stsAudience + `"]`,
				tokenClaim("sub"): "StringLike var.github_subjects",
			}
			if d := cmp.Diff(want, conds); d != "" {
				problem("the trust statement's conditions (-want +got):\n%s", d)
			}
		}
	}
	if doc, ok := cfg.one(&p, "data", "aws_iam_policy_document", "workflow"); ok {
		sts := doc.nested("statement")
		if len(sts) != 1 || len(doc.body.Blocks) != 1 {
			problem("the workflow policy has %d blocks, want the one Table statement", len(doc.body.Blocks))
		} else {
			var actions []string
			for _, a := range sts[0].list("actions") {
				actions = append(actions, strings.Trim(a, `"`))
			}
			sort.Strings(actions)
			if d := cmp.Diff(storeActions(), actions); d != "" || sts[0].expr("effect") != q("Allow") {
				problem("the workflow role's actions (-store calls +policy):\n%s", d)
			}
			wantTable := []string{"aws_dynamodb_table.state.arn", q("${aws_dynamodb_table.state.arn}/index/" + dynamo.PendingIndex)}
			if d := cmp.Diff(wantTable, sts[0].list("resources")); d != "" {
				problem("the workflow role's resources: the table and its pending index only (-want +got):\n%s", d)
			}
		}
	}
	if out, ok := cfg.one(&p, "output", "latestwins_role_arn"); ok && out.expr("value") != "local.workflow_role ? aws_iam_role.workflow[0].arn : null" {
		problem("output latestwins_role_arn is %s, want the workflow role's ARN", out.expr("value"))
	}
	return p
}

func TestTerraformModule(t *testing.T) {
	t.Parallel()
	for _, p := range tfProblems(t, parseTF(t, tfFiles(t, tfModule))) {
		t.Error(p)
	}
}

// tfMutants are broken modules TestTerraformModule must refuse: each replaces text of one file.
var tfMutants = map[string]struct{ file, from, to string }{
	"a Scan allowed":            {"main.tf", `"dynamodb:UpdateItem"]`, `"dynamodb:UpdateItem", "dynamodb:Scan"]`},
	"a wildcard action":         {"main.tf", `actions   = ["ssm:GetParameter"]`, `actions   = ["ssm:*"]`},
	"every table's index":       {"main.tf", `"${aws_dynamodb_table.state.arn}/index/pending",`, `"${aws_dynamodb_table.state.arn}/index/*",`},
	"KMS not through SSM":       {"main.tf", `variable = "kms:ViaService"`, `variable = "kms:CallerAccount"`},
	"any parameter readable":    {"main.tf", `parameter${var.app_private_key_parameter}"`, `parameter/*"`},
	"TTL on another attribute":  {"main.tf", `attribute_name = "expires_at_epoch"`, `attribute_name = "ttl"`},
	"no point-in-time recovery": {"main.tf", "point_in_time_recovery {\n    enabled = true", "point_in_time_recovery {\n    enabled = false"},
	"an x86 function":           {"main.tf", `architectures = ["arm64"]`, `architectures = ["x86_64"]`},
	"direct invocation for all": {"main.tf", "invoked_via_function_url = true", "invoked_via_function_url = false"},
	"a table that may be lost":  {"main.tf", "prevent_destroy = true", "prevent_destroy = false"},
	"a workflow may Scan": {"main.tf", `"dynamodb:UpdateItem"]
    resources = [
      aws_dynamodb_table.state.arn,
      "${aws_dynamodb_table.state.arn}/index/pending",
    ]
  }
}

# The role a workflow`, `"dynamodb:UpdateItem", "dynamodb:Scan"]
    resources = [
      aws_dynamodb_table.state.arn,
      "${aws_dynamodb_table.state.arn}/index/pending",
    ]
  }
}

# The role a workflow`},
	"any audience":                {"main.tf", `values   = ["sts.amazonaws.com"]`, `values   = ["*"]`},
	"any subject":                 {"main.tf", `values   = var.github_subjects`, `values   = ["*"]`},
	"sub matched exactly":         {"main.tf", `test     = "StringLike"`, `test     = "ForAnyValue:StringLike"`},
	"any pattern allowed":         {"variables.tf", `can(regex("^[^*?]", s))`, `true`},
	"a role without patterns":     {"main.tf", `workflow_role        = length(var.github_subjects) > 0`, `workflow_role        = true`},
	"sign-in secrets always":      {"main.tf", `for_each = var.status_page == "github" ? [1] : []`, `for_each = [1]`},
	"alarm secret always":         {"main.tf", `for_each = var.alert_secret_parameter != "" ? [1] : []`, `for_each = [1]`},
	"alarm secret any parameter":  {"main.tf", `parameter${var.alert_secret_parameter}"`, `parameter/*"`},
	"alarm secret not passed":     {"main.tf", `LATESTWINS_ALERT_SECRET_SSM_PARAMETER      = var.alert_secret_parameter`, ``},
	"git token always":            {"main.tf", `for_each = var.git_token_parameter != "" ? [1] : []`, `for_each = [1]`},
	"git token any parameter":     {"main.tf", `parameter${var.git_token_parameter}"`, `parameter/*"`},
	"git token not passed":        {"main.tf", `LATESTWINS_GIT_TOKEN_SSM_PARAMETER         = var.git_token_parameter`, ``},
	"git store ignored":           {"main.tf", `store                = var.git_store != "" ? var.git_store : `, `store                = `},
	"store output not the store":  {"outputs.tf", `value       = local.store`, `value       = "dynamodb://${aws_dynamodb_table.state.name}?region=${local.region}"`},
	"a variable the code ignores": {"main.tf", `LATESTWINS_SWEEP_STALL                     = var.sweep_stall`, `LATESTWINS_SWEEP_STAL = var.sweep_stall`},
}

func TestTerraformMutantsAreCaught(t *testing.T) {
	t.Parallel()
	files := tfFiles(t, tfModule)
	for name, m := range tfMutants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(tfModule, m.file)
			if !strings.Contains(string(files[path]), m.from) {
				t.Fatalf("%s no longer contains %q: update the mutant", path, m.from)
			}
			broken := map[string][]byte{}
			for k, v := range files {
				broken[k] = v
			}
			broken[path] = []byte(strings.Replace(string(files[path]), m.from, m.to, 1))
			if len(tfProblems(t, parseTF(t, broken))) == 0 {
				t.Errorf("TestTerraformModule accepts a module with %s", name)
			}
		})
	}
}

// TestTerraformTableMatchesMigrate creates the table with the code (Store.Migrate, on dynalite) and
// compares it with the module's table.
func TestTerraformTableMatchesMigrate(t *testing.T) {
	cfg := parseTF(t, tfFiles(t, tfModule))
	var problems []string
	table, ok := cfg.one(&problems, "resource", "aws_dynamodb_table")
	if !ok {
		t.Fatal(problems)
	}
	fromModule := tableShape{Billing: strings.Trim(table.expr("billing_mode"), `"`), Indexes: map[string]string{}}
	for _, a := range table.nested("attribute") {
		fromModule.Attributes = append(fromModule.Attributes, strings.Trim(a.expr("name"), `"`)+" "+strings.Trim(a.expr("type"), `"`))
	}
	sort.Strings(fromModule.Attributes)
	keys := func(b tfBlock) string {
		k := strings.Trim(b.expr("hash_key"), `"`) + " HASH"
		if r := b.expr("range_key"); r != "" {
			k += ", " + strings.Trim(r, `"`) + " RANGE"
		}
		return k
	}
	fromModule.Key = keys(table)
	for _, idx := range table.nested("global_secondary_index") {
		fromModule.Indexes[strings.Trim(idx.expr("name"), `"`)] = keys(idx) + "; " + strings.Trim(idx.expr("projection_type"), `"`)
	}
	if d := cmp.Diff(migratedShape(t), fromModule); d != "" {
		t.Fatalf("the module's table differs from the one Migrate creates (-migrate +module):\n%s", d)
	}
}

// TestTerraformDocumented checks that every variable and output says what it is, and that the
// example root module uses the module with every variable that has no default.
func TestTerraformDocumented(t *testing.T) {
	t.Parallel()
	cfg := parseTF(t, tfFiles(t, tfModule))
	var required []string
	for _, typ := range []string{"variable", "output"} {
		for _, b := range cfg.find(typ) {
			if d := b.expr("description"); len(d) < 10 {
				t.Errorf("%s %s has no description", typ, b.labels[0])
			}
			if typ == "variable" && b.expr("default") == "" {
				required = append(required, b.labels[0])
			}
		}
	}
	example := parseTF(t, tfFiles(t, filepath.Join(tfModule, "examples", "basic")))
	var problems []string
	mod, ok := example.one(&problems, "module", "latestwins")
	if !ok {
		t.Fatal(problems)
	}
	if src := mod.expr("source"); src != q("../..") {
		t.Errorf("the example's module source is %s, want the module (../..)", src)
	}
	for _, v := range required {
		if mod.expr(v) == "" {
			t.Errorf("the example does not set %s, which has no default", v)
		}
	}
	for name := range mod.body.Attributes {
		if name != "source" && len(cfg.find("variable", name)) == 0 {
			t.Errorf("the example sets %s, which is not a variable of the module", name)
		}
	}
}

// TestTerraformMatchesCloudFormation checks that the module takes the template's parameters, with
// the same defaults, so that the two stacks deploy the same App.
func TestTerraformMatchesCloudFormation(t *testing.T) {
	t.Parallel()
	tpl := load(t)
	cfg := parseTF(t, tfFiles(t, tfModule))
	variable := map[string]string{
		"CodeBucket": "code_bucket", "CodeKey": "code_key", "TableName": "table_name",
		"WebhookSecretParameter": "webhook_secret_parameter", "AppPrivateKeyParameter": "app_private_key_parameter",
		"AppId": "app_id", "GitHubApiUrl": "github_api_url", "SweepScheduleExpression": "sweep_schedule_expression",
		"SweepStall": "sweep_stall", "LogRetentionDays": "log_retention_days", "ConfigRepo": "config_repo",
		"GitHubSubjects": "github_subjects", "GitHubOidcProviderArn": "github_oidc_provider_arn", "StatusPage": "status_page",
		"PublicUrl": "public_url", "AppClientId": "app_client_id", "AppClientSecretParameter": "app_client_secret_parameter",
		"SessionKeyParameter": "session_key_parameter", "GitHubUrl": "github_url",
		"OidcIssuer": "oidc_issuer", "OidcAudience": "oidc_audience", "Retention": "retention",
		"AlertAfterSeconds": "alert_after_seconds", "AlarmTopicArn": "alarm_topic_arn",
		"AlertSecretParameter": "alert_secret_parameter", "GitStore": "git_store", "GitTokenParameter": "git_token_parameter",
	}
	for param, def := range tpl.Parameters {
		name, ok := variable[param]
		if !ok {
			t.Errorf("template parameter %s has no Terraform variable: add it, and to this table", param)
			continue
		}
		vs := cfg.find("variable", name)
		if len(vs) != 1 {
			t.Errorf("no variable %s (the template's %s)", name, param)
			continue
		}
		want, hasDefault := def["Default"]
		got := vs[0].expr("default")
		if def["Type"] == "CommaDelimitedList" && got == "[]" {
			got = `""` // an empty list
		}
		switch {
		case !hasDefault && got != "" && got != "null":
			t.Errorf("variable %s defaults to %s; the template's %s has no default", name, got, param)
		case hasDefault && strings.Trim(got, `"`) != fmt.Sprint(want):
			t.Errorf("variable %s defaults to %s, the template's %s to %v", name, got, param, want)
		}
	}
}

// TestTerraformFormatted checks every .tf file is in canonical form: hclwrite.Format is the
// formatter `terraform fmt` applies (scripts/check-infra also runs terraform fmt -check when terraform
// is installed).
func TestTerraformFormatted(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{tfModule, filepath.Join(tfModule, "examples", "basic")} {
		for name, src := range tfFiles(t, dir) {
			if got := hclwrite.Format(src); string(got) != string(src) {
				t.Errorf("%s is not formatted: run terraform fmt -recursive infra/terraform", name)
			}
		}
	}
}
