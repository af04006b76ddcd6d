# Classifies "importer<TAB>imported<TAB>prod|test" lines by the layers of CONTRIBUTING.md and prints
# every violation as "importer -> imported (rule)". Used by hack/verify-imports.sh.

function layer(p) {
	if (p ~ /^k8s\.io\/net-utils(\/|$)/) return "netutils"
	if (p !~ /^k8s\.io\/kube-proxy(\/|$)/) return "external"
	if (p ~ /^k8s\.io\/kube-proxy\/cmd(\/|$)/) return "cmd"
	if (p ~ /^k8s\.io\/kube-proxy\/(test|examples|hack)(\/|$)/) return "free"
	if (p ~ /^k8s\.io\/kube-proxy\/config(\/|$)/) return "configapi"
	if (p ~ /^k8s\.io\/kube-proxy\/pkg\/features(\/|$)/) return "features"
	if (proxier(p) != "") return "proxier"
	if (p ~ /^k8s\.io\/kube-proxy\/pkg\//) return "brain"
	return "free"
}

# The built-in modes, and ebpf (socket load balancing, a backend of the library that runs
# beside one of them). "Backend" means the library's pkg/proxy/backend contract only.
function proxier(p,   m) {
	if (match(p, /^k8s\.io\/kube-proxy\/pkg\/proxy\/(iptables|nftables|ipvs|winkernel|metaproxier|ebpf)(\/|$)/)) {
		m = substr(p, 29)
		sub(/\/.*/, "", m)
		return m
	}
	return ""
}

# The library's layers, bottom up (CONTRIBUTING.md, "The way down"): 1 the brain (trackers,
# caches, config, metrics, health, util, trace, diffstore); 2 what turns its maps into
# something to program (localnode's model, syncshell's loop) and where objects come from
# (source); 3 the third-party backend contract; 4 the library's run loop; 5 the node-local
# state over gRPC, which serves and consumes everything below. A package imports only lower
# layers, its own sub-packages, or (in the brain) other brain packages: the stable model never
# leans on the parts that may still change above it.
function rank(p,   q) {
	if (p !~ /^k8s\.io\/kube-proxy\/pkg\//) return 0
	q = substr(p, 23)
	if (q ~ /^proxy\/localnodegrpc(\/|$)/) return 5
	if (q ~ /^proxy\/proxyrun(\/|$)/) return 4
	if (q ~ /^proxy\/backend(\/|$)/) return 3
	if (q ~ /^proxy\/(localnode|syncshell|source)(\/|$)/) return 2
	return 1
}

# group is the package's first path element under pkg/proxy (source for source/manifests).
function group(p,   q) {
	q = substr(p, 23)
	sub(/^proxy\//, "", q)
	sub(/\/.*/, "", q)
	return q
}

function grpcpkg(p) { return p ~ /^k8s\.io\/kube-proxy\/pkg\/proxy\/localnodegrpc\/(api\/v[0-9]+|server|client)$/ }

function stdlib(p) { return p !~ /^[^\/]*\./ }

# Modules every layer may use (CONTRIBUTING.md, "Boundaries", plus small leaf helpers).
function common(p) {
	return p ~ /^k8s\.io\/(api|apimachinery|client-go|component-base|component-helpers|utils)\// ||
		p ~ /^k8s\.io\/klog\/v2(\/|$)/ || p ~ /^github\.com\/go-logr\/logr(\/|$)/ || p ~ /^sigs\.k8s\.io\/yaml(\/|$)/ ||
		p ~ /^golang\.org\/x\/(sys|time)\//
}

function allowed(from, to) {
	if (stdlib(to) || common(to)) return 1
	if (from == "netutils")
		return to ~ /^k8s\.io\/net-utils(\/|$)/ || to ~ /^github\.com\/(moby\/ipvs|vishvananda\/)/
	if (from == "configapi") return layer(to) == "configapi"
	if (from == "features") return layer(to) == "features"
	if (from == "brain" || from == "proxier") {
		if (layer(to) == "netutils" || layer(to) == "configapi" || layer(to) == "features" || layer(to) == "brain") return 1
		if (from == "proxier" && layer(to) == "proxier") return 1
		if (to ~ /^github\.com\/(vishvananda\/|fsnotify\/fsnotify)/) return 1
		# YAML with line numbers for config/manifest errors; randfill for the config fuzzer.
		if (to ~ /^go\.yaml\.in\/yaml\/v3(\/|$)/ || to ~ /^sigs\.k8s\.io\/randfill(\/|$)/) return 1
		# gRPC and protobuf only in the node-local state's wire packages (schema, server,
		# client); the rest of the brain and the library stay free of them.
		if (grpcpkg(fromPkg) && to ~ /^google\.golang\.org\/(grpc|protobuf)(\/|$)/) return 1
		# The BPF loader only in the socket load balancer (checked for every importer below).
		if (from == "proxier" && proxier(fromPkg) == "ebpf" && to ~ /^github\.com\/cilium\/ebpf(\/|$)/) return 1
		if (from == "proxier")
			return layer(to) == "proxier" || to ~ /^sigs\.k8s\.io\/knftables(\/|$)/ || to ~ /^github\.com\/Microsoft\/hnslib(\/|$)/
		return 0
	}
	return 1 # cmd, test, examples, hack: anything the rules above do not forbid
}

function report(from, to, rule) { printf "%s -> %s (%s)\n", from, to, rule }

NF >= 2 {
	from = $1; to = $2; kind = $3; fromPkg = from
	if (to ~ /^k8s\.io\/kubernetes(\/|$)/) { report(from, to, "no-k8s-kubernetes"); next }
	if (from == "(transitive)") next
	lf = layer(from); lt = layer(to)
	if (lf == "netutils" && to ~ /^k8s\.io\/kube-proxy(\/|$)/) { report(from, to, "netutils-standalone"); next }
	# cilium/ebpf is a large, kernel-facing dependency: one package owns it, so the rest of
	# the module (and every consumer of the library) stays free of it. Tests included.
	if (to ~ /^github\.com\/cilium\/ebpf(\/|$)/ && proxier(from) != "ebpf") { report(from, to, "cilium-ebpf-only-in-pkg/proxy/ebpf"); next }
	if (lt == "cmd" && lf != "cmd") { report(from, to, "only-cmd-imports-cmd"); next }
	if (lt == "proxier" && (lf == "brain" || lf == "features" || lf == "configapi")) { report(from, to, "library-no-proxier"); next }
	if (lf == "proxier" && lt == "proxier" && proxier(from) != proxier(to) && proxier(to) != "metaproxier") {
		report(from, to, "proxier-no-proxier"); next
	}
	if (kind == "prod" && lf == "brain" && lt == "brain" && group(from) != group(to) &&
		(rank(to) > rank(from) || (rank(to) == rank(from) && rank(from) > 1))) {
		report(from, to, "library-layers-point-down"); next
	}
	if (kind == "prod" && !allowed(lf, to)) report(from, to, "layer-allowlist")
}
