#!/usr/bin/env bash
# Start `python3 manage.py serve` exactly as the README says (on a spare port and a scratch data
# folder), then send the seed §4.5 request shape with curl and check the framing.
set -euo pipefail
cd "$(dirname "$0")/.."
port=8765
data="$(mktemp -d)"
log="$data/serve.log"
OPERATOR_DATA_DIR="$data" python3 manage.py serve --port "$port" --no-access-log >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 1 60); do
  curl -sf "http://127.0.0.1:$port/api/health" >/dev/null 2>&1 && break
  sleep 1
done
curl -sf "http://127.0.0.1:$port/api/health"; echo
token=$(sed -n 's/^ *export OPERATOR_TOKEN=//p' "$log")
[ -n "$token" ] || { echo "serve printed no owner token"; cat "$log"; exit 1; }
answer=$(curl -s "http://127.0.0.1:$port/mcp" \
  -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' \
  -H "Authorization: Bearer $token" \
  -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
        "name":"operator_list_directives","arguments":{}}}')
echo "$answer"
printf '%s' "$answer" | tr -d '\r' | head -n1 | grep -qx 'event: message' || { echo "no SSE event line"; exit 1; }
printf '%s' "$answer" | tr -d '\r' | sed -n 's/^data: //p' | python3 -c '
import json, sys
msg = json.loads(sys.stdin.read())
content = msg["result"]["content"]
assert len(content) == 1 and content[0]["type"] == "text", content
body = json.loads(content[0]["text"])
assert content[0]["text"] == json.dumps(body, indent=2, ensure_ascii=False)
assert body["ok"] is True, body
print("smoke: seed request shape OK")
'
status=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/mcp" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}')
[ "$status" = 401 ] || { echo "expected 401 without a token, got $status"; exit 1; }
echo "smoke: 401 without a token OK"
