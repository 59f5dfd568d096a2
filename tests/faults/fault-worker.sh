#!/usr/bin/env bash
# fault-worker.sh -- a launcher wrapper for the fault-injection suite: it runs
# the real `ditto worker` behind it and passes requests and replies through,
# except for the requests it was told to break.
#   usage (the launcher in config.json or --launcher):
#     fault-worker.sh {exe} {device}
#   FAULT_DIR    a folder for its state (required): "log" gets one line per
#                request ("START pid", "REQ name", "FAULT kind name"); each
#                request name's count across every start is kept there too
#   FAULT_REQ    the request name to break ("compile", "load_matrix", ...)
#   FAULT        what to do to it:
#                  kill    SIGKILL itself instead of answering
#                  hang    never answer (the client's deadline must act)
#                  garble  answer half of the real reply (not JSON)
#                  misid   answer the real reply with another request's id
#                  noid    answer the real reply without its id
#                  kfault  answer kernel_fault and exit 3, as the real worker
#                          does after a kernel fault
#                  burn    exec a busy loop in this process (a worker
#                          burning CPU: it must die with ditto); its pid is
#                          written to FAULT_DIR/burn.pid first
#   FAULT_TIMES  how many of the FAULT_REQ requests to break, counted over
#                every start of the worker (default 1): 2 breaks the retry too
exe=$1
dev=${2:-0}
: "${FAULT_DIR:?FAULT_DIR must name a folder}"
echo "START $$" >> "$FAULT_DIR/log"
coproc WK { exec "$exe" worker --device "$dev"; }
while IFS= read -r line; do
  req=$(printf '%s' "${line:0:60}" | sed -n 's/.*"req":"\([a-z_]*\)".*/\1/p')
  echo "REQ $req" >> "$FAULT_DIR/log"
  printf '%s\n' "$line" >&"${WK[1]}"
  if [ -n "${FAULT_REQ:-}" ] && [ "$req" = "$FAULT_REQ" ]; then
    n=$(( $(cat "$FAULT_DIR/count.$req" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$FAULT_DIR/count.$req"
    if [ "$n" -le "${FAULT_TIMES:-1}" ]; then
      echo "FAULT $FAULT $req" >> "$FAULT_DIR/log"
      case "$FAULT" in
        kill) kill -9 $$ ;;
        hang) exec sleep 100000 ;;
        burn) echo $$ > "$FAULT_DIR/burn.pid"; exec bash -c 'while :; do :; done' ;;
        kfault)
          id=$(printf '%s' "$line" | sed -n 's/.*[^\\]"id":\([0-9]*\).*/\1/p')
          printf '{"id":%s,"ok":false,"error":"kernel_fault","message":"illegal address"}\n' "$id"
          exit 3 ;;
      esac
      IFS= read -r reply <&"${WK[0]}" || exit 1
      case "$FAULT" in
        garble) printf '%s\n' "${reply:0:$(( ${#reply} / 2 ))}" ;;
        misid) printf '%s\n' "$reply" | sed 's/^{"id":\([0-9]*\)/{"id":9\1/' ;;
        noid) printf '%s\n' "$reply" | sed 's/^{"id":[0-9]*,/{/' ;;
        *) printf '%s\n' "$reply" ;;
      esac
      continue
    fi
  fi
  IFS= read -r reply <&"${WK[0]}" || exit 1
  printf '%s\n' "$reply"
  [ "$req" = shutdown ] && exit 0
done
