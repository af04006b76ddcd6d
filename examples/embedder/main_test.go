//go:build linux

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// The example runs as documented: two syncs reported by the hook, and the
// final ruleset balances the Service over both endpoints.
func TestEmbedder(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"synced initial state (full=true)",
		"synced second endpoint (full=false)",
		"10.1.0.1 . 8080",
		"10.1.0.2 . 8080",
		"10.96.0.10 . tcp . 80",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
