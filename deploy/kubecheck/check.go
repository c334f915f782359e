package main

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// namespace is the namespace pods are assumed to run in when their
// arguments are expanded; any other gives the same result up to the name.
const namespace = "default"

// podIndexLabel is the label the StatefulSet controller puts on each pod
// with its ordinal (Kubernetes 1.28 and newer).
const podIndexLabel = "apps.kubernetes.io/pod-index"

// check returns every way the manifests fall short of a coordd cluster.
func check(m *manifests) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf("kubecheck: "+format, args...)) }
	if len(m.statefulSets) != 1 {
		fail("%d StatefulSets, want exactly one", len(m.statefulSets))
		return errs
	}
	sts := m.statefulSets[0]
	spec := &sts.Spec
	pod := &spec.Template
	podLabels := labels.Set(pod.Labels)
	name := "statefulset " + sts.Name

	replicas := replicasOf(sts)
	if replicas < 3 || replicas%2 == 0 {
		fail("%s: %d replicas, want an odd number of at least 3", name, replicas)
	}
	if spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		fail("%s: podManagementPolicy %q, want Parallel (the servers must start together to elect a leader)", name, spec.PodManagementPolicy)
	}
	if !selects(spec.Selector, podLabels) {
		fail("%s: its selector does not match its pod template's labels", name)
	}
	if p := spec.PersistentVolumeClaimRetentionPolicy; p == nil ||
		p.WhenDeleted != appsv1.RetainPersistentVolumeClaimRetentionPolicyType ||
		p.WhenScaled != appsv1.RetainPersistentVolumeClaimRetentionPolicyType {
		fail("%s: persistentVolumeClaimRetentionPolicy must retain the volumes (they hold the Raft logs)", name)
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil && *g < 10 {
		fail("%s: terminationGracePeriodSeconds %d leaves coordd too little time to stop cleanly (want at least 10)", name, *g)
	}

	c := coorddContainer(sts)
	if c == nil {
		fail("%s: no container named coordd", name)
		return errs
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	clientPort, peerPort, metricsPort := ports["client"], ports["peer"], ports["metrics"]
	if clientPort == 0 || peerPort == 0 || metricsPort == 0 {
		fail("%s: the coordd container must name its ports client, peer and metrics", name)
		return errs
	}
	if !isImage(c.Image, m.images) {
		fail("%s: image %q is not among kustomization.yaml's images, so setting the image there would miss it", name, c.Image)
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		fail("%s: the coordd container should have a read-only root filesystem (it writes only to its volume)", name)
	}
	// Readiness is /readyz (knows a leader, caught up), liveness /livez
	// (Raft runs, the state machine answers), on the metrics port; a
	// startup probe, if any, is /livez too.
	for _, p := range []struct {
		kind, path string
		probe      *corev1.Probe
		optional   bool
	}{{"readiness", "/readyz", c.ReadinessProbe, false}, {"liveness", "/livez", c.LivenessProbe, false}, {"startup", "/livez", c.StartupProbe, true}} {
		if p.probe == nil && p.optional {
			continue
		}
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || !isPort(p.probe.HTTPGet.Port, "metrics", metricsPort) {
			fail("%s: want a %s probe of HTTP GET %s on port metrics", name, p.kind, p.path)
		} else if p.probe.TimeoutSeconds > 0 && p.probe.TimeoutSeconds < 3 {
			fail("%s: the %s probe's timeoutSeconds %d is less than the 2 s /livez may take", name, p.kind, p.probe.TimeoutSeconds)
		}
	}
	if err := checkMemLimit(c); err != nil {
		fail("%s: %v", name, err)
	}

	// The headless Service the pods' names live under.
	var headless *corev1.Service
	for _, s := range m.services {
		if s.Name == spec.ServiceName {
			headless = s
		}
	}
	switch {
	case headless == nil:
		fail("%s: serviceName %q names no Service here", name, spec.ServiceName)
	case headless.Spec.ClusterIP != corev1.ClusterIPNone:
		fail("service %s: the StatefulSet's serviceName must be headless (clusterIP: None)", headless.Name)
	case !headless.Spec.PublishNotReadyAddresses:
		fail("service %s: publishNotReadyAddresses must be true: the servers must find each other before any is ready", headless.Name)
	case !labels.SelectorFromSet(headless.Spec.Selector).Matches(podLabels) || len(headless.Spec.Selector) == 0:
		fail("service %s: its selector does not match the pods", headless.Name)
	case !servesPort(headless, "peer", peerPort):
		fail("service %s: no port targets the pods' peer port", headless.Name)
	}
	// A client Service: a stable address that reaches a server.
	client := false
	for _, s := range m.services {
		if s.Spec.ClusterIP != corev1.ClusterIPNone && len(s.Spec.Selector) > 0 &&
			labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) && servesPort(s, "client", clientPort) {
			client = true
		}
	}
	if !client {
		fail("no Service with a cluster IP serves the pods' client port")
	}

	pdbs := 0
	for _, b := range m.pdbs {
		if selects(b.Spec.Selector, podLabels) {
			pdbs++
			if err := checkBudget(b, int(replicas)); err != nil {
				fail("poddisruptionbudget %s: %v", b.Name, err)
			}
		}
	}
	if pdbs != 1 {
		fail("%d PodDisruptionBudgets select the pods, want one", pdbs)
	}

	// Every pod's arguments, expanded as the kubelet does.
	dataMounts := map[string]bool{}
	for _, t := range spec.VolumeClaimTemplates {
		dataMounts[t.Name] = true
	}
	for i := 0; i < int(replicas); i++ {
		args, _, err := podArgs(sts, c, i)
		if err != nil {
			fail("%s: pod %s-%d: %v", name, sts.Name, i, err)
			continue
		}
		if err := checkPodArgs(sts, c, args, i, peerPort, clientPort, metricsPort, dataMounts); err != nil {
			fail("%s: pod %s-%d: %v", name, sts.Name, i, err)
		}
	}
	return errs
}

// checkPodArgs checks pod i's expanded arguments: its id is its ordinal,
// --peers names every replica at its address under the headless Service,
// its own entry is its --peer-addr, it joins when it is not among them
// (--join), its data is on its volume, and its metrics are on the pod's
// metrics port.
func checkPodArgs(sts *appsv1.StatefulSet, c *corev1.Container, args []string, i int, peerPort, clientPort, metricsPort int32, dataMounts map[string]bool) error {
	flags, err := parseFlags(args)
	if err != nil {
		return err
	}
	if got := flags["id"]; got != strconv.Itoa(i) {
		return fmt.Errorf("--id is %q, want its ordinal %d", got, i)
	}
	peers := map[string]string{}
	for _, p := range strings.Split(flags["peers"], ",") {
		id, addr, ok := strings.Cut(p, "=")
		if !ok {
			return fmt.Errorf("--peers entry %q is not id=host:port", p)
		}
		peers[id] = addr
	}
	replicas := int(replicasOf(sts))
	if len(peers) != replicas {
		return fmt.Errorf("--peers lists %d servers, the StatefulSet has %d replicas", len(peers), replicas)
	}
	for j := 0; j < replicas; j++ {
		want := fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local:%d", sts.Name, j, sts.Spec.ServiceName, namespace, peerPort)
		if got := peers[strconv.Itoa(j)]; got != want {
			return fmt.Errorf("--peers gives server %d the address %q, want %q (its name under the headless Service)", j, got, want)
		}
	}
	if got, want := flags["peer-addr"], peers[strconv.Itoa(i)]; got != want {
		return fmt.Errorf("--peer-addr is %q, its entry in --peers %q", got, want)
	}
	if flags["join"] != "true" {
		return fmt.Errorf("no --join=true: a pod beyond --peers (kubectl scale) would refuse to start instead of waiting to be added with coordctl member add")
	}
	if _, port, err := net.SplitHostPort(flags["client-addr"]); err != nil || port != strconv.Itoa(int(clientPort)) {
		return fmt.Errorf("--client-addr %q does not listen on the client port %d", flags["client-addr"], clientPort)
	}
	// The kubelet probes, and Prometheus scrapes, the pod's address.
	if host, port, err := net.SplitHostPort(flags["metrics-addr"]); err != nil || port != strconv.Itoa(int(metricsPort)) || !wildcard(host) {
		return fmt.Errorf("--metrics-addr %q does not listen on the pod's metrics port %d (want :%d)", flags["metrics-addr"], metricsPort, metricsPort)
	}
	dir := flags["data-dir"]
	onVolume := false
	for _, vm := range c.VolumeMounts {
		if dataMounts[vm.Name] && (dir == vm.MountPath || strings.HasPrefix(dir, strings.TrimSuffix(vm.MountPath, "/")+"/")) {
			onVolume = true
		}
	}
	if !onVolume {
		return fmt.Errorf("--data-dir %q is not on a volume of the volumeClaimTemplates", dir)
	}
	return nil
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podArgs expands the container's args for pod ordinal i, and returns
// them with the environment they were expanded from: $(VAR) becomes the
// value of env VAR, which is a literal or one of the downward API's fields
// a StatefulSet pod's arguments need.
func podArgs(sts *appsv1.StatefulSet, c *corev1.Container, i int) ([]string, map[string]string, error) {
	env, err := podEnv(sts, c, i)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	for _, a := range c.Args {
		var missing string
		x := varRef.ReplaceAllStringFunc(a, func(ref string) string {
			v, ok := env[ref[2:len(ref)-1]]
			if !ok {
				missing = ref
				return ref
			}
			return v
		})
		if missing != "" {
			return nil, nil, fmt.Errorf("argument %q refers to %s, which the container's env does not define", a, missing)
		}
		out = append(out, x)
	}
	return out, env, nil
}

// podEnv is the container's environment in pod ordinal i.
func podEnv(sts *appsv1.StatefulSet, c *corev1.Container, i int) (map[string]string, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil:
			switch p := e.ValueFrom.FieldRef.FieldPath; p {
			case "metadata.name":
				env[e.Name] = fmt.Sprintf("%s-%d", sts.Name, i)
			case "metadata.namespace":
				env[e.Name] = namespace
			case "metadata.labels['" + podIndexLabel + "']":
				env[e.Name] = strconv.Itoa(i)
			default:
				return nil, fmt.Errorf("env %s: field %s is not one kubecheck knows", e.Name, p)
			}
		default:
			// Resource limits, ConfigMaps, Secrets: no argument uses them.
		}
	}
	return env, nil
}

// parseFlags reads --name=value arguments (the form the manifests use, so
// that each is one list item).
func parseFlags(args []string) (map[string]string, error) {
	flags := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !ok || !strings.HasPrefix(a, "--") {
			return nil, fmt.Errorf("argument %q: write flags as --name=value", a)
		}
		if _, dup := flags[k]; dup {
			return nil, fmt.Errorf("flag --%s given twice", k)
		}
		flags[k] = v
	}
	return flags, nil
}

// checkBudget checks that b lets at least one server go at a time and
// always keeps a majority of n.
func checkBudget(b *policyv1.PodDisruptionBudget, n int) error {
	majority := n/2 + 1
	var keep int
	switch {
	case b.Spec.MaxUnavailable != nil && b.Spec.MinAvailable == nil:
		down, err := intstr.GetScaledValueFromIntOrPercent(b.Spec.MaxUnavailable, n, true)
		if err != nil {
			return err
		}
		keep = n - down
	case b.Spec.MinAvailable != nil && b.Spec.MaxUnavailable == nil:
		var err error
		if keep, err = intstr.GetScaledValueFromIntOrPercent(b.Spec.MinAvailable, n, true); err != nil {
			return err
		}
	default:
		return fmt.Errorf("set exactly one of maxUnavailable and minAvailable")
	}
	if keep < majority {
		return fmt.Errorf("it lets %d of %d servers go, leaving fewer than a majority (%d)", n-keep, n, majority)
	}
	if keep >= n {
		return fmt.Errorf("it lets no server go, so no node can be drained")
	}
	return nil
}

// checkMemLimit checks that a GOMEMLIMIT in the container's env is below
// its memory limit: a soft limit at or above the hard one never helps.
func checkMemLimit(c *corev1.Container) error {
	var soft string
	for _, e := range c.Env {
		if e.Name == "GOMEMLIMIT" && e.ValueFrom == nil {
			soft = e.Value
		}
	}
	hard, ok := c.Resources.Limits[corev1.ResourceMemory]
	if soft == "" || !ok {
		return nil
	}
	bytes, err := goMemLimit(soft)
	if err != nil {
		return err
	}
	if bytes >= hard.Value() {
		return fmt.Errorf("GOMEMLIMIT %s is not below the memory limit %s", soft, hard.String())
	}
	return nil
}

// goMemLimit parses GOMEMLIMIT's syntax: bytes, or a number with B, KiB,
// MiB, GiB or TiB.
func goMemLimit(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}}
	mult := int64(1)
	num := s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("GOMEMLIMIT %q: want bytes or a number with B, KiB, MiB, GiB or TiB", s)
	}
	return n * mult, nil
}

// replicasOf is the StatefulSet's replica count (1 when unset, as the
// API server defaults it).
func replicasOf(sts *appsv1.StatefulSet) int32 {
	if sts.Spec.Replicas == nil {
		return 1
	}
	return *sts.Spec.Replicas
}

// coorddContainer is the pod template's container named coordd, or nil.
func coorddContainer(sts *appsv1.StatefulSet) *corev1.Container {
	cs := sts.Spec.Template.Spec.Containers
	for i := range cs {
		if cs[i].Name == "coordd" {
			return &cs[i]
		}
	}
	return nil
}

func selects(sel *metav1.LabelSelector, set labels.Set) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(set)
}

// wildcard reports whether host listens on every address of the pod.
func wildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

func isPort(p intstr.IntOrString, name string, number int32) bool {
	if p.Type == intstr.String {
		return p.StrVal == name
	}
	return p.IntVal == number
}

func servesPort(s *corev1.Service, name string, number int32) bool {
	for _, p := range s.Spec.Ports {
		target := p.TargetPort
		if target.Type == intstr.Int && target.IntVal == 0 {
			target = intstr.FromInt32(p.Port) // targetPort defaults to port
		}
		if isPort(target, name, number) {
			return true
		}
	}
	return false
}

// isImage reports whether image is one kustomization.yaml's images entry
// rewrites.
func isImage(image string, images []kustomizeImage) bool {
	for _, im := range images {
		if image == im.Name || strings.HasPrefix(image, im.Name+":") || strings.HasPrefix(image, im.Name+"@") {
			return true
		}
	}
	return false
}

// runCoordd runs the coordd binary with each pod's arguments and
// --version: coordd parses every flag before it acts on --version, so a
// flag it does not have or a value of the wrong form fails here. The
// container's env is passed too (the Go runtime reads GOMEMLIMIT at start
// and stops on a bad one).
func runCoordd(m *manifests, bin string) []error {
	var errs []error
	sts := m.statefulSets[0]
	c := coorddContainer(sts)
	for i := 0; i < int(replicasOf(sts)); i++ {
		args, env, err := podArgs(sts, c, i)
		if err != nil {
			errs = append(errs, fmt.Errorf("kubecheck: pod %s-%d: %w", sts.Name, i, err))
			continue
		}
		cmd := exec.Command(bin, append(args, "--version")...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil || !strings.HasPrefix(out.String(), "coordd ") {
			errs = append(errs, fmt.Errorf("kubecheck: pod %s-%d: coordd %s --version: %v: %s", sts.Name, i, strings.Join(args, " "), err, strings.TrimSpace(out.String())))
		}
	}
	return errs
}
