// Package vm boots a throwaway QEMU guest on a real Debian kernel so that tests can prove
// behaviour that needs kernel facilities the host may lack (IPVS above all: CI hosts and
// containers often have no ip_vs module, and a private network namespace cannot load one).
//
// The pieces are independent so other tests can reuse them:
//   - FetchKernel downloads a Debian cloud kernel package with `apt-get download` into a
//     cache outside the repository and unpacks it once;
//   - Initramfs builds a gzipped newc cpio in Go (busybox-static, a dependency closure of
//     kernel modules, dynamically linked tools with the libraries ldd names, files and
//     scripts) so no host cpio or root filesystem image is needed;
//   - Boot runs qemu-system-x86_64 on it under a deadline, streams the serial console into
//     the test log and returns the "VMCHECK <name> PASS|FAIL <detail>" lines the guest
//     printed.
//
// Tests skip with a reason when not root, when qemu-system-x86_64 or a static busybox is
// missing, or when no kernel package can be downloaded.
//
// May import anything; nothing outside test/ imports it.
package vm
