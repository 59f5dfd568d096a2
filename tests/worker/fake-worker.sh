#!/usr/bin/env bash
# fake-worker.sh -- a stand-in worker for the client's death tests: it speaks
# just enough of the protocol, and misbehaves on request.
#   req "sleep"  -> never answers (a hang)
#   req "die"    -> kills itself with SIGKILL
#   req "fault"  -> answers kernel_fault and exits 3, as the real worker does
#   req "misid"  -> answers with another request's id
#   req "noid"   -> answers without an id
#   req "garble" -> answers a line that is not JSON
#   anything else -> {"ok": true, "echo": REQ}
# Each start appends a line to $FAKE_WORKER_LOG (to count restarts).
[ -n "${FAKE_WORKER_LOG:-}" ] && echo "start $$" >> "$FAKE_WORKER_LOG"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  req=$(printf '%s' "$line" | sed -n 's/.*"req":"\([a-z_]*\)".*/\1/p')
  [ -n "${FAKE_WORKER_LOG:-}" ] && echo "req $req" >> "$FAKE_WORKER_LOG"
  case "$req" in
    hello) printf '{"id":%s,"ok":true,"protocol":1,"pid":%s,"device":{"present":false,"reason":"fake"}}\n' "$id" "$$" ;;
    sleep) sleep 1000 ;;
    die) kill -9 $$ ;;
    fault) printf '{"id":%s,"ok":false,"error":"kernel_fault","message":"illegal address"}\n' "$id"; exit 3 ;;
    misid) printf '{"id":%s9,"ok":true}\n' "$id" ;;
    noid) printf '{"ok":true}\n' ;;
    garble) printf 'Segmentation fault (core dumped) {"id":%s\n' "$id" ;;
    shutdown) printf '{"id":%s,"ok":true}\n' "$id"; exit 0 ;;
    *) printf '{"id":%s,"ok":true,"echo":"%s"}\n' "$id" "$req" ;;
  esac
done
