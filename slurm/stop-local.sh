#!/usr/bin/env bash
# Stop the daemons slurm/start-local.sh started, and only those: each recorded PID is signalled
# after checking that /proc/PID/comm still names that daemon (a recycled PID is left alone).
# SIGTERM first (slurmctld saves its state on TERM), SIGKILL after a bounded wait. Idempotent.
set -euo pipefail
STATE=/run/local-slurm

running() { # running PID NAME: alive, not a zombie, still that program
  [ -r "/proc/$1/stat" ] && [ "$(cut -d' ' -f3 "/proc/$1/stat")" != Z ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ]
}

stopped=()
for name in slurmd slurmctld slurmdbd mariadbd munged; do  # reverse start order
  pidfile=$STATE/$name.pid
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  if running "$pid" "$name"; then
    kill -TERM "$pid"
    for _ in $(seq 1 100); do running "$pid" "$name" || break; sleep 0.1; done
    if running "$pid" "$name"; then
      echo "stop-local: $name ($pid) ignored SIGTERM for 10s; sending SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    stopped+=("$name")
  fi
  rm -f "$pidfile"
done
echo "stop-local: stopped ${stopped[*]:-nothing (none of its daemons was running)}"
