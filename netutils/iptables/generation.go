package iptables

// GenerationReader is implemented by an Interface that can read the kernel's nf_tables
// generation: a counter the kernel bumps on every committed nf_tables transaction in the
// network namespace, whoever commits it (iptables-nft, nft, a firewall manager). Two equal
// readings mean that no rule of any nf_tables table changed between them, so a caller that
// compares the rules with what it wrote can skip reading them. The Interface New returns
// implements it; a wrapper that runs the binaries elsewhere (another network namespace)
// must not pass it on.
type GenerationReader interface {
	// Generation returns the generation of the calling process's network namespace; ok
	// is false when this Interface's rules are not kept in nf_tables (legacy iptables),
	// where no such counter exists.
	Generation() (gen uint32, ok bool, err error)
}

var _ GenerationReader = &runner{}

// Generation is part of GenerationReader.
func (r *runner) Generation() (uint32, bool, error) {
	if r.Features().Variant != VariantNFT {
		return 0, false, nil
	}
	gen, err := NFTablesGeneration()
	if err != nil {
		return 0, false, err
	}
	return gen, true, nil
}
