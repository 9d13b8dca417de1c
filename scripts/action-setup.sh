#!/usr/bin/env bash
# The Action's first step (action.yml runs it): puts a latestwins binary at $LATESTWINS_BIN and writes
# its path to $GITHUB_OUTPUT as `path`.
#
# On a release ref it downloads the release binary for the runner and never compiles:
#   - a version tag (uses: latestwins/latestwins@v1.4.2) downloads that release;
#   - a major or minor tag (@v1, @v1.4) downloads the release named by the file .release-version at
#     the action's root, which the release workflow commits under the tag it moves (it must name a
#     version of that major or minor line).
# The binary is checked against the release's checksums.txt, and, where the gh command is present,
# against the release's build provenance attestation (`gh attestation verify`). A binary that cannot
# be verified is refused, never run.
#
# Any other ref (a branch, a commit sha, a local `uses: ./`) is not a release: the binary is built
# from the action's own source with the runner's Go and its build cache.
#
# Environment (action.yml sets the first ones from the github and runner contexts):
#   ACTION_REPOSITORY, ACTION_REF   github.action_repository and github.action_ref (empty for uses: ./)
#   RUNNER_OS_NAME, RUNNER_ARCH_NAME runner.os (Linux, macOS) and runner.arch (X64, ARM64)
#   GITHUB_ACTION_PATH              the action's source
#   LATESTWINS_BIN                  where to put the binary (default $RUNNER_TEMP/latestwins-bin/latestwins)
#   LATESTWINS_RELEASE_URL          releases' download base (default https://github.com/REPO/releases/download);
#                                   a release's files are at BASE/VERSION/NAME
#   LATESTWINS_SKIP_ATTESTATION     true: do not run gh attestation verify even where gh is present
#   GH_TOKEN                        for gh attestation verify
# Exit codes: 0 ready, 2 refused (no verified binary, no way to build one), as the command line's 2.
set -euo pipefail

log() { printf 'latestwins setup: %s\n' "$*" >&2; }
fail() { printf '::error::latestwins setup: %s\n' "$*"; exit 2; }

bin="${LATESTWINS_BIN:-${RUNNER_TEMP:?RUNNER_TEMP is not set}/latestwins-bin/latestwins}"
action_path="${GITHUB_ACTION_PATH:-$(cd "$(dirname "$0")/.." && pwd)}"
repo="${ACTION_REPOSITORY:-}"
ref="${ACTION_REF:-}"

output() {
  if [ -n "${GITHUB_OUTPUT:-}" ]; then printf 'path=%s\n' "$bin" >>"$GITHUB_OUTPUT"; fi
}

# resolve_release sets version to the release to download for the action's ref, or leaves it empty
# when the ref is not a release.
version=""
resolve_release() {
  if [ -z "$repo" ] || [ -z "$ref" ]; then return 0; fi
  if [[ "$ref" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
    version="$ref"
    return 0
  fi
  if [[ "$ref" =~ ^v[0-9]+(\.[0-9]+)?$ ]] && [ -f "$action_path/.release-version" ]; then
    local pinned
    pinned="$(tr -d '[:space:]' <"$action_path/.release-version")"
    if [[ ! "$pinned" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || [[ "$pinned" != "$ref".* ]]; then
      fail "the action's .release-version says '$pinned', which is not a release of $ref; the tag $ref of $repo is broken, pin a version tag (@vX.Y.Z) instead"
    fi
    version="$pinned"
  fi
}

build_from_source() {
  local why="$1"
  if ! command -v go >/dev/null 2>&1; then
    fail "$why, so latestwins is built from the action's source, and Go is not installed: add actions/setup-go before this step, or use a release (uses: ${repo:-latestwins/latestwins}@v1)"
  fi
  log "$why: building from the action's source with $(go version)"
  mkdir -p "$(dirname "$bin")"
  (cd "$action_path" && CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/latestwins)
}

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | awk '{print $1}'; else shasum -a 256 "$1" | awk '{print $1}'; fi
}

download_release() {
  local version="$1" os arch
  case "${RUNNER_OS_NAME:-}" in
    Linux) os=linux ;;
    macOS) os=darwin ;;
    *) fail "no release binary for the runner's OS '${RUNNER_OS_NAME:-}' (Linux and macOS have one)" ;;
  esac
  case "${RUNNER_ARCH_NAME:-}" in
    X64) arch=amd64 ;;
    ARM64) arch=arm64 ;;
    *) fail "no release binary for the runner's architecture '${RUNNER_ARCH_NAME:-}' (X64 and ARM64 have one)" ;;
  esac
  local base="${LATESTWINS_RELEASE_URL:-https://github.com/$repo/releases/download}/$version"
  local asset="latestwins_${os}_${arch}"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT

  if ! curl -fsSL --retry 3 --connect-timeout 10 -o "$tmp/checksums.txt" "$base/checksums.txt"; then
    fail "cannot download $base/checksums.txt: is $version a release of $repo? A binary without it cannot be verified"
  fi
  local want
  want="$(awk -v f="$asset" '$2 == f || $2 == "*" f { print $1 }' "$tmp/checksums.txt")"
  if [ -z "$want" ]; then
    fail "checksums.txt of $version lists no $asset; refusing an unverified binary"
  fi
  if ! curl -fsSL --retry 3 --connect-timeout 10 -o "$tmp/$asset" "$base/$asset"; then
    fail "cannot download $base/$asset"
  fi
  local got
  got="$(sha256 "$tmp/$asset")"
  if [ "$got" != "$want" ]; then
    fail "checksum mismatch for $asset of $version: the file has $got, checksums.txt says $want; refusing it"
  fi
  local attested="no gh command, so no attestation check"
  if [ "${LATESTWINS_SKIP_ATTESTATION:-}" = true ]; then
    attested="attestation check skipped (LATESTWINS_SKIP_ATTESTATION)"
  elif command -v gh >/dev/null 2>&1; then
    if ! gh attestation verify "$tmp/$asset" --repo "$repo" >"$tmp/attestation.log" 2>&1; then
      cat "$tmp/attestation.log" >&2
      fail "$asset of $version has no valid build provenance attestation of $repo (gh attestation verify failed, above); refusing it. Set LATESTWINS_SKIP_ATTESTATION=true in the step's env to rely on the checksum alone"
    fi
    attested="build provenance attestation verified"
  fi
  mkdir -p "$(dirname "$bin")"
  install -m 0755 "$tmp/$asset" "$bin"
  log "$asset $version from the release: checksum verified, $attested"
}

if [ -x "$bin" ]; then
  output
  exit 0
fi
resolve_release
if [ -n "$version" ]; then
  download_release "$version"
elif [ -z "$repo" ] || [ -z "$ref" ]; then
  build_from_source "the action is used from a local path (uses: ./)"
else
  build_from_source "$ref is not a release of $repo"
fi
output
