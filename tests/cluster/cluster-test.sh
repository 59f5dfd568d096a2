#!/usr/bin/env bash
# cluster-test.sh -- `make cluster-test`: ditto's workers under a real
# scheduler. Brings up a one-node Slurm cluster (munge, slurmctld, slurmd)
# and an sshd, both on 127.0.0.1 only, in a temporary folder; runs
# `ditto tune --compile-only` with 4 workers started through each launcher
# (srun, then ssh), kills one worker's job mid-run (scancel; SIGKILL of one
# ssh connection), and checks that the tune still accounts for every
# variant: each compiled and statically checked, none lost. Everything it
# started is stopped on exit; every step is bounded in time.
#
# Needs root (the daemons run as root, on loopback ports) and the Debian
# packages slurmctld slurmd slurm-client munge openssh-server
# openssh-client, which it installs with apt-get when they are missing.
# Usage: tests/cluster/cluster-test.sh [slurm|ssh|all]   (default all)
# Exit 0: passed; 1: failed; 77: this machine cannot run it (not root, the
# packages cannot be installed, a daemon does not start), with the reason.
# DITTO_BIN: the ditto to test (default ./ditto at the source root).
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
DITTO=${DITTO_BIN:-$SRC/ditto}
WHAT=${1:-all}
T=$(mktemp -d /tmp/ditto-cluster.XXXXXX)
chmod 755 "$T"
TOKEN=$(basename "$T" | tr -cd 'A-Za-z0-9')
START=$(date +%s)
DAEMONS=()          # pids of what this script started
MADE_RUN_SSHD=0
FAILED=0

say() { printf '[cluster-test %3ds] %s\n' "$(( $(date +%s) - START ))" "$*"; }
die() { say "FAIL: $*"; FAILED=1; exit 1; }
# What this machine cannot provide (root, the packages, the daemons
# themselves) is not a failure of ditto: exit 77, "SKIP: why".
unavailable() { say "SKIP: $*"; exit 77; }

cleanup() {
  local rc=$?
  set +e
  if [ -n "${SLURM_CONF:-}" ] && [ -f "${SLURM_CONF}" ]; then
    timeout 10 scancel --quiet --name "dw-$TOKEN" 2>/dev/null
  fi
  for pid in "${DAEMONS[@]}"; do
    kill "$pid" 2>/dev/null
  done
  for pid in "${DAEMONS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  [ "$MADE_RUN_SSHD" = 1 ] && rmdir /run/sshd 2>/dev/null
  if [ "$rc" != 0 ] || [ "$FAILED" = 1 ]; then
    for f in "$T"/*.log; do
      [ -f "$f" ] || continue
      echo "---- $f (last 30 lines)"; tail -n 30 "$f"
    done
  fi
  rm -rf "$T"
  say "stopped everything it started ($(( $(date +%s) - START )) s in all)"
  exit "$rc"
}
trap cleanup EXIT INT TERM

[ -x "$DITTO" ] || die "$DITTO: not built (run make ditto first)"
[ "$(id -u)" = 0 ] || unavailable "needs root: slurmd and sshd run as root here (on 127.0.0.1 only)"

# ---- packages ---------------------------------------------------------------------
need=()
for p in slurmctld:slurmctld slurmd:slurmd srun:slurm-client munged:munge sshd:openssh-server \
         ssh:openssh-client ssh-keygen:openssh-client; do
  command -v "${p%%:*}" >/dev/null 2>&1 || need+=("${p#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  say "installing ${need[*]}"
  for p in "${need[@]}"; do
    cand=$(apt-cache policy "$p" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
    [ -n "$cand" ] && [ "$cand" != "(none)" ] ||
      unavailable "package $p has no install candidate (apt-get update first?)"
  done
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y --no-install-recommends \
    "${need[@]}" > "$T/apt.log" 2>&1 || unavailable "apt-get install ${need[*]} failed (see $T/apt.log)"
fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# A matrix (a band of 60000 rows) the workers do not load by path: the
# launchers run them "elsewhere", so the client ships it to each.
awk 'BEGIN { n = 60000; print "%%MatrixMarket matrix coordinate real general";
             print n, n, 5 * n - 6;
             for (i = 1; i <= n; i++) for (d = -2; d <= 2; d++)
               if (i + d >= 1 && i + d <= n) printf "%d %d %.6f\n", i, i + d, 0.5 + ((i * 7 + d) % 13) / 13 }' \
  > "$T/band.mtx"
echo '{"op": "spmv", "matrix": "band.mtx", "dtype": "fp32"}' > "$T/spec.json"
VARIANTS=8
STRATEGIES=3

# run_tune NAME LAUNCHER KILL_CMD: tune with 4 workers through LAUNCHER; once
# 3 variants are compiled, run KILL_CMD (it kills one worker's job). Checks
# every variant is accounted for.
run_tune() {
  local name=$1 launcher=$2 killcmd=$3
  local dir="$T/$name"
  mkdir -p "$dir/cfg/ditto" "$dir/cache"
  python3 - "$dir/cfg/ditto/config.json" "$launcher" <<'PY'
import json, sys
json.dump({"workers": {"count": 4, "launcher": sys.argv[2]}}, open(sys.argv[1], "w"), indent=1)
PY
  local planned
  planned=$(cd "$T" && XDG_CONFIG_HOME="$dir/cfg" timeout 60 "$DITTO" tune spec.json --dry-run --json \
              --strategies $STRATEGIES --variants $VARIANTS |
            python3 -c 'import json,sys; print(sum(len(c["variants"]) for c in json.load(sys.stdin)))')
  say "$name: tuning $planned variants with 4 workers through: $launcher"
  local t0; t0=$(date +%s.%N)
  (cd "$T" && XDG_CONFIG_HOME="$dir/cfg" XDG_CACHE_HOME="$dir/cache" timeout 300 "$DITTO" tune spec.json \
     --compile-only --strategies $STRATEGIES --variants $VARIANTS > "$dir/out.log" 2> "$dir/err.log";
   echo $? > "$dir/rc") &
  local tune=$!
  local waited=0
  # (no out.log yet: grep prints no count, taken as 0)
  until n=$(grep -c ' compiled: ' "$dir/out.log" 2>/dev/null); [ "${n:-0}" -ge 3 ]; do
    sleep 0.2; waited=$((waited + 1))
    [ -f "$dir/rc" ] && die "$name: the tune ended before any worker was killed: $(cat "$dir/err.log")"
    [ $waited -lt 900 ] || die "$name: no 3 variants compiled within 180 s"
  done
  say "$name: $(grep -c ' compiled: ' "$dir/out.log") compiled; killing one worker's job: $killcmd"
  eval "$killcmd" || die "$name: the kill command failed"
  wait "$tune" || true
  local t1; t1=$(date +%s.%N)
  local rc; rc=$(cat "$dir/rc")
  cat "$dir/out.log"
  grep -E 'retrying|exited|restarting|shipping .*stored|already holds|srun: ' "$dir/err.log" | head -20 || true
  [ "$rc" = 0 ] || die "$name: ditto tune exited $rc: $(tail -5 "$dir/err.log")"
  local line; line=$(grep -E '^ *[0-9.]+ s [0-9]+ variants: ' "$dir/out.log" || true)
  [ -n "$line" ] || die "$name: no summary line"
  local total ok lost
  total=$(echo "$line" | sed -E 's/.* s ([0-9]+) variants: .*/\1/')
  ok=$(echo "$line" | sed -E 's/.*: ([0-9]+) compiled and checked.*/\1/')
  lost=$(echo "$line" | sed -E 's/.*, ([0-9]+) lost.*/\1/')
  [ "$total" = "$planned" ] || die "$name: $total variants in the result, $planned planned"
  [ "$lost" = 0 ] || die "$name: $lost variants lost"
  local lines; lines=$(grep -cE ' compiled: | compile error: | not compiled' "$dir/out.log" || true)
  [ "$lines" = "$planned" ] || die "$name: $lines variant lines for $planned variants"
  # The death is logged with the job it interrupted ("retrying it once on
  # another worker") when one was in flight; an idle worker's death shows
  # only as its restart.
  grep -q 'restarts: [1-9]' "$dir/out.log" || die "$name: the lost worker was not restarted"
  grep -q 'matrix shipped to workers' "$dir/out.log" || die "$name: the matrix was not shipped"
  # Compiled kernels come back through the launcher's channel intact
  # (gpu/PROTOCOL.md, "Sharing compiled kernels"): kept by the client, none
  # refused by the hash check.
  local cc; cc=$(grep -E 'compile cache: ' "$dir/out.log" || true)
  echo "$cc" | grep -qE ', [1-9][0-9]* kept from the workers that compiled them, 0 refused' ||
    die "$name: compiled kernels did not come back intact: ${cc:-no compile cache line}"
  say "$name: PASS: $ok of $total variants compiled and checked, 0 lost, in $(python3 -c "print(round($t1 - $t0, 1))") s"
}

# ---- Slurm ------------------------------------------------------------------------
slurm_test() {
  local host; host=$(hostname -s)
  mkdir -p "$T/munge" "$T/slurm/state" "$T/slurm/spool"
  chmod 700 "$T/munge"
  dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$T/munge/munge.key"
  munged -F -f --socket="$T/munge/munge.sock" --key-file="$T/munge/munge.key" \
    --pid-file="$T/munge/munged.pid" --log-file="$T/munged.log" --seed-file="$T/munge/seed" \
    > /dev/null 2>&1 &
  DAEMONS+=($!)
  for _ in $(seq 50); do [ -S "$T/munge/munge.sock" ] && break; sleep 0.1; done
  [ -S "$T/munge/munge.sock" ] || unavailable "munged did not start"
  local cport dport; cport=$(free_port); dport=$(free_port)
  export SLURM_CONF="$T/slurm/slurm.conf"
  cat > "$SLURM_CONF" <<CONF
ClusterName=ditto$TOKEN
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$cport
SlurmdPort=$dport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$T/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$T/slurm/state
SlurmdSpoolDir=$T/slurm/spool
SlurmctldPidFile=$T/slurm/slurmctld.pid
SlurmdPidFile=$T/slurm/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
NodeName=dn1 NodeHostname=$host NodeAddr=127.0.0.1 CPUs=2 RealMemory=2000 State=UNKNOWN
PartitionName=dq Nodes=dn1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
  slurmctld -D -i -f "$SLURM_CONF" > "$T/slurmctld.out" 2>&1 &
  DAEMONS+=($!)
  slurmd -D -N dn1 -f "$SLURM_CONF" > "$T/slurmd.out" 2>&1 &
  DAEMONS+=($!)
  local up=""
  for _ in $(seq 150); do
    up=$(timeout 5 sinfo -h -N -o '%T' 2>/dev/null | head -1 || true)
    case "$up" in idle*|mix*|alloc*) break ;; esac
    sleep 0.2
  done
  case "$up" in idle*|mix*|alloc*) ;; *) unavailable "the Slurm node did not come up (state '$up')" ;; esac
  say "slurm: one node (dn1, CPUs=2) up on 127.0.0.1:$cport/$dport"
  timeout 30 srun -N1 -n1 --job-name="dw-$TOKEN" true || unavailable "srun true failed"
  run_tune slurm \
    "srun --quiet --job-name=dw-$TOKEN-{device} --oversubscribe -N1 -n1 --export=ALL {exe} worker --device {device}" \
    'jid=$(timeout 10 squeue -h -n "dw-$TOKEN-1" -o %i | head -1); [ -n "$jid" ] && say "scancel $jid (worker 1)" && timeout 10 scancel "$jid"'
}

# ---- ssh --------------------------------------------------------------------------
ssh_test() {
  local port; port=$(free_port)
  mkdir -p "$T/ssh"
  ssh-keygen -q -t ed25519 -N '' -f "$T/ssh/host_key" -C "ditto-cluster-test host"
  ssh-keygen -q -t ed25519 -N '' -f "$T/ssh/id" -C "ditto-cluster-test client"
  cp "$T/ssh/id.pub" "$T/ssh/authorized_keys"
  chmod 600 "$T/ssh/authorized_keys"
  if [ ! -d /run/sshd ]; then mkdir -p /run/sshd; chmod 755 /run/sshd; MADE_RUN_SSHD=1; fi
  cat > "$T/ssh/sshd_config" <<CONF
Port $port
ListenAddress 127.0.0.1
HostKey $T/ssh/host_key
AuthorizedKeysFile $T/ssh/authorized_keys
PidFile $T/ssh/sshd.pid
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
AcceptEnv none
CONF
  /usr/sbin/sshd -D -e -f "$T/ssh/sshd_config" > "$T/sshd.log" 2>&1 &
  DAEMONS+=($!)
  local sshcmd="ssh -p $port -i $T/ssh/id -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=$T/ssh/known_hosts -o LogLevel=ERROR 127.0.0.1"
  local ok=0
  for _ in $(seq 50); do timeout 5 $sshcmd true 2>/dev/null && { ok=1; break; }; sleep 0.2; done
  [ $ok = 1 ] || unavailable "sshd on 127.0.0.1:$port did not accept the key"
  say "ssh: sshd up on 127.0.0.1:$port"
  # The remote side gets no environment from us: its store is set on its
  # command line, as on a real host.
  run_tune ssh \
    "$sshcmd XDG_CACHE_HOME=$T/ssh/remote-cache {exe} worker --device {device}" \
    "pid=\$(ps -eo pid=,args= | awk -v p='-p $port' -v d='--device 1' 'index(\$0, p) && index(\$0, d) && \$2 == \"ssh\" {print \$1; exit}'); [ -n \"\$pid\" ] && say \"SIGKILL ssh connection \$pid (worker 1)\" && kill -9 \$pid"
}

case "$WHAT" in
  slurm) slurm_test ;;
  ssh) ssh_test ;;
  all) slurm_test; ssh_test ;;
  *) die "usage: $0 [slurm|ssh|all]" ;;
esac
say "PASS ($WHAT)"
