#!/usr/bin/env bash
# Start a real single-node SLURM cluster on this machine (Debian/Ubuntu, run as root): munge, a
# private MariaDB for accounting, slurmdbd, slurmctld and slurmd. Safe to run twice: live daemons are
# reused. Every wait is bounded; on failure the daemons' log tails are printed. The PIDs it starts
# are recorded in $STATE so that stop-local.sh stops exactly those.
#
#   slurm/start-local.sh            # then: sinfo; bench run --cluster slurm --profile local
#   LOCAL_SLURM_CPUS=8 LOCAL_SLURM_GPUS=4 slurm/start-local.sh
set -euo pipefail

CPUS=${LOCAL_SLURM_CPUS:-8}              # advertised CPUs (may exceed the real ones)
GPUS=${LOCAL_SLURM_GPUS:-4}              # fake GPUs (character devices), for --gpus-per-node
MAX_ARRAY=${LOCAL_SLURM_MAX_ARRAY:-1001} # MaxArraySize
STATE=/run/local-slurm
DBDIR=/var/spool/slurm-mariadb
DBSOCK=/run/slurm-mariadb/mysqld.sock
DBPORT=3307
NODE=$(hostname -s)

log() { printf 'start-local: %s\n' "$*"; }
tails() {
  for f in /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log /var/log/slurm/slurmdbd.log \
           /var/log/slurm-mariadb/mariadb.log /var/log/munge/munged.log; do
    [ -f "$f" ] && { echo "---- tail $f"; tail -n 15 "$f"; }
  done
}
die() { echo "start-local: error: $*" >&2; tails >&2; exit 1; }
# poll SECONDS COMMAND...: retry COMMAND every 0.2 s; fails once SECONDS have passed.
poll() {
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || return 1
    sleep 0.2
  done
}
# wait_for SECONDS DESCRIPTION COMMAND...: poll, and fail with the log tails on time-out.
wait_for() {
  local limit=$1 what=$2; shift 2
  poll "$limit" "$@" || die "timed out after ${limit}s waiting for $what"
}
alive() { # alive NAME: the PID recorded for NAME is a live (non-zombie) process of that name
  local pidfile=$STATE/$1.pid pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -r "/proc/$pid/stat" ] || return 1
  [ "$(cut -d' ' -f3 "/proc/$pid/stat")" != Z ] || return 1
  [ "$(cat "/proc/$pid/comm")" = "$1" ]
}
record() { # record NAME PIDFILE_WRITTEN_BY_THE_DAEMON
  wait_for 15 "$1 to write its pid file" test -s "$2"
  cp "$2" "$STATE/$1.pid"
}

[ "$(id -u)" = 0 ] || die "must run as root (it installs packages and starts system daemons)"
mkdir -p "$STATE"

# ---- packages: only what is missing, without recommends
need=()
for pkg in munge slurmctld slurmd slurm-client slurmdbd mariadb-server; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null || die "apt-get install failed"
fi

mkdir -p /var/log/slurm /var/spool/slurmctld /var/spool/slurmd /run/slurm /etc/slurm
mkdir -p /var/log/munge /run/munge /var/log/slurm-mariadb /run/slurm-mariadb
chown munge:munge /var/log/munge /run/munge
chmod 0755 /run/munge
chown mysql:mysql /var/log/slurm-mariadb /run/slurm-mariadb

# ---- munge (reuse a munged that is already answering, e.g. the system's)
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  [ -f /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
  chown -R munge:munge /etc/munge && chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged --force
  record munged /run/munge/munged.pid
  wait_for 15 "munge to answer" bash -c 'munge -n | unmunge'
fi

db_answers() { mariadb --no-defaults -S "$DBSOCK" -e "select 1" >/dev/null 2>&1; }
ctld_answers() { scontrol ping 2>/dev/null | grep -q UP; }
# A daemon that answers is reused even if this script did not record it (e.g. one left by an earlier
# run whose state directory was lost): starting a second one would fight it for its port.

# ---- a private MariaDB for accounting, kept apart from /var/lib/mysql
if ! alive mariadbd && ! db_answers; then
  if [ ! -d "$DBDIR/mysql" ]; then
    mkdir -p "$DBDIR" && chown mysql:mysql "$DBDIR"
    mariadb-install-db --no-defaults --user=mysql --datadir="$DBDIR" \
      --auth-root-authentication-method=socket --skip-test-db >/dev/null 2>&1 || die "mariadb-install-db failed"
  fi
  setsid -f mariadbd --no-defaults --user=mysql --datadir="$DBDIR" --socket="$DBSOCK" --port=$DBPORT \
    --bind-address=127.0.0.1 --skip-name-resolve --log-error=/var/log/slurm-mariadb/mariadb.log \
    --pid-file=/run/slurm-mariadb/mariadbd.pid --innodb-buffer-pool-size=1G --innodb-lock-wait-timeout=900
  record mariadbd /run/slurm-mariadb/mariadbd.pid
  wait_for 30 "MariaDB to accept connections" db_answers
fi
# Every time, so that a reused database has the user and password slurmdbd.conf names.
mariadb --no-defaults -S "$DBSOCK" -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
  CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
  ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
  GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;" || die "setting up the accounting database failed"

# ---- configuration (rewritten each start; daemons are restarted below if it changed)
memory=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
[ -n "$memory" ] || memory=4000
mkdir -p /run/slurm/fakegpu
for ((i = 0; i < GPUS; i++)); do
  [ -c /run/slurm/fakegpu/nvidia$i ] || mknod -m 0666 /run/slurm/fakegpu/nvidia$i c 195 $i
done
new_conf=$(mktemp)
cat >"$new_conf" <<EOF
# Written by bench's slurm/start-local.sh: a single-node test cluster.
ClusterName=bench-local
SlurmctldHost=${NODE}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=cred_expire=10
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurm/slurmctld.pid
SlurmdPidFile=/run/slurm/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
KillWait=5
MaxArraySize=${MAX_ARRAY}
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_interval=2,bf_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
SlurmdParameters=config_overrides
GresTypes=gpu
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStorageTRES=gres/gpu
NodeName=${NODE} NodeAddr=127.0.0.1 CPUs=${CPUS} RealMemory=${memory} Gres=gpu:${GPUS} State=UNKNOWN
PartitionName=debug Nodes=${NODE} Default=YES MaxTime=INFINITE State=UP
EOF
changed=0
cmp -s "$new_conf" /etc/slurm/slurm.conf || { mv "$new_conf" /etc/slurm/slurm.conf; changed=1; }
rm -f "$new_conf"
echo "NodeName=${NODE} Name=gpu File=/run/slurm/fakegpu/nvidia[0-$((GPUS - 1))]" >/etc/slurm/gres.conf
cat >/etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=/run/slurm/slurmdbd.pid
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=${DBPORT}
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
EOF
chmod 0600 /etc/slurm/slurmdbd.conf
if [ "$changed" = 1 ]; then  # a changed slurm.conf needs both daemons restarted together
  for name in slurmd slurmctld; do
    if alive "$name"; then
      kill -TERM "$(cat "$STATE/$name.pid")"
      wait_for 20 "$name to stop" bash -c "! $(declare -f alive); STATE=$STATE; alive $name"
    fi
  done
  if ctld_answers; then  # daemons this script did not start: make them re-read the configuration
    scontrol reconfigure >/dev/null 2>&1 || true
  fi
fi

# ---- slurmdbd, slurmctld, slurmd
if ! alive slurmdbd && ! (exec 3<>/dev/tcp/127.0.0.1/6819) 2>/dev/null; then
  rm -f /run/slurm/slurmdbd.pid
  slurmdbd
  record slurmdbd /run/slurm/slurmdbd.pid
  wait_for 30 "slurmdbd to listen" bash -c 'exec 3<>/dev/tcp/127.0.0.1/6819'
fi
if ! alive slurmctld && ! ctld_answers; then
  rm -f /run/slurm/slurmctld.pid
  slurmctld
  record slurmctld /run/slurm/slurmctld.pid
fi
wait_for 30 "slurmctld to answer" bash -c 'scontrol ping | grep -q UP'
node_ready() { sinfo -h -n "$NODE" -o %T | grep -Eq '^(idle|mixed|allocated)'; }
if ! alive slurmd && ! node_ready; then
  rm -f /run/slurm/slurmd.pid
  slurmd -N "$NODE"
  record slurmd /run/slurm/slurmd.pid
fi
if ! poll 5 node_ready; then  # a drained or down node left from an earlier run
  scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true
fi
wait_for 30 "node $NODE to be idle" node_ready
log "up: node $NODE, $CPUS CPUs, $GPUS fake GPUs, accounting on 127.0.0.1:$DBPORT"
sinfo
