#!/usr/bin/env bash
# `make test-cluster`: start a real one-node SLURM cluster on this machine (Debian's slurm-wlm,
# no accounting database) and run tests/cluster/test_slurm.py, which mines through
# `--profile profiles/slurm`. Needs root: it installs packages and starts munged, slurmctld and
# slurmd. Everything it writes lies in one temp dir, and the daemons are stopped on exit,
# whatever happens.
#
# Usage: tests/cluster/run_slurm_test.sh [pytest args]
# Environment: PYTHON (default .venv/bin/python), MIRROR (default ../shared/data),
# KEEP_TMP=1 keeps the temp dir (logs, work dirs) for a look after a failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$PWD
PYTHON=${PYTHON:-.venv/bin/python}
MIRROR=$(realpath "${MIRROR:-../shared/data}")

[ "$(id -u)" = 0 ] || { echo "run_slurm_test.sh: needs root (apt-get, SLURM daemons)" >&2; exit 1; }
[ -f "$MIRROR/SOURCES.md" ] || { echo "run_slurm_test.sh: no data mirror at $MIRROR (set MIRROR)" >&2; exit 1; }

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
if ! installed slurm-wlm || ! installed munge; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurm-wlm munge >/dev/null
fi
echo "slurm-wlm $(dpkg-query -W -f='${Version}' slurm-wlm)," \
    "snakemake-executor-plugin-slurm $("$PYTHON" -m pip show snakemake-executor-plugin-slurm |
        sed -n 's/^Version: //p')"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/psp-slurm.XXXXXX")
# munged insists that every directory above its socket is searchable by all.
chmod 755 "$TMP"
mkdir -p "$TMP"/{munge,state,spool/localhost,log,bin}
pids=()

stop_cluster() {
    local rc=$?
    set +e
    if [ -n "${SLURM_CONF:-}" ] && [ "${#pids[@]}" -ge 2 ]; then
        # Cancel what is left (after a failure) so no job outlives its slurmd.
        squeue -h -o %i 2>/dev/null | xargs -r scancel
        for _ in $(seq 20); do [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5; done
    fi
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        kill "${pids[i]}" 2>/dev/null && wait "${pids[i]}" 2>/dev/null
    done
    if [ "$rc" != 0 ]; then
        # The daemons' logs, and the SLURM logs of failed jobs (the plugin deletes the others).
        for log in "$TMP"/log/* $(find "$TMP/pytest" -path '*/slurm_logs/*.log' 2>/dev/null); do
            echo "== $log"
            tail -n 25 "$log"
        done
    fi
    echo "cluster test: exit $rc after ${SECONDS}s"
    if [ -n "${KEEP_TMP:-}" ]; then echo "kept $TMP"; else rm -rf "$TMP"; fi
    exit "$rc"
}
trap stop_cluster EXIT
trap 'exit 130' INT TERM

# munged with its own key and socket, so a system munged (if any) is left alone.
dd if=/dev/urandom of="$TMP/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$TMP/munge/munge.key"
munged --foreground --key-file="$TMP/munge/munge.key" --socket="$TMP/munge/munge.socket" \
    --pid-file="$TMP/munge/munged.pid" --seed-file="$TMP/munge/munged.seed" \
    --log-file="$TMP/log/munged.log" &
pids+=($!)

# Two ports free on 127.0.0.1 (the kernel picks them), and this machine's CPUs and memory.
read -r ctld_port slurmd_port < <("$PYTHON" -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')
node=$(slurmd -C | head -n 1)
cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node")
memory=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$node")
partition=$("$PYTHON" -c '
import yaml
print(yaml.safe_load(open("profiles/slurm/config.yaml"))["default-resources"]["slurm_partition"])')
sed -e "s|@TMP@|$TMP|g" -e "s|@CTLD_PORT@|$ctld_port|" -e "s|@SLURMD_PORT@|$slurmd_port|" \
    -e "s|@CPUS@|$cpus|" -e "s|@MEMORY@|$memory|" -e "s|@PARTITION@|$partition|" \
    tests/cluster/slurm.conf.in >"$TMP/slurm.conf"
export SLURM_CONF=$TMP/slurm.conf

# The SLURM jobstep plugin (0.6.1) drops the SLURM_* variables but the job's ids, SLURM_CONF
# included, before the srun it runs inside each job. A real cluster keeps slurm.conf at
# /etc/slurm, where srun finds it anyway; this one keeps it in $TMP, so an srun first on PATH
# puts the variable back.
printf '#!/bin/sh\nSLURM_CONF=%s exec %s "$@"\n' "$SLURM_CONF" "$(command -v srun)" >"$TMP/bin/srun"
chmod 755 "$TMP/bin/srun"
export PATH=$TMP/bin:$PATH

slurmctld -D -i >"$TMP/log/slurmctld.out" 2>&1 &
pids+=($!)
slurmd -D -N localhost >"$TMP/log/slurmd.out" 2>&1 &
pids+=($!)
for _ in $(seq 60); do
    state=$(sinfo -h -n localhost -o %t 2>/dev/null || true)
    [ "$state" = idle ] && break
    sleep 0.5
done
[ "$state" = idle ] || { echo "SLURM node not idle (state: '$state')" >&2; exit 1; }
sinfo

PSP_SLURM_CLUSTER=1 PSP_SHARED_DATA=$MIRROR "$PYTHON" -m pytest -q -p no:cacheprovider \
    --basetemp "$TMP/pytest" "$REPO/tests/cluster" "$@"
