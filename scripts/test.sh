#!/usr/bin/env bash
# Installs what the tests need (Debian packages, idempotently) and runs every
# test of every module against real servers the tests start themselves.
#
#   ./scripts/test.sh            everything: lint, race tests, the rest
#   ./scripts/test.sh -run Foo   extra flags go to every `go test`
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the tests start as real servers (each test package starts
# its own server processes on free loopback ports), prometheus for
# promtool, which checks and tests the alert rules in deploy/prometheus,
# faketime, whose library runs servers under a wrong wall clock, and
# protobuf-compiler, whose protoc checks that the service's generated code
# is what its .proto files make (scripts/proto.sh), and chromium, which the
# operator page's tests drive headless (service/dashboard).
packages=(redis-server redis-sentinel etcd-server zookeeper postgresql mariadb-server prometheus faketime protobuf-compiler chromium)
# The Python and Java clients' tests (clients/test.sh) need python3 (3.9+)
# and a JDK 17+ (javac, java); a machine that has them from elsewhere
# keeps its own.
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null || packages+=(python3)
javac_major=$( (javac -version 2>&1 || true) | sed -n 's/^javac \([0-9]*\).*/\1/p')
[ "${javac_major:-0}" -ge 17 ] || packages+=(default-jdk-headless)

missing=()
for p in "${packages[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "== installing ${missing[*]}"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo="sudo"
	export DEBIAN_FRONTEND=noninteractive
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq "${missing[@]}" >/dev/null
	# The packages may start system services; the tests run their own servers.
	for svc in redis-server etcd zookeeper postgresql mariadb prometheus prometheus-node-exporter; do
		$sudo service "$svc" stop >/dev/null 2>&1 || true
	done
fi

modules=$(go list -m -f '{{.Dir}}')

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet, staticcheck"
staticcheck=$(command -v staticcheck || true)
if [ -z "$staticcheck" ]; then
	GOBIN="$(go env GOPATH)/bin" go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
	staticcheck="$(go env GOPATH)/bin/staticcheck"
fi
# -trimpath: the packages vet compiles are then the ones the install check
# below builds (from another module cache), so that it does not compile
# them again: 20 s instead of 130 s for its go install on a cold cache.
for m in $modules; do
	(cd "$m" && go vet -trimpath ./... && "$staticcheck" ./...)
done

echo "== promtool: alert rules"
(cd deploy/prometheus && promtool check rules alerts.yml && promtool test rules alerts_test.yml)

# Every go.mod requires its turnstile siblings at the version being
# prepared, with no replace directive; go.work maps those versions to the
# directories (tools/release says why).
echo "== module graph"
go run ./tools/release check

# What users do, without publishing: scripts/release.sh on a copy of the
# working tree with a file-system module proxy, then, with no go.work, an
# empty module cache and that proxy first in GOPROXY, `go install
# .../cmd/turnstile@VERSION`, the installed binary, and a fresh module that
# `go get`s the root and the redis backend and builds the README's program.
echo "== install from a local module proxy"
go run ./tools/release install-check

status=0
# Tests too slow under the race detector carry `//go:build !race` and run
# here, without it.
echo "== go test (tests built only without -race)"
# Only the packages that have such tests: building every package's tests
# without -race as well would double the compile time of the run.
# The fault-injection quick mode (chaos/quick_test.go) is one of them; it
# runs beside the race tests below instead, being mostly waiting.
for f in $( (grep -rl --include='*_test.go' '^//go:build !race' . || true) | grep -v '^\./chaos/' | sort); do
	# A file of such a package may hold no test (grep finds none: not an error).
	names=$( (grep -ho '^func \(Test[A-Za-z0-9_]*\)' "$f" || true) | sed 's/^func //' | paste -sd'|' -)
	if [ -n "$names" ]; then
		(cd "$(dirname "$f")" && go test -count=1 -timeout 15m -run "^($names)\$" "$@" .) || status=1
	fi
done
# The fault-injection suite's quick mode: every store, a few faults, real
# servers and worker processes (chaos/quick_test.go, a few minutes, most
# of it waiting out faults). It runs in the background beside the race
# tests, and its output is printed when they are done.
echo "== chaos quick mode (in the background)"
chaos_log=$(mktemp)
(cd chaos && go test -count=1 -timeout 15m -run '^TestQuick$' "$@" .) >"$chaos_log" 2>&1 &
chaos_pid=$!
# Two modules at a time: the store modules' tests mostly wait on their
# servers and on lease timers, one package each, so one module alone
# leaves a core idle. The slowest go first so that both lanes end close
# together; each module's output is printed whole when it ends.
echo "== go test -race (two modules at a time)"
slowest="cmd/turnstile etcd redlock redis zookeeper"
ordered=$(for m in $slowest; do case " $(echo $modules) " in *" $PWD/$m "*) echo "$PWD/$m" ;; esac; done
	for m in $modules; do case " $slowest " in *" ${m#"$PWD"/} "*) ;; *) echo "$m" ;; esac; done)
race_logs=$(mktemp -d)
declare -A race_module=() race_log=()
race_done() { # waits for one module's tests, prints them, notes a failure
	local pid rc=0
	wait -n -p pid "${!race_module[@]}" || rc=$?
	cat "${race_log[$pid]}"
	[ "$rc" -eq 0 ] || { echo "go test -race failed in ${race_module[$pid]} (exit $rc)"; status=1; }
	unset "race_module[$pid]" "race_log[$pid]"
}
n=0
for m in $ordered; do
	[ "${#race_module[@]}" -lt 2 ] || race_done
	n=$((n + 1))
	(cd "$m" && exec go test -race -count=1 -timeout 15m "$@" ./...) >"$race_logs/$n" 2>&1 &
	race_module[$!]=$m
	race_log[$!]=$race_logs/$n
done
while [ "${#race_module[@]}" -gt 0 ]; do race_done; done
rm -rf "$race_logs"
# The Python and Java clients against a real turnstile serve over a real
# redis-server, with their GC-pause examples (about 2 minutes on 2 busy
# cores, half a minute of it building turnstile and the Java client).
echo "== clients: python, java"
clients/test.sh || status=1
echo "== chaos quick mode"
wait "$chaos_pid" || status=1
cat "$chaos_log"
rm -f "$chaos_log"
exit $status
