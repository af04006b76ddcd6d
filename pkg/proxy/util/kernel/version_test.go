package kernel

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/version"
)

func TestParseRelease(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "6.18.44-fc-v669", want: "6.18.44"},
		{in: "6.8.0-45-generic\n", want: "6.8.0"},
		{in: "5.15.167.4-microsoft-standard-WSL2", want: "5.15.167"},
		{in: "4.19.0+", want: "4.19.0"},
		{in: "5.13", want: "5.13"},
		{in: "5.13-rc1", want: "5.13"},
		{in: "  3.10.0-1160.el7.x86_64  ", want: "3.10.0"},
		{in: "5.4.0\x00\x00", want: "5.4.0"},
		{in: "4.1.", want: "4.1"},
		{in: "6", wantErr: true},
		{in: "6-generic", wantErr: true},
		{in: "", wantErr: true},
		{in: "v5.4.0", wantErr: true},
		{in: ".5.4", wantErr: true},
		{in: "linux", wantErr: true},
		{in: "99999999999999999999.1", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(strconv.Quote(tc.in), func(t *testing.T) {
			got, err := parseRelease(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseRelease(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got.String() != tc.want {
				t.Errorf("parseRelease(%q) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestThresholds(t *testing.T) {
	// A distro suffix must not make a kernel look older than its base version.
	tests := []struct {
		release   string
		threshold string
		atLeast   bool
	}{
		{"5.13.0-1-generic", NFTablesKubeProxyKernelVersion, true},
		{"5.12.19", NFTablesKubeProxyKernelVersion, false},
		{"4.1.0", IPVSConnReuseModeMinSupportedKernelVersion, true},
		{"4.0.9", IPVSConnReuseModeMinSupportedKernelVersion, false},
		{"5.9.0-rc1", IPVSConnReuseModeFixedKernelVersion, true},
		{"5.8.18", IPVSConnReuseModeFixedKernelVersion, false},
	}
	for _, tc := range tests {
		v, err := parseRelease(tc.release)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.AtLeast(version.MustParseGeneric(tc.threshold)); got != tc.atLeast {
			t.Errorf("%s AtLeast %s = %v, want %v", tc.release, tc.threshold, got, tc.atLeast)
		}
	}
}

func TestGetVersionReadError(t *testing.T) {
	_, err := getVersion(func(string) ([]byte, error) { return nil, os.ErrPermission })
	if !errors.Is(err, os.ErrPermission) {
		t.Errorf("error %v does not wrap the read error", err)
	}
	_, err = getVersion(func(p string) ([]byte, error) {
		if p != osReleasePath {
			t.Errorf("read %q, want %q", p, osReleasePath)
		}
		return []byte("garbage"), nil
	})
	if err == nil {
		t.Error("expected a parse error")
	}
}

func TestGetVersionHost(t *testing.T) {
	if _, err := os.Stat(osReleasePath); err != nil {
		t.Skipf("%s not available: %v", osReleasePath, err)
	}
	v, err := GetVersion()
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(osReleasePath)
	if !strings.HasPrefix(strings.TrimSpace(string(raw)), strconv.Itoa(int(v.Major()))+".") {
		t.Errorf("version %s does not match %q", v, raw)
	}
}

func FuzzParseRelease(f *testing.F) {
	for _, s := range []string{"6.18.44-fc-v669", "5.15.167.4-microsoft", "4.19.0+", "6", "", "1.2.3.4.5", "0.0", "5.4.0\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseRelease(s)
		if err != nil {
			return
		}
		trimmed := strings.TrimSpace(strings.TrimRight(s, "\x00"))
		if trimmed == "" || trimmed[0] < '0' || trimmed[0] > '9' {
			t.Fatalf("parseRelease(%q) accepted input not starting with a digit: %s", s, v)
		}
		// The canonical form must parse back to the same version.
		again, err := parseRelease(v.String())
		if err != nil || !again.EqualTo(v) {
			t.Fatalf("parseRelease(%q) = %s, reparse = %v, %v", s, v, again, err)
		}
	})
}
