package ebpf

// The BPF object is generated and committed as Go source: run hack/update-bpf.sh, not
// go generate alone (which leaves a .o that the loader no longer embeds); with --verify
// it fails when the committed files differ.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go@v0.22.0 -cc clang -no-global-types -target bpfel -tags linux -type fe_key -type fe_val -type set_val -type be_key -type be_val -type aff_key -type aff_val -type rev_key -type rev_val socketlb bpf/socketlb.c -- -O2 -g -Wall -Werror -Ibpf/include
