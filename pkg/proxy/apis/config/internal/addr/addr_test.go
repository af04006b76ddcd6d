package addr

import "testing"

func TestWithPort(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"1.2.3.4", "1.2.3.4:99"},
		{"1.2.3.4:5", "1.2.3.4:5"},
		{"::1", "[::1]:99"},
		{"[::1]:5", "[::1]:5"},
		{"010.001.002.003", "010.001.002.003:99"},
		{"not-an-ip", "not-an-ip"},
		{"", ""},
	} {
		if got := WithPort(tc.in, 99); got != tc.want {
			t.Errorf("WithPort(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestServerHosts(t *testing.T) {
	for _, tc := range []struct{ in, healthz, metrics string }{
		{"", "0.0.0.0", "127.0.0.1"},
		{"0.0.0.0", "0.0.0.0", "127.0.0.1"},
		{"10.0.0.1", "0.0.0.0", "127.0.0.1"},
		{"::", "::", "::1"},
		{"fd00::1", "::", "::1"},
		{"::ffff:10.0.0.1", "0.0.0.0", "127.0.0.1"},
		{"garbage", "::", "::1"},
	} {
		h, m := ServerHosts(tc.in)
		if h != tc.healthz || m != tc.metrics {
			t.Errorf("ServerHosts(%q) = %q, %q; want %q, %q", tc.in, h, m, tc.healthz, tc.metrics)
		}
	}
}

func TestServerAddress(t *testing.T) {
	for _, tc := range []struct{ cur, host, want string }{
		{"", "0.0.0.0", "0.0.0.0:99"},
		{"", "::", "[::]:99"},
		{"1.2.3.4", "0.0.0.0", "1.2.3.4:99"},
		{"1.2.3.4:7", "0.0.0.0", "1.2.3.4:7"},
		{"fd00::1", "::", "[fd00::1]:99"},
	} {
		if got := ServerAddress(tc.cur, tc.host, 99); got != tc.want {
			t.Errorf("ServerAddress(%q, %q) = %q, want %q", tc.cur, tc.host, got, tc.want)
		}
	}
}
