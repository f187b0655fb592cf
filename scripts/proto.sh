#!/usr/bin/env bash
# Generates the Go code of the service's API from proto/turnstile/v1/*.proto
# into service/gen (or into the directory given), with protoc (Debian's
# protobuf-compiler) and the plugins pinned as tools in service/go.mod:
#
#   ./scripts/proto.sh           regenerate service/gen
#   ./scripts/proto.sh DIR       generate into DIR instead (the drift test)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-service/gen}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if ! command -v protoc >/dev/null; then
	echo "scripts/proto.sh: protoc not found: install Debian's protobuf-compiler (apt-get install protobuf-compiler)" >&2
	exit 1
fi
# go tool -n builds a tool of service/go.mod and prints its path.
gen_go=$(cd service && go tool -n google.golang.org/protobuf/cmd/protoc-gen-go)
gen_connect=$(cd service && go tool -n connectrpc.com/connect/cmd/protoc-gen-connect-go)

# paths=source_relative: the files land under DIR as the .proto files lie
# under proto/, whatever the go_package says.
protoc -I proto \
	--plugin=protoc-gen-go="$gen_go" --go_out="$out" --go_opt=paths=source_relative \
	--plugin=protoc-gen-connect-go="$gen_connect" --connect-go_out="$out" --connect-go_opt=paths=source_relative \
	proto/turnstile/v1/*.proto
