package daemon

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// The manifests of dist/kubernetes, read as Kubernetes would: the parts of
// each object the test checks.

type k8sMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type k8sHTTPGet struct {
	Path string `yaml:"path"`
	Port any    `yaml:"port"` // a number or a port's name
}

type k8sProbe struct {
	HTTPGet *k8sHTTPGet `yaml:"httpGet"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sDeployment struct {
	Metadata k8sMeta `yaml:"metadata"`
	Spec     struct {
		Replicas int `yaml:"replicas"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata k8sMeta `yaml:"metadata"`
			Spec     struct {
				TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
				Containers                    []k8sContainer `yaml:"containers"`
				Volumes                       []struct {
					Name      string `yaml:"name"`
					ConfigMap *struct {
						Name string `yaml:"name"`
					} `yaml:"configMap"`
				} `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sService struct {
	Metadata k8sMeta `yaml:"metadata"`
	Spec     struct {
		Type      string            `yaml:"type"`
		ClusterIP string            `yaml:"clusterIP"`
		Selector  map[string]string `yaml:"selector"`
		Ports     []k8sServicePort  `yaml:"ports"`
	} `yaml:"spec"`
}

type k8sServicePort struct {
	Name       string `yaml:"name"`
	Port       int    `yaml:"port"`
	TargetPort any    `yaml:"targetPort"` // a number or a container port's name
}

type k8sPDB struct {
	Spec struct {
		MaxUnavailable any `yaml:"maxUnavailable"`
		MinAvailable   any `yaml:"minAvailable"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	} `yaml:"spec"`
}

type kustomization struct {
	Resources          []string `yaml:"resources"`
	ConfigMapGenerator []struct {
		Name  string   `yaml:"name"`
		Files []string `yaml:"files"`
	} `yaml:"configMapGenerator"`
	Images []struct {
		Name string `yaml:"name"`
	} `yaml:"images"`
}

// k8sDir is where the manifests are.
var k8sDir = filepath.Join("..", "dist", "kubernetes")

// k8sObjects returns every object of the manifests kust lists, by kind,
// each as the YAML of its document.
func k8sObjects(t *testing.T, kust kustomization) map[string][]string {
	t.Helper()
	docSep := regexp.MustCompile(`(?m)^---[ \t]*$`)
	objs := map[string][]string{}
	for _, file := range kust.Resources {
		b, err := os.ReadFile(filepath.Join(k8sDir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range docSep.Split(string(b), -1) {
			var head struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string `yaml:"kind"`
			}
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if head.Kind == "" {
				continue // comments alone
			}
			objs[head.APIVersion+" "+head.Kind] = append(objs[head.APIVersion+" "+head.Kind], doc)
		}
	}
	return objs
}

// k8sUnmarshal decodes an object's YAML into v, which takes the fields the
// test reads.
func k8sUnmarshal(t *testing.T, doc string, v any) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(doc), v); err != nil {
		t.Fatal(err)
	}
}

// dockerfileImage returns what the repository's Dockerfile gives its
// image: the environment (ENV), the ports (EXPOSE) and the entrypoint.
func dockerfileImage(t *testing.T) (env []string, ports []int, entrypoint string) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) < 2 {
			continue
		}
		switch w[0] {
		case "ENV":
			env = append(env, w[1:]...)
		case "EXPOSE":
			for _, p := range w[1:] {
				n, err := strconv.Atoi(p)
				if err != nil {
					t.Fatalf("Dockerfile: EXPOSE %s", p)
				}
				ports = append(ports, n)
			}
		case "ENTRYPOINT":
			entrypoint = strings.Join(w[1:], " ")
		}
	}
	return env, ports, entrypoint
}

// addrPort returns the port of a listening address, and whether its host
// is every interface (0.0.0.0, ::, none), which a pod's listeners need:
// the kubelet's probes and the Services come from outside the pod.
func addrPort(t *testing.T, addr string) (int, bool) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	ip := net.ParseIP(host)
	return n, host == "" || ip != nil && ip.IsUnspecified()
}

// TestKubernetesManifests checks dist/kubernetes against rpcd: the
// configuration the Deployment gives rpcd serve (its arguments, the
// image's environment, the ConfigMap's rpcd.yaml, loaded as serve loads
// them) listens where the container ports say, on rpcd's default RPC
// port; the probes ask the admin listener's /readyz and /healthz, which a
// daemon so configured answers; the grace period outlasts the preStop
// sleep and everything a stopping daemon waits for; the Services, the
// PodDisruptionBudget and the Deployment's selector pick the pods.
func TestKubernetesManifests(t *testing.T) {
	var kust kustomization
	b, err := os.ReadFile(filepath.Join(k8sDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	k8sUnmarshal(t, string(b), &kust)
	files, _ := filepath.Glob(filepath.Join(k8sDir, "*.yaml"))
	var manifests []string
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && name != "rpcd.yaml" {
			manifests = append(manifests, name)
		}
	}
	if got := slices.Sorted(slices.Values(kust.Resources)); !slices.Equal(got, manifests) {
		t.Errorf("kustomization.yaml's resources are %q; the manifests are %q", got, manifests)
	}
	if len(kust.ConfigMapGenerator) != 1 || !slices.Equal(kust.ConfigMapGenerator[0].Files, []string{"rpcd.yaml"}) {
		t.Fatalf("kustomization.yaml: configMapGenerator %+v, want one ConfigMap of rpcd.yaml", kust.ConfigMapGenerator)
	}
	configMap := kust.ConfigMapGenerator[0].Name

	objs := k8sObjects(t, kust)
	if len(objs["apps/v1 Deployment"]) != 1 || len(objs["v1 Service"]) != 2 || len(objs["policy/v1 PodDisruptionBudget"]) != 1 || len(objs) != 3 {
		t.Fatalf("objects: %d kinds; want a Deployment, two Services and a PodDisruptionBudget", len(objs))
	}
	var dep k8sDeployment
	k8sUnmarshal(t, objs["apps/v1 Deployment"][0], &dep)
	pod := dep.Spec.Template
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want rpcd's", len(pod.Spec.Containers))
	}
	ctr := pod.Spec.Containers[0]
	if len(kust.Images) != 1 || kust.Images[0].Name != ctr.Image {
		t.Errorf("kustomization.yaml's images %+v do not set the container's image %q", kust.Images, ctr.Image)
	}

	// The configuration, as rpcd serve in the container loads it.
	imageEnv, exposed, entrypoint := dockerfileImage(t)
	if len(ctr.Command) != 0 || entrypoint != `["/usr/local/bin/rpcd"]` || len(ctr.Args) == 0 || ctr.Args[0] != "serve" {
		t.Fatalf("container command %q, args %q over the image's entrypoint %s; want rpcd serve", ctr.Command, ctr.Args, entrypoint)
	}
	mounts := map[string]string{} // volume name: mount path
	for _, m := range ctr.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	configFile := ""
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == configMap && mounts[v.Name] != "" {
			configFile = mounts[v.Name] + "/rpcd.yaml"
		}
	}
	args := slices.Clone(ctr.Args[1:])
	if i := slices.Index(args, "-"+FileFlag); i < 0 || i+1 == len(args) || args[i+1] != configFile {
		t.Fatalf("serve's arguments %q: want -%s %s, the ConfigMap's rpcd.yaml where it is mounted", args, FileFlag, configFile)
	} else {
		args[i+1] = filepath.Join(k8sDir, "rpcd.yaml")
	}
	environ := slices.Clone(imageEnv)
	for _, e := range ctr.Env {
		environ = append(environ, e.Name+"="+e.Value)
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("rpcd serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	DefineFlags(fs, &cfg, "")
	fs.String(FileFlag, "", "")
	if err := fs.Parse(args); err != nil {
		t.Fatalf("serve's arguments %q: %v", args, err)
	}
	if loaded := Load(fs, environ); loaded.Err != nil || len(loaded.Warnings) > 0 {
		t.Fatalf("the configuration does not load: %v %q", loaded.Err, loaded.Warnings)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the configuration: %v", err)
	}

	// Ports: the container's are the listeners', the image's, and the RPC
	// port is rpcd's default.
	ports := map[string]int{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	defPort, _ := addrPort(t, DefaultAddr)
	for _, l := range []struct{ name, key, addr string }{{"rpcd", "addr", cfg.Addr}, {"gateway", "gateway", cfg.Gateway}, {"admin", "admin", cfg.Admin}} {
		if l.addr == "" {
			t.Errorf("%s is off; the container has a port %s", l.key, l.name)
			continue
		}
		port, every := addrPort(t, l.addr)
		if !every {
			t.Errorf("%s is %s: the kubelet and the Services reach the pod from outside; want 0.0.0.0", l.key, l.addr)
		}
		if ports[l.name] != port {
			t.Errorf("container port %s is %d; %s listens on %d", l.name, ports[l.name], l.key, port)
		}
		if !slices.Contains(exposed, port) {
			t.Errorf("the Dockerfile exposes %v, not %s's port %d", exposed, l.key, port)
		}
	}
	if len(ports) != 3 {
		t.Errorf("container ports %v, want rpcd, gateway and admin", ports)
	}
	if ports["rpcd"] != defPort {
		t.Errorf("the RPC port is %d, not rpcd's default %d", ports["rpcd"], defPort)
	}
	portOf := func(p any) int { // a port by number or by name
		switch p := p.(type) {
		case string:
			return ports[p]
		case uint64:
			return int(p)
		case int64:
			return int(p)
		}
		return 0
	}

	// Probes: the admin listener's paths; a daemon so configured answers
	// them.
	var asked []string
	for _, p := range []struct {
		name  string
		probe *k8sProbe
		path  string
	}{{"readiness", ctr.ReadinessProbe, "/readyz"}, {"liveness", ctr.LivenessProbe, "/healthz"}} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("no %s probe over HTTP", p.name)
		case p.probe.HTTPGet.Path != p.path || portOf(p.probe.HTTPGet.Port) != ports["admin"]:
			t.Errorf("%s probe: GET %s on port %v; want %s on the admin port, %d", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port, p.path, ports["admin"])
		default:
			asked = append(asked, p.probe.HTTPGet.Path)
		}
	}
	if a := pod.Metadata.Annotations; a["prometheus.io/port"] != strconv.Itoa(ports["admin"]) || a["prometheus.io/path"] != "/metrics" {
		t.Errorf("the Prometheus annotations %v do not name the admin listener's /metrics", a)
	} else {
		asked = append(asked, a["prometheus.io/path"])
	}
	probeDaemon(t, cfg, asked...)

	// The grace period: the preStop sleep, then the drain, the admin
	// listener's close and the last spans' export (Run's order).
	sleep := ctr.Lifecycle.PreStop.Sleep
	if sleep == nil || sleep.Seconds <= 0 {
		t.Fatal("no preStop sleep: the pod would drain while the endpoints still send it connections")
	}
	need := time.Duration(sleep.Seconds)*time.Second + cfg.DrainTimeout + adminStopTimeout + tracingFlushTimeout
	if grace := time.Duration(pod.Spec.TerminationGracePeriodSeconds) * time.Second; grace <= need {
		t.Errorf("terminationGracePeriodSeconds is %v; the preStop sleep (%ds), drain-timeout (%v), the admin listener's close (%v) and the spans' export (%v) take up to %v",
			grace, sleep.Seconds, cfg.DrainTimeout, adminStopTimeout, tracingFlushTimeout, need)
	}
	if cfg.MaxConnAge <= 0 {
		t.Error("max-conn-age is off: clients of the ClusterIP Service would stay on the pods they first reached")
	}

	// Selectors: the Deployment's, the Services' and the budget's pick the
	// pods.
	labels := pod.Metadata.Labels
	matches := func(sel map[string]string) bool {
		for k, v := range sel {
			if labels[k] != v {
				return false
			}
		}
		return len(sel) > 0
	}
	if !matches(dep.Spec.Selector.MatchLabels) {
		t.Errorf("the Deployment's selector %v does not pick its pods %v", dep.Spec.Selector.MatchLabels, labels)
	}
	kinds := map[string]bool{}
	for _, doc := range objs["v1 Service"] {
		var svc k8sService
		k8sUnmarshal(t, doc, &svc)
		if !matches(svc.Spec.Selector) {
			t.Errorf("Service %s: selector %v does not pick the pods %v", svc.Metadata.Name, svc.Spec.Selector, labels)
		}
		headless := svc.Spec.ClusterIP == "None"
		kinds[map[bool]string{true: "headless", false: "ClusterIP"}[headless]] = true
		if !headless && svc.Spec.Type != "ClusterIP" {
			t.Errorf("Service %s: type %q", svc.Metadata.Name, svc.Spec.Type)
		}
		for _, p := range svc.Spec.Ports {
			target := portOf(p.TargetPort)
			if target == 0 || target == ports["admin"] {
				t.Errorf("Service %s: port %s targets %v; want a container port, not the admin one (no authentication)", svc.Metadata.Name, p.Name, p.TargetPort)
			}
			if p.Name == "rpcd" && (p.Port != defPort || target != ports["rpcd"]) {
				t.Errorf("Service %s: port rpcd is %d to %v; want %d to the RPC port", svc.Metadata.Name, p.Port, p.TargetPort, defPort)
			}
		}
		if !slices.ContainsFunc(svc.Spec.Ports, func(p k8sServicePort) bool { return p.Name == "rpcd" }) {
			t.Errorf("Service %s has no port rpcd (the SRV records _rpcd._tcp)", svc.Metadata.Name)
		}
	}
	if !kinds["headless"] || !kinds["ClusterIP"] {
		t.Errorf("Services: %v; want a headless one (DNS discovery) and a ClusterIP one", kinds)
	}
	var pdb k8sPDB
	k8sUnmarshal(t, objs["policy/v1 PodDisruptionBudget"][0], &pdb)
	if !matches(pdb.Spec.Selector.MatchLabels) {
		t.Errorf("the PodDisruptionBudget's selector %v does not pick the pods %v", pdb.Spec.Selector.MatchLabels, labels)
	}
	if n, ok := pdb.Spec.MaxUnavailable.(uint64); !ok || n < 1 || int(n) >= dep.Spec.Replicas {
		t.Errorf("the PodDisruptionBudget allows %v pods down of %d; want at least 1 and fewer than all", pdb.Spec.MaxUnavailable, dep.Spec.Replicas)
	}
}

// probeDaemon runs a daemon with cfg's settings on loopback ports and asks
// its admin listener each path, wanting 200 OK.
func probeDaemon(t *testing.T, cfg Config, paths ...string) {
	t.Helper()
	cfg.Addr, cfg.Gateway, cfg.Admin = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	d, err := New(cfg, WithLogOutput(io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(waitTimeout):
		t.Fatal("the daemon did not become ready")
	}
	hc := &http.Client{Timeout: waitTimeout, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	for _, path := range paths {
		resp, err := hc.Get(fmt.Sprintf("http://%s%s", d.AdminAddr(), path))
		if err != nil {
			t.Errorf("GET %s: %v", path, err)
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", path, resp.Status)
		}
	}
}
