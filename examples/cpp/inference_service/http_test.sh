#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest: the service with --http 127.0.0.1:0 answers /healthz, /metrics, /report and POST /dump
# to curl while it serves, then stops on SIGTERM. Skipped (77) when built without the HTTP
# control (the service prints why).
set -euo pipefail
service=$1
dir=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
"$service" --requests 0 --request-ms 5 --record "$dir/run.gpudiag" --http 127.0.0.1:0 \
  >"$dir/out" 2>&1 &
pid=$!
url=""
for _ in $(seq 100); do
  line=$(grep -m1 "gpudiag HTTP control:" "$dir/out" || true)
  if [ -n "$line" ]; then break; fi
  sleep 0.1
done
case "$line" in
  *"not served"*) echo "$line"; grep -q "no HTTP control" <<<"$line" && exit 77; exit 1 ;;
  *http://*) url=${line##*: } ;;
  *) echo "no HTTP control line:"; cat "$dir/out"; exit 1 ;;
esac
fail() { echo "FAIL: $*"; cat "$dir/out"; exit 1; }
curl -sf "$url/healthz" | grep -q '"running":true' || fail "/healthz"
# The first report is built on the first request, while the service is still starting: retry.
metrics_ok() { curl -sf "$url/metrics" | grep -q '^# TYPE gpudiag_capture_events_total counter'; }
for _ in 1 2 3 4 5 6 7 8 9 10; do metrics_ok && break; sleep 0.5; done
metrics_ok || fail "/metrics"
curl -sf "$url/report?compact=1" | grep -q '"findings"' || fail "/report"
dump=$(curl -sf -X POST "$url/dump") || fail "POST /dump"
path=$(sed -n 's/.*"path":"\([^"]*\)".*/\1/p' <<<"$dump")
[ -s "$path" ] || fail "the dump $path ($dump)"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/nothing")" = 404 ] || fail "404"
kill -TERM "$pid"
wait "$pid" || fail "the service's exit status"
echo "served /healthz, /metrics, /report and /dump ($path) on $url"
