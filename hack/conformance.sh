#!/usr/bin/env bash
# Runs upstream Kubernetes' own [sig-network] e2e specs (Services, EndpointSlice, Conntrack,
# KubeProxy, and the Networking specs that go through Services) against a real two-node
# cluster built on this machine, once with upstream's kube-proxy v1.37.2 and once with ours
# (every node runs the kube-proxy under test), in iptables and in nftables mode, and writes
# a per-spec table.
#
#   hack/conformance.sh [all]        build (cached), bring the cluster up, run every
#                                    proxy x mode, write the table, tear down
#   hack/conformance.sh build        only build and cache the binaries
#   hack/conformance.sh up | down    bring the cluster up / tear it down
#   hack/conformance.sh run PROXY MODE [NAME]
#                                    on a running cluster: start kube-proxy PROXY
#                                    (ours|upstream|broken) in MODE (iptables|nftables), run the
#                                    suite, stop it; results in $state/results/NAME
#   hack/conformance.sh report DIR...   print the markdown table of result directories
#
# Environment: CONFORMANCE_PROXIES ("upstream ours"), CONFORMANCE_MODES ("iptables nftables"),
# CONFORMANCE_FOCUS / CONFORMANCE_SKIP (ginkgo regexps, default below), CONFORMANCE_SUBSET=ci
# (the Service [Conformance] specs only, what .ci/run runs), CONFORMANCE_NODES (2: a second
# kubelet and kube-proxy in their own namespace, so the specs that need two nodes run; 1: the
# control-plane node only).
#
# Exit codes: 0 all selected specs passed; 1 a spec failed or the cluster did not work;
# 3 the machine lacks something this script cannot install (no apt, no cgroup controllers):
# .ci/run reports that loudly and does not fail on it.
#
# Nothing here reaches a registry or the internet. Upstream's binaries and e2e.test are built
# from the fixture module test/apiserver (the one place k8s.io/kubernetes may appear; the
# upstream sources are in the Go module cache), our cluster tools from test/conformance,
# which does not depend on k8s.io/kubernetes; every image the
# specs name is assembled locally (test/conformance/ociimage) and imported into the cluster's
# own containerd. The cluster runs in the network namespaces "kpc" (control plane and the first
# node) and "kpc2" (the second node), joined by one veth pair: the host's network, routes and
# rules are never touched, and no packet of the tests can leave the machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=v1.37.2
cache=${KUBE_PROXY_CONFORMANCE_CACHE:-/var/cache/kube-proxy-conformance}/$version
state=${KUBE_PROXY_CONFORMANCE_STATE:-/var/lib/kube-proxy-conformance}
rundir=/run/kube-proxy-conformance

# Addresses: 198.18.0.0/15 is the benchmarking range (RFC 2544), never routed anywhere.
# Node i (0-based) is named node_names[i], has node_ips[i] on the link between the node
# namespaces, runs in network namespace node_netns[i] and gives its pods pod_cidrs[i]. The
# control plane, the cluster DNS and the test runner live on node 0.
nodes=${CONFORMANCE_NODES:-2}
node_names=(kpc-node kpc-node2)
node_ips=(198.18.0.1 198.18.0.2)
node_netns=(kpc kpc2)
pod_cidrs=(198.18.64.0/24 198.18.65.0/24)
pod_gws=(198.18.64.1 198.18.65.1)
cluster_cidr=198.18.64.0/23 # every node's pod CIDR: kube-proxy's --cluster-cidr
# On a running cluster (run, report, down) the node count is the one up recorded.
if [ -z "${CONFORMANCE_NODES:-}" ] && [ -f "$rundir/nodes" ]; then nodes=$(cat "$rundir/nodes"); fi
case $nodes in 1|2) ;; *) echo "CONFORMANCE_NODES=$nodes: 1 or 2" >&2; exit 2 ;; esac
node_name=${node_names[0]}
node_ip=${node_ips[0]}
netns=${node_netns[0]}
nsexec=(nsenter --net=/run/netns/$netns --)
svc_cidr=198.19.0.0/16
svc_ip=198.19.0.1
# Cluster DNS (kpctl dns, test/conformance/clusterdns) listens on the node's address, not
# behind a Service, so that name resolution does not depend on the kube-proxy under test.
dns_ip=$node_ip

# Image references exactly as k8s.io/kubernetes@v1.37.2/test/utils/image names them.
img_agnhost=registry.k8s.io/e2e-test-images/agnhost:2.66.1
img_busybox=registry.k8s.io/e2e-test-images/busybox:1.37.0-2
img_pause=registry.k8s.io/pause:3.10.2
img_nginx=registry.k8s.io/e2e-test-images/nginx:1.27.0-2
img_regression=registry.k8s.io/e2e-test-images/regression-issue-74839:1.5
img_iptables=registry.k8s.io/build-image/distroless-iptables:v0.9.9

focus_default='\[sig-network\] (Services|EndpointSlice|EndpointSliceMirroring|Conntrack|KubeProxy|Networking)'
# Each skip with its reason; docs/conformance.md prints this list.
skips=(
  '\[Disruptive\]|restarts or kills cluster components over SSH; this host-process cluster has no SSH'
  'LoadBalancer|needs a cloud provider to provision load balancers'
  '\[Feature:Networking-IPv6\]|\[Feature:IPv6DualStack\]|single-stack IPv4 cluster'
  '\[sig-network\] DNS|the DNS specs test CoreDNS itself; this cluster serves Service records only (kpctl dns)'
  'Internet connection|contacts addresses on the internet; this cluster has no route out'
  '\[Feature:SCTPConnectivity\]|SCTP module not loaded on this kernel'
  '\[Feature:ServiceCIDRs\]|alpha/beta feature gate not enabled'
  'should be able to switch session affinity for LoadBalancer|cloud load balancer'
  '\[Feature:ProxyTerminatingEndpoints\]|feature-gated in upstream e2e'
  '\[Slow\]|slow specs (over 5 minutes each) excluded to fit the time budget'
  '\[Feature:|other feature-gated specs not enabled on this cluster'
  'Networking IPerf|performance measurement, needs two nodes'
)
skip_regexp() {
  local s="" e
  # The reason after the last "|" is documentation; the regexp is what comes before.
  for e in "${skips[@]}"; do s+="${s:+|}${e%|*}"; done
  printf '%s' "$s"
}

log() { printf '== %s\n' "$*" >&2; }
env_fail() { printf '\n!!! conformance: ENVIRONMENT: %s\n!!! (not a test failure)\n\n' "$*" >&2; exit 3; }

# ---------------------------------------------------------------------------------------------
# build

# go_build runs one go command of the upstream fixture module test/apiserver; a failure to
# download a module (no network, proxy down) is the environment's, not a defect of this
# repository.
# UPSTREAM_GOCACHE, when set, is the build cache for these builds alone: .ci/run shares a
# tmpfs cache with its fixture build, which our own tools below must not use (it starts
# empty, and they would compile our whole tree into it again).
go_build() {
  local out rc=0
  out=$(cd "$root/test/apiserver" && GOCACHE=${UPSTREAM_GOCACHE:-$(go env GOCACHE)} CGO_ENABLED=0 "$@" 2>&1) || rc=$?
  [ -n "$out" ] && printf '%s\n' "$out" >&2
  if [ $rc -ne 0 ]; then
    if grep -qE 'dial tcp|no such host|i/o timeout|TLS handshake|connection refused' <<<"$out"; then
      env_fail "downloading Go modules failed: $(grep -m1 -E 'dial tcp|no such host|i/o timeout|TLS handshake|connection refused' <<<"$out")"
    fi
    return $rc
  fi
}

build() {
  mkdir -p "$cache"
  local bins=(kube-controller-manager kube-scheduler kubelet kube-proxy kubectl agnhost regression-issue-74839 ginkgo e2e.test)
  local missing=0 b
  for b in "${bins[@]}"; do [ -x "$cache/$b" ] || missing=1; done
  if [ $missing = 1 ]; then
    exec 8>"$cache/.build.lock"
    flock 8
    local v=k8s.io/component-base/version
    local ld="-s -w -X $v.gitVersion=$version -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean -X $v.buildDate=2026-01-01T00:00:00Z"
    local start=$SECONDS
    if [ ! -x "$cache/e2e.test" ]; then
      log "building e2e.test (upstream [sig-network] specs; cold ~15 min on 2 cores)"
      go_build go test -c -tags conformance -trimpath -ldflags "$ld" -o "$cache/e2e.test.tmp" ./e2e
      mv "$cache/e2e.test.tmp" "$cache/e2e.test"
    fi
    local pkgs=()
    for b in "${bins[@]}"; do
      [ -x "$cache/$b" ] && continue
      case $b in
        e2e.test) ;;
        agnhost|regression-issue-74839) pkgs+=("k8s.io/kubernetes/test/images/$b") ;;
        ginkgo) pkgs+=(github.com/onsi/ginkgo/v2/ginkgo) ;;
        *) pkgs+=("k8s.io/kubernetes/cmd/$b") ;;
      esac
    done
    if [ ${#pkgs[@]} -gt 0 ]; then
      log "building ${pkgs[*]}"
      local tmp
      tmp=$(mktemp -d "$cache/.build.XXXXXX")
      go_build go build -trimpath -ldflags "$ld" -o "$tmp/" "${pkgs[@]}"
      mv "$tmp"/* "$cache/"
      rmdir "$tmp"
    fi
    log "conformance binaries built in $((SECONDS - start)) s"
    flock -u 8
  fi
  # kube-apiserver and etcd are the integration tests' fixtures (built once for both).
  local fixtures
  fixtures=$("$root/hack/build-fixtures.sh" | tail -1)
  apiserver_bin="$fixtures/kube-apiserver-$version"
  etcd_bin=$(ls "$fixtures"/etcd-v* | head -1)
  # Our tools and our kube-proxy are small and follow the checkout: always rebuilt (seconds).
  mkdir -p "$state/bin"
  (cd "$root/test/conformance" && CGO_ENABLED=0 go build -o "$state/bin/" ./cmd/kpctl ./cmd/pause ./cmd/runc-clamp)
  (cd "$root" && CGO_ENABLED=0 go build -o "$state/bin/kube-proxy-ours" ./cmd/kube-proxy)
}

# ---------------------------------------------------------------------------------------------
# host packages

deps() {
  local need=()
  command -v containerd >/dev/null || need+=(containerd)
  command -v runc >/dev/null || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  [ -x /bin/busybox ] && /bin/busybox --list | grep -qx nc || need+=(busybox-static)
  [ -x /bin/nc.openbsd ] || need+=(netcat-openbsd)
  [ -x /bin/dash ] || need+=(dash)
  command -v wget >/dev/null || need+=(wget)
  command -v curl >/dev/null || need+=(curl)
  command -v conntrack >/dev/null || need+=(conntrack)
  command -v iptables >/dev/null || need+=(iptables)
  command -v nft >/dev/null || need+=(nftables)
  command -v nsenter >/dev/null || need+=(util-linux)
  if [ ${#need[@]} -gt 0 ]; then
    log "installing ${need[*]}"
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } ||
      env_fail "apt-get install ${need[*]} failed"
  fi
  local c
  for c in cpu cpuacct cpuset memory pids; do
    grep -qw "$c" /proc/cgroups || env_fail "cgroup controller $c missing (the kubelet needs it)"
  done
}

# ---------------------------------------------------------------------------------------------
# processes: each daemon runs in its node's network namespace, its PID in $rundir/NAME.pid.
# Per-node daemons are named NAME-NODE (containerd-kpc-node2, kubelet-kpc-node, ...).

start_in() { # node-index name cmd...
  local i=$1 name=$2; shift 2
  nsenter --net="/run/netns/${node_netns[$i]}" -- setsid "$@" >"$state/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$rundir/$name.pid"
}
start() { start_in 0 "$@"; } # name cmd...: a control-plane daemon, on node 0
stop() { # name
  local f="$rundir/$1.pid" pid i
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  kill "$pid" 2>/dev/null || true
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}
wait_for() { # what seconds cmd...
  local what=$1 secs=$2 i; shift 2
  for i in $(seq "$secs"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  log "timed out after ${secs}s waiting for $what"
  return 1
}
kubectl() { "${nsexec[@]}" "$cache/kubectl" --kubeconfig "$state/pki/admin.conf" "$@"; }
nsx() { local i=$1; shift; nsenter --net="/run/netns/${node_netns[$i]}" -- "$@"; } # node-index cmd...
ndir() { echo "$state/nodes/${node_names[$1]}"; } # a node's persistent state
nrun() { echo "$rundir/${node_names[$1]}"; }      # a node's runtime state (sockets, runc)
sock() { echo "$(nrun "$1")/containerd.sock"; }
ctr_() { local i=$1; shift; ctr -a "$(sock "$i")" -n k8s.io "$@"; } # node-index args...
node_seq() { seq 0 $((nodes - 1)); }
# Each node's cgroups hang below /<node name> in every controller (the kubelet's
# cgroupRoot): the two kubelets never see, nor garbage-collect, each other's pods, and down
# removes exactly what the cluster created.
cgroup_dirs() { # node-index: the node's cgroupRoot in every mounted v1 controller
  local c
  # cgroup v2 alone: one hierarchy, its root at /sys/fs/cgroup.
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "/sys/fs/cgroup/${node_names[$1]}"
    return 0
  fi
  for c in /sys/fs/cgroup/*/; do
    [ -f "$c/cgroup.procs" ] && echo "${c%/}/${node_names[$1]}"
  done
  return 0
}

# ---------------------------------------------------------------------------------------------
# cluster

network() {
  local i
  for i in $(node_seq); do
    ip netns add "${node_netns[$i]}" 2>/dev/null || true
    nsx "$i" ip link set lo up
  done
  # Node 0's address sits on one end of a veth pair (this kernel has no dummy driver). With
  # two nodes the other end is node 1's interface, in node 1's namespace: the pair is the
  # nodes' only link. With one node both ends stay in node 0's namespace. Each node's
  # default route points into the pair, on-link, so an address no node owns is simply not
  # answered: address detection in the components is happy and nothing can leave.
  "${nsexec[@]}" ip link add kpc0 type veth peer name kpc1 2>/dev/null || true
  "${nsexec[@]}" ip addr replace "${node_ips[0]}/24" dev kpc0
  "${nsexec[@]}" ip link set kpc0 up
  if [ "$nodes" = 2 ]; then
    "${nsexec[@]}" ip link set kpc1 netns "${node_netns[1]}" 2>/dev/null || true
    nsx 1 ip addr replace "${node_ips[1]}/24" dev kpc1
    nsx 1 ip link set kpc1 up
    nsx 1 ip route replace default dev kpc1
    # Each node reaches the other's pods through the other node (what a cloud's routes or
    # a CNI's host-gw mode do).
    nsx 0 ip route replace "${pod_cidrs[1]}" via "${node_ips[1]}"
    nsx 1 ip route replace "${pod_cidrs[0]}" via "${node_ips[0]}"
  else
    "${nsexec[@]}" ip link set kpc1 up
  fi
  "${nsexec[@]}" ip route replace default dev kpc0
  for i in $(node_seq); do
    nsx "$i" sysctl -qw net.ipv4.ip_forward=1
    # Make the node's netfilter see bridged traffic (kube-proxy needs it for hairpin).
    nsx "$i" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  done
}

containerd_up() { # node-index
  local i=$1 d r
  d=$(ndir "$i")
  r=$(nrun "$i")
  mkdir -p "$r" "$d/containerd" "$d/cni/net.d"
  cat >"$d/cni/net.d/10-kpc.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "kpc", "plugins": [
  {"type": "bridge", "bridge": "kpcbr0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "${pod_cidrs[$i]}", "gateway": "${pod_gws[$i]}"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$d/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
  cat >"$d/containerd.toml" <<EOF
version = 2
root = "$d/containerd"
state = "$r/state"
[grpc]
  address = "$(sock "$i")"
[ttrpc]
  address = "$(sock "$i").ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$img_pause"
  enable_selinux = false
  # Where root may not lower oom_score_adj this keeps containers at containerd's own score;
  # sandboxes are clamped by runc-clamp (test/conformance/cmd/runc-clamp).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
      BinaryName = "$state/bin/runc-clamp"
      # runc's state under this node's run directory, not the shared /run/containerd/runc.
      Root = "$r/runc"
EOF
  start_in "$i" "containerd-${node_names[$i]}" containerd --config "$d/containerd.toml"
  wait_for "containerd of ${node_names[$i]}" 30 ctr_ "$i" version ||
    env_fail "containerd did not start: $(tail -5 "$state/logs/containerd-${node_names[$i]}.log")"
}

images() {
  local d="$state/images" bin="$state/bin"
  mkdir -p "$d"
  # pause: written here (test/conformance/cmd/pause).
  "$bin/kpctl" image -o "$d/pause.tar" -tag $img_pause -file "$bin/pause:/pause" -entrypoint /pause
  # busybox: Debian's static busybox with its applets.
  "$bin/kpctl" image -o "$d/busybox.tar" -tag $img_busybox -busybox /bin/busybox -dir /tmp -cmd sh \
    -text "/etc/passwd=root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
" -text "/etc/group=root:x:0:
nogroup:x:65534:
"
  # agnhost: the binary from k8s.io/kubernetes@$version, and the tools the specs exec in it
  # (coreutils-like tools from busybox; curl and OpenBSD nc, as upstream's Alpine image has).
  # /bin/sh is dash, not busybox: busybox's shell runs its own applets before PATH, and its
  # nc lacks the -v, -u, -t and -z the specs pass. wget is GNU wget: the static busybox's
  # wget segfaults in glibc's resolver when run as its own process.
  "$bin/kpctl" image -o "$d/agnhost.tar" -tag $img_agnhost -busybox /bin/busybox -dir /tmp -dir /uploads \
    -file "$cache/agnhost:/agnhost" -link /agnhost-2=agnhost \
    -bin /usr/bin/curl -bin /bin/nc.openbsd -link /usr/bin/nc=/bin/nc.openbsd \
    -bin /bin/dash -link /bin/sh=dash -bin /usr/bin/wget \
    -text "/etc/passwd=root:x:0:0:root:/root:/bin/sh
" -entrypoint /agnhost -cmd pause
  # nginx: the specs that name it only need a web server on port 80 (EndpointSlice contents);
  # busybox httpd stands in for it.
  "$bin/kpctl" image -o "$d/nginx.tar" -tag $img_nginx -busybox /bin/busybox -dir /tmp \
    -text "/usr/share/nginx/html/index.html=ok
" -entrypoint /bin/httpd -cmd -f,-p,80,-h,/usr/share/nginx/html
  "$bin/kpctl" image -o "$d/regression.tar" -tag $img_regression \
    -file "$cache/regression-issue-74839:/regression-issue-74839" -entrypoint /regression-issue-74839
  # distroless-iptables: the host-network pod in which "should set TCP CLOSE_WAIT timeout"
  # reads the node's conntrack table (/proc/net/nf_conntrack, else the conntrack tool).
  "$bin/kpctl" image -o "$d/distroless-iptables.tar" -tag $img_iptables -busybox /bin/busybox -dir /tmp \
    -bin /usr/sbin/conntrack -cmd sh
  local t i
  for i in $(node_seq); do
    for t in "$d"/*.tar; do
      ctr_ "$i" images import --no-unpack=false "$t" >/dev/null
    done
  done
}

pki_and_configs() {
  local more=() i d base
  for i in $(seq 1 $((nodes - 1))); do more+=(-more-node "${node_names[$i]}=${node_ips[$i]}"); done
  "$state/bin/kpctl" pki -dir "$state/pki" -node $node_name -node-ip $node_ip -service-ip $svc_ip -server "https://$node_ip:6443" "${more[@]}"
  printf 'nameserver %s\n' "$dns_ip" >"$state/resolv.conf"
  for i in $(node_seq); do
    d=$(ndir "$i")
    mkdir -p "$d"
    # Node 0 has pki's kubelet.{crt,key,conf}; the others kubelet-NAME.{crt,key,conf}.
    base=kubelet
    [ "$i" = 0 ] || base=kubelet-${node_names[$i]}
    # podLogsDir: the default /var/log/pods is shared by every kubelet of the machine, and
    # each would garbage-collect the other's pod logs as orphans.
    cat >"$d/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /${node_names[$i]}
containerRuntimeEndpoint: unix://$(sock "$i")
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $state/pki/$base.crt
tlsPrivateKeyFile: $state/pki/$base.key
clusterDomain: cluster.local
clusterDNS: [$dns_ip]
resolvConf: $state/resolv.conf
podLogsDir: $d/pod-logs
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
podCIDR: ${pod_cidrs[$i]}
maxPods: 110
EOF
    echo "$state/pki/$base.conf" >"$d/kubeconfig-path"
  done
}

kubelet_up() { # node-index
  local i=$1 d c
  d=$(ndir "$i")
  # The kubelet checks that its cgroupRoot exists in every controller. A new cpuset cgroup
  # starts with no CPUs and no memory nodes: give it its parent's, or nothing below can run.
  while read -r c; do
    mkdir -p "$c"
    if [ -f "$c/cpuset.cpus" ] && [ -f "${c%/*}/cpuset.cpus" ]; then
      cat "${c%/*}/cpuset.cpus" >"$c/cpuset.cpus"
      cat "${c%/*}/cpuset.mems" >"$c/cpuset.mems"
    fi
  done < <(cgroup_dirs "$i")
  mkdir -p "$d/kubelet" "$d/pod-logs"
  start_in "$i" "kubelet-${node_names[$i]}" "$cache/kubelet" --config "$d/kubelet.yaml" --kubeconfig "$(cat "$d/kubeconfig-path")" \
    --hostname-override "${node_names[$i]}" --node-ip "${node_ips[$i]}" --root-dir "$d/kubelet" --v=1
}

control_plane() {
  local p="$state/pki" i
  mkdir -p "$state/etcd"
  start etcd "$etcd_bin" --data-dir "$state/etcd" --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 --quota-backend-bytes 2147483648
  start kube-apiserver "$apiserver_bin" --etcd-servers http://127.0.0.1:2379 \
    --advertise-address $node_ip --bind-address 0.0.0.0 --secure-port 6443 \
    --service-cluster-ip-range $svc_cidr --allow-privileged=true \
    --client-ca-file "$p/ca.crt" --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
    --kubelet-client-certificate "$p/apiserver.crt" --kubelet-client-key "$p/apiserver.key" \
    --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --kubelet-preferred-address-types InternalIP \
    --profiling=false --v=1
  wait_for kube-apiserver 120 kubectl get --raw /readyz || { tail -20 "$state/logs/kube-apiserver.log"; return 1; }
  start kube-controller-manager "$cache/kube-controller-manager" --kubeconfig "$p/controller-manager.conf" \
    --authentication-kubeconfig "$p/controller-manager.conf" --authorization-kubeconfig "$p/controller-manager.conf" \
    --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" --use-service-account-credentials=true \
    --cluster-signing-cert-file "$p/ca.crt" --cluster-signing-key-file "$p/ca.key" \
    --leader-elect=false --bind-address 127.0.0.1 --v=1
  start kube-scheduler "$cache/kube-scheduler" --kubeconfig "$p/scheduler.conf" \
    --authentication-kubeconfig "$p/scheduler.conf" --authorization-kubeconfig "$p/scheduler.conf" \
    --leader-elect=false --bind-address 127.0.0.1 --v=1
  start dns "$state/bin/kpctl" dns -kubeconfig "$p/admin.conf" -listen $dns_ip:53 -domain cluster.local
  for i in $(node_seq); do kubelet_up "$i"; done
  # kube-proxy's identity, as kubeadm sets it: a service account bound to system:node-proxier.
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: kube-proxy, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: "kubeadm:node-proxier"}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "system:node-proxier"}
subjects: [{kind: ServiceAccount, name: kube-proxy, namespace: kube-system}]
EOF
  local token ca
  token=$(kubectl -n kube-system create token kube-proxy --duration 48h)
  ca=$(base64 -w0 <"$p/ca.crt")
  cat >"$state/kube-proxy.conf" <<EOF
{"apiVersion": "v1", "kind": "Config",
 "clusters": [{"name": "conformance", "cluster": {"server": "https://$node_ip:6443", "certificate-authority-data": "$ca"}}],
 "users": [{"name": "kube-proxy", "user": {"token": "$token"}}],
 "contexts": [{"name": "conformance", "context": {"cluster": "conformance", "user": "kube-proxy"}}],
 "current-context": "conformance"}
EOF
  chmod 600 "$state/kube-proxy.conf"
  for i in $(node_seq); do
    wait_for "node ${node_names[$i]} Ready" 180 kubectl wait --for=condition=Ready "node/${node_names[$i]}" --timeout=1s ||
      { tail -30 "$state/logs/kubelet-${node_names[$i]}.log"; return 1; }
  done
}

up() {
  deps
  build
  down quiet
  mkdir -p "$rundir" "$state/logs"
  # How many nodes this cluster has: down reads it, so it tears down what up made even when
  # CONFORMANCE_NODES differs between the two calls.
  echo "$nodes" >"$rundir/nodes"
  network
  local i
  for i in $(node_seq); do containerd_up "$i"; done
  images
  pki_and_configs
  control_plane
  log "cluster up: $nodes node(s) Ready: ${node_names[*]:0:$nodes}"
}

# node_cni_netns prints the network namespaces (/var/run/netns/cni-...) of one node's pod
# sandboxes, read from each sandbox container's OCI spec, and removes those containers' CNI
# result cache (/var/lib/cni/results). containerd names these namespaces cni-<random> and
# removes one only when the kubelet stops its pod sandbox, which a teardown does not wait
# for; deleting every cni-* would take other runtimes' namespaces too.
node_cni_netns() { # node-index
  local i=$1 c
  for c in $(ctr_ "$i" containers list -q 2>/dev/null); do
    ctr_ "$i" containers info "$c" 2>/dev/null | grep -oE '"/(var/)?run/netns/cni-[0-9a-f-]+"' | tr -d '"' || true
    rm -f /var/lib/cni/results/kpc-"$c"-* /var/lib/cni/results/cni-loopback-"$c"-*
  done
}

down() {
  [ "${1:-}" = quiet ] || log "tearing the cluster down"
  # Tear down as many nodes as up made (recorded), else as many as configured; local, so
  # that up's own count survives the down it starts with.
  local nodes=$nodes
  if [ -f "$rundir/nodes" ]; then nodes=$(cat "$rundir/nodes"); fi
  local i n c pid cni_netns=()
  for i in $(node_seq); do stop "kube-proxy-${node_names[$i]}"; stop "kubelet-${node_names[$i]}"; done
  for n in dns kube-scheduler kube-controller-manager; do stop $n; done
  for i in $(node_seq); do
    [ -S "$(sock "$i")" ] || continue
    mapfile -t -O ${#cni_netns[@]} cni_netns < <(node_cni_netns "$i" | sort -u)
    for c in $(ctr_ "$i" tasks list -q 2>/dev/null); do ctr_ "$i" tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
    sleep 1
    for c in $(ctr_ "$i" tasks list -q 2>/dev/null); do ctr_ "$i" tasks delete -f "$c" >/dev/null 2>&1 || true; done
    for c in $(ctr_ "$i" containers list -q 2>/dev/null); do ctr_ "$i" containers delete "$c" >/dev/null 2>&1 || true; done
  done
  for i in $(node_seq); do stop "containerd-${node_names[$i]}"; done
  stop kube-apiserver
  stop etcd
  # A shim whose task could not be deleted outlives containerd: it is found by this cluster's
  # socket path on its command line, and ended by PID.
  for pid in $(cluster_pids); do kill -9 "$pid" 2>/dev/null || true; done
  # Volumes the kubelets mounted, the sandboxes' /dev/shm (containerd's root) and the
  # containers' root filesystems (containerd's state); then the sandboxes' network
  # namespaces and the nodes'.
  findmnt -rn -o TARGET | grep -E "^($state/nodes|$rundir)/" | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  for n in "${cni_netns[@]}"; do
    ip netns delete "${n##*/}" 2>/dev/null || { umount -l "$n" 2>/dev/null; rm -f "$n"; } || true
  done
  for i in 0 1; do ip netns delete "${node_netns[$i]}" 2>/dev/null || true; done
  # The nodes' cgroups, deepest first (their processes are gone).
  for i in 0 1; do
    while read -r c; do
      if [ -d "$c" ]; then find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
    done < <(cgroup_dirs "$i")
  done
  rm -rf "$state/etcd" "$state/nodes" "$rundir"
  # containerd's shims and ctr keep sockets and FIFOs in /run/containerd whatever the
  # configured state: remove those directories, only when empty and no system containerd runs.
  if [ ! -S /run/containerd/containerd.sock ]; then
    rmdir /run/containerd/s /run/containerd/fifo /run/containerd/runc/k8s.io /run/containerd/runc /run/containerd 2>/dev/null || true
  fi
  local left
  left=$(leftovers "${cni_netns[@]}")
  if [ -n "$left" ]; then
    log "down left behind:"
    printf '   %s\n' "$left" >&2
    return 1
  fi
}

# cluster_pids prints the processes whose command line names a path under the given
# directories (default: the run directory, where containerd's shims have their socket),
# each command line read by its own grep so that no grep finds itself.
cluster_pids() { # dirs...
  local f pid d
  [ $# -gt 0 ] || set -- "$rundir"
  for f in /proc/[0-9]*/cmdline; do
    pid=${f#/proc/}
    pid=${pid%/cmdline}
    if [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ]; then continue; fi
    for d in "$@"; do
      if grep -qaF "$d/" "$f" 2>/dev/null; then echo "$pid"; break; fi
    done
  done
  return 0
}

# leftovers prints what a torn-down cluster would have left: its network namespaces (the
# nodes' and the given sandbox ones), mounts under its directories, processes naming its
# run directory, the nodes' cgroups, and the run directory itself.
leftovers() { # sandbox-netns-paths...
  local n i c
  for n in "${node_netns[@]}" "${@##*/}"; do
    [ -e "/run/netns/$n" ] && echo "network namespace $n"
  done
  findmnt -rn -o TARGET | { grep -E "^($state/nodes|$rundir)(/|$)" || true; } | sed 's/^/mount /'
  # The daemons name $state (their configs), the shims $rundir.
  cluster_pids "$rundir" "$state" | sed 's/^/process /'
  for i in 0 1; do
    while read -r c; do [ -d "$c" ] && echo "cgroup $c"; done < <(cgroup_dirs "$i")
  done
  [ -e "$rundir" ] && echo "directory $rundir"
  return 0
}

# ---------------------------------------------------------------------------------------------
# kube-proxy and the suite

proxy_bin() {
  case $1 in
    upstream) echo "$cache/kube-proxy" ;;
    ours|broken) echo "$state/bin/kube-proxy-ours" ;;
    *) echo "unknown proxy $1 (ours|upstream|broken)" >&2; return 1 ;;
  esac
}

# Every node runs the kube-proxy under test, in the same mode, as a real cluster does: a
# Service reached through node 1's address or from node 1's pods is node 1's kube-proxy's work.
proxy_start() { # proxy mode
  local bin args i
  bin=$(proxy_bin "$1")
  for i in $(node_seq); do
    args=(--kubeconfig "$state/kube-proxy.conf" --hostname-override "${node_names[$i]}" --proxy-mode "$2"
      --cluster-cidr $cluster_cidr --conntrack-max-per-core 0 --v 2)
    if [ "$1" = broken ]; then
      # The deliberately broken proxy of the "can the check fail" run: a cluster CIDR that
      # matches no pod, so traffic the specs expect to be masqueraded or treated as local is not.
      args=(--kubeconfig "$state/kube-proxy.conf" --hostname-override "${node_names[$i]}" --proxy-mode "$2"
        --cluster-cidr 203.0.113.0/24 --masquerade-all=false --nodeport-addresses 127.0.0.0/8 --conntrack-max-per-core 0 --v 2)
    fi
    start_in "$i" "kube-proxy-${node_names[$i]}" "$bin" "${args[@]}"
  done
  for i in $(node_seq); do
    wait_for "kube-proxy healthz on ${node_names[$i]}" 60 nsx "$i" curl -fsS http://127.0.0.1:10256/healthz ||
      { tail -20 "$state/logs/kube-proxy-${node_names[$i]}.log"; return 1; }
  done
}

proxy_stop() { # proxy mode
  local i
  for i in $(node_seq); do
    stop "kube-proxy-${node_names[$i]}"
    # Both binaries remove what they programmed; run both cleanups so the next run starts clean.
    nsx "$i" "$(proxy_bin "$1")" --cleanup >/dev/null 2>&1 || true
    nsx "$i" "$cache/kube-proxy" --cleanup >/dev/null 2>&1 || true
  done
}

suite() { # name
  local out="$state/results/$1" focus skip
  rm -rf "$out"; mkdir -p "$out"
  focus=${CONFORMANCE_FOCUS:-$focus_default}
  skip=${CONFORMANCE_SKIP:-$(skip_regexp)}
  if [ "${CONFORMANCE_SUBSET:-}" = ci ]; then
    focus='\[sig-network\] Services .*\[Conformance\]'
  fi
  local start=$SECONDS rc=0
  # ginkgo's CLI runs the precompiled suite in parallel processes, [Serial] specs last, as
  # upstream's CI does; most of a spec's time is spent waiting for pods.
  # --num-nodes: without it only ginkgo's first process counts the nodes; a spec that calls
  # SkipUnlessNodeCountIsAtLeast(2) on any other process skips itself ("not -1").
  "${nsexec[@]}" "$cache/ginkgo" --procs "${CONFORMANCE_PROCS:-4}" --timeout 4h --no-color \
    --focus "$focus" --skip "$skip" --output-dir "$out" --json-report report.json \
    "$cache/e2e.test" -- --provider=local --kubeconfig "$state/pki/admin.conf" \
    --kubectl-path "$cache/kubectl" --report-dir "$out" \
    --dump-logs-on-failure=false --allowed-not-ready-nodes 0 --num-nodes "$nodes" \
    >"$out/e2e.log" 2>&1 || rc=$?
  echo $((SECONDS - start)) >"$out/seconds"
  grep -E '^(Ran|FAIL|SUCCESS|PASS)' "$out/e2e.log" | tail -3 >&2 || true
  return $rc
}

run_one() { # proxy mode name
  local name=${3:-$1-$2} rc=0
  log "kube-proxy $1, mode $2 -> $state/results/$name"
  printf '%s\n' "$1" "$2" "$(proxy_bin "$1")" >"$rundir/current"
  proxy_start "$1" "$2" || return 1
  suite "$name" || rc=$?
  local i
  for i in $(node_seq); do
    cp "$state/logs/kube-proxy-${node_names[$i]}.log" "$state/results/$name/" 2>/dev/null || true
  done
  proxy_stop "$1" "$2"
  return $rc
}

report() {
  printf '%s\n' "${skips[@]}" >"$state/skips.txt"
  "$state/bin/kpctl" report -focus "${CONFORMANCE_FOCUS:-$focus_default}" -skips "$state/skips.txt" "$@"
}

all() {
  local t0=$SECONDS rc=0 p m dirs=()
  up
  for m in ${CONFORMANCE_MODES:-iptables nftables}; do
    for p in ${CONFORMANCE_PROXIES:-upstream ours}; do
      run_one "$p" "$m" || rc=1
      dirs+=("$state/results/$p-$m")
    done
  done
  down
  report "${dirs[@]}" >"$state/results/table.md" || true
  log "results: $state/results/table.md (total $((SECONDS - t0)) s)"
  return $rc
}

trap 'rc=$?; if [ $rc -ne 0 ] && [ $rc -ne 3 ] && [ -d "$state/logs" ]; then log "logs in $state/logs"; fi' EXIT

cmd=${1:-all}
shift || true
case $cmd in
  all) all ;;
  build) build ;;
  up) up ;;
  down) down ;;
  run) build >/dev/null; run_one "$@" ;;
  report) report "$@" ;;
  skips) printf '%s\n' "${skips[@]}" ;;
  step) "$@" ;; # one internal step, for debugging: deps, network, containerd_up, images, ...
  *) echo "usage: $0 [all|build|up|down|run PROXY MODE [NAME]|report DIR...|skips]" >&2; exit 2 ;;
esac
