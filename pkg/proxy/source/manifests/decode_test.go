package manifests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

const goodService = `apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  clusterIP: 10.96.0.10
  ports:
  - port: 80
`

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name  string
		file  string
		data  string
		want  []string // keys in order
		lines []int
	}{
		{
			name: "single service, defaulted namespace",
			data: goodService, want: []string{"services/default/web"}, lines: []int{1},
		},
		{
			name: "multi-document with comments, separators and empty docs",
			data: "# leading comment\n---\n" + goodService + "---\n# only a comment\n---\n" +
				"apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n...\n",
			want: []string{"services/default/web", "nodes/n1"}, lines: []int{3, 14},
		},
		{
			name: "v1 List with mixed kinds",
			data: `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
- apiVersion: networking.k8s.io/v1
  kind: ServiceCIDR
  metadata: {name: kubernetes}
  spec: {cidrs: [10.96.0.0/16]}
`,
			want: []string{"nodes/n1", "servicecidrs/kubernetes"}, lines: []int{4, 7},
		},
		{
			name: "typed list whose items omit apiVersion and kind",
			data: `apiVersion: v1
kind: NodeList
items:
- metadata: {name: a}
- metadata: {name: b}
`,
			want: []string{"nodes/a", "nodes/b"}, lines: []int{4, 5},
		},
		{
			name: "JSON stream",
			file: "x.json",
			data: `{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}

{"apiVersion":"v1","kind":"Node","metadata":{"name":"b"}}`,
			want: []string{"nodes/a", "nodes/b"}, lines: []int{1, 3},
		},
		{
			name: "JSON array",
			file: "x.json",
			data: "[\n {\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}},\n {\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"b\"}}\n]",
			want: []string{"nodes/a", "nodes/b"}, lines: []int{2, 3},
		},
		{
			name: "headless service without ports and ExternalName service",
			data: "apiVersion: v1\nkind: Service\nmetadata: {name: h, namespace: x}\nspec: {clusterIP: None}\n---\n" +
				"apiVersion: v1\nkind: Service\nmetadata: {name: e}\nspec: {type: ExternalName, externalName: example.com}\n",
			want: []string{"services/x/h", "services/default/e"}, lines: []int{1, 6},
		},
		{
			name: "empty file",
			data: "\n\n# nothing\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.file
			if file == "" {
				file = "m.yaml"
			}
			objs, problems := Decode(file, []byte(tc.data))
			if len(problems) > 0 {
				t.Fatalf("unexpected problems: %v", problems)
			}
			if len(objs) != len(tc.want) {
				t.Fatalf("got %d objects, want %d", len(objs), len(tc.want))
			}
			for i, o := range objs {
				k, _ := KeyOf(o.Object)
				if k.String() != tc.want[i] {
					t.Errorf("object %d: key %s, want %s", i, k, tc.want[i])
				}
				if o.Line != tc.lines[i] {
					t.Errorf("object %d (%s): line %d, want %d", i, k, o.Line, tc.lines[i])
				}
				if o.File != file {
					t.Errorf("object %d: file %q", i, o.File)
				}
			}
		})
	}
}

func TestDecodeDefaults(t *testing.T) {
	data := `apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  type: NodePort
  clusterIP: 10.96.0.1
  sessionAffinity: ClientIP
  ports:
  - {name: a, port: 80, nodePort: 30001}
  - {name: b, port: 53, protocol: UDP, targetPort: dns, nodePort: 30002}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s-1, labels: {kubernetes.io/service-name: s}}
addressType: IPv4
ports: [{port: 80}]
endpoints: [{addresses: [198.19.0.1]}]
`
	objs, problems := Decode("d.yaml", []byte(data))
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	svc := objs[0].Object.(*v1.Service)
	if svc.Spec.Ports[0].Protocol != v1.ProtocolTCP || svc.Spec.Ports[0].TargetPort != intstr.FromInt32(80) {
		t.Errorf("port 0 not defaulted: %+v", svc.Spec.Ports[0])
	}
	if svc.Spec.Ports[1].TargetPort != intstr.FromString("dns") {
		t.Errorf("named targetPort changed: %+v", svc.Spec.Ports[1])
	}
	if got := svc.Spec.ClusterIPs; len(got) != 1 || got[0] != "10.96.0.1" {
		t.Errorf("clusterIPs = %v", got)
	}
	if got := svc.Spec.IPFamilies; len(got) != 1 || got[0] != v1.IPv4Protocol {
		t.Errorf("ipFamilies = %v", got)
	}
	if svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyCluster ||
		ptr.Deref(svc.Spec.InternalTrafficPolicy, "") != v1.ServiceInternalTrafficPolicyCluster {
		t.Errorf("traffic policies not defaulted: %q %v", svc.Spec.ExternalTrafficPolicy, svc.Spec.InternalTrafficPolicy)
	}
	if ptr.Deref(svc.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, 0) != 10800 {
		t.Errorf("affinity timeout not defaulted")
	}
	if svc.APIVersion != "" || svc.Kind != "" {
		t.Errorf("type meta left set: %v", svc.TypeMeta)
	}
	slice := objs[1].Object.(*discoveryv1.EndpointSlice)
	if ptr.Deref(slice.Ports[0].Protocol, "") != v1.ProtocolTCP {
		t.Errorf("slice port protocol not defaulted")
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name string
		data string
		// every problem must match one of these, in order: line and a reason fragment
		want []struct {
			line   int
			reason string
		}
		accepted int
	}{
		{
			name: "YAML syntax error is reported at its file line, later documents still apply",
			data: goodService + "---\napiVersion: v1\nkind: Node\nmetadata:\n  name: [oops\n---\napiVersion: v1\nkind: Node\nmetadata: {name: ok}\n",
			want: []struct {
				line   int
				reason string
			}{{13, "invalid YAML"}},
			accepted: 2,
		},
		{
			name: "unknown field names the field and its line",
			data: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  clusterIP: 10.96.0.1\n  ports:\n  - port: 80\n    nodeport: 30000\n",
			want: []struct {
				line   int
				reason string
			}{{8, `unknown field "spec.ports[0].nodeport"`}},
		},
		{
			name: "duplicate key",
			data: "apiVersion: v1\nkind: Node\nmetadata:\n  name: a\n  name: b\n",
			want: []struct {
				line   int
				reason string
			}{{5, "already set"}},
		},
		{
			name: "missing cluster IP explains why",
			data: "apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec:\n  ports:\n  - port: 80\n",
			want: []struct {
				line   int
				reason string
			}{{4, "spec.clusterIP: Required value: no API server allocates cluster IPs"}},
		},
		{
			name: "bad port, node port on second port, bad external IP",
			data: `apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  type: NodePort
  clusterIP: 10.96.0.1
  externalIPs: [1.2.3]
  ports:
  - name: a
    port: 0
    nodePort: 30000
  - name: b
    port: 81
`,
			want: []struct {
				line   int
				reason string
			}{
				{10, "spec.ports[0].port: Invalid value: 0"},
				{12, "spec.ports[1].nodePort: Required value"},
				{7, `spec.externalIPs[0]: Invalid value: "1.2.3"`},
			},
		},
		{
			name: "endpoint slice without service label and with a bad address",
			data: `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: x
addressType: IPv4
endpoints:
- addresses: [198.19.0.1]
- addresses: ["fd00::1"]
`,
			want: []struct {
				line   int
				reason string
			}{
				{3, "kubernetes.io/service-name"},
				{8, `endpoints[1].addresses[0]: Invalid value: "fd00::1": must be a valid IPv4 address`},
			},
		},
		{
			name: "unsupported kinds and versions",
			data: "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n---\napiVersion: v1\nkind: Endpoints\nmetadata: {name: e}\n---\napiVersion: discovery.k8s.io/v1beta1\nkind: EndpointSlice\nmetadata: {name: e}\n",
			want: []struct {
				line   int
				reason string
			}{{1, "kind Deployment"}, {5, "EndpointSlices"}, {9, `unsupported apiVersion "discovery.k8s.io/v1beta1"`}},
		},
		{
			name: "missing kind and apiVersion",
			data: "metadata: {name: a}\n---\nkind: Node\nmetadata: {name: a}\n",
			want: []struct {
				line   int
				reason string
			}{{1, "missing kind"}, {3, "missing apiVersion"}},
		},
		{
			name: "bad item in a list is reported at the item, the rest applies",
			data: `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: good}
- apiVersion: v1
  kind: Node
  metadata: {name: bad}
  spec:
    podCIDRs: [198.19.0.0/33]
`,
			want: []struct {
				line   int
				reason string
			}{{11, `spec.podCIDRs[0]: Invalid value: "198.19.0.0/33"`}},
			accepted: 1,
		},
		{
			name: "namespace on a cluster-scoped object",
			data: "apiVersion: v1\nkind: Node\nmetadata: {name: a, namespace: x}\n",
			want: []struct {
				line   int
				reason string
			}{{3, "metadata.namespace: Forbidden"}},
		},
		{
			name: "document that is not a mapping",
			data: "- a\n- b\n",
			want: []struct {
				line   int
				reason string
			}{{1, "not an object"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, problems := Decode("bad.yaml", []byte(tc.data))
			if len(objs) != tc.accepted {
				t.Errorf("accepted %d objects, want %d", len(objs), tc.accepted)
			}
			if len(problems) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(problems), len(tc.want), problems)
			}
			for i, p := range problems {
				if p.File != "bad.yaml" || p.Line != tc.want[i].line || !strings.Contains(p.Reason, tc.want[i].reason) {
					t.Errorf("problem %d = %q (line %d), want line %d containing %q", i, p.Error(), p.Line, tc.want[i].line, tc.want[i].reason)
				}
				if !strings.HasPrefix(p.Error(), "bad.yaml:") {
					t.Errorf("problem %d does not start with file:line: %q", i, p.Error())
				}
			}
		})
	}
}

func TestDecodeBadJSON(t *testing.T) {
	_, problems := Decode("x.json", []byte("{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}}\n{\n  \"kind\": ,\n}"))
	if len(problems) != 1 || problems[0].Line != 3 || !strings.Contains(problems[0].Reason, "invalid JSON") {
		t.Fatalf("problems = %v", problems)
	}
}

// The shipped example cluster must load without a single problem.
func TestExampleClusterLoads(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "examples", "cluster")
	l, err := listManifests(dir)
	if err != nil {
		t.Skipf("examples not present: %v", err)
	}
	// Across files too: no two Services may share a cluster IP or node port.
	if res, err := NewReader(dir).Sync(context.Background()); err != nil || len(res.Problems) > 0 {
		t.Errorf("Sync: %v, problems %v", err, res.Problems)
	}
	kinds := map[string]int{}
	for _, f := range l.files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, problems := Decode(f, data)
		for _, p := range problems {
			t.Errorf("%v", p)
		}
		for _, o := range objs {
			switch o.Object.(type) {
			case *v1.Service:
				kinds["Service"]++
			case *discoveryv1.EndpointSlice:
				kinds["EndpointSlice"]++
			case *v1.Node:
				kinds["Node"]++
			case *networkingv1.ServiceCIDR:
				kinds["ServiceCIDR"]++
			}
		}
	}
	if kinds["Service"] < 7 || kinds["EndpointSlice"] < 8 || kinds["Node"] != 2 || kinds["ServiceCIDR"] != 1 {
		t.Errorf("unexpected example contents: %v", kinds)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(goodService))
	f.Add([]byte("apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  apiVersion: v1\n  metadata: {name: a}\n"))
	f.Add([]byte(`[{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}]`))
	f.Add([]byte("---\n---\n...\n"))
	f.Add([]byte("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: x, labels: {kubernetes.io/service-name: s}}\naddressType: IPv6\nports: [{port: 1}]\nendpoints: [{addresses: ['::1']}]\n"))
	f.Add([]byte("{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, problems := Decode("f.yaml", data)
		lines := strings.Count(string(data), "\n") + 1
		for _, p := range problems {
			if p.Line < 0 || p.Line > lines {
				t.Errorf("problem line %d outside 1..%d: %v", p.Line, lines, p)
			}
		}
		for _, o := range objs {
			if _, ok := KeyOf(o.Object); !ok {
				t.Errorf("accepted unsupported object %T", o.Object)
			}
			if o.Line < 1 || o.Line > lines {
				t.Errorf("object line %d outside 1..%d", o.Line, lines)
			}
		}
	})
}
