package iptables

import (
	"fmt"
	"regexp"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// Variant is the kernel interface the iptables binaries program.
type Variant string

const (
	// VariantUnknown means the variant could not be told, typically because the
	// binary is too old to say or could not be run.
	VariantUnknown Variant = ""
	// VariantLegacy is the x_tables (setsockopt) backend, "iptables-legacy".
	VariantLegacy Variant = "legacy"
	// VariantNFT is the nf_tables backend, "iptables-nft".
	VariantNFT Variant = "nf_tables"
)

// Versions from which iptables features are available. These are upstream iptables
// release facts.
var (
	waitMinVersion        = utilversion.MustParseGeneric("1.4.20")
	waitSecondsMinVersion = utilversion.MustParseGeneric("1.4.22")
	restoreWaitMinVersion = utilversion.MustParseGeneric("1.6.2")
	randomFullyMinVersion = utilversion.MustParseGeneric("1.6.2")
)

// Features describes the iptables binaries an Interface runs.
type Features struct {
	// Version is the iptables version, nil if it could not be detected.
	Version *utilversion.Version
	// Variant is legacy or nf_tables, VariantUnknown if not detected.
	Variant Variant
	// Wait is true if iptables accepts "-w" (wait for the xtables lock).
	Wait bool
	// WaitSeconds is true if "-w" accepts a timeout in seconds.
	WaitSeconds bool
	// RestoreWait is true if iptables-restore accepts "-w SECONDS". Without it,
	// Restore takes the xtables lock file itself.
	RestoreWait bool
	// RandomFully is true if the MASQUERADE/SNAT targets accept "--random-fully".
	RandomFully bool
}

// FeatureDetector is implemented by every Interface this package and its testing
// package return. Use it through a type assertion, or through HasRandomFully.
type FeatureDetector interface {
	// Features reports what the iptables binaries support. Detection happens once;
	// if it fails, modern defaults are reported (see Features.Version == nil).
	Features() Features
}

// HasRandomFully reports whether ipt's iptables supports "--random-fully". It is false
// for an Interface that cannot report its features.
func HasRandomFully(ipt Interface) bool {
	fd, ok := ipt.(FeatureDetector)
	return ok && fd.Features().RandomFully
}

// "iptables v1.8.9 (nf_tables)", "ip6tables v1.8.7 (legacy)", "iptables v1.4.21".
var versionOutputRE = regexp.MustCompile(`v([0-9]+\.[0-9]+(?:\.[0-9]+)*)(?:\s+\(([a-z_]+)\))?`)

// parseVersionOutput reads the output of "iptables --version".
func parseVersionOutput(out string) (Features, error) {
	m := versionOutputRE.FindStringSubmatch(out)
	if m == nil {
		return Features{}, fmt.Errorf("no version in iptables --version output %q", out)
	}
	v, err := utilversion.ParseGeneric(m[1])
	if err != nil {
		return Features{}, fmt.Errorf("bad version %q in iptables --version output: %w", m[1], err)
	}
	f := featuresForVersion(v)
	switch m[2] {
	case "legacy":
		f.Variant = VariantLegacy
	case "nf_tables":
		f.Variant = VariantNFT
	}
	return f, nil
}

func featuresForVersion(v *utilversion.Version) Features {
	return Features{
		Version:     v,
		Wait:        v.AtLeast(waitMinVersion),
		WaitSeconds: v.AtLeast(waitSecondsMinVersion),
		RestoreWait: v.AtLeast(restoreWaitMinVersion),
		RandomFully: v.AtLeast(randomFullyMinVersion),
	}
}

// assumedFeatures is used when detection fails: the binary is probably missing, in
// which case every command fails anyway, so assume what any supported distribution
// ships rather than degrading behaviour.
var assumedFeatures = Features{Wait: true, WaitSeconds: true, RestoreWait: true, RandomFully: true}

// waitArgs returns the lock-wait flags for iptables commands.
func (f Features) waitArgs() []string {
	switch {
	case f.WaitSeconds:
		return []string{WaitString, WaitSecondsValue}
	case f.Wait:
		return []string{WaitString}
	default:
		return nil
	}
}
