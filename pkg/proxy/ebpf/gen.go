package ebpf

// The BPF objects are generated and committed; hack/update-bpf.sh regenerates them
// (and with --verify fails when the committed ones differ).
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go@v0.22.0 -cc clang -no-global-types -target bpfel -tags linux -type fe_key -type fe_val -type set_val -type be_key -type be_val -type aff_key -type aff_val -type rev_key -type rev_val socketlb bpf/socketlb.c -- -O2 -g -Wall -Werror -Ibpf/include
