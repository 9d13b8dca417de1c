package lambda_test

import (
	"context"
	"strings"
	"testing"

	"github.com/latestwins/latestwins/app"
	"github.com/latestwins/latestwins/internal/tracing"
	"github.com/latestwins/latestwins/internal/tracing/tracingtest"
	"github.com/latestwins/latestwins/lambda"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT the function traces each webhook delivery and each scheduled
// sweep, with the store's requests under them, and has exported an invocation's spans by the time
// it returns: Lambda freezes the process after that.
func TestInvocationsAreTracedAndExportedBeforeTheyReturn(t *testing.T) {
	t.Parallel()
	col := tracingtest.New(t)
	loaded, err := lambda.LoadSettings(context.Background(), env(map[string]string{lambda.EnvStore: "dynamodb://latestwins?region=eu-west-1",
		lambda.EnvWebhookSecret: "s", tracing.EnvEndpoint: col.URL, tracing.EnvServiceName: "lw-test"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := col.URL + "/v1/traces"; loaded.Tracing.URL != want || loaded.Tracing.Service != "lw-test" {
		t.Fatalf("settings' tracing %+v; want %s for lw-test", loaded.Tracing, want)
	}
	s := &lambda.Settings{Store: "memory://", Config: testdata(t, "lambda", "latestwins.yml"), WebhookSecret: testSecret,
		GitHubAPIURL: "https://api.github.com/", MaxBodyBytes: app.DefaultMaxBodyBytes, Stall: lambda.DefaultStall, MaxAttempts: 3,
		Tracing: loaded.Tracing}
	h, err := lambda.Build(context.Background(), s, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res := invokeHTTP(t, h, fixture(t, "function-url-push.json")); res.StatusCode != 200 {
		t.Fatalf("push: %d %s", res.StatusCode, res.Body)
	}
	hooks := col.Named("POST /webhook")
	if len(hooks) != 1 || hooks[0].Attr("github.event") != "push" || hooks[0].Service != "lw-test" {
		t.Fatalf("after the push returned, webhook spans %+v; want the push's, exported", hooks)
	}
	if _, err := sweep(t, h); err != nil {
		t.Fatal(err)
	}
	sweeps := col.Named("sweep")
	if len(sweeps) != 1 {
		t.Fatalf("after the sweep returned, %d sweep spans; want 1, exported", len(sweeps))
	}
	under := map[string]int{}
	for _, sp := range col.Spans() {
		if strings.HasPrefix(sp.GetName(), "store.") {
			under[sp.Parent()]++
		}
	}
	if under[hooks[0].ID()] == 0 || under[sweeps[0].ID()] == 0 {
		t.Errorf("store spans by parent %v; want some under the delivery %s and under the sweep %s", under, hooks[0].ID(), sweeps[0].ID())
	}
}
