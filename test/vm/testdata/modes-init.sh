#!/bin/sh
# /init of the TestKernelMatrix guest. For each proxy mode in /etc/vm-modes
# ("name vip nodeport no-endpoints-vip hidden-modules|- kube-proxy-flags..."), it runs kube-proxy on /manifests/<name> (a ClusterIP and a
# NodePort Service of their own addresses and ports, both to one endpoint, and a Service
# with no endpoints), and reports as "VMCHECK <name>/<check> PASS|FAIL <detail>":
#   synced      kube-proxy answered healthz 200, its sync metric is set, and it runs
#   refused     kube-proxy exited before syncing; the detail is its last error line
#   clusterip   a TCP GET of the ClusterIP was answered by the endpoint
#   nodeport    a TCP GET of node IP:NodePort was answered by the endpoint
#   no-endpoints a TCP GET of the endpoint-less ClusterIP was answered (must FAIL: it
#               shows the GET checks can fail)
# and "<name>/time" (PASS, the seconds the mode took). The host decides which outcome each kernel and
# mode must have. After every mode, one `kube-proxy --cleanup` must exit 0 and leave no
# KUBE- chain (either iptables backend, either family), kube-proxy nft table, IPVS
# virtual server, KUBE- ip set or kube-ipvs0: "cleanup/<what>". It never stops early,
# then powers off.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp

NODE_IP=198.18.0.10
EP=198.19.1.11
EP_PORT=8080

say() { echo "VMLOG $*"; }
result() { # NAME EXIT-STATUS DETAIL
	if [ "$2" -eq 0 ]; then echo "VMCHECK $1 PASS $3"; else echo "VMCHECK $1 FAIL $3"; fi
}
oneline() { tr '\n' ';' | tr -s ' ' | cut -c1-400; }
# get IP PORT prints the body of an HTTP/1.0 GET of /id (nc, not wget: the static glibc
# busybox's wget segfaults in this guest).
get() {
	printf 'GET /id HTTP/1.0\r\n\r\n' | nc -w 3 "$1" "$2" 2>/dev/null | sed '1,/^\r*$/d'
}
healthz() {
	printf 'GET /healthz HTTP/1.0\r\n\r\n' | nc -w 2 127.0.0.1 10256 2>/dev/null | head -n 1 | cut -d' ' -f2
}
# synced: the sync-time metric is set, i.e. a sync of rules completed. healthz alone is
# not enough: it answers 200 before the first sync, when nothing is queued yet (the
# first matrix run's ClusterIP GETs, made right after healthz, all failed).
synced() {
	printf 'GET /metrics HTTP/1.0\r\n\r\n' | nc -w 2 127.0.0.1 10249 2>/dev/null |
		awk '/^kubeproxy_sync_proxy_rules_last_timestamp_seconds/ && $NF > 0 {ok = 1} END {exit !ok}'
}
uptime_s() { cut -d' ' -f1 /proc/uptime; }
since() { awk -v a="$1" '{print $1 - a}' /proc/uptime; }

say "kernel $(uname -r)"
t0=$(uptime_s)
nmod=0
for m in $(cat /etc/vm-modules); do
	insmod "$m" 2>/tmp/insmod.err || say "insmod $m: $(cat /tmp/insmod.err)"
	nmod=$((nmod + 1))
done
say "loaded $nmod modules in $(since "$t0")s"

ip link set lo up
ip link add eth0 type dummy
ip addr add $NODE_IP/24 dev eth0
ip link set eth0 up
ip route add default via 198.18.0.1 dev eth0 onlink
ip link add pod0 type dummy
ip addr add $EP/32 dev pod0
ip link set pod0 up
mkdir -p /www
echo ep >/www/id
httpd -p $EP:$EP_PORT -h /www
got=$(get $EP $EP_PORT)
[ "$got" = ep ]
result setup/endpoint-direct $? "GET $EP:$EP_PORT answered '$got'"

# hide MODULE...: make the kernel lack modules, as a kernel built without them would:
# unload each (nothing uses it once the modes before have stopped), delete its file and
# its modules.dep line, so neither kube-proxy's probe nor the kernel's autoloading can
# find it.
hide() {
	dep=/lib/modules/$(uname -r)/modules.dep
	# Rules of the modes before may still use them: remove every rule first.
	nft flush ruleset 2>/dev/null
	for t in nat filter mangle raw; do
		iptables-legacy -t $t -F 2>/dev/null
		iptables-legacy -t $t -X 2>/dev/null
	done
	for h in "$@"; do
		rmmod "$h" 2>/tmp/rmmod.err || say "rmmod $h: $(cat /tmp/rmmod.err)"
		f=$(grep -E "(^|/)$h\.ko:" $dep | cut -d: -f1)
		[ -n "$f" ] && rm -f "/lib/modules/$(uname -r)/$f"
		grep -vE "(^|/)$h\.ko:" $dep >/tmp/dep && cat /tmp/dep >$dep
		grep -q "^$h " /proc/modules && say "hide $h: still loaded"
	done
}

# diagnose VIP PORT logs how the kernel sees a failed connection.
diagnose() {
	say "diag: $(ip route get "$1" 2>&1 | oneline)"
	iptables-save 2>/dev/null | grep -F "$1" | head -n 5 | sed 's/^/VMLOG diag iptables-nft: /'
	iptables-legacy-save 2>/dev/null | grep -F "$1" | head -n 5 | sed 's/^/VMLOG diag iptables-legacy: /'
	nft list ruleset 2>/dev/null | grep -F "$1" | head -n 5 | sed 's/^/VMLOG diag nft: /'
	ipvsadm -Ln 2>/dev/null | grep -F -A2 "$1" | sed 's/^/VMLOG diag ipvs: /'
	ip -4 addr show 2>/dev/null | grep inet | oneline | sed 's/^/VMLOG diag addrs: /'
}

# mode NAME VIP NODEPORT NOEP-VIP HIDE FLAGS...
mode() {
	m=$1 vip=$2 np=$3 noep=$4 hidden=$5
	shift 5
	t1=$(uptime_s)
	[ "$hidden" = - ] || hide $(echo "$hidden" | tr ',' ' ')
	say "mode $m: kube-proxy $*"
	case $m in
	# Evidence for docs/kernels.md: what the kernel itself does with the mode when
	# the release gate is skipped.
	*-skipcheck) export KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK=1 ;;
	*) unset KUBE_PROXY_NFTABLES_SKIP_KERNEL_VERSION_CHECK ;;
	esac
	kube-proxy "$@" --manifests /manifests/$m --hostname-override node-1 --v=2 >/tmp/kp-$m.log 2>&1 &
	pid=$!
	synced=1
	i=0
	# Bounded at ~3 min: under TCG on a loaded machine a mode that first removes another
	# mode's leftovers took over a minute to sync (nftables after the iptables modes).
	while [ $i -lt 450 ]; do
		if ! kill -0 $pid 2>/dev/null; then
			break
		fi
		if [ "$(healthz)" = 200 ] && synced; then
			synced=0
			break
		fi
		sleep 0.2
		i=$((i + 1))
	done
	if [ $synced -ne 0 ] && ! kill -0 $pid 2>/dev/null; then
		wait $pid
		rc=$?
		# The reason is kube-proxy's last error-level line.
		why=$(grep -E '^[EF][0-9]{4}' /tmp/kp-$m.log | tail -n 1 | cut -c1-700)
		result $m/refused 0 "exit $rc: $why"
		grep -E "^[EF][0-9]{4}" /tmp/kp-$m.log | tail -n 3 | sed "s/^/VMLOG kube-proxy[$m] /"
	else
		result $m/synced $synced "healthz and sync metric after $i polls"
		if [ $synced -ne 0 ]; then
			grep -v 'FLAG:' /tmp/kp-$m.log | tail -n 25 | cut -c1-600 | sed "s/^/VMLOG kube-proxy[$m] /"
			nft list tables 2>&1 | oneline | sed "s/^/VMLOG diag nft tables: /"
		fi
		got=$(get $vip 80)
		[ "$got" = ep ]
		rc=$?
		result $m/clusterip $rc "GET $vip:80 answered '$got'"
		[ $rc -eq 0 ] || diagnose $vip
		got=$(get $NODE_IP $np)
		[ "$got" = ep ]
		rc=$?
		result $m/nodeport $rc "GET $NODE_IP:$np answered '$got'"
		[ $rc -eq 0 ] || diagnose $NODE_IP
		got=$(get $noep 80)
		[ "$got" = ep ]
		result $m/no-endpoints $? "GET $noep:80 answered '$got'"
		if [ -x /opt/nft-debian11/nft ] && [ $synced -eq 0 ] && [ "${m%-skipcheck}" != "$m" ]; then
			# Evidence, not judged by the host: the nft of a pre-5.13 distribution
			# (Debian 11) reading the table this mode wrote, beside the current nft.
			nft list table ip kube-proxy >/tmp/nft-new.out 2>&1
			result $m/current-nft-list $? "nft $(nft --version 2>&1 | oneline): $(grep -c . /tmp/nft-new.out) lines"
			for what in "table ip kube-proxy" ruleset; do
				# shellcheck disable=SC2086 # two words by design
				LD_LIBRARY_PATH=/opt/nft-debian11/lib /opt/nft-debian11/nft list $what >/tmp/nft-old.out 2>&1
				rc=$?
				result "$m/debian11-nft-list-${what%% *}" $rc "nft $(cat /opt/nft-debian11/version) list $what: exit $rc, $(grep -c . /tmp/nft-old.out) lines; $(grep -E '^Error|not found|egmentation|bort' /tmp/nft-old.out | head -n 3 | oneline)"
			done
			LD_LIBRARY_PATH=/opt/nft-debian11/lib /opt/nft-debian11/nft list table ip kube-proxy >/tmp/nft-old.out 2>&1
			diff /tmp/nft-new.out /tmp/nft-old.out | grep '^[-+][^-+]' | head -n 6 | cut -c1-200 | sed 's/^/VMLOG nft-diff (1.0.6 -, 0.9.8 +): /'
		fi
		kill $pid
		wait $pid
		grep -E '^[EF][0-9]{4}' /tmp/kp-$m.log | grep -v 'nodePortAddresses is unset' | tail -n 5 | sed "s/^/VMLOG kube-proxy[$m] /"
	fi
	# No --cleanup between modes (it took 30-40 s per mode under TCG): each mode has
	# addresses and ports of its own, so another mode's leftover rules cannot answer
	# for it, and starting a mode removes the other modes' rules as on a real node.
	result $m/time 0 "$(since "$t1")"
}

while read -r name vip np noep hidden flags; do
	[ -n "$name" ] || continue
	# shellcheck disable=SC2086 # flags are words by design
	mode "$name" "$vip" "$np" "$noep" "$hidden" $flags </dev/null
done </etc/vm-modes

# One --cleanup after every mode ran (one per mode took 30-40 s under TCG): whatever
# the modes left, it must remove all of kube-proxy's state and exit 0.
t1=$(uptime_s)
kube-proxy --cleanup >/tmp/cleanup.log 2>&1
rc=$?
result cleanup/exit $rc "kube-proxy --cleanup exited $rc in $(since "$t1")s; $(grep -E '^[EF][0-9]{4}' /tmp/cleanup.log | tail -n 3 | oneline)"
# KUBE-FIREWALL is kubelet's chain: kube-proxy writes the same rule into it (and the
# jumps to it, in both families, as upstream does) but never deletes it.
left=""
for save in iptables-nft-save ip6tables-nft-save iptables-legacy-save ip6tables-legacy-save; do
	n=$($save 2>/dev/null | grep -E '^:KUBE-|-j KUBE-' | grep -cv 'KUBE-FIREWALL')
	[ "$n" -eq 0 ] || left="$left $save:$n"
	$save 2>/dev/null | grep -E '^\*|^:KUBE-|-j KUBE-' | grep -v KUBE-FIREWALL | grep -B1 KUBE- | head -n 20 | sed "s/^/VMLOG left by --cleanup in $save: /"
done
[ -z "$left" ]
result cleanup/iptables $? "KUBE- chains and jumps left:${left:- none}"
tables=$(nft list tables 2>/dev/null | grep kube-proxy | oneline)
[ -z "$tables" ]
result cleanup/nftables $? "kube-proxy tables left: ${tables:-none}"
n=$(ipvsadm -Ln 2>/dev/null | grep -cE '^(TCP|UDP|SCTP|FWM)')
[ "$n" -eq 0 ]
result cleanup/ipvs $? "$n virtual servers left"
sets=$(ipset list -n 2>/dev/null | grep '^KUBE-' | oneline)
[ -z "$sets" ]
result cleanup/ipsets $? "KUBE- sets left: ${sets:-none}"
! ip link show kube-ipvs0 >/dev/null 2>&1
result cleanup/kube-ipvs0 $? "kube-ipvs0 $(ip link show kube-ipvs0 >/dev/null 2>&1 && echo left || echo gone)"

echo VMDONE
sync
poweroff -f
