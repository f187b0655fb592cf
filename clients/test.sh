#!/usr/bin/env bash
# The tests of the Python and Java clients (clients/python, clients/java),
# against a real "turnstile serve" over a real redis-server, both started
# here on free loopback ports, and the clients' runnable examples.
#
#   clients/test.sh                 build turnstile, run both suites and the examples
#   clients/test.sh python|java     one suite (and its example)
#   TURNSTILE_BIN=/path/turnstile clients/test.sh   use a turnstile binary built already
#
# Needs python3 (3.9+), a JDK 17+ (javac, java), redis-server, openssl and go;
# scripts/test.sh installs them. Exits non-zero if any test fails.
set -euo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_port PORT NAME LOG: until something listens on PORT (10 s at most).
wait_port() {
	for _ in $(seq 200); do
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.05
	done
	echo "clients/test.sh: $2 did not start on port $1:" >&2
	cat "$3" >&2
	return 1
}

start=$(date +%s)
bin=${TURNSTILE_BIN:-}
if [ -z "$bin" ]; then
	echo "== clients: go build ./cmd/turnstile"
	bin="$work/turnstile"
	(cd cmd/turnstile && go build -trimpath -o "$bin" .)
fi
echo "== clients: go build ./examples/fenced-register"
fenced="$work/fenced-register"
(cd examples && go build -trimpath -o "$fenced" ./fenced-register)

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work" --save '' --appendonly no \
	--daemonize no --loglevel warning --logfile "$work/redis.log" &
pids+=($!)
wait_port "$redis_port" redis-server "$work/redis.log"

# Two tokens: an admin one for every key, and a lock one limited to keys
# under "other:", which the permission tests use.
"$bin" serve token clients-admin --prefix '*' --role admin >"$work/admin.out"
"$bin" serve token clients-limited --prefix other: --role lock >"$work/limited.out"
admin=$(sed -n 2p "$work/admin.out")
limited=$(sed -n 2p "$work/limited.out")
{ sed -n 4p "$work/admin.out"; sed -n 4p "$work/limited.out"; } >"$work/tokens"

# A certificate for 127.0.0.1, for the TLS instance.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null

port=$(free_port)
"$bin" serve --backend "redis://127.0.0.1:$redis_port" --listen "127.0.0.1:$port" --tokens "$work/tokens" \
	--drain-timeout 2s 2>"$work/serve.log" &
pids+=($!)
tls_port=$(free_port)
"$bin" serve --backend "redis://127.0.0.1:$redis_port" --listen "127.0.0.1:$tls_port" --tokens "$work/tokens" \
	--cert-file "$work/cert.pem" --key-file "$work/key.pem" --drain-timeout 2s 2>"$work/serve-tls.log" &
pids+=($!)
wait_port "$port" "turnstile serve" "$work/serve.log"
wait_port "$tls_port" "turnstile serve (TLS)" "$work/serve-tls.log"

export TURNSTILE_BIN="$bin"
export TURNSTILE_TEST_REDIS="redis://127.0.0.1:$redis_port"
export TURNSTILE_TEST_URL="http://127.0.0.1:$port"
export TURNSTILE_TEST_TLS_URL="https://127.0.0.1:$tls_port"
export TURNSTILE_TEST_CA="$work/cert.pem"
export TURNSTILE_TEST_ADMIN="$admin"
export TURNSTILE_TEST_LIMITED="$limited"
export TURNSTILE_TEST_TOKENS_FILE="$work/tokens"
ready=$(date +%s)
echo "== clients: redis-server and turnstile serve up ($((ready - start)) s with the builds)"

status=0
if [ "$which" = all ] || [ "$which" = python ]; then
	echo "== clients: python ($(python3 --version 2>&1))"
	t0=$(date +%s)
	(cd clients/python && python3 -m unittest discover -s tests -t . 2>&1) || status=1
	echo "== clients: python example: the GC-pause incident"
	python3 clients/python/examples/gc_pause.py --turnstile "$bin" --fenced-register "$fenced" \
		--redis "$TURNSTILE_TEST_REDIS" || status=1
	echo "== clients: python took $(($(date +%s) - t0)) s"
fi
if [ "$which" = all ] || [ "$which" = java ]; then
	echo "== clients: java ($(javac -version 2>&1))"
	t0=$(date +%s)
	# The JVMs here run short and mostly wait: C1 alone and the serial
	# collector halve their CPU on 2 busy cores.
	jvm=(-XX:TieredStopAtLevel=1 -XX:+UseSerialGC)
	if clients/java/build.sh "$work/java"; then
		java "${jvm[@]}" -cp "$work/java/classes:$work/java/test-classes" io.github.turnstilelock.turnstile.TestRunner || status=1
		echo "== clients: java example: the GC-pause incident"
		java "${jvm[@]}" -cp "$work/java/classes:$work/java/example-classes" GcPause --turnstile "$bin" \
			--fenced-register "$fenced" --redis "$TURNSTILE_TEST_REDIS" || status=1
	else
		status=1
	fi
	echo "== clients: java took $(($(date +%s) - t0)) s"
fi
if [ $status -ne 0 ]; then
	for log in redis.log serve.log serve-tls.log; do
		echo "== clients: the end of $log"
		tail -n 40 "$work/$log" 2>/dev/null || true
	done
fi
echo "== clients: $( [ $status -eq 0 ] && echo ok || echo FAILED ) in $(($(date +%s) - start)) s"
exit $status
