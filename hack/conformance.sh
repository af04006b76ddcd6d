#!/usr/bin/env bash
# Runs upstream Kubernetes' own [sig-network] e2e specs (Services, EndpointSlice, Conntrack,
# KubeProxy, and the Networking specs that go through Services) against a real one-node
# cluster built on this machine, once with upstream's kube-proxy v1.37.2 and once with ours,
# in iptables and in nftables mode, and writes a per-spec table.
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
# (the Service [Conformance] specs only, what .ci/run runs).
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
# own containerd. The whole cluster runs in the network namespace "kpc": the host's network,
# routes and rules are never touched, and no packet of the tests can leave the machine.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=v1.37.2
cache=${KUBE_PROXY_CONFORMANCE_CACHE:-/var/cache/kube-proxy-conformance}/$version
state=${KUBE_PROXY_CONFORMANCE_STATE:-/var/lib/kube-proxy-conformance}
rundir=/run/kube-proxy-conformance
netns=kpc
nsexec=(nsenter --net=/run/netns/$netns --)

# Addresses: 198.18.0.0/15 is the benchmarking range (RFC 2544), never routed anywhere.
node_name=kpc-node
node_ip=198.18.0.1
pod_cidr=198.18.64.0/24
pod_gw=198.18.64.1
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

focus_default='\[sig-network\] (Services|EndpointSlice|EndpointSliceMirroring|Conntrack|KubeProxy|Networking)'
# Each skip with its reason; docs/conformance.md prints this list.
skips=(
  '\[Disruptive\]|restarts or kills cluster components over SSH; one host-process cluster has no SSH'
  'LoadBalancer|needs a cloud provider to provision load balancers'
  '\[Feature:Networking-IPv6\]|\[Feature:IPv6DualStack\]|single-stack IPv4 cluster'
  '\[sig-network\] DNS|the DNS specs test CoreDNS itself; this cluster serves Service records only (kpctl dns)'
  'Internet connection|contacts addresses on the internet; this cluster has no route out'
  '\[Feature:SCTPConnectivity\]|SCTP module not loaded on this kernel'
  'should be able to preserve UDP traffic when server pod cycles for a NodePort service|needs two nodes (client and server on different nodes)'
  '\[Feature:ServiceCIDRs\]|alpha/beta feature gate not enabled'
  'should be able to switch session affinity for LoadBalancer|cloud load balancer'
  '\[Feature:ProxyTerminatingEndpoints\]|feature-gated in upstream e2e'
  'should set TCP CLOSE_WAIT timeout|needs two nodes (nodes.Items[1])'
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
go_build() {
  local out rc=0
  out=$(cd "$root/test/apiserver" && CGO_ENABLED=0 "$@" 2>&1) || rc=$?
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
# processes: each daemon runs in the kpc network namespace, its PID in $rundir/NAME.pid

start() { # name cmd...
  local name=$1; shift
  "${nsexec[@]}" setsid "$@" >"$state/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$rundir/$name.pid"
}
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
ctr_() { ctr -a "$rundir/containerd/containerd.sock" -n k8s.io "$@"; }

# ---------------------------------------------------------------------------------------------
# cluster

network() {
  ip netns add $netns 2>/dev/null || true
  "${nsexec[@]}" ip link set lo up
  # The node's address sits on one end of a veth pair whose both ends are in the namespace
  # (this kernel has no dummy driver). A default route keeps address detection in the
  # components happy; it points into the pair, so nothing can leave the namespace.
  "${nsexec[@]}" ip link add kpc0 type veth peer name kpc1 2>/dev/null || true
  "${nsexec[@]}" ip addr replace $node_ip/32 dev kpc0
  "${nsexec[@]}" ip link set kpc0 up
  "${nsexec[@]}" ip link set kpc1 up
  "${nsexec[@]}" ip route replace default dev kpc0
  "${nsexec[@]}" sysctl -qw net.ipv4.ip_forward=1
  # Make the node's netfilter see bridged traffic (kube-proxy needs it for hairpin).
  "${nsexec[@]}" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
}

containerd_up() {
  mkdir -p "$rundir/containerd" "$state/containerd" "$state/cni/net.d"
  cat >"$state/cni/net.d/10-kpc.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "kpc", "plugins": [
  {"type": "bridge", "bridge": "kpcbr0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$pod_cidr", "gateway": "$pod_gw"}]],
            "routes": [{"dst": "0.0.0.0/0"}], "dataDir": "$state/cni/ipam"}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOF
  cat >"$state/containerd.toml" <<EOF
version = 2
root = "$state/containerd"
state = "$rundir/containerd/state"
[grpc]
  address = "$rundir/containerd/containerd.sock"
[ttrpc]
  address = "$rundir/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$img_pause"
  enable_selinux = false
  # Where root may not lower oom_score_adj this keeps containers at containerd's own score;
  # sandboxes are clamped by runc-clamp (test/conformance/cmd/runc-clamp).
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$state/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
      BinaryName = "$state/bin/runc-clamp"
EOF
  start containerd containerd --config "$state/containerd.toml"
  wait_for containerd 30 ctr_ version || env_fail "containerd did not start: $(tail -5 "$state/logs/containerd.log")"
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
  local t
  for t in "$d"/*.tar; do
    ctr_ images import --no-unpack=false "$t" >/dev/null
  done
}

pki_and_configs() {
  "$state/bin/kpctl" pki -dir "$state/pki" -node $node_name -node-ip $node_ip -service-ip $svc_ip -server "https://$node_ip:6443"
  cat >"$state/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$rundir/containerd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $state/pki/kubelet.crt
tlsPrivateKeyFile: $state/pki/kubelet.key
clusterDomain: cluster.local
clusterDNS: [$dns_ip]
resolvConf: $state/resolv.conf
failSwapOn: false
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
podCIDR: $pod_cidr
maxPods: 110
EOF
  printf 'nameserver %s\n' "$dns_ip" >"$state/resolv.conf"
}

control_plane() {
  local p="$state/pki"
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
  mkdir -p "$state/kubelet"
  start kubelet "$cache/kubelet" --config "$state/kubelet.yaml" --kubeconfig "$p/kubelet.conf" \
    --hostname-override $node_name --node-ip $node_ip --root-dir "$state/kubelet" --v=1
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
  wait_for "node $node_name Ready" 180 kubectl wait --for=condition=Ready node/$node_name --timeout=1s ||
    { tail -30 "$state/logs/kubelet.log"; return 1; }
}

up() {
  deps
  build
  down quiet
  mkdir -p "$rundir" "$state/logs"
  network
  containerd_up
  images
  pki_and_configs
  control_plane
  log "cluster up: node $node_name Ready"
}

down() {
  [ "${1:-}" = quiet ] || log "tearing the cluster down"
  for n in kube-proxy kubelet dns kube-scheduler kube-controller-manager; do stop $n; done
  if [ -S "$rundir/containerd/containerd.sock" ]; then
    local c
    for c in $(ctr_ tasks list -q 2>/dev/null); do ctr_ tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
    sleep 1
    for c in $(ctr_ tasks list -q 2>/dev/null); do ctr_ tasks delete -f "$c" >/dev/null 2>&1 || true; done
    for c in $(ctr_ containers list -q 2>/dev/null); do ctr_ containers delete "$c" >/dev/null 2>&1 || true; done
  fi
  stop containerd
  stop kube-apiserver
  stop etcd
  # Volumes the kubelet mounted, then the sandboxes' network namespaces (named cni-* by
  # containerd and listed in its CNI state) and our own.
  if [ -d "$state/kubelet" ]; then
    findmnt -rn -o TARGET | grep -E "^$state/kubelet(/|$)" | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  fi
  findmnt -rn -o TARGET | grep "^$rundir/" | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  ip netns delete $netns 2>/dev/null || true
  rm -rf "$state/etcd" "$state/kubelet" "$state/cni/ipam" "$state/containerd" "$rundir"
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

proxy_start() { # proxy mode
  local bin args
  bin=$(proxy_bin "$1")
  args=(--kubeconfig "$state/kube-proxy.conf" --hostname-override $node_name --proxy-mode "$2"
    --cluster-cidr $pod_cidr --conntrack-max-per-core 0 --v 2)
  if [ "$1" = broken ]; then
    # The deliberately broken proxy of the "can the check fail" run: a cluster CIDR that
    # matches no pod, so traffic the specs expect to be masqueraded or treated as local is not.
    args=(--kubeconfig "$state/kube-proxy.conf" --hostname-override $node_name --proxy-mode "$2"
      --cluster-cidr 203.0.113.0/24 --masquerade-all=false --nodeport-addresses 127.0.0.0/8 --conntrack-max-per-core 0 --v 2)
  fi
  start kube-proxy "$bin" "${args[@]}"
  wait_for "kube-proxy healthz" 60 "${nsexec[@]}" curl -fsS http://127.0.0.1:10256/healthz ||
    { tail -20 "$state/logs/kube-proxy.log"; return 1; }
}

proxy_stop() { # proxy mode
  stop kube-proxy
  # Both binaries remove what they programmed; run both cleanups so the next run starts clean.
  "${nsexec[@]}" "$(proxy_bin "$1")" --cleanup >/dev/null 2>&1 || true
  "${nsexec[@]}" "$cache/kube-proxy" --cleanup >/dev/null 2>&1 || true
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
  "${nsexec[@]}" "$cache/ginkgo" --procs "${CONFORMANCE_PROCS:-4}" --timeout 4h --no-color \
    --focus "$focus" --skip "$skip" --output-dir "$out" --json-report report.json \
    "$cache/e2e.test" -- --provider=local --kubeconfig "$state/pki/admin.conf" \
    --kubectl-path "$cache/kubectl" --report-dir "$out" \
    --dump-logs-on-failure=false --allowed-not-ready-nodes 0 \
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
  cp "$state/logs/kube-proxy.log" "$state/results/$name/kube-proxy.log" 2>/dev/null || true
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
