//go:build linux

package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"k8s.io/kube-proxy/test/kubeproxybin"
)

// These tests cover deploy/: the manifests an operator applies (DaemonSet, ServiceAccount,
// ClusterRoleBinding, ConfigMap). Here: the files themselves and the configuration the
// ConfigMap holds, loaded by the binary; deploy_apiserver_test.go creates them against
// kube-apiserver.

// deployDir is the repository's deploy/ directory (tests run in test/integration).
func deployDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "deploy"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

type kustomization struct {
	Namespace string   `json:"namespace"`
	Resources []string `json:"resources"`
	Images    []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deployDir(t), "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	return k
}

// deployObjects reads every document of the files kustomization.yaml lists, in order.
func deployObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, file := range readKustomization(t).Resources {
		data, err := os.ReadFile(filepath.Join(deployDir(t), file))
		if err != nil {
			t.Fatalf("kustomization.yaml lists %s: %v", file, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			if err := dec.Decode(&obj); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if obj == nil {
				continue
			}
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
	return out
}

// deployed is deploy/ decoded strictly into the API types: a misspelt field fails here
// with its name, before the API server is asked.
type deployed struct {
	sa  *v1.ServiceAccount
	crb *rbacv1.ClusterRoleBinding
	cm  *v1.ConfigMap
	ds  *appsv1.DaemonSet
}

func decodeDeploy(t *testing.T) deployed {
	t.Helper()
	var d deployed
	for _, u := range deployObjects(t) {
		data, err := u.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var target any
		switch u.GetKind() {
		case "ServiceAccount":
			d.sa = &v1.ServiceAccount{}
			target = d.sa
		case "ClusterRoleBinding":
			d.crb = &rbacv1.ClusterRoleBinding{}
			target = d.crb
		case "ConfigMap":
			d.cm = &v1.ConfigMap{}
			target = d.cm
		case "DaemonSet":
			d.ds = &appsv1.DaemonSet{}
			target = d.ds
		default:
			t.Fatalf("unexpected %s %s in deploy/", u.GetKind(), u.GetName())
		}
		if err := yaml.UnmarshalStrict(data, target); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	if d.sa == nil || d.crb == nil || d.cm == nil || d.ds == nil {
		t.Fatalf("deploy/ must hold a ServiceAccount, a ClusterRoleBinding, a ConfigMap and a DaemonSet, got %+v", d)
	}
	return d
}

// TestDeployFiles checks deploy/ on its own: kustomization.yaml lists every manifest, the
// objects refer to each other correctly, and the DaemonSet keeps what kubeadm's has.
func TestDeployFiles(t *testing.T) {
	dir := deployDir(t)
	k := readKustomization(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(k.Resources, base) {
			t.Errorf("deploy/%s is not listed in kustomization.yaml's resources", base)
		}
	}
	d := decodeDeploy(t)
	pod := d.ds.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("DaemonSet has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	volume := func(name string) *v1.Volume {
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == name {
				return &pod.Volumes[i]
			}
		}
		return nil
	}
	mount := func(path string) *v1.VolumeMount {
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].MountPath == path {
				return &c.VolumeMounts[i]
			}
		}
		return nil
	}
	hostPathMount := func(path string, typ v1.HostPathType, readOnly bool) error {
		m := mount(path)
		if m == nil {
			return fmt.Errorf("%s is not mounted", path)
		}
		v := volume(m.Name)
		if v == nil || v.HostPath == nil || v.HostPath.Path != path {
			return fmt.Errorf("%s is not the host's %s: %+v", path, path, v)
		}
		if typ != "" && (v.HostPath.Type == nil || *v.HostPath.Type != typ) {
			return fmt.Errorf("hostPath %s has type %v, want %s", path, v.HostPath.Type, typ)
		}
		if m.ReadOnly != readOnly {
			return fmt.Errorf("%s readOnly=%v, want %v", path, m.ReadOnly, readOnly)
		}
		return nil
	}
	flagValue := func(name string) string {
		for _, a := range c.Command[1:] {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		return ""
	}

	for _, check := range []struct {
		what string
		err  func() error
	}{
		{"labels and selector are kubeadm's (the selector is immutable)", func() error {
			if d.ds.Name != "kube-proxy" || d.ds.Namespace != "kube-system" || d.ds.Spec.Selector.MatchLabels["k8s-app"] != "kube-proxy" ||
				d.ds.Spec.Template.Labels["k8s-app"] != "kube-proxy" || len(d.ds.Spec.Selector.MatchLabels) != 1 {
				return fmt.Errorf("got %s/%s selector %v template labels %v", d.ds.Namespace, d.ds.Name, d.ds.Spec.Selector, d.ds.Spec.Template.Labels)
			}
			return nil
		}},
		{"rolling update", func() error {
			if d.ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType {
				return fmt.Errorf("update strategy %q", d.ds.Spec.UpdateStrategy.Type)
			}
			return nil
		}},
		{"host network", func() error {
			if !pod.HostNetwork {
				return fmt.Errorf("hostNetwork is false")
			}
			return nil
		}},
		{"privileged", func() error {
			if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
				return fmt.Errorf("securityContext %+v", c.SecurityContext)
			}
			return nil
		}},
		{"system-node-critical", func() error {
			if pod.PriorityClassName != "system-node-critical" {
				return fmt.Errorf("priorityClassName %q", pod.PriorityClassName)
			}
			return nil
		}},
		{"tolerates every taint", func() error {
			if !slices.ContainsFunc(pod.Tolerations, func(tol v1.Toleration) bool {
				return tol.Operator == v1.TolerationOpExists && tol.Key == "" && tol.Effect == ""
			}) {
				return fmt.Errorf("tolerations %+v", pod.Tolerations)
			}
			return nil
		}},
		{"Linux nodes only", func() error {
			if pod.NodeSelector["kubernetes.io/os"] != "linux" {
				return fmt.Errorf("nodeSelector %v", pod.NodeSelector)
			}
			return nil
		}},
		{"the host's xtables lock", func() error { return hostPathMount("/run/xtables.lock", v1.HostPathFileOrCreate, false) }},
		{"the host's kernel modules, read-only", func() error { return hostPathMount("/lib/modules", "", true) }},
		{"the binary at upstream's path, with kubeadm's flags only (so that swapping images back works)", func() error {
			if len(c.Command) == 0 || c.Command[0] != "/usr/local/bin/kube-proxy" {
				return fmt.Errorf("command %q", c.Command)
			}
			for _, a := range c.Command[1:] {
				name, _, _ := strings.Cut(a, "=")
				if name != "--config" && name != "--hostname-override" {
					return fmt.Errorf("flag %s: upstream kube-proxy may not accept it, and kubeadm does not pass it", a)
				}
			}
			if flagValue("hostname-override") != "$(NODE_NAME)" || !slices.ContainsFunc(c.Env, func(e v1.EnvVar) bool {
				return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
			}) {
				return fmt.Errorf("--hostname-override must be the pod's node name: command %q env %+v", c.Command, c.Env)
			}
			return nil
		}},
		{"--config is a key of the mounted ConfigMap, and so is the config's kubeconfig", func() error {
			config := flagValue("config")
			m := mount(filepath.Dir(config))
			if m == nil {
				return fmt.Errorf("--config=%s: %s is not mounted", config, filepath.Dir(config))
			}
			if v := volume(m.Name); v == nil || v.ConfigMap == nil || v.ConfigMap.Name != d.cm.Name {
				return fmt.Errorf("%s is not ConfigMap %s: %+v", m.MountPath, d.cm.Name, v)
			}
			if _, ok := d.cm.Data[filepath.Base(config)]; !ok {
				return fmt.Errorf("--config=%s: ConfigMap %s has no key %s", config, d.cm.Name, filepath.Base(config))
			}
			for _, key := range []string{filepath.Base(config), "config-v1alpha2.conf"} {
				var cfg struct {
					ClientConnection struct {
						Kubeconfig string `json:"kubeconfig"`
					} `json:"clientConnection"`
				}
				if err := yaml.Unmarshal([]byte(d.cm.Data[key]), &cfg); err != nil {
					return fmt.Errorf("%s: %w", key, err)
				}
				kc := cfg.ClientConnection.Kubeconfig
				if filepath.Dir(kc) != m.MountPath || d.cm.Data[filepath.Base(kc)] == "" {
					return fmt.Errorf("%s: clientConnection.kubeconfig %q is not a key of the ConfigMap mounted at %s", key, kc, m.MountPath)
				}
			}
			return nil
		}},
		{"runs as the ServiceAccount the binding names, bound to system:node-proxier", func() error {
			if pod.ServiceAccountName != d.sa.Name || d.sa.Namespace != d.ds.Namespace {
				return fmt.Errorf("serviceAccountName %q, ServiceAccount %s/%s", pod.ServiceAccountName, d.sa.Namespace, d.sa.Name)
			}
			if d.crb.RoleRef.Kind != "ClusterRole" || d.crb.RoleRef.Name != "system:node-proxier" {
				return fmt.Errorf("roleRef %+v", d.crb.RoleRef)
			}
			if !slices.Contains(d.crb.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: d.sa.Name, Namespace: d.sa.Namespace}) {
				return fmt.Errorf("subjects %+v do not include ServiceAccount %s/%s", d.crb.Subjects, d.sa.Namespace, d.sa.Name)
			}
			return nil
		}},
	} {
		if err := check.err(); err != nil {
			t.Errorf("%s: %v", check.what, err)
		}
	}

	// kustomize renders the same objects, with the image it is told to use.
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Logf("kubectl is not installed: not rendering deploy/ with kustomize")
		return
	}
	out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize deploy/: %v\n%s", err, out)
	}
	var kinds []string
	var image string
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, u.GetKind())
		if u.GetKind() == "DaemonSet" {
			var ds appsv1.DaemonSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds); err != nil {
				t.Fatal(err)
			}
			image = ds.Spec.Template.Spec.Containers[0].Image
		}
	}
	slices.Sort(kinds)
	if want := []string{"ClusterRoleBinding", "ConfigMap", "DaemonSet", "ServiceAccount"}; !slices.Equal(kinds, want) {
		t.Errorf("kustomize renders %v, want %v", kinds, want)
	}
	if len(k.Images) != 1 || image != k.Images[0].NewName+":"+k.Images[0].NewTag {
		t.Errorf("kustomize renders image %q, kustomization.yaml's images say %+v", image, k.Images)
	}
}

// TestDeployConfigLoads runs the binary on both configurations the ConfigMap holds: each
// loads without a warning, and converted to v1alpha2 they are the same configuration (so
// switching the DaemonSet's --config from one to the other changes nothing).
func TestDeployConfigLoads(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kube-proxy binary; skipped with -short")
	}
	cm := decodeDeploy(t).cm
	dir := t.TempDir()
	for key, data := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := kubeproxybin.Path(t)
	written := map[string]map[string]any{}
	for _, tc := range []struct {
		key, wantVersion string
	}{
		{"config.conf", "kubeproxy.config.k8s.io/v1alpha1"},
		{"config-v1alpha2.conf", "kubeproxy.config.k8s.io/v1alpha2"},
	} {
		if !strings.Contains(cm.Data[tc.key], "apiVersion: "+tc.wantVersion+"\n") {
			t.Errorf("ConfigMap key %s is not %s", tc.key, tc.wantVersion)
		}
		out := filepath.Join(dir, tc.key+".written")
		cmd := exec.Command(bin, "--config="+filepath.Join(dir, tc.key), "--write-config-to="+out, "--write-config-version=v1alpha2")
		logs, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kube-proxy --config=%s --write-config-to: %v\n%s", tc.key, err, logs)
		}
		// klog's text format starts each line with its severity: I, W, E or F.
		for _, line := range strings.Split(string(logs), "\n") {
			if line != "" && line[0] != 'I' {
				t.Errorf("%s: kube-proxy logged more than information:\n%s", tc.key, logs)
				break
			}
		}
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := yaml.Unmarshal(data, &cfg); err != nil {
			t.Fatal(err)
		}
		written[tc.key] = cfg
	}

	fromV1, fromV2 := written["config.conf"], written["config-v1alpha2.conf"]
	if fromV2["configHardFail"] != true {
		t.Errorf("config-v1alpha2.conf: configHardFail %v, want true (a typo must stop kube-proxy)", fromV2["configHardFail"])
	}
	// v1alpha1 files are always lenient; that is the one intended difference.
	delete(fromV1, "configHardFail")
	delete(fromV2, "configHardFail")
	a, _ := yaml.Marshal(fromV1)
	b, _ := yaml.Marshal(fromV2)
	if !bytes.Equal(a, b) {
		t.Errorf("the ConfigMap's v1alpha1 and v1alpha2 configurations differ once loaded:\n--- config.conf\n%s\n--- config-v1alpha2.conf\n%s", a, b)
	}
	for field, want := range map[string]any{
		"mode":               "iptables",
		"healthzBindAddress": "0.0.0.0:10256",
		"metricsBindAddress": "127.0.0.1:10249",
	} {
		if fromV2[field] != want {
			t.Errorf("%s = %v, want %v (kubeadm's)", field, fromV2[field], want)
		}
	}
}
