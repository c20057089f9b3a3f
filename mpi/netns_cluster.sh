#!/usr/bin/env bash
# Run an MPI program across K+1 hosts made of network namespaces on this machine, on shaped links.
#
#   mpi/netns_cluster.sh -K 4 [--master-up-mbit 1000] [--worker-down-mbit 0] [--worker-up-mbit 0]
#       [--delay-ms 0] [--mtu 1500] [--bcast chain|mpich] [--tcp-cc auto] [--peers] [--igmp-snooping]
#       [--racks NxH|H+H+... --rack-up-mbit R [--rack-down-mbit R]] [--timeout 600] -- PROGRAM [ARGS...]
#
# Hosts h0 (the master, rank 0) .. hK are network namespaces, each with one interface `eth0` (a
# veth pair) plugged into a bridge that lives in a switch namespace of its own: nothing is added
# to the root namespace, and only the private addresses 10.199.0.10 + i of these namespaces are
# used. Links are shaped with tc tbf (rates in megabits, 10^6 bits, a second; 0 = unshaped):
#   --master-up-mbit R     h0's uplink (egress of h0's eth0)            default 1000
#   --worker-down-mbit R   each worker's downlink (egress of its switch port)  default 0
#   --worker-up-mbit R     each worker's uplink (egress of its eth0)      default 0
#   --delay-ms D           one-way delay added on every shaped egress (needs the netem qdisc)
#   --mtu BYTES            MTU of every link (default 1500; up to 9000, jumbo frames, for larger
#                          multicast datagrams: run --datagram-bytes BYTES-28)
#   --tcp-cc NAME          every host's TCP congestion control: auto (default) is Linux's default,
#                          cubic, or reno where the kernel lets a namespace choose only reno and
#                          bbr (at these round trips cubic grows its window as reno does);
#                          system keeps the machine's own (which may be bbr: plain MPI transfers
#                          in rounds ran 6 to 36 % under the port's rate under it)
#   --igmp-snooping        the bridge forwards a multicast group only to the ports whose hosts
#                          joined it (IGMP snooping, the bridge its own querier), as a managed
#                          switch does; it waits until the bridge filters (about 10 s after it
#                          is made: Linux floods every group until then) before the job starts
#   --peers                K hosts h0 .. h(K-1), every one a worker shaped as above, and
#                          `mpiexec -n K`: a job of peers (no master; --master-up-mbit unused)
#   --racks NxH|H+H+...    the workers in racks, in the order of their indices (N racks of H hosts,
#                          or each rack's hosts; they add up to the workers): each rack a bridge
#                          (a top-of-rack switch) in a namespace of its own, cs<pid>-r<r>, joined to
#                          the spine, the switch namespace's bridge, where the master is, by one
#                          veth pair, the rack's uplink (port `uplink` in the rack, `r<r>` on the spine)
#   --rack-up-mbit R       each rack's uplink to the spine (egress of its port `uplink`) default 0
#   --rack-down-mbit R     each rack's downlink from the spine (egress of the spine's port `r<r>`)
#                          default: --rack-up-mbit's rate
# Then `mpiexec -n K+1 -ppn 1` runs PROGRAM from inside h0 with a hostfile of the hosts'
# addresses and a launcher (hydra's ssh launcher, pointed at a script) that starts each host's
# proxy inside that host's namespace with a hostname of its own (UTS namespace), so MPICH treats
# the ranks as separate nodes and all traffic between them crosses the shaped links (shared
# memory is off as well: MPIR_CVAR_NOLOCAL=1, netmod ofi over tcp on eth0).
#
# --bcast chain (default) makes MPI_Bcast a pipelined chain, root -> rank 1 -> ... -> rank K, in
# pieces of 256 KiB, so the root emits each byte once, as on a shared medium; MPICH's own choice
# for large messages (--bcast mpich: scatter, then ring allgather) has the root send about twice
# the message, and for small ones (binomial tree) log2(K+1) times.
#
# The namespaces are named cs<pid>-sw and cs<pid>-h<i>, so parallel runs never collide; they are
# deleted on exit, whatever happens (trap), every process left in them stopped first, and
# mpiexec is bounded by --timeout seconds.
# Environment: MPIEXEC (default: mpiexec beside PYTHON, else on PATH), PYTHON (default python3).
# Every host routes 239.0.0.0/8 (the local multicast scope) on its eth0, so that `run --multicast`
# reaches the others through the bridge, which replicates each datagram for free (to every port,
# or with --igmp-snooping to the members of its group).
# Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), ip (iproute2), tc and unshare (util-linux).
# Prints, after the job, the bytes each host's eth0 sent and received (`links: hI eth0 tx T rx R
# bytes` lines on standard error), and with --racks the bytes each rack's uplink and downlink
# carried (`links: rackR up U down D bytes`, the egress counters of the rack's port `uplink` and of
# the spine's port `rR`): what crossed between racks. Both count the whole job (its start-up and
# control messages too) and every frame's headers. Exit status: the job's, or 2 on a usage or
# setup error.
set -euo pipefail

PROG=netns_cluster.sh
usage() { sed -n '4,6p' "$0" | sed 's/^# \{0,1\}//' >&2; }
die() { echo "$PROG: error: $*" >&2; exit 2; }

K=""
MASTER_UP=1000
WORKER_DOWN=0
WORKER_UP=0
DELAY=0
MTU=1500
TIMEOUT=600
BCAST=chain
TCP_CC=auto
PEERS=0
SNOOPING=0
RACKS=""
RACK_UP=0
RACK_DOWN=""
while [ $# -gt 0 ]; do
    case "$1" in
        -K|--workers) K="${2:-}"; shift 2 ;;
        --master-up-mbit) MASTER_UP="${2:-}"; shift 2 ;;
        --worker-down-mbit) WORKER_DOWN="${2:-}"; shift 2 ;;
        --worker-up-mbit) WORKER_UP="${2:-}"; shift 2 ;;
        --delay-ms) DELAY="${2:-}"; shift 2 ;;
        --mtu) MTU="${2:-}"; shift 2 ;;
        --timeout) TIMEOUT="${2:-}"; shift 2 ;;
        --bcast) BCAST="${2:-}"; shift 2 ;;
        --tcp-cc) TCP_CC="${2:-}"; shift 2 ;;
        --peers) PEERS=1; shift ;;
        --igmp-snooping) SNOOPING=1; shift ;;
        --racks) RACKS="${2:-}"; shift 2 ;;
        --rack-up-mbit) RACK_UP="${2:-}"; shift 2 ;;
        --rack-down-mbit) RACK_DOWN="${2:-}"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) usage; die "unknown option '$1'" ;;
    esac
done
[ $# -gt 0 ] || { usage; die "no program to run (give it after --)"; }
case "$K" in ''|*[!0-9]*) die "-K must be a positive integer, not '${K}'" ;; esac
[ "$K" -ge 1 ] && [ "$K" -le 200 ] || die "-K must be between 1 and 200, not $K"
LAST=$((K - PEERS))  # the last host: hK, or h(K-1) among peers
[ -n "$RACK_DOWN" ] || RACK_DOWN="$RACK_UP"
for pair in "master-up-mbit:$MASTER_UP" "worker-down-mbit:$WORKER_DOWN" "worker-up-mbit:$WORKER_UP" \
    "delay-ms:$DELAY" "timeout:$TIMEOUT" "rack-up-mbit:$RACK_UP" "rack-down-mbit:$RACK_DOWN"; do
    case "${pair#*:}" in ''|*[!0-9.]*|*.*.*) die "--${pair%%:*} must be a non-negative number, not '${pair#*:}'" ;; esac
done
case "$MTU" in ''|*[!0-9]*) die "--mtu must be an integer, not '$MTU'" ;; esac
[ "$MTU" -ge 576 ] && [ "$MTU" -le 65535 ] || die "--mtu must be 576 to 65535, not $MTU"
case "$BCAST" in chain|mpich) ;; *) die "--bcast must be chain or mpich, not '$BCAST'" ;; esac
case "$TCP_CC" in ''|*[!a-z0-9_]*) die "--tcp-cc must be auto, system or a congestion control's name, not '$TCP_CC'" ;; esac
awk -v t="$TIMEOUT" 'BEGIN { exit !(t >= 1) }' || die "--timeout must be at least 1 second, not $TIMEOUT"
FIRST=$((1 - PEERS))  # the first worker's host: h1, or h0 among peers
RACK_OF=()            # RACK_OF[i]: the rack of host hI (workers only), with --racks
if [ -n "$RACKS" ]; then
    sizes=""  # each rack's hosts, separated by spaces
    case "$RACKS" in
        *x*) count="${RACKS%%x*}" hosts="${RACKS#*x}"
             case "$count:$hosts" in
                 [0-9]*:[0-9]*) case "$count$hosts" in *[!0-9]*) ;; *)
                     [ "$count" -ge 1 ] && [ "$count" -le 16 ] || die "--racks must be 1 to 16 racks, not $count"
                     for _ in $(seq "$count"); do sizes="$sizes $hosts"; done ;; esac ;;
             esac ;;
        *) case "$RACKS" in ''|*[!0-9+]*|+*|*+|*++*) ;; *) sizes="${RACKS//+/ }" ;; esac ;;
    esac
    [ -n "$sizes" ] || die "--racks must be NxH (N racks of H hosts) or H+H+... (each rack's hosts), not '$RACKS'"
    total=0
    NRACKS=0
    for h in $sizes; do
        [ "$h" -ge 1 ] || die "--racks: every rack holds at least one host, not '$RACKS'"
        total=$((total + h)) NRACKS=$((NRACKS + 1))
    done
    [ "$NRACKS" -le 16 ] || die "--racks must be 1 to 16 racks, not $NRACKS"
    [ "$total" -eq "$((LAST + 1 - FIRST))" ] || die "--racks $RACKS holds $total hosts, not the $((LAST + 1 - FIRST)) workers"
    host=$FIRST
    rack=0
    for h in $sizes; do
        for _ in $(seq "$h"); do RACK_OF[host]=$rack; host=$((host + 1)); done
        rack=$((rack + 1))
    done
    [ "$SNOOPING" -eq 0 ] || die "--igmp-snooping applies to one switch, not with --racks"
else
    for pair in "rack-up-mbit:$RACK_UP" "rack-down-mbit:$RACK_DOWN"; do
        [ "${pair#*:}" = 0 ] || die "--${pair%%:*} applies with --racks only"
    done
fi
[ "$(id -u)" -eq 0 ] || die "needs root (CAP_NET_ADMIN) to create network namespaces"
for tool in ip tc unshare timeout; do command -v "$tool" >/dev/null || die "'$tool' not found"; done

PYTHON="${PYTHON:-python3}"
if [ -z "${MPIEXEC:-}" ]; then
    MPIEXEC="$(dirname "$(command -v "$PYTHON")")/mpiexec"
    [ -x "$MPIEXEC" ] || MPIEXEC="$(command -v mpiexec || true)"
fi
[ -n "$MPIEXEC" ] && [ -x "$MPIEXEC" ] || die "mpiexec not found; install the MPI extra: pip install 'coded_shuffle[mpi]'"

P="cs$$"
SW="$P-sw"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/$P.XXXXXX")"
host_ns() { echo "$P-h$1"; }
host_ip() { echo "10.199.0.$((10 + $1))"; }
rack_ns() { echo "$P-r$1"; }

JOB=""
cleanup() {
    local status=$?
    trap - EXIT INT TERM
    if [ -n "$JOB" ] && kill -0 "$JOB" 2>/dev/null; then  # interrupted: stop the job first, bounded
        kill -TERM "$JOB" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$JOB" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$JOB" 2>/dev/null || true
    fi
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        case "$ns" in "$P"-*)
            # what the job left running there (a proxy whose mpiexec was stopped, a process of the
            # program's own) would outlive the namespace, its sockets' peers gone: stopped first
            pids="$(ip netns pids "$ns" 2>/dev/null || true)"
            [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
            ip netns delete "$ns" 2>/dev/null || true ;;
        esac
    done
    rm -rf "$WORK"
    exit "$status"
}
trap cleanup EXIT
trap 'echo "$PROG: error: setting up the hosts failed (line $LINENO)" >&2; exit 2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

# shape DEV-NAMESPACE DEV RATE_MBIT: tbf at RATE (and netem DELAY before it, if asked).
shape() {
    local ns="$1" dev="$2" rate="$3" parent="root" burst
    if [ "$DELAY" != "0" ]; then
        ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "${DELAY}ms" limit 100000 \
            2>/dev/null || die "--delay-ms needs the netem qdisc, which this kernel lacks (CONFIG_NET_SCH_NETEM)"
        parent="parent 1:1"
    fi
    [ "$rate" = "0" ] && return 0
    # Bucket: 2 ms of the link, at least 128 KiB (a GSO packet of veth is up to 64 KiB).
    burst=$(awk -v r="$rate" 'BEGIN { b = r * 1e6 / 8 * 0.002; if (b < 131072) b = 131072; printf "%d", b }')
    # shellcheck disable=SC2086
    ip netns exec "$ns" tc qdisc add dev "$dev" $parent handle 10: tbf rate "${rate}mbit" burst "$burst" \
        latency 100ms || die "tc tbf failed on $dev in $ns"
}

# set_cc NAMESPACE: its TCP congestion control, as --tcp-cc says.
set_cc() {
    local ns="$1" sysctl="net.ipv4.tcp_congestion_control"
    case "$TCP_CC" in
        system) ;;
        auto) ip netns exec "$ns" sysctl -qw "$sysctl=cubic" 2>/dev/null \
                  || ip netns exec "$ns" sysctl -qw "$sysctl=reno" ;;
        *) ip netns exec "$ns" sysctl -qw "$sysctl=$TCP_CC" 2>/dev/null \
               || die "--tcp-cc $TCP_CC: a namespace may choose only $(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control) here" ;;
    esac
}

ip netns add "$SW"
if [ "$SNOOPING" -eq 1 ]; then
    # A group only to its members' ports; the bridge is the querier (without one Linux floods).
    ip -n "$SW" link add br0 type bridge mcast_snooping 1 mcast_querier 1 mcast_query_response_interval 100
    SNOOP_FROM=$SECONDS
elif [ -n "$RACKS" ]; then  # the spine and every rack's switch replicate each multicast datagram
    ip -n "$SW" link add br0 type bridge mcast_snooping 0
else
    ip -n "$SW" link add br0 type bridge
fi
ip -n "$SW" link set br0 up
for r in $(seq 0 $((${NRACKS:-0} - 1))); do  # each rack a bridge, joined to the spine by its uplink
    ns="$(rack_ns "$r")"
    ip netns add "$ns"
    ip -n "$ns" link add br0 type bridge mcast_snooping 0
    ip -n "$ns" link set br0 up
    ip link add uplink netns "$ns" type veth peer name "r$r" netns "$SW"
    ip -n "$ns" link set uplink mtu "$MTU" master br0 up
    ip -n "$SW" link set "r$r" mtu "$MTU" master br0 up
    shape "$ns" uplink "$RACK_UP"
    shape "$SW" "r$r" "$RACK_DOWN"
done
: > "$WORK/hostfile"
{
    echo '#!/bin/sh'
    echo '# hydra ssh launcher: [-x] HOST COMMAND... -> COMMAND inside HOST namespace, as host hI.'
    echo 'while [ "${1#-}" != "$1" ]; do shift; done'
    echo 'host="$1"; shift'
    echo 'case "$host" in'
} > "$WORK/launch"
for i in $(seq 0 "$LAST"); do
    ns="$(host_ns "$i")"
    sw="$SW"  # the host's switch: the spine, or its rack's
    [ -z "${RACK_OF[i]:-}" ] || sw="$(rack_ns "${RACK_OF[i]}")"
    ip netns add "$ns"
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master br0 up
    ip -n "$ns" addr add "$(host_ip "$i")/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 mtu "$MTU"
    ip -n "$sw" link set "p$i" mtu "$MTU"
    ip -n "$ns" link set eth0 up
    # The administratively scoped multicast groups (run --multicast) go out on eth0, to the bridge,
    # which replicates each datagram to the ports whose hosts joined the group.
    ip -n "$ns" route add 239.0.0.0/8 dev eth0
    # A transfer after a pause (each epoch's delivery) keeps its congestion window, as on a tuned
    # cluster, instead of slow-starting again through the shaped link's queue.
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_slow_start_after_idle=0
    set_cc "$ns"
    echo "$(host_ip "$i"):1" >> "$WORK/hostfile"
    echo "    $(host_ip "$i")) ns=$ns; name=h$i ;;" >> "$WORK/launch"
    if [ "$i" -eq 0 ] && [ "$PEERS" -eq 0 ]; then
        shape "$ns" eth0 "$MASTER_UP"
    else
        shape "$sw" "p$i" "$WORKER_DOWN"
        shape "$ns" eth0 "$WORKER_UP"
    fi
done
{
    echo '    *) echo "launch: unknown host $host" >&2; exit 2 ;;'
    echo 'esac'
    echo "exec ip netns exec \"\$ns\" unshare --uts sh -c 'hostname \"\$0\" && exec sh -c \"\$1\"' \"\$name\" \"\$*\""
} >> "$WORK/launch"
chmod +x "$WORK/launch"

counters() {  # one line per host: host tx_bytes rx_bytes of its eth0; per rack: up and down tx_bytes
    for i in $(seq 0 "$LAST"); do
        echo "h$i" $(ip netns exec "$(host_ns "$i")" cat /sys/class/net/eth0/statistics/tx_bytes \
            /sys/class/net/eth0/statistics/rx_bytes)
    done
    for r in $(seq 0 $((${NRACKS:-0} - 1))); do
        echo "rack$r" $(ip netns exec "$(rack_ns "$r")" cat /sys/class/net/uplink/statistics/tx_bytes) \
            $(ip netns exec "$SW" cat "/sys/class/net/r$r/statistics/tx_bytes")
    done
}
counters > "$WORK/before"

export MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_CH4_NETMOD="${MPIR_CVAR_CH4_NETMOD:-ofi}" FI_PROVIDER=tcp \
    FI_TCP_IFACE=eth0 FI_SOCKETS_IFACE=eth0 UCX_NET_DEVICES=eth0 UCX_TLS=tcp
# The hosts share this machine's cores: with more ranks than cores, MPICH's waiting loops must
# yield the core (each rank believes it is alone on its node, so the program cannot tell).
if [ "$((LAST + 1))" -gt "$(nproc)" ]; then
    export MPIR_CVAR_ENABLE_HEAVY_YIELD="${MPIR_CVAR_ENABLE_HEAVY_YIELD:-1}"
fi
if [ "$BCAST" = chain ]; then
    export MPIR_CVAR_BCAST_INTRA_ALGORITHM=pipelined_tree MPIR_CVAR_BCAST_TREE_TYPE=kary \
        MPIR_CVAR_BCAST_TREE_KVAL=1 \
        MPIR_CVAR_BCAST_TREE_PIPELINE_CHUNK_SIZE="${MPIR_CVAR_BCAST_TREE_PIPELINE_CHUNK_SIZE:-262144}"
fi
if [ "$SNOOPING" -eq 1 ]; then  # Linux's bridge floods every group for its first 10 s or so
    sleep $((SNOOP_FROM + 11 - SECONDS > 0 ? SNOOP_FROM + 11 - SECONDS : 0))
fi
# In the background, so that a signal to this script runs its trap at once (bash defers traps
# until a foreground command ends).
ip netns exec "$(host_ns 0)" unshare --uts sh -c 'hostname h0 && exec "$@"' sh \
    timeout --kill-after=10 "$TIMEOUT" "$MPIEXEC" -f "$WORK/hostfile" -localhost "$(host_ip 0)" \
    -launcher ssh -launcher-exec "$WORK/launch" -n "$((LAST + 1))" -ppn 1 "$@" &
JOB=$!
trap - ERR  # the hosts are up; from here the job's own status is the script's
set +e
wait "$JOB"
status=$?
set -e
JOB=""
counters > "$WORK/after"
paste -d ' ' "$WORK/before" "$WORK/after" | awk '{
    if ($1 ~ /^rack/) printf "links: %s up %d down %d bytes\n", $1, $5 - $2, $6 - $3
    else printf "links: %s eth0 tx %d rx %d bytes\n", $1, $5 - $2, $6 - $3 }' >&2
[ "$status" -eq 124 ] && echo "$PROG: error: the job ran past --timeout $TIMEOUT s" >&2
exit "$status"
