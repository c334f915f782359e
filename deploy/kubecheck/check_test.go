package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const dir = "../kubernetes"

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestManifests: the manifests shipped in deploy/kubernetes pass.
func TestManifests(t *testing.T) {
	m := loadManifests(t)
	if len(m.statefulSets) != 1 || len(m.services) != 2 || len(m.pdbs) != 1 {
		t.Fatalf("loaded %d StatefulSets, %d Services, %d PodDisruptionBudgets; want 1, 2, 1", len(m.statefulSets), len(m.services), len(m.pdbs))
	}
	for _, err := range check(m) {
		t.Error(err)
	}
}

func setArg(t *testing.T, c *corev1.Container, flag, value string) {
	t.Helper()
	for i, a := range c.Args {
		if strings.HasPrefix(a, flag+"=") {
			c.Args[i] = flag + "=" + value
			return
		}
	}
	t.Fatalf("no %s argument", flag)
}

func setEnvField(t *testing.T, c *corev1.Container, name, field string) {
	t.Helper()
	for i := range c.Env {
		if c.Env[i].Name == name {
			c.Env[i].ValueFrom.FieldRef.FieldPath = field
			return
		}
	}
	t.Fatalf("no env %s", name)
}

func service(t *testing.T, m *manifests, name string) *corev1.Service {
	t.Helper()
	for _, s := range m.services {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no service %s", name)
	return nil
}

// TestCheckCatches: each way of breaking the cluster that check looks for
// is reported, with a message that says what is wrong.
func TestCheckCatches(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container)
		want   string
	}{
		{"even replicas", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			*sts.Spec.Replicas = 4
		}, "want an odd number"},
		{"replicas beyond --peers", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			*sts.Spec.Replicas = 5
		}, "--peers lists 3 servers, the StatefulSet has 5 replicas"},
		{"ordered start", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			sts.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
		}, "want Parallel"},
		{"id from the pod name", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			setEnvField(t, c, "POD_INDEX", "metadata.name")
		}, `--id is "coordd-0", want its ordinal 0`},
		{"the same id everywhere", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			setArg(t, c, "--id", "0")
		}, `--id is "0", want its ordinal 1`},
		{"peers under another service", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			setArg(t, c, "--peers", "0=coordd-0.coordd.$(POD_NAMESPACE).svc.cluster.local:2888,1=coordd-1.coordd.$(POD_NAMESPACE).svc.cluster.local:2888,2=coordd-2.coordd.$(POD_NAMESPACE).svc.cluster.local:2888")
		}, "its name under the headless Service"},
		{"no --join", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			var args []string
			for _, a := range c.Args {
				if !strings.HasPrefix(a, "--join") {
					args = append(args, a)
				}
			}
			c.Args = args
		}, "no --join=true"},
		{"peer-addr not its own entry", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			setArg(t, c, "--peer-addr", "coordd-0.coordd-peer.$(POD_NAMESPACE).svc.cluster.local:2888")
		}, "pod coordd-1: --peer-addr is"},
		{"undefined variable", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			setArg(t, c, "--peer-addr", "$(HOSTNAME).coordd-peer.$(POD_NAMESPACE).svc.cluster.local:2888")
		}, "refers to $(HOSTNAME), which the container's env does not define"},
		{"data off the volume", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			setArg(t, c, "--data-dir", "/data")
		}, `--data-dir "/data" is not on a volume`},
		{"client on loopback only", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			setArg(t, c, "--client-addr", "127.0.0.1:2182")
		}, "does not listen on the client port 2181"},
		{"readiness on the peer port", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			c.ReadinessProbe.HTTPGet.Port = intstr.FromString("peer")
		}, "want a readiness probe of HTTP GET /readyz on port metrics"},
		{"readiness by TCP connect", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			c.ReadinessProbe.HTTPGet = nil
			c.ReadinessProbe.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromString("client")}
		}, "want a readiness probe of HTTP GET /readyz"},
		{"liveness on /readyz", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			c.LivenessProbe.HTTPGet.Path = "/readyz"
		}, "want a liveness probe of HTTP GET /livez on port metrics"},
		{"startup probe on /metrics", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			c.StartupProbe.HTTPGet.Path = "/metrics"
		}, "want a startup probe of HTTP GET /livez"},
		{"liveness timeout too short", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			c.LivenessProbe.TimeoutSeconds = 1
		}, "the liveness probe's timeoutSeconds 1"},
		{"metrics on loopback", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			setArg(t, c, "--metrics-addr", "127.0.0.1:9181")
		}, `--metrics-addr "127.0.0.1:9181" does not listen on the pod's metrics port 9181`},
		{"metrics on another port", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			setArg(t, c, "--metrics-addr", ":9999")
		}, `--metrics-addr ":9999" does not listen`},
		{"GOMEMLIMIT above the limit", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			c.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("1Gi")
		}, "GOMEMLIMIT 1800MiB is not below the memory limit 1Gi"},
		{"volumes dropped on scale-down", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled = appsv1.DeletePersistentVolumeClaimRetentionPolicyType
		}, "must retain the volumes"},
		{"image kustomize does not set", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			c.Image = "example.com/other:1"
		}, "is not among kustomization.yaml's images"},
		{"peer service hides unready pods", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			service(t, m, "coordd-peer").Spec.PublishNotReadyAddresses = false
		}, "publishNotReadyAddresses must be true"},
		{"peer service not headless", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			service(t, m, "coordd-peer").Spec.ClusterIP = ""
		}, "must be headless"},
		{"peer service selects nothing", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			service(t, m, "coordd-peer").Spec.Selector = map[string]string{"app.kubernetes.io/name": "zookeeper"}
		}, "selector does not match the pods"},
		{"no client service", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			service(t, m, "coordd").Spec.Ports[0].TargetPort = intstr.FromString("peer")
		}, "no Service with a cluster IP serves the pods' client port"},
		{"budget loses the majority", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			two := intstr.FromInt32(2)
			m.pdbs[0].Spec.MaxUnavailable = &two
		}, "lets 2 of 3 servers go, leaving fewer than a majority (2)"},
		{"budget blocks every drain", func(t *testing.T, m *manifests, sts *appsv1.StatefulSet, c *corev1.Container) {
			all := intstr.FromString("100%")
			m.pdbs[0].Spec.MaxUnavailable, m.pdbs[0].Spec.MinAvailable = nil, &all
		}, "lets no server go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := loadManifests(t)
			sts := m.statefulSets[0]
			tc.mutate(t, m, sts, coorddContainer(sts))
			errs := check(m)
			var msgs []string
			for _, err := range errs {
				if strings.Contains(err.Error(), tc.want) {
					return
				}
				msgs = append(msgs, err.Error())
			}
			t.Errorf("no error contains %q; got %q", tc.want, msgs)
		})
	}
}

// editedCopy copies deploy/kubernetes to a temporary directory, replaces
// old with new in file (which must contain old), and returns the copy.
func editedCopy(t *testing.T, file, old, new string) string {
	t.Helper()
	tmp := t.TempDir()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == file {
			if !strings.Contains(string(b), old) {
				t.Fatalf("%s does not contain %q", file, old)
			}
			b = []byte(strings.Replace(string(b), old, new, 1))
		}
		if err := os.WriteFile(filepath.Join(tmp, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(tmp, file)); err != nil {
		if err := os.WriteFile(filepath.Join(tmp, file), []byte(new), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return tmp
}

// TestStrictDecoding: a field the Kubernetes API does not have, a key
// given twice, a value of the wrong type, a kind the manifests do not use,
// or a file kustomize would not apply is an error naming the problem.
func TestStrictDecoding(t *testing.T) {
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"misspelt field", "statefulset.yaml", "  replicas: 3\n", "  replica: 3\n", `unknown field "spec.replica"`},
		{"field in the wrong place", "service-peer.yaml", "  publishNotReadyAddresses: true\n", "  publishNotReadyAddresses: true\n  ports2: []\n", `unknown field "spec.ports2"`},
		{"duplicate key", "pdb.yaml", "  maxUnavailable: 1\n", "  maxUnavailable: 1\n  maxUnavailable: 2\n", `key "maxUnavailable" already set`},
		{"wrong type", "statefulset.yaml", "  replicas: 3\n", "  replicas: three\n", "replicas"},
		{"bad quantity", "statefulset.yaml", "storage: 10Gi", "storage: ten gigabytes", "quantities must match"},
		{"unknown kind", "pdb.yaml", "kind: PodDisruptionBudget", "kind: PodDisruptionBudgets", `no kind "PodDisruptionBudgets"`},
		{"kind not used", "pdb.yaml", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata:\n  name: coordd\n  labels:\n    app.kubernetes.io/name: coordd\nspec:\n  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: coordd\n",
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: coordd\n", "kind ConfigMap is not one coordd's manifests use"},
		{"file not listed", "extra.yaml", "", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n", "extra.yaml is not among kustomization.yaml's resources"},
		{"kustomization field", "kustomization.yaml", "images:", "namePrefix: x-\nimages:", `unknown field "namePrefix"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(editedCopy(t, tc.file, tc.old, tc.new))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("load: %v; want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestRunCoordd: every pod's arguments are ones coordd accepts, and a flag
// coordd does not have is caught.
func TestRunCoordd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "coordd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/coordd")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build coordd: %v\n%s", err, out)
	}
	m := loadManifests(t)
	for _, err := range runCoordd(m, bin) {
		t.Error(err)
	}
	c := coorddContainer(m.statefulSets[0])
	c.Args = append(c.Args, "--no-such-flag=1")
	errs := runCoordd(m, bin)
	if len(errs) != 3 || !strings.Contains(errs[0].Error(), "flag provided but not defined: -no-such-flag") {
		t.Errorf("with an unknown flag: %q; want one error per pod naming the flag", errs)
	}
}
