package dynamo

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/latestwins/latestwins/internal/authority"
	"github.com/latestwins/latestwins/internal/testutil/dynalitetest"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw     string
		want    Target
		wantErr string
	}{
		{raw: "dynamodb://latestwins", want: Target{Table: "latestwins"}},
		{raw: "dynamodb://latestwins/", want: Target{Table: "latestwins"}},
		{raw: "dynamodb://Prod_State.v2-x?region=eu-west-1", want: Target{Table: "Prod_State.v2-x", Region: "eu-west-1"}},
		{raw: "dynamodb://lwt?region=us-east-1&endpoint=http://127.0.0.1:4567",
			want: Target{Table: "lwt", Region: "us-east-1", Endpoint: "http://127.0.0.1:4567"}},
		{raw: "dynamodb://lwt?endpoint=https%3A%2F%2Fdynamodb.local%3A8443%2F", want: Target{Table: "lwt", Endpoint: "https://dynamodb.local:8443/"}},
		{raw: "dynamodb://", wantErr: "names no table"},
		{raw: "dynamodb:latestwins", wantErr: "names no table"},
		{raw: "dynamodb:///latestwins", wantErr: "names no table"},
		{raw: "bolt://latestwins", wantErr: `scheme "bolt" is not "dynamodb"`},
		{raw: "latestwins", wantErr: `scheme "" is not "dynamodb"`},
		{raw: "dynamodb://ab", wantErr: `table name "ab" is invalid`},
		{raw: "dynamodb://lw:8000", wantErr: `table name "lw:8000" is invalid`},
		{raw: "dynamodb://" + strings.Repeat("t", 256), wantErr: "is invalid"},
		{raw: "dynamodb://key:secret@latestwins", wantErr: "credentials do not belong in the URL"},
		{raw: "dynamodb://latestwins/extra", wantErr: `unexpected path "/extra"`},
		{raw: "dynamodb://latestwins#x", wantErr: `unexpected fragment "x"`},
		{raw: "dynamodb://latestwins?regoin=eu-west-1", wantErr: `unknown parameter "regoin"`},
		{raw: "dynamodb://latestwins?region=eu-west-1&region=us-east-1", wantErr: "region is given 2 times"},
		{raw: "dynamodb://latestwins?region=", wantErr: `region "" is invalid`},
		{raw: "dynamodb://latestwins?region=EU%20West", wantErr: `region "EU West" is invalid`},
		{raw: "dynamodb://latestwins?endpoint=127.0.0.1:4567", wantErr: "is not an http(s) URL"},
		{raw: "dynamodb://latestwins?endpoint=ftp://host", wantErr: "is not an http(s) URL"},
		{raw: "dynamodb://latestwins?endpoint=http://", wantErr: "is not an http(s) URL"},
		{raw: "dynamodb://lat estwins", wantErr: "expected dynamodb://TABLE"},
		{raw: "dynamodb://latestwins?region=%zz", wantErr: "query"},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			t.Parallel()
			got, err := ParseURL(tc.raw)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseURL(%q) = %+v, %v; want an error containing %q", tc.raw, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseURL(%q): %v", tc.raw, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("ParseURL(%q) (-want +got):\n%s", tc.raw, diff)
			}
		})
	}
}

// isolateAWSConfig points the AWS configuration chain at nothing of this machine's.
func isolateAWSConfig(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_CONFIG_FILE":             filepath.Join(dir, "config"),
		"AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_REGION":                  "",
		"AWS_DEFAULT_REGION":          "",
		"AWS_PROFILE":                 "",
		"AWS_ENDPOINT_URL":            "",
		"AWS_ENDPOINT_URL_DYNAMODB":   "",
	} {
		t.Setenv(k, v)
	}
}

func TestOpenWithoutRegion(t *testing.T) {
	isolateAWSConfig(t)
	_, err := Open(t.Context(), "dynamodb://latestwins")
	if err == nil || !strings.Contains(err.Error(), "no AWS region") || !strings.Contains(err.Error(), "?region=R") {
		t.Fatalf("Open without a region anywhere: %v; want an error that says how to give one", err)
	}
	if _, err := Open(t.Context(), "dynamodb://x"); err == nil || !strings.Contains(err.Error(), "is invalid") {
		t.Fatalf("Open of a bad URL: %v", err)
	}
	t.Setenv("AWS_REGION", "eu-central-1")
	s, err := Open(t.Context(), "dynamodb://latestwins")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.api.(*dynamodb.Client).Options().Region; got != "eu-central-1" {
		t.Fatalf("region from the environment: %q", got)
	}
}

// TestOpenAgainstDynalite opens a store by URL the way the CLI does, with a request-counting
// client option, and uses it.
func TestOpenAgainstDynalite(t *testing.T) {
	ep := dynalitetest.Endpoint(t)
	isolateAWSConfig(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	table := dynalitetest.TableName(t)
	counter := &requestCounter{}
	s, err := Open(t.Context(), "dynamodb://"+table+"?region=us-east-1&endpoint="+ep, counter.option())
	if err != nil {
		t.Fatal(err)
	}
	if got := aws.ToString(s.api.(*dynamodb.Client).Options().BaseEndpoint); got != ep {
		t.Fatalf("endpoint %q, want %q", got, ep)
	}
	if rep, err := s.Migrate(t.Context()); err != nil || !rep.Created {
		t.Fatalf("migrate: %+v, %v", rep, err)
	}
	a := authority.New(s)
	if _, err := a.Acquire(t.Context(), "refresh", "host:1", "refresh", authority.DefaultLeaseTTL); err != nil {
		t.Fatal(err)
	}
	if n := counter.take(); n["GetItem"] != 1 || n["PutItem"] < 2 || n["CreateTable"] != 1 {
		t.Fatalf("requests through the opened client: %v", n)
	}
}
