#!/bin/sh
# /init of the TestDatapathInVM guest. It runs test/e2e's test binary (built static on the
# host) once per kube-proxy mode, with -test.v so the host can read every (sub)test's
# result from the console, and then powers off. /etc/e2e.env (written by the host) sets:
#   E2E_MODES    the modes, one e2e run each (KUBE_PROXY_E2E_MODES of that run)
#   E2E_RUN      the -test.run pattern: every test of the e2e binary it matches runs in
#                every mode
#   E2E_TIMEOUT  -test.timeout of one run, so a hung test ends with a goroutine dump
# Around each run it prints "VMMODE <mode>" and "VMCHECK e2e/<mode> PASS|FAIL <detail>".
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
. /etc/e2e.env

say() { echo "VMLOG $*"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }

# Modules in dependency order, as the host computed them. All are loaded up front: the
# guest has no module autoloading to rely on (no udev, and no kmod's modprobe).
t0=$(uptime_s)
nmod=0
for m in $(cat /etc/vm-modules); do
	insmod "$m" 2>/tmp/insmod.err || say "insmod $m: $(cat /tmp/insmod.err)"
	nmod=$((nmod + 1))
done
say "loaded $nmod modules in $(awk -v a="$t0" '{print $1 - a}' /proc/uptime)s"
ip link set lo up
say "memory: $(grep -E 'MemTotal|MemAvailable' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
# Under TCG (qemu's emulated "QEMU Virtual CPU"), every exec and every sync takes ten
# times longer or more than on a real machine: the e2e suite's repair slack is scaled for
# that (KUBE_PROXY_E2E_SLACK_SCALE); under KVM (-cpu host) it is not.
E2E_SLACK_SCALE=1
grep -q 'QEMU Virtual CPU' /proc/cpuinfo && E2E_SLACK_SCALE=10
say "repair slack scale $E2E_SLACK_SCALE ($(grep -m1 'model name' /proc/cpuinfo))"

for mode in $E2E_MODES; do
	echo "VMMODE $mode"
	t0=$(uptime_s)
	KUBE_PROXY_E2E_SLACK_SCALE=$E2E_SLACK_SCALE KUBE_PROXY_E2E_DUMP_RULES=1 KUBE_PROXY_E2E_MODES=$mode KUBE_PROXY_E2E_BINARY=/usr/bin/kube-proxy \
		/usr/bin/e2e.test -test.v -test.count=1 -test.run "$E2E_RUN" -test.timeout "$E2E_TIMEOUT" 2>&1
	rc=$?
	took=$(awk -v a="$t0" '{printf "%.1f", $1 - a}' /proc/uptime)
	# Whatever a failed run left behind (namespaces, kube-proxy) must not leak into the
	# next mode's run.
	for ns in $(ip netns list 2>/dev/null | cut -d' ' -f1); do ip netns del "$ns"; done
	if [ "$rc" -eq 0 ]; then
		echo "VMCHECK e2e/$mode PASS exit=0 seconds=$took"
	else
		echo "VMCHECK e2e/$mode FAIL exit=$rc seconds=$took"
	fi
done

echo VMDONE
sync
poweroff -f
