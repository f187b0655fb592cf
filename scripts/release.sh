#!/usr/bin/env bash
# Releases every module of the repository at one version.
#
#   ./scripts/release.sh VERSION               e.g. ./scripts/release.sh v0.1.0
#   ./scripts/release.sh --proxy DIR VERSION   and keep the local module proxy in DIR
#
# On a clean work tree it sets every requirement of a turnstile module to
# VERSION (no replace directives), writes each module's go.sum lines for its
# turnstile dependencies with `go mod tidy` against a local module proxy
# into which each module is zipped as soon as its go.sum is final (in
# dependency order, so every hash is the one the Go module proxy will compute
# from the tag), commits that, and tags every module in dependency order:
# VERSION for the root module, DIR/VERSION for the module in DIR. It then
# checks each tag's tree against the local proxy. It does not push: it
# prints the command that does. docs/releasing.md says more.
set -euo pipefail

usage() {
	echo "usage: scripts/release.sh [--proxy DIR] VERSION" >&2
	exit 64
}

proxy=""
version=""
while [ $# -gt 0 ]; do
	case "$1" in
	--proxy)
		[ $# -ge 2 ] || usage
		proxy="$2"
		shift 2
		;;
	--proxy=*)
		proxy="${1#--proxy=}"
		shift
		;;
	-h | --help) usage ;;
	-*)
		echo "scripts/release.sh: unknown flag $1" >&2
		usage
		;;
	*)
		[ -z "$version" ] || usage
		version="$1"
		shift
		;;
	esac
done
[ -n "$version" ] || usage

cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# TURNSTILE_RELEASE_TOOL names a built tools/release binary (its tests use it).
tool="${TURNSTILE_RELEASE_TOOL:-}"
if [ -z "$tool" ]; then
	go build -o "$tmp/release" ./tools/release
	tool="$tmp/release"
fi
release() { "$tool" "$@"; }

release check-version "$version" # exits 64 with the reason

if [ -n "$(git status --porcelain --untracked-files=normal)" ]; then
	echo "scripts/release.sh: the work tree has uncommitted changes; commit or remove them first:" >&2
	git status --short >&2
	exit 1
fi

mapfile -t tags < <(release tags "$version")
for t in "${tags[@]}"; do
	if git rev-parse -q --verify "refs/tags/$t" >/dev/null; then
		echo "scripts/release.sh: tag $t already exists" >&2
		exit 1
	fi
done

if [ -z "$proxy" ]; then
	proxy="$tmp/proxy"
fi
mkdir -p "$proxy"
proxy=$(cd "$proxy" && pwd)

echo "== go.mod and go.sum of every module at $version, in dependency order"
release prepare -proxy "$proxy" "$version"

changed=$(git status --porcelain --untracked-files=normal | cut -c4-)
for f in $changed; do
	case "$f" in
	go.mod | go.sum | go.work | */go.mod | */go.sum) ;;
	*)
		echo "scripts/release.sh: preparing the release changed $f, which it must not" >&2
		exit 1
		;;
	esac
done
if [ -n "$changed" ]; then
	# shellcheck disable=SC2086
	git add -- $changed
	git commit -q -m "release $version: every module requires its turnstile siblings at $version" -- $changed
	echo "== committed $(git rev-parse --short HEAD): $(echo $changed | wc -w) go.mod and go.sum files"
else
	echo "== go.mod and go.sum files already at $version"
fi

echo "== tags, in dependency order"
for t in "${tags[@]}"; do
	git tag -a -m "turnstile $t" "$t"
	echo "$t"
done

echo "== each tag's tree, against the local proxy"
release verify-tags -proxy "$proxy" "$version"

branch=$(git symbolic-ref --short -q HEAD || echo HEAD)
echo "== done; nothing is pushed. To publish:"
echo "git push origin $branch ${tags[*]}"
