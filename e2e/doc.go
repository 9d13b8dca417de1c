// Package e2e runs the GitHub Action end to end: the project's action.yml, built from source by its
// own composite step, in workflows run by act on the host against dynalite. Its tests need act
// (scripts/test installs it), Go, git and dynalite; under CI=true a missing tool is a failure.
package e2e
