#!/usr/bin/env bash
# scripts/lint.sh: run golangci-lint with the checked-in .golangci.yml.
#
#   scripts/lint.sh [packages]        default ./...
#
# The pinned golangci-lint is built from the Go module proxy with `go install` the first time
# and kept in SWITCHYARD_TOOLS_DIR (default ~/.cache/switchyard/tools), so a fresh clone needs
# only Go and the module proxy, and later runs start at once. scripts/test.sh runs this as its
# "golangci-lint" step. Exit status: golangci-lint's (non-zero on any finding).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The version is pinned so that every machine and CI report the same findings; move it with
# care (new versions add checks) and make the tree pass in the same commit.
GOLANGCI_LINT_VERSION=v2.15.0
GOLANGCI_LINT_MODULE=github.com/golangci/golangci-lint/v2/cmd/golangci-lint

case "${1:-}" in
  -h | --help)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 0
    ;;
esac

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi

tools="${SWITCHYARD_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/switchyard/tools}"
bin_dir="$tools/golangci-lint-$GOLANGCI_LINT_VERSION"
bin="$bin_dir/golangci-lint"
if [ ! -x "$bin" ]; then
  printf 'lint.sh: building golangci-lint %s into %s (once; takes a few minutes)\n' "$GOLANGCI_LINT_VERSION" "$bin_dir" >&2
  mkdir -p "$bin_dir"
  # GOFLAGS from the caller (say -mod=vendor or -race) must not apply to the tool's build;
  # GOTOOLCHAIN=local builds it with the Go that lints, which is what golangci-lint requires.
  GOBIN="$bin_dir" GOFLAGS= GOTOOLCHAIN=local go install "$GOLANGCI_LINT_MODULE@$GOLANGCI_LINT_VERSION"
fi

[ $# -gt 0 ] || set -- ./...
exec "$bin" run --config .golangci.yml "$@"
