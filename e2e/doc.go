// Package e2e runs the GitHub Action end to end: the project's action.yml, built from source by its
// own composite step, in workflows run by act on the host against dynalite, or with no store given
// against the workflow's repository on a loopback git server (git http-backend). Its tests need act
// (scripts/test installs it), Go, git and dynalite; under CI=true a missing tool is a failure.
//
// It also runs the recipes of README.md and docs/*.md (docs_test.go) with a freshly built latestwins,
// and checks the verbs, flags, files and links those documents name, so that they cannot drift from
// the code.
package e2e
