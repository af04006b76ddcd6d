/* See types.h in this directory: the generic uapi definitions, for -target bpf. */
#include <asm-generic/posix_types.h>
