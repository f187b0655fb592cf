#!/usr/bin/env bash
# Fuzzes every fuzz target (func FuzzXxx in a _test.go file) of every
# module in go.work, one at a time, for DURATION each (default 30s), and
# stops at the first failure, printing where Go saved the failing input.
# Plain `go test` (and so scripts/test.sh) already runs every target's seed
# corpus, f.Add inputs and testdata/fuzz/FuzzXxx files alike. FuzzClient
# (the randomized checker of the Client driven by the fuzzer's input) is
# one of the targets; after them the randomized checker itself runs in
# its long mode, each scenario for DURATION, on the memory backend and on
# Redis (locktest.RunRandom, TestRandomized).
#
#   ./scripts/fuzz.sh                    30s per target
#   ./scripts/fuzz.sh 5m                 longer
#   ./scripts/fuzz.sh 30s cmd/turnstile  only the packages under these
#                                        directories (of the repository)
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-30s}
shift || true
only=()
for d in "$@"; do
	[ -d "$d" ] || { echo "fuzz.sh: no directory $d" >&2; exit 64; }
	only+=("$(cd "$d" && pwd)")
done

# wanted reports whether the package in directory $1 is to be fuzzed.
wanted() {
	[ ${#only[@]} -eq 0 ] && return 0
	for o in "${only[@]}"; do
		case "$1/" in "$o"/*) return 0 ;; esac
	done
	return 1
}

start=$(date +%s)
targets=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

for m in $(go list -m -f '{{.Dir}}'); do
	# A module that holds none of the directories asked for is skipped
	# whole.
	if [ ${#only[@]} -gt 0 ]; then
		overlap=false
		for o in "${only[@]}"; do
			case "$o/" in "$m"/*) overlap=true ;; esac
			case "$m/" in "$o"/*) overlap=true ;; esac
		done
		$overlap || continue
	fi
	# go list stays inside the module: nested modules are listed on their own.
	for dir in $(cd "$m" && go list -f '{{.Dir}}' ./...); do
		wanted "$dir" || continue
		files=$(grep -l '^func Fuzz' "$dir"/*_test.go 2>/dev/null || true)
		[ -n "$files" ] || continue
		for name in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' $files | sed 's/^func //' | sort -u); do
			targets=$((targets + 1))
			t0=$(date +%s)
			rel=${dir#"$PWD"}
			echo "== ./${rel#/} $name ($duration)"
			if ! (cd "$dir" && go test -run '^$' -fuzz "^$name\$" -fuzztime "$duration" .) >"$log" 2>&1; then
				grep -v '^fuzz: elapsed' "$log" | tail -n 40
				input=$(sed -n 's/.*Failing input written to \(testdata\/fuzz\/[^ ]*\).*/\1/p' "$log" | head -n 1)
				if [ -n "$input" ]; then
					echo "FAIL: $name: failing input $dir/$input"
					echo "      rerun: (cd $dir && go test -run '$name/$(basename "$input")' .)"
				else
					echo "FAIL: $name (no failing input saved: see the output above)"
				fi
				exit 1
			fi
			echo "   ok in $(($(date +%s) - t0))s: $(grep -o 'execs: [0-9]*' "$log" | tail -n 1)"
		done
	done
done
echo "== $targets fuzz targets, $duration each, all passed in $(($(date +%s) - start))s"

for dir in . redis; do
	t0=$(date +%s)
	echo "== ./$dir TestRandomized ($duration per scenario)"
	if ! (cd "$dir" && TURNSTILE_RANDOM_DURATION=$duration go test -count=1 -timeout 0 -run '^TestRandomized$' -v .) >"$log" 2>&1; then
		grep -E '^\s*(--- FAIL|random\.go:|rerun:)' "$log" | tail -n 40
		echo "FAIL: TestRandomized in ./$dir (each failure above names its seed and the command that reruns it)"
		exit 1
	fi
	echo "   ok in $(($(date +%s) - t0))s"
done
