# Classifies "importer<TAB>imported<TAB>prod|test" lines by the layers of CONTRIBUTING.md and prints
# every violation as "importer -> imported (rule)". Used by hack/verify-imports.sh.

function layer(p) {
	if (p ~ /^k8s\.io\/net-utils(\/|$)/) return "netutils"
	if (p !~ /^k8s\.io\/kube-proxy(\/|$)/) return "external"
	if (p ~ /^k8s\.io\/kube-proxy\/cmd(\/|$)/) return "cmd"
	if (p ~ /^k8s\.io\/kube-proxy\/(test|examples|hack)(\/|$)/) return "free"
	if (p ~ /^k8s\.io\/kube-proxy\/config(\/|$)/) return "configapi"
	if (p ~ /^k8s\.io\/kube-proxy\/pkg\/features(\/|$)/) return "features"
	if (backend(p) != "") return "backend"
	if (p ~ /^k8s\.io\/kube-proxy\/pkg\//) return "brain"
	return "free"
}

function backend(p,   m) {
	if (match(p, /^k8s\.io\/kube-proxy\/pkg\/proxy\/(iptables|nftables|ipvs|winkernel|metaproxier)(\/|$)/)) {
		m = substr(p, 29)
		sub(/\/.*/, "", m)
		return m
	}
	return ""
}

function grpcpkg(p) { return p ~ /^k8s\.io\/kube-proxy\/pkg\/proxy\/localnode\/(api\/v[0-9]+|server|client)$/ }

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
	if (from == "brain" || from == "backend") {
		if (layer(to) == "netutils" || layer(to) == "configapi" || layer(to) == "features" || layer(to) == "brain") return 1
		if (to ~ /^github\.com\/(vishvananda\/|fsnotify\/fsnotify)/) return 1
		# YAML with line numbers for config/manifest errors; randfill for the config fuzzer.
		if (to ~ /^go\.yaml\.in\/yaml\/v3(\/|$)/ || to ~ /^sigs\.k8s\.io\/randfill(\/|$)/) return 1
		# gRPC and protobuf only in the node-local state's wire packages (schema, server,
		# client); the rest of the brain and the library stay free of them.
		if (grpcpkg(fromPkg) && to ~ /^google\.golang\.org\/(grpc|protobuf)(\/|$)/) return 1
		if (from == "backend")
			return layer(to) == "backend" || to ~ /^sigs\.k8s\.io\/knftables(\/|$)/ || to ~ /^github\.com\/Microsoft\/hnslib(\/|$)/
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
	if (lt == "cmd" && lf != "cmd") { report(from, to, "only-cmd-imports-cmd"); next }
	if (lt == "backend" && (lf == "brain" || lf == "features" || lf == "configapi")) { report(from, to, "brain-no-backend"); next }
	if (lf == "backend" && lt == "backend" && backend(from) != backend(to) && backend(to) != "metaproxier") {
		report(from, to, "backend-no-backend"); next
	}
	if (kind == "prod" && !allowed(lf, to)) report(from, to, "layer-allowlist")
}
