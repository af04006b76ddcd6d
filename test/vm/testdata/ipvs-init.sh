#!/bin/sh
# /init of the TestIPVSInVM guest. It runs kube-proxy in ipvs mode on the manifests under
# /manifests and reports every check as "VMCHECK <scenario>/<check> PASS|FAIL <detail>"
# on the console for the host to parse, then powers off. It never stops early: a failed
# step is a FAIL line, so the host sees every check of every scenario.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp

VIP=10.96.0.10
PORT=80
EP_A=198.19.1.11
EP_B=198.19.1.12
EP_PORT=8080

say() { echo "VMLOG $*"; }
check() { # scenario/name PASS|FAIL detail...
	name=$1 status=$2
	shift 2
	echo "VMCHECK $name $status $*"
}
# result NAME CONDITION-EXIT-STATUS DETAIL
result() {
	if [ "$2" -eq 0 ]; then check "$1" PASS "$3"; else check "$1" FAIL "$3"; fi
}
oneline() { tr '\n' ';' | tr -s ' '; }
# get URL-PATH IP PORT prints the body of an HTTP/1.0 GET. It uses nc, not wget: the
# static glibc busybox's wget segfaults in this guest (likely in an NSS lookup, which a
# static binary cannot load).
get() {
	printf 'GET %s HTTP/1.0\r\n\r\n' "$1" | nc -w 3 "$2" "$3" 2>/dev/null | sed '1,/^\r*$/d'
}
# status URL-PATH IP PORT prints the HTTP status code.
status() {
	printf 'GET %s HTTP/1.0\r\n\r\n' "$1" | nc -w 3 "$2" "$3" 2>/dev/null | head -n 1 | cut -d' ' -f2
}

# Modules in dependency order, as the host computed them from modules.dep. Loading them
# all up front means nothing depends on the kernel's module autoloading in the guest.
t0=$(cut -d' ' -f1 /proc/uptime)
nmod=0
for m in $(cat /etc/vm-modules); do
	insmod "$m" 2>/tmp/insmod.err || say "insmod $m: $(cat /tmp/insmod.err)"
	nmod=$((nmod + 1))
done
say "loaded $nmod modules in $(awk -v a="$t0" '{print $1 - a}' /proc/uptime)s"
grep -q '^ip_vs ' /proc/modules
result setup/ip_vs $? "$(grep -c '^ip_vs' /proc/modules) ip_vs* modules loaded"

# The node: a dummy uplink with the node IP and a default route (kube-proxy picks its node
# IP from the Node object, but some paths want a route), and a dummy "pod" device holding
# both endpoint addresses, each served by its own busybox httpd that answers with its name.
ip link set lo up
ip link add eth0 type dummy
ip addr add 198.18.0.10/24 dev eth0
ip link set eth0 up
ip route add default via 198.18.0.1 dev eth0 onlink
ip link add pod0 type dummy
ip addr add $EP_A/32 dev pod0
ip addr add $EP_B/32 dev pod0
ip link set pod0 up
mkdir -p /www/a /www/b
echo a >/www/a/id
echo b >/www/b/id
httpd -p $EP_A:$EP_PORT -h /www/a
httpd -p $EP_B:$EP_PORT -h /www/b
got=$(get /id $EP_A $EP_PORT)
[ "$got" = a ]
result setup/endpoint-direct $? "GET $EP_A:$EP_PORT/id answered '$got'"

# scenario NAME: run kube-proxy on /manifests/NAME until it has synced, check the kernel
# state it programmed and the datapath, stop it, run --cleanup and check what is left.
scenario() {
	s=$1
	say "scenario $s: starting kube-proxy"
	kube-proxy --proxy-mode ipvs --manifests /manifests/$s --hostname-override node-1 \
		--v=2 >/tmp/kube-proxy-$s.log 2>&1 &
	pid=$!
	# Synced: healthz answers 200 (it does once a sync has run) and the virtual server
	# exists. Both, because healthz alone could answer before the first sync on some paths.
	synced=1
	i=0
	while [ $i -lt 100 ]; do
		if [ "$(status /healthz 127.0.0.1 10256)" = 200 ] &&
			ipvsadm -Ln -t $VIP:$PORT >/dev/null 2>&1; then
			synced=0
			break
		fi
		kill -0 $pid 2>/dev/null || break
		sleep 0.2
		i=$((i + 1))
	done
	result $s/synced $synced "after $i polls"
	# A last short wait so the real servers of the same sync are in too.
	sleep 1

	vs=$(ipvsadm -Ln -t $VIP:$PORT 2>&1)
	echo "$vs" | grep -Eq "^TCP +$VIP:$PORT rr"
	result $s/virtual-server $? "$(echo "$vs" | oneline)"
	echo "$vs" | grep -Eq -- "-> +$EP_A:$EP_PORT +Masq" &&
		echo "$vs" | grep -Eq -- "-> +$EP_B:$EP_PORT +Masq"
	result $s/real-servers $? "$(echo "$vs" | grep -- '->' | grep -v Remote | oneline)"

	addrs=$(ip -4 addr show dev kube-ipvs0 2>&1)
	echo "$addrs" | grep -q "inet $VIP/32"
	result $s/kube-ipvs0 $? "$(echo "$addrs" | grep inet | oneline)"

	set_=$(ipset list KUBE-CLUSTER-IP 2>&1)
	echo "$set_" | grep -q "^$VIP,tcp:$PORT"
	result $s/ipset-cluster-ip $? "$(echo "$set_" | grep -A5 Members | oneline)"

	# Four connections through the virtual server; rr must spread them over both.
	answers=""
	ok=0
	for n in 1 2 3 4; do
		got=$(get /id $VIP $PORT)
		case "$got" in
		a | b) answers="$answers$got" ;;
		*)
			answers="$answers-"
			ok=1
			;;
		esac
	done
	result $s/connect $ok "answers from 4 GETs of $VIP:$PORT: $answers"
	case "$answers" in
	*a*b* | *b*a*) both=0 ;;
	*) both=1 ;;
	esac
	result $s/connect-both-endpoints $both "answers $answers"

	kill $pid
	wait $pid
	say "scenario $s: kube-proxy exited $?; its last log lines:"
	tail -n 15 /tmp/kube-proxy-$s.log | sed "s/^/VMLOG kube-proxy[$s] /"

	kube-proxy --cleanup --proxy-mode ipvs --v=2 >/tmp/cleanup-$s.log 2>&1
	rc=$?
	result $s/cleanup-exit $rc "kube-proxy --cleanup exited $rc"
	grep -E '^[EW][0-9]' /tmp/cleanup-$s.log | sed "s/^/VMLOG cleanup[$s] /"
	left=$(ipvsadm -Ln 2>&1 | grep -E '^(TCP|UDP|SCTP|FWM) ')
	[ -z "$left" ]
	result $s/cleanup-ipvs $? "virtual servers left: ${left:-none}"
	ip link show kube-ipvs0 >/dev/null 2>&1
	[ $? -ne 0 ]
	result $s/cleanup-kube-ipvs0 $? "kube-ipvs0 $(ip link show kube-ipvs0 >/dev/null 2>&1 && echo present || echo gone)"
	left=$(ipset list -n 2>&1 | grep KUBE- | oneline)
	[ -z "$left" ]
	result $s/cleanup-ipsets $? "KUBE-* sets left: ${left:-none}"
	left=$(iptables-save 2>&1 | grep -c 'KUBE-')
	[ "$left" -eq 0 ]
	result $s/cleanup-iptables $? "$left iptables-save lines mention KUBE-"
}

scenario good
# The same Service with its endpoints gone: the host expects real-servers and connect to
# FAIL here, which shows those checks can tell a broken datapath from a working one.
scenario broken

echo VMDONE
sync
poweroff -f
