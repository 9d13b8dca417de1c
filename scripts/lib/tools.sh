# Pinned Go tools, built once into a cache outside the repository and again when the pin changes.
# Source it from a script run at the repository's root; it needs a log function.

# install_tool PKG@VERSION NAME installs the tool; $tool is then its path.
install_tool() {
  local bin="${XDG_CACHE_HOME:-$HOME/.cache}/latestwins/bin"
  tool="$bin/$2"
  if [ ! -x "$tool" ] || [ "$(cat "$tool.version" 2>/dev/null)" != "$1" ]; then
    log "installing $1"
    GOBIN="$bin" go install "$1"
    echo "$1" >"$tool.version"
  fi
}
