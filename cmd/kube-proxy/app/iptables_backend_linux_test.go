//go:build linux

package app

import (
	"strings"
	"testing"
)

func TestIPTablesBackendFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		wantErr string
	}{
		{want: "auto"},
		{args: []string{"--iptables-backend=legacy"}, want: "legacy"},
		{args: []string{"--iptables-backend", "nft"}, want: "nft"},
		{args: []string{"--iptables-backend=nftables"}, wantErr: `iptables backend "nftables": want auto, legacy or nft`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cmd := NewProxyCommand()
			err := cmd.ParseFlags(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parsing %q: error %v, want %q", tc.args, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			f := cmd.Flags().Lookup(iptablesBackendFlagName)
			if f == nil {
				t.Fatalf("--%s is not registered", iptablesBackendFlagName)
			}
			if got := f.Value.String(); got != tc.want {
				t.Errorf("--%s = %q, want %q", iptablesBackendFlagName, got, tc.want)
			}
			if _, ok := f.Value.(*iptablesBackendFlag); !ok {
				t.Errorf("--%s holds %T; ProxyServer.iptablesBackend would not find its choice", iptablesBackendFlagName, f.Value)
			}
		})
	}
}
