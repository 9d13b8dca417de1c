# shellcheck shell=bash
# Sourced by scripts/mutants: traces. Off without an endpoint; a delivery's store requests are
# children of its span; the Lambda exports an invocation's spans before it returns.

mutant "tracing starts without an endpoint" internal/tracing/tracing.go \
  's/\tif raw == "" \{\n\t\treturn Config\{\}, nil\n\t\}\n\tu, err/\tu, err/' \
  TestOffWithoutAnEndpoint ./internal/tracing/
mutant "a delivery's store requests lose its span" internal/tracing/tracing.go \
  's/h\.ServeHTTP\(sw, r\.WithContext\(ctx\)\)/_ = ctx\n\t\th.ServeHTTP(sw, r)/' \
  TestWebhookAndStoreSpansReachTheCollector ./internal/tracing/
mutant "the Lambda returns before its spans are exported" lambda/handler.go \
  's/\tdefer h\.flushTraces\(ctx\)\n//' \
  TestInvocationsAreTracedAndExportedBeforeTheyReturn ./lambda/
