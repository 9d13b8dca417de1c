package lambda_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/lambda"
)

// parameters is an SSM Parameter Store holding SecureStrings; it refuses reads without decryption.
type parameters map[string]string

var _ lambda.ParameterReader = parameters(nil)

func (p parameters) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	name := aws.ToString(in.Name)
	v, ok := p[name]
	if !ok {
		return nil, &types.ParameterNotFound{Message: aws.String("parameter " + name + " not found")}
	}
	if !aws.ToBool(in.WithDecryption) {
		v = "AQICAHh-encrypted-blob"
	}
	return &ssm.GetParameterOutput{Parameter: &types.Parameter{Name: in.Name, Type: types.ParameterTypeSecureString, Value: aws.String(v)}}, nil
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadSettings(t *testing.T) {
	t.Parallel()
	key := testKeyPEM(t)
	ssmParams := parameters{"/latestwins/webhook-secret": "from-ssm", "/latestwins/app-key": key, "/latestwins/empty": ""}
	base := func(extra map[string]string) map[string]string {
		m := map[string]string{lambda.EnvStore: "dynamodb://latestwins?region=eu-west-1"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name    string
		env     map[string]string
		params  lambda.ParameterReader
		want    *lambda.Settings
		wantErr []string // each must be in the error
	}{
		{name: "secrets from SSM, decrypted", params: ssmParams,
			env: base(map[string]string{lambda.EnvWebhookSecretSSM: "/latestwins/webhook-secret", lambda.EnvAppPrivateKeySSM: "/latestwins/app-key",
				lambda.EnvAppID: "42", lambda.EnvSweepStall: "5m", lambda.EnvMaxAttempts: "4", lambda.EnvGitHubAPIURL: "https://ghe.example.com/api/v3",
				lambda.EnvHealDeliveries: "false"}),
			want: &lambda.Settings{Store: "dynamodb://latestwins?region=eu-west-1", WebhookSecret: []byte("from-ssm"), AppID: 42,
				AppPrivateKey: []byte(key), GitHubAPIURL: "https://ghe.example.com/api/v3/", MaxBodyBytes: app.DefaultMaxBodyBytes,
				Stall: 5 * time.Minute, MaxAttempts: 4, StatusPage: app.StatusPageOff}},
		{name: "secret from the environment, defaults",
			env: base(map[string]string{lambda.EnvWebhookSecret: "plain", lambda.EnvConfig: "/var/task/latestwins.yml"}),
			want: &lambda.Settings{Store: "dynamodb://latestwins?region=eu-west-1", Config: "/var/task/latestwins.yml", WebhookSecret: []byte("plain"),
				GitHubAPIURL: "https://api.github.com/", MaxBodyBytes: app.DefaultMaxBodyBytes, Stall: lambda.DefaultStall, MaxAttempts: lambda.DefaultMaxAttempts,
				StatusPage: app.StatusPageOff, HealDeliveries: true}},
		{name: "alert secret from SSM", params: parameters{"/latestwins/alert-secret": "sign-alarms"},
			env: base(map[string]string{lambda.EnvWebhookSecret: "plain", lambda.EnvAlertSecretSSM: "/latestwins/alert-secret"}),
			want: &lambda.Settings{Store: "dynamodb://latestwins?region=eu-west-1", WebhookSecret: []byte("plain"), AlertSecret: []byte("sign-alarms"),
				GitHubAPIURL: "https://api.github.com/", MaxBodyBytes: app.DefaultMaxBodyBytes, Stall: lambda.DefaultStall, MaxAttempts: lambda.DefaultMaxAttempts,
				StatusPage: app.StatusPageOff, HealDeliveries: true}},
		{name: "alert secret both ways", params: parameters{"/latestwins/alert-secret": "sign-alarms"},
			env:     base(map[string]string{lambda.EnvWebhookSecret: "plain", lambda.EnvAlertSecretSSM: "/latestwins/alert-secret", lambda.EnvAlertSecret: "x"}),
			wantErr: []string{"both " + lambda.EnvAlertSecretSSM + " and " + lambda.EnvAlertSecret + " are set"}},
		{name: "status page auto is off on a Function URL",
			env: base(map[string]string{lambda.EnvWebhookSecret: "plain", lambda.EnvStatusPage: "auto"}),
			want: &lambda.Settings{Store: "dynamodb://latestwins?region=eu-west-1", WebhookSecret: []byte("plain"),
				GitHubAPIURL: "https://api.github.com/", MaxBodyBytes: app.DefaultMaxBodyBytes, Stall: lambda.DefaultStall, MaxAttempts: lambda.DefaultMaxAttempts,
				StatusPage: app.StatusPageOff, HealDeliveries: true}},
		{name: "status page with GitHub sign-in, secrets from SSM", params: parameters{"/latestwins/client-secret": "cs", "/latestwins/session-key": strings.Repeat("k", 32)},
			env: base(map[string]string{lambda.EnvWebhookSecret: "plain", lambda.EnvStatusPage: "github", lambda.EnvPublicURL: "https://abc.lambda-url.eu-west-1.on.aws",
				lambda.EnvClientID: "Iv1.x", lambda.EnvClientSecretSSM: "/latestwins/client-secret", lambda.EnvSessionKeySSM: "/latestwins/session-key"}),
			want: &lambda.Settings{Store: "dynamodb://latestwins?region=eu-west-1", WebhookSecret: []byte("plain"),
				GitHubAPIURL: "https://api.github.com/", MaxBodyBytes: app.DefaultMaxBodyBytes, Stall: lambda.DefaultStall, MaxAttempts: lambda.DefaultMaxAttempts,
				StatusPage: app.StatusPageGitHub, PublicURL: "https://abc.lambda-url.eu-west-1.on.aws", ClientID: "Iv1.x", ClientSecret: "cs",
				SessionKey: []byte(strings.Repeat("k", 32)), HealDeliveries: true}},
		{name: "status page github without its settings", env: base(map[string]string{lambda.EnvWebhookSecret: "s", lambda.EnvStatusPage: "github"}),
			wantErr: []string{lambda.EnvStatusPage + "=github needs", lambda.EnvPublicURL, lambda.EnvClientID, lambda.EnvSessionKeySSM}},
		{name: "status page github with a short session key",
			env: base(map[string]string{lambda.EnvWebhookSecret: "s", lambda.EnvStatusPage: "github", lambda.EnvPublicURL: "https://x.example",
				lambda.EnvClientID: "c", lambda.EnvClientSecret: "s", lambda.EnvSessionKey: "short"}),
			wantErr: []string{"session key has 5 bytes", "at least 32"}},
		{name: "status page mode unknown", env: base(map[string]string{lambda.EnvWebhookSecret: "s", lambda.EnvStatusPage: "public"}),
			wantErr: []string{lambda.EnvStatusPage, `"public"`}},
		{name: "heal deliveries is true or false", env: base(map[string]string{lambda.EnvWebhookSecret: "s", lambda.EnvHealDeliveries: "sometimes"}),
			wantErr: []string{lambda.EnvHealDeliveries + `="sometimes"`, "true or false"}},
		{name: "no webhook secret refuses to start", env: base(nil),
			wantErr: []string{"no webhook secret", lambda.EnvWebhookSecretSSM, "unsigned deliveries would be accepted"}},
		{name: "empty SSM parameter", params: ssmParams, env: base(map[string]string{lambda.EnvWebhookSecretSSM: "/latestwins/empty"}),
			wantErr: []string{"SSM parameter /latestwins/empty is empty"}},
		{name: "missing SSM parameter", params: ssmParams, env: base(map[string]string{lambda.EnvWebhookSecretSSM: "/latestwins/nope"}),
			wantErr: []string{"read SSM parameter /latestwins/nope", "ssm:GetParameter", "not found"}},
		{name: "both parameter and plain secret", params: ssmParams,
			env:     base(map[string]string{lambda.EnvWebhookSecretSSM: "/latestwins/webhook-secret", lambda.EnvWebhookSecret: "x"}),
			wantErr: []string{"both " + lambda.EnvWebhookSecretSSM + " and " + lambda.EnvWebhookSecret + " are set"}},
		{name: "SSM named but no client", env: base(map[string]string{lambda.EnvWebhookSecretSSM: "/latestwins/webhook-secret"}),
			wantErr: []string{"no SSM client"}},
		{name: "app id without key", env: base(map[string]string{lambda.EnvWebhookSecret: "s", lambda.EnvAppID: "42"}),
			wantErr: []string{lambda.EnvAppID + " is set but the App's private key is not"}},
		{name: "key without app id", params: ssmParams,
			env:     base(map[string]string{lambda.EnvWebhookSecret: "s", lambda.EnvAppPrivateKeySSM: "/latestwins/app-key"}),
			wantErr: []string{"private key is set but " + lambda.EnvAppID + " is not"}},
		{name: "every mistake at once", env: map[string]string{lambda.EnvStore: "bolt://./x.db", lambda.EnvAppID: "abc", lambda.EnvAppPrivateKey: key,
			lambda.EnvSweepStall: "soon", lambda.EnvMaxAttempts: "0", lambda.EnvMaxBody: "-1", lambda.EnvGitHubAPIURL: "ftp://x"},
			wantErr: []string{"a bolt file does not survive", "no webhook secret", lambda.EnvAppID + `="abc"`, lambda.EnvSweepStall + `="soon"`,
				lambda.EnvMaxAttempts + `="0"`, lambda.EnvMaxBody + `="-1"`, lambda.EnvGitHubAPIURL + `="ftp://x"`}},
		{name: "no store", env: map[string]string{lambda.EnvWebhookSecret: "s"}, wantErr: []string{lambda.EnvStore + " is not set"}},
		{name: "github store, its token from SSM", params: parameters{"/latestwins/git-token": "ghp_fromssm"},
			env: map[string]string{lambda.EnvStore: "github://octo-org/state", lambda.EnvWebhookSecret: "plain",
				lambda.EnvGitTokenSSM: "/latestwins/git-token", lambda.EnvGitHubURL: "https://ghe.example.com"},
			want: &lambda.Settings{Store: "github://octo-org/state", WebhookSecret: []byte("plain"), GitToken: "ghp_fromssm", GitServerURL: "https://ghe.example.com",
				GitHubAPIURL: "https://api.github.com/", MaxBodyBytes: app.DefaultMaxBodyBytes, Stall: lambda.DefaultStall, MaxAttempts: lambda.DefaultMaxAttempts,
				StatusPage: app.StatusPageOff, HealDeliveries: true}},
		{name: "github store without a token", env: map[string]string{lambda.EnvStore: "github://octo-org/state", lambda.EnvWebhookSecret: "s"},
			wantErr: []string{"no token to push with", lambda.EnvGitTokenSSM, lambda.EnvGitToken, "contents: write"}},
		{name: "github store with a bad owner", env: map[string]string{lambda.EnvStore: "github://-octo/state", lambda.EnvWebhookSecret: "s", lambda.EnvGitToken: "t"},
			wantErr: []string{lambda.EnvStore, "not a GitHub account name"}},
		{name: "local git store refused", env: map[string]string{lambda.EnvStore: "git+file:///srv/state.git", lambda.EnvWebhookSecret: "s"},
			wantErr: []string{"no git programs", "github://OWNER/REPO"}},
		{name: "memory store refused at cold start", env: map[string]string{lambda.EnvStore: "memory://", lambda.EnvWebhookSecret: "s"},
			wantErr: []string{lambda.EnvStore + "=memory://", "every Lambda instance would keep its own state", "dynamodb://"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := lambda.LoadSettings(context.Background(), env(tt.env), tt.params)
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("settings %+v, want an error", got)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Fatalf("settings (-want +got):\n%s", d)
			}
		})
	}
}

func TestBuild(t *testing.T) {
	t.Parallel()
	s := &lambda.Settings{Store: "memory://", Config: testdata(t, "lambda", "latestwins.yml"), WebhookSecret: testSecret,
		GitHubAPIURL: "https://api.github.com/", MaxBodyBytes: app.DefaultMaxBodyBytes, Stall: lambda.DefaultStall, MaxAttempts: 3}
	h, err := lambda.Build(context.Background(), s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := invokeHTTP(t, h, fixture(t, "function-url-push.json")); res.StatusCode != 200 || !strings.Contains(res.Body, `"outcome":"accepted"`) {
		t.Fatalf("push: %d %s", res.StatusCode, res.Body)
	}

	bad := []struct {
		name string
		edit func(s *lambda.Settings)
		want string
	}{
		{"no configuration source", func(s *lambda.Settings) { s.Config = "" }, "no configuration source"},
		{"invalid configuration", func(s *lambda.Settings) { s.Config = testdata(t, "lambda", "scheduled-sweep.json") }, lambda.EnvConfig},
		{"unknown store", func(s *lambda.Settings) { s.Store = "redis://x" }, `LATESTWINS_STORE="redis://x"`},
		{"bad key", func(s *lambda.Settings) { s.AppID, s.AppPrivateKey = 42, []byte("-----BEGIN nonsense") }, "private key"},
		{"plain-http OIDC issuer", func(s *lambda.Settings) { s.OIDCIssuer = "http://issuer.example" }, lambda.EnvOIDCIssuer},
	}
	for _, tt := range bad {
		c := *s
		tt.edit(&c)
		if _, err := lambda.Build(context.Background(), &c, nil, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one saying %q", tt.name, err, tt.want)
		}
	}
	var nf interface{ ErrorCode() string }
	_, err = lambda.LoadSettings(context.Background(), env(map[string]string{lambda.EnvStore: "memory://", lambda.EnvWebhookSecretSSM: "/x"}), parameters{})
	if !errors.As(err, &nf) || nf.ErrorCode() != "ParameterNotFound" {
		t.Errorf("error %v: want the SSM error wrapped, not flattened", err)
	}
}

// testKeyPEM is a fresh RSA key in the PEM form GitHub issues App keys in.
func testKeyPEM(t testing.TB) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}
