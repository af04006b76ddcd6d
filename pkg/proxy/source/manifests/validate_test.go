package manifests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// Documents an API server always rejects are rejected here too, with the field.
func TestDecodeRejectsWhatAnAPIServerRejects(t *testing.T) {
	svc := func(meta, spec string) string {
		return "apiVersion: v1\nkind: Service\nmetadata: " + meta + "\nspec:\n" + spec
	}
	basic := "  clusterIP: 10.96.0.1\n  ports:\n  - port: 80\n"
	slice := func(endpoints int, extra string) string {
		var b strings.Builder
		b.WriteString("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s, labels: {kubernetes.io/service-name: web}}\naddressType: IPv4\n" + extra + "endpoints:\n")
		for i := range endpoints {
			fmt.Fprintf(&b, "- addresses: [198.19.%d.%d]\n", i/250, i%250+1)
		}
		return b.String()
	}
	tests := []struct {
		name string
		data string
		want string // a fragment of the only problem's Error()
	}{
		{"Service name with an underscore", svc("{name: web_1}", basic), `metadata.name: Invalid value: "web_1"`},
		{"Service name starting with a digit", svc("{name: 1web}", basic), `metadata.name: Invalid value: "1web"`},
		{"Service name with a dot (a subdomain, not a label)", svc("{name: a.b}", basic), `metadata.name: Invalid value: "a.b"`},
		{"bad namespace", svc("{name: web, namespace: Prod}", basic), `metadata.namespace: Invalid value: "Prod"`},
		{"bad label value", svc("{name: web, labels: {a: 'x y'}}", basic), `metadata.labels: Invalid value: "x y"`},
		{"annotations over 256 KiB", svc("{name: web, annotations: {a: "+strings.Repeat("x", 256<<10)+"}}", basic), "metadata.annotations: Too long"},
		{"port out of range", svc("{name: web}", "  clusterIP: 10.96.0.1\n  ports:\n  - port: 70000\n"), "spec.ports[0].port: Invalid value: 70000"},
		{"node port out of range", svc("{name: web}", "  type: NodePort\n  clusterIP: 10.96.0.1\n  ports:\n  - port: 80\n    nodePort: 65536\n"), "spec.ports[0].nodePort: Invalid value: 65536"},
		{"duplicate port and protocol", svc("{name: web}", "  clusterIP: 10.96.0.1\n  ports:\n  - {name: a, port: 80}\n  - {name: b, port: 80}\n"), "spec.ports[1]: Duplicate value"},
		{"duplicate node port and protocol", svc("{name: web}", "  type: NodePort\n  clusterIP: 10.96.0.1\n  ports:\n  - {name: a, port: 80, nodePort: 30000}\n  - {name: b, port: 81, nodePort: 30000}\n"), "spec.ports[1].nodePort: Duplicate value: 30000"},
		{"bad port name", svc("{name: web}", "  clusterIP: 10.96.0.1\n  ports:\n  - {name: HTTP, port: 80}\n"), `spec.ports[0].name: Invalid value: "HTTP"`},
		{"bad target port name", svc("{name: web}", "  clusterIP: 10.96.0.1\n  ports:\n  - {port: 80, targetPort: not_valid}\n"), `spec.ports[0].targetPort: Invalid value: "not_valid"`},
		{"loopback external IP", svc("{name: web}", basic+"  externalIPs: [127.0.0.1]\n"), "spec.externalIPs[0]: Invalid value: \"127.0.0.1\": may not be in the loopback range"},
		{"unspecified external IP", svc("{name: web}", basic+"  externalIPs: [\"::\"]\n"), "spec.externalIPs[0]: Invalid value: \"::\": may not be unspecified (::)"},
		{"loopback cluster IP", svc("{name: web}", "  clusterIP: 127.0.0.1\n  ports:\n  - port: 80\n"), `spec.clusterIPs[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)`},
		{"IPv6 loopback cluster IP", svc("{name: web}", "  clusterIPs: [10.96.0.1, \"::1\"]\n  ports:\n  - port: 80\n"), `spec.clusterIPs[1]: Invalid value: "::1": may not be in the loopback range`},
		{"multicast cluster IP", svc("{name: web}", "  clusterIP: 224.0.0.1\n  ports:\n  - port: 80\n"), `spec.clusterIPs[0]: Invalid value: "224.0.0.1": may not be a multicast address (224.0.0.0/4, ff00::/8)`},
		{"global multicast cluster IP", svc("{name: web}", "  clusterIP: 239.1.2.3\n  ports:\n  - port: 80\n"), `spec.clusterIPs[0]: Invalid value: "239.1.2.3": may not be a multicast address`},
		{"link-local cluster IP", svc("{name: web}", "  clusterIP: 169.254.0.10\n  ports:\n  - port: 80\n"), `spec.clusterIPs[0]: Invalid value: "169.254.0.10": may not be in the link-local range`},
		{"unspecified cluster IP", svc("{name: web}", "  clusterIP: 0.0.0.0\n  ports:\n  - port: 80\n"), `spec.clusterIPs[0]: Invalid value: "0.0.0.0": may not be unspecified`},
		{"external traffic policy on an internal Service", svc("{name: web}", basic+"  externalTrafficPolicy: Local\n"), "spec.externalTrafficPolicy: Invalid value"},
		{"health-check node port without Local", svc("{name: web}", "  type: NodePort\n  clusterIP: 10.96.0.1\n  healthCheckNodePort: 32000\n  ports:\n  - {port: 80, nodePort: 30000}\n"), "spec.healthCheckNodePort: Invalid value: 32000"},
		{"Local load balancer without a health-check node port", svc("{name: web}", "  type: LoadBalancer\n  externalTrafficPolicy: Local\n  clusterIP: 10.96.0.1\n  ports:\n  - {port: 80, nodePort: 30000}\n"), "spec.healthCheckNodePort: Required value"},
		{"source ranges on a ClusterIP Service", svc("{name: web}", basic+"  loadBalancerSourceRanges: [10.0.0.0/8]\n"), "spec.loadBalancerSourceRanges: Forbidden"},
		{"affinity config without affinity", svc("{name: web}", basic+"  sessionAffinityConfig: {clientIP: {timeoutSeconds: 10}}\n"), "spec.sessionAffinityConfig: Forbidden"},
		{"bad selector", svc("{name: web}", basic+"  selector: {'a b': c}\n"), "spec.selector: Invalid value"},
		{"EndpointSlice with 1001 endpoints", slice(1001, ""), "endpoints: Too many: 1001: must have at most 1000 items"},
		{"EndpointSlice with a loopback endpoint", strings.Replace(slice(1, ""), "198.19.0.1", "127.0.0.1", 1), `endpoints[0].addresses[0]: Invalid value: "127.0.0.1"`},
		{"EndpointSlice with a bad port name", slice(1, "ports: [{name: Web, port: 80}]\n"), `ports[0].name: Invalid value: "Web"`},
		{"EndpointSlice with a bad node name", strings.Replace(slice(1, ""), "- addresses: [198.19.0.1]", "- {addresses: [198.19.0.1], nodeName: Node_1}", 1), `endpoints[0].nodeName: Invalid value: "Node_1"`},
		{"Node with a bad name", "apiVersion: v1\nkind: Node\nmetadata: {name: Node_1}\n", `metadata.name: Invalid value: "Node_1"`},
		{"ServiceCIDR with two IPv4 ranges", "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: k}\nspec: {cidrs: [10.96.0.0/16, 10.97.0.0/16]}\n", `spec.cidrs[1]: Invalid value: "10.97.0.0/16"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, problems := Decode("bad.yaml", []byte(tc.data))
			if len(objs) != 0 || len(problems) != 1 || !strings.Contains(problems[0].Error(), tc.want) {
				t.Errorf("accepted %d, problems %v; want one containing %q", len(objs), problems, tc.want)
			}
		})
	}
}

// What an API server accepts, and nothing here should reject: a Service port used
// for two protocols, and a node port likewise, are fine.
func TestDecodeAcceptsValidEdgeCases(t *testing.T) {
	for _, data := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: dns}\nspec:\n  type: NodePort\n  clusterIP: 10.96.0.10\n  ports:\n  - {name: udp, port: 53, protocol: UDP, nodePort: 30053}\n  - {name: tcp, port: 53, protocol: TCP, nodePort: 30053}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: ext}\nspec:\n  clusterIP: 10.96.0.11\n  externalIPs: [198.18.0.1]\n  externalTrafficPolicy: Local\n  ports: [{port: 80, targetPort: http}]\n",
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: s.1, labels: {kubernetes.io/service-name: web}}\naddressType: FQDN\nendpoints: [{addresses: [db.example.com]}]\n",
	} {
		if _, problems := Decode("ok.yaml", []byte(data)); len(problems) > 0 {
			t.Errorf("rejected:\n%s\n%v", data, problems)
		}
	}
}

// A document too large for an API server is refused before it is parsed; a List may
// be larger as long as each item is not.
func TestDecodeBoundsDocumentSize(t *testing.T) {
	huge := strings.Repeat("x", MaxDocumentBytes)
	data := "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  annotations:\n    a: " + huge + "\nspec: {clusterIP: 10.96.0.1, ports: [{port: 80}]}\n---\n" + goodService
	objs, problems := Decode("big.yaml", []byte(data))
	if len(objs) != 1 || len(problems) != 1 || !strings.Contains(problems[0].Reason, "over the 3145728-byte limit") ||
		problems[0].Object != "Service web" || problems[0].Line != 1 {
		t.Errorf("accepted %d, problems %+v", len(objs), problems)
	}
	jsonData := `{"apiVersion":"v1","kind":"Node","metadata":{"name":"n","annotations":{"a":"` + huge + `"}}}`
	if objs, problems := Decode("big.json", []byte(jsonData)); len(objs) != 0 || len(problems) != 1 ||
		!strings.Contains(problems[0].Reason, "limit") || problems[0].Object != "Node n" {
		t.Errorf("JSON: accepted %d, problems %+v", len(objs), problems)
	}

	var list strings.Builder
	list.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range 16 {
		fmt.Fprintf(&list, "- {apiVersion: v1, kind: Node, metadata: {name: node-%d, annotations: {pad: %s}}}\n", i, strings.Repeat("p", 200<<10))
	}
	if list.Len() <= MaxDocumentBytes {
		t.Fatalf("list of %d bytes does not exceed the limit", list.Len())
	}
	if objs, problems := Decode("list.yaml", []byte(list.String())); len(objs) != 16 || len(problems) != 0 {
		t.Errorf("large List: accepted %d, problems %v", len(objs), problems[:min(len(problems), 3)])
	}
}

// A file over the size limit is refused without being read, and what it held stays.
func TestSourceBoundsFileSize(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	f := filepath.Join(dir, "a.yaml")
	writeFile(t, f, svcYAML("a", "10.96.0.1", 80))
	s := NewReader(dir)
	s.MaxFileBytes = 1024
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f, svcYAML("a", "10.96.0.2", 80)+"# "+strings.Repeat("x", 2048)+"\n")
	res, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Reason, "over the 1024-byte limit") || res.Problems[0].File != f {
		t.Errorf("problems = %v", res.Problems)
	}
	if got := strings.Join(serviceNames(t, s), ","); got != "default/a=10.96.0.1" {
		t.Errorf("services = %s, want the last good version kept", got)
	}
}

func TestDecodeMessages(t *testing.T) {
	tests := []struct {
		name       string
		data       string
		wantObject string
		wantReason string
	}{
		{
			name:       "nested List",
			data:       "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items: []\n",
			wantObject: "List",
			wantReason: "a List inside a list is not supported",
		},
		{
			name:       "nested typed list",
			data:       "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ServiceList\n  metadata: {name: x}\n  items: []\n",
			wantObject: "ServiceList x",
			wantReason: "a ServiceList inside a list is not supported",
		},
		{
			name:       "a type error names the object",
			data:       "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: prod\nspec:\n  clusterIP: 10.96.0.1\n  ports:\n  - port: eighty\n",
			wantObject: "Service prod/web",
			wantReason: "cannot decode",
		},
		{
			name:       "invalid YAML names the object",
			data:       "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  labels:\n    name: not-this\nspec:\n  ports: [\n",
			wantObject: "Service web",
			wantReason: "invalid YAML",
		},
		{
			name:       "invalid YAML in flow style names the object",
			data:       "kind: Node\nmetadata: {name: n1, labels: {name: no}}\nspec: [\n",
			wantObject: "Node n1",
			wantReason: "invalid YAML",
		},
		{
			name:       "an unsupported kind names the object",
			data:       "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: x}\n",
			wantObject: "Pod x/p",
			wantReason: "kind Pod",
		},
		{
			name:       "a missing apiVersion names the object",
			data:       "kind: Node\nmetadata: {name: node-1}\n",
			wantObject: "Node node-1",
			wantReason: "missing apiVersion",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := Decode("m.yaml", []byte(tc.data))
			if len(problems) != 1 || problems[0].Object != tc.wantObject || !strings.Contains(problems[0].Reason, tc.wantReason) {
				t.Errorf("problems = %+v, want object %q and a reason containing %q", problems, tc.wantObject, tc.wantReason)
			}
		})
	}
}

// Two Services may not share a cluster IP or a node port, as an API server's
// allocators ensure. The one in service keeps it; the newcomer is rejected by name.
func TestSourceRejectsConflictingServices(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	nodePortSvc := func(name, ip string, nodePort int, extra string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: %s}\nspec:\n  type: NodePort\n  clusterIP: %s\n  ports: [{port: 80, nodePort: %d}]\n%s", name, ip, nodePort, extra)
	}
	s := NewReader(dir)
	steps := []struct {
		name     string
		files    map[string]string
		want     string
		problems []string
	}{
		{
			name:     "the first in file order wins a cluster IP",
			files:    map[string]string{"b.yaml": svcYAML("b", "10.96.0.1", 80), "c.yaml": svcYAML("c", "10.96.0.1", 81)},
			want:     "default/b=10.96.0.1",
			problems: []string{"c.yaml:1: Service default/c: spec.clusterIPs[0] 10.96.0.1 is already used by Service default/b"},
		},
		{
			name:     "a Service in service keeps its cluster IP against one earlier in file order",
			files:    map[string]string{"a.yaml": svcYAML("a", "10.96.0.1", 82), "c.yaml": ""},
			want:     "default/b=10.96.0.1",
			problems: []string{"a.yaml:1: Service default/a: spec.clusterIPs[0] 10.96.0.1 is already used by Service default/b"},
		},
		{
			name: "node ports conflict across Services whatever the protocol",
			files: map[string]string{"a.yaml": "", "b.yaml": "",
				"n1.yaml": nodePortSvc("n1", "10.96.0.2", 30000, ""),
				"n2.yaml": strings.Replace(nodePortSvc("n2", "10.96.0.3", 30000, ""), "port: 80,", "port: 80, protocol: UDP,", 1)},
			want:     "default/n1=10.96.0.2",
			problems: []string{"n2.yaml:1: Service default/n2: spec.ports[0].nodePort 30000 is already used by Service default/n1"},
		},
		{
			name: "a health-check node port shares the node port range",
			files: map[string]string{"n2.yaml": strings.Replace(nodePortSvc("n2", "10.96.0.3", 30001, "  externalTrafficPolicy: Local\n  healthCheckNodePort: 30000\n"),
				"type: NodePort", "type: LoadBalancer", 1)},
			want:     "default/n1=10.96.0.2",
			problems: []string{"n2.yaml:1: Service default/n2: spec.healthCheckNodePort 30000 is already used by Service default/n1"},
		},
		{
			name:  "freeing the address lets the other in",
			files: map[string]string{"n1.yaml": ""},
			want:  "default/n2=10.96.0.3",
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			for name, data := range st.files {
				writeFile(t, filepath.Join(dir, name), data)
			}
			res, err := s.Sync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(serviceNames(t, s), ","); got != st.want {
				t.Errorf("services = %s, want %s", got, st.want)
			}
			var got []string
			for _, p := range res.Problems {
				got = append(got, strings.TrimPrefix(p.Error(), dir+string(filepath.Separator)))
			}
			if len(got) != len(st.problems) {
				t.Fatalf("problems = %q, want %q", got, st.problems)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], st.problems[i]) {
					t.Errorf("problem %d = %q, want it to start with %q", i, got[i], st.problems[i])
				}
			}
		})
	}
}

// writeInPlace rewrites a file through the same inode, as a writer that is not
// careful does, so a reader may see it half written.
func writeInPlace(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Under Run, each file changed in place waits until it has been unchanged for the
// settle time; a file that keeps changing does not hold back the others, and is
// itself held back for at most ten settle times. A file replaced by a rename is
// whole and applies at once. The clock is the test's.
func TestSourceSettlesEachFile(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "c.yaml")
	writeFile(t, a, svcYAML("a", "10.96.0.1", 80))
	writeFile(t, b, svcYAML("b", "10.96.0.2", 80))
	s := NewReader(dir)
	start := time.Unix(1000, 0)
	now := start
	s.now = func() time.Time { return now }
	if _, err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	const settle = time.Second
	step := func(advance time.Duration, change func(), want string, pending int, due time.Duration) {
		t.Helper()
		now = now.Add(advance)
		if change != nil {
			change()
		}
		res, next, err := s.sync(ctx, settle)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(serviceNames(t, s), ","); got != want {
			t.Errorf("at +%v: services = %s, want %s", now.Sub(start), got, want)
		}
		wantNext := time.Time{}
		if due > 0 {
			wantNext = now.Add(due)
		}
		if res.Pending != pending || !next.Equal(wantNext) {
			t.Errorf("at +%v: pending %d due %v, want %d due %v", now.Sub(start), res.Pending, next.Sub(start), pending, wantNext.Sub(start))
		}
	}
	step(0, func() { writeInPlace(t, a, svcYAML("a", "10.96.0.11", 80)) },
		"default/a=10.96.0.1,default/b=10.96.0.2", 1, settle)
	// a changes again: its wait starts over; b's change waits on its own.
	step(600*time.Millisecond, func() {
		writeInPlace(t, a, svcYAML("a", "10.96.0.21", 80))
		writeInPlace(t, b, svcYAML("b", "10.96.0.12", 80))
	}, "default/a=10.96.0.1,default/b=10.96.0.2", 2, settle)
	step(999*time.Millisecond, func() { writeInPlace(t, a, svcYAML("a", "10.96.0.31", 80)) },
		"default/a=10.96.0.1,default/b=10.96.0.2", 2, time.Millisecond)
	step(time.Millisecond, nil, "default/a=10.96.0.1,default/b=10.96.0.12", 1, 999*time.Millisecond)
	// A new file waits too; a removed one goes at once.
	step(0, func() {
		writeInPlace(t, c, svcYAML("c", "10.96.0.3", 80))
		_ = os.Remove(b)
	}, "default/a=10.96.0.1", 2, 999*time.Millisecond)
	step(999*time.Millisecond, nil, "default/a=10.96.0.31", 1, time.Millisecond)
	step(time.Millisecond, nil, "default/a=10.96.0.31,default/c=10.96.0.3", 0, 0)
	// A file renamed into place is whole: no wait.
	step(time.Second, func() { writeFile(t, a, svcYAML("a", "10.96.0.41", 80)) },
		"default/a=10.96.0.41,default/c=10.96.0.3", 0, 0)
	// One rewritten in place more often than the settle time is applied after ten.
	for i := range 12 {
		step(900*time.Millisecond, func() { writeInPlace(t, c, svcYAML("c", fmt.Sprintf("10.96.1.%d", i), 80)) },
			"default/a=10.96.0.41,default/c=10.96.0.3", 1, min(settle, 10*settle-time.Duration(i)*900*time.Millisecond))
	}
	step(100*time.Millisecond, func() { writeInPlace(t, c, svcYAML("c", "10.96.1.99", 80)) },
		"default/a=10.96.0.41,default/c=10.96.1.99", 0, 0)
}

// A cluster IP outside every ServiceCIDR in the manifests is one an API
// server's allocator refuses; without ServiceCIDRs the range is unknown and
// only the special-purpose addresses (TestDecodeRejectsWhatAnAPIServerRejects)
// are refused.
func TestSourceRejectsClusterIPsOutsideServiceCIDRs(t *testing.T) {
	cidr := "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: kubernetes}\nspec: {cidrs: [10.96.0.0/16, \"fd00:10:96::/112\"]}\n"
	dual := "apiVersion: v1\nkind: Service\nmetadata: {name: dual}\nspec:\n  clusterIPs: [10.96.0.3, \"fd00:10:97::3\"]\n  ipFamilyPolicy: RequireDualStack\n  ports: [{port: 80}]\n"
	for _, tc := range []struct {
		name     string
		files    map[string]string
		want     string
		problems []string
	}{
		{
			name:  "inside and outside the ServiceCIDR",
			files: map[string]string{"cidr.yaml": cidr, "a.yaml": svcYAML("a", "10.96.0.1", 80), "b.yaml": svcYAML("b", "10.97.0.1", 80)},
			want:  "default/a=10.96.0.1",
			problems: []string{`b.yaml:1: Service default/b: spec.clusterIPs[0]: Invalid value: "10.97.0.1": failed to allocate IP 10.97.0.1: ` +
				`the provided IP (10.97.0.1) is not in the valid range. The range of valid IPs is 10.96.0.0/16 (ServiceCIDR kubernetes)`},
		},
		{
			name:  "the second family outside",
			files: map[string]string{"cidr.yaml": cidr, "a.yaml": svcYAML("a", "10.96.0.1", 80), "dual.yaml": dual},
			want:  "default/a=10.96.0.1",
			problems: []string{`dual.yaml:1: Service default/dual: spec.clusterIPs[1]: Invalid value: "fd00:10:97::3": failed to allocate IP fd00:10:97::3: ` +
				`the provided IP (fd00:10:97::3) is not in the valid range. The range of valid IPs is fd00:10:96::/112 (ServiceCIDR kubernetes)`},
		},
		{
			name:  "no ServiceCIDRs: any unicast address",
			files: map[string]string{"a.yaml": svcYAML("a", "10.96.0.1", 80), "b.yaml": svcYAML("b", "10.97.0.1", 80)},
			want:  "default/a=10.96.0.1,default/b=10.97.0.1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			dir := t.TempDir()
			for name, data := range tc.files {
				writeFile(t, filepath.Join(dir, name), data)
			}
			s := NewReader(dir)
			res, err := s.Sync(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(serviceNames(t, s), ","); got != tc.want {
				t.Errorf("services = %s, want %s", got, tc.want)
			}
			var got []string
			for _, p := range res.Problems {
				got = append(got, strings.TrimPrefix(p.Error(), dir+string(filepath.Separator)))
			}
			if strings.Join(got, "\n") != strings.Join(tc.problems, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.problems, "\n"))
			}
		})
	}
}

// A manifest nested deeper than the reader descends is not read, and the
// log says so at the default verbosity rather than dropping it silently.
func TestSourceReportsTooDeepDirectories(t *testing.T) {
	ctx, logs := bufferedContext(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), svcYAML("a", "10.96.0.1", 80))
	deep := dir
	for i := range 70 {
		deep = filepath.Join(deep, fmt.Sprintf("d%d", i))
	}
	writeFile(t, filepath.Join(deep, "b.yaml"), svcYAML("b", "10.96.0.2", 80))
	s := NewReader(dir)
	res, err := s.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(serviceNames(t, s), ","); got != "default/a=10.96.0.1" {
		t.Errorf("services = %s", got)
	}
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Reason, "deeper than 64 directories") {
		t.Errorf("problems %v, want one naming the depth limit", res.Problems)
	}
	if out := logs(); !strings.Contains(out, "deeper than 64 directories") || !strings.Contains(out, "d64") {
		t.Errorf("the log does not say which directory was skipped and why:\n%s", out)
	}
}
