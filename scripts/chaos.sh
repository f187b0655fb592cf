#!/usr/bin/env bash
# The fault-injection suite's full run: every store configuration under
# every fault (chaos/), its table written into docs/guarantees.md and one
# JSON line per cell into chaos-results.jsonl. Each worker locks
# CHAOS_KEYS keys side by side (default 8) for CHAOS_DURATION per cell
# (default 30s), so that every store sees more than 10,000 critical
# sections even where one key's are slow (etcd: about 12,500).
# Needs the Debian packages scripts/test.sh installs. Extra flags go to the
# runner, e.g.
#
#   ./scripts/chaos.sh                       the full run (about 75 minutes on 2 cores)
#   ./scripts/chaos.sh --duration 10s        shorter cells
#   ./scripts/chaos.sh --store etcd          one store, every fault
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./chaos --all --duration "${CHAOS_DURATION:-30s}" --keys "${CHAOS_KEYS:-8}" --doc docs/guarantees.md --json chaos-results.jsonl "$@"
