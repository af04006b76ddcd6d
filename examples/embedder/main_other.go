//go:build !linux

package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "embedder: the nftables proxier is Linux-only")
	os.Exit(1)
}
