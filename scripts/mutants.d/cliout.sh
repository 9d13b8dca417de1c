# shellcheck shell=bash
# Sourced by scripts/mutants: what the command line tells a deploy command and a script.
mutant "a deploy command is told the first scope's commit when its scopes deploy different ones" internal/pass/supervise.go \
  's/\t\tif c\.Sha != sha \{\n\t\t\tsha = ""\n\t\t\}\n//' \
  TestRunGivesTheCommandTheCommitItDeploys ./internal/cli/
mutant "a flag error prints every flag of the command" internal/cli/settings.go \
  's/\tcase err != nil:\n\t\treturn usageErrorf/\tcase err != nil:\n\t\tfs.SetOutput(help)\n\t\tfs.PrintDefaults()\n\t\treturn usageErrorf/' \
  TestFlagErrorSaysTheProblemAndWhereTheHelpIs ./internal/cli/
mutant "webhook send signs something else than the body it sends" internal/cli/webhook.go \
  's/\tmac\.Write\(body\)/\tmac.Write(append(body, byte(10)))/' \
  TestWebhookSendDeliversASignedPayload ./internal/cli/
