#!/usr/bin/env bash
# bench/first-push.sh: a new user's first hour, timed, with only a lavender
# binary (a release's, no Go): serve started in an empty directory with one
# Bark target, then a failing and a succeeding `lavender phase run`. It
# prints when serve was ready and when each push reached a Bark stand-in on
# loopback (python3's http.server), and the run log.
#
#   bench/first-push.sh path/to/lavender
#
# It uses port 9877 (serve's default, as the README runs it) and 18999.
set -euo pipefail
bin=$(realpath "${1:?usage: bench/first-push.sh path/to/lavender}")
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"

python3 -u - 18999 >bark.log 2>&1 <<'PY' &
import http.server, sys, time, urllib.parse
class Bark(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print("%.3f %s" % (time.time(), urllib.parse.unquote(self.path.split("?")[0])), flush=True)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"code":200,"message":"success","timestamp":0}')
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Bark).serve_forever()
PY

echo 'http://127.0.0.1:18999/FirstPushKeyFirstPush1/$0' >phone.bark.env
chmod 600 phone.bark.env
"$bin" check

start=$(date +%s.%N)
"$bin" serve >serve.log 2>&1 &
serve=$!
for _ in $(seq 200); do curl -sf http://127.0.0.1:9877/-/ready >/dev/null && break; sleep 0.05; done
printf 'serve ready after %.1f s\n' "$(echo "$(date +%s.%N) - $start" | bc)"

failing=$(date +%s.%N)
"$bin" phase run "Demo fails" -- sh -c 'echo boom >&2; exit 3' || echo "phase run exited $? (the command's status)"
succeeding=$(date +%s.%N)
"$bin" phase run "Demo ok" -- sleep 2

for _ in $(seq 300); do [ "$(wc -l <bark.log)" -ge 2 ] && break; sleep 1; done
while read -r at path; do
  case "$path" in
    *'"Demo fails"'*) from=$failing ;;
    *) from=$succeeding ;;
  esac
  printf '%5.1f s after its phase run: %s\n' "$(echo "$at - $from" | bc)" "${path#/FirstPushKeyFirstPush1/}"
done <bark.log
kill -TERM "$serve"
wait "$serve"
cat logs/run-*.log
