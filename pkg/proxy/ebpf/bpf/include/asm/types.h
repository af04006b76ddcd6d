/* Compiling for -target bpf, clang does not search the host's multiarch include
 * directory, where Debian keeps asm/. The generic definitions are what every
 * architecture's uapi asm/types.h amounts to for the types the BPF headers use. */
#include <asm-generic/types.h>
