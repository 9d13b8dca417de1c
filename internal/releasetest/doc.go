// Package releasetest tests how latestwins reaches its users: the Action's setup script
// (scripts/action-setup.sh), which downloads and verifies a release binary or builds from source, run
// with bash against a release server on 127.0.0.1. The release pipeline itself (.goreleaser.yaml) is
// checked by scripts/check-release.
package releasetest
