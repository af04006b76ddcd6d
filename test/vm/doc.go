// Package vm boots a throwaway QEMU guest on a real Debian kernel so that tests can prove
// behaviour that needs kernel facilities the host may lack (IPVS above all: CI hosts and
// containers often have no ip_vs module, and a private network namespace cannot load one).
//
// The pieces are independent so other tests can reuse them:
//   - FetchKernel downloads a Debian cloud kernel package with `apt-get download` into a
//     cache outside the repository and unpacks it once; FetchKernelSpec does the same for
//     any kernel of the matrix (KernelSpecs: Debian 11/12, Ubuntu 22.04/24.04), through a
//     private, signature-checked apt root for archives the host does not list;
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
