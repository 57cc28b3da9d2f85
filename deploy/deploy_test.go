package deploy_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// ---------------------------------------------------------------------------
// Helpers

// root is the module root (the folder holding go.mod).
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test's directory")
		}
		dir = parent
	}
}

// obj is one decoded YAML mapping.
type obj = map[string]any

// decodeAll decodes every document of a (multi-document) YAML file.
func decodeAll(t *testing.T, path string) []obj {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []obj
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var d obj
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, len(docs)+1, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

// at walks keys (string for maps, int for lists) and returns nil when any step is missing.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(obj)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := at(v, path...).(string)
	return s
}

func list(v any, path ...any) []any {
	l, _ := at(v, path...).([]any)
	return l
}

func num(v any, path ...any) int {
	n, _ := at(v, path...).(int)
	return n
}

// subset reports whether every key of sel has the same value in labels.
func subset(sel, labels any) bool {
	s, ok1 := sel.(obj)
	l, ok2 := labels.(obj)
	if !ok1 || !ok2 || len(s) == 0 {
		return false
	}
	for k, v := range s {
		if l[k] != v {
			return false
		}
	}
	return true
}

// tool finds a pinned tool: $env, else <root>/.tools/bin/<name>. Missing is a
// failure when CI is set and a skip otherwise.
func tool(t *testing.T, env, name string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join(root(t), ".tools", "bin", name)
	}
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("%s not found (set %s or run make tools): %v", name, env, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// ---------------------------------------------------------------------------
// Kubernetes

type k8s struct {
	kust    obj
	docs    []obj
	byKind  map[string][]obj
	config  obj    // config/spillway.yaml, the spillway-config ConfigMap
	polDir  string // the folder of the spillway-policy ConfigMap's files
	polList []string
}

func loadK8s(t *testing.T) *k8s {
	t.Helper()
	dir := filepath.Join(root(t), "deploy", "kubernetes")
	kd := decodeAll(t, filepath.Join(dir, "kustomization.yaml"))
	if len(kd) != 1 {
		t.Fatalf("kustomization.yaml: %d documents", len(kd))
	}
	k := &k8s{kust: kd[0], byKind: map[string][]obj{}}
	for _, r := range list(k.kust, "resources") {
		for _, d := range decodeAll(t, filepath.Join(dir, r.(string))) {
			k.docs = append(k.docs, d)
			k.byKind[str(d, "kind")] = append(k.byKind[str(d, "kind")], d)
		}
	}
	for _, g := range list(k.kust, "configMapGenerator") {
		var files []string
		for _, f := range list(g, "files") {
			files = append(files, f.(string))
			if _, err := os.Stat(filepath.Join(dir, f.(string))); err != nil {
				t.Errorf("configMapGenerator %s: %v", str(g, "name"), err)
			}
		}
		switch str(g, "name") {
		case "spillway-config":
			if len(files) != 1 {
				t.Fatalf("spillway-config holds %d files, want the one config file", len(files))
			}
			cd := decodeAll(t, filepath.Join(dir, files[0]))
			if len(cd) != 1 {
				t.Fatalf("%s: %d documents", files[0], len(cd))
			}
			k.config = cd[0]
		case "spillway-policy":
			if at(g, "options", "disableNameSuffixHash") != true {
				t.Error("spillway-policy has a hash suffix: edits would roll the pods instead of hot-reloading")
			}
			for _, f := range files {
				if !strings.HasSuffix(f, ".rego") || strings.HasSuffix(f, "_test.rego") {
					t.Errorf("spillway-policy file %s: only non-test .rego files belong in the ConfigMap", f)
				}
				k.polDir = filepath.Join(dir, filepath.Dir(f))
				k.polList = append(k.polList, filepath.Base(f))
			}
		}
	}
	if k.config == nil || k.polDir == "" {
		t.Fatal("kustomization.yaml lacks the spillway-config or spillway-policy generator")
	}
	return k
}

func (k *k8s) get(kind, name string) obj {
	for _, d := range k.byKind[kind] {
		if str(d, "metadata", "name") == name {
			return d
		}
	}
	return nil
}

// Every manifest in deploy/kubernetes is applied by the kustomization (or is
// a documented optional extra), and every document is well formed.
func TestKubernetesManifests(t *testing.T) {
	k := loadK8s(t)
	dir := filepath.Join(root(t), "deploy", "kubernetes")
	optional := []string{"sticky-sessions.istio.yaml"}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		base := filepath.Base(f)
		if base == "kustomization.yaml" {
			continue
		}
		listed := slices.ContainsFunc(list(k.kust, "resources"), func(r any) bool { return r == base })
		if !listed && !slices.Contains(optional, base) {
			t.Errorf("%s is neither in kustomization.yaml resources nor a known optional extra", base)
		}
		for i, d := range decodeAll(t, f) {
			if str(d, "apiVersion") == "" || str(d, "kind") == "" || str(d, "metadata", "name") == "" {
				t.Errorf("%s document %d: apiVersion, kind and metadata.name are required", base, i+1)
			}
			if ns := str(d, "metadata", "namespace"); ns != "" {
				t.Errorf("%s %s: hard-coded namespace %q (kustomization.yaml sets it)", base, str(d, "metadata", "name"), ns)
			}
		}
	}
	if len(k.docs) < 10 {
		t.Errorf("only %d documents applied", len(k.docs))
	}
}

func TestSpillwayDeployment(t *testing.T) {
	k := loadK8s(t)
	d := k.get("Deployment", "spillway")
	if d == nil {
		t.Fatal("no Deployment spillway")
	}
	if r := num(d, "spec", "replicas"); r < 2 {
		t.Errorf("replicas %d, want at least 2", r)
	}
	pod := at(d, "spec", "template", "spec")
	c := at(pod, "containers", 0)
	if str(c, "image") != "spillway" {
		t.Errorf("image %q", str(c, "image"))
	}
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		ports[str(p, "name")] = num(p, "containerPort")
	}
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz"} {
		got := str(c, probe, "httpGet", "path")
		port := at(c, probe, "httpGet", "port")
		if got != path {
			t.Errorf("%s path %q, want %q", probe, got, path)
		}
		if name, ok := port.(string); !ok || ports[name] == 0 {
			t.Errorf("%s port %v is not a named container port", probe, port)
		}
	}
	if ports["http"] != 8080 {
		t.Errorf("container port http = %d", ports["http"])
	}
	if _, port, _ := net.SplitHostPort(str(k.config, "listen")); port != strconv.Itoa(ports["http"]) {
		t.Errorf("config listen %q does not match container port %d", str(k.config, "listen"), ports["http"])
	}
	for _, res := range []string{"cpu", "memory"} {
		if str(c, "resources", "requests", res) == "" {
			t.Errorf("no %s request", res)
		}
	}
	if str(c, "resources", "limits", "memory") == "" {
		t.Error("no memory limit")
	}

	// The config file: --config names the file the ConfigMap is mounted as.
	args := list(c, "args")
	cfgPath := ""
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			cfgPath = args[i+1].(string)
		}
	}
	mounts := map[string]any{}
	for _, m := range list(c, "volumeMounts") {
		mounts[str(m, "mountPath")] = m
	}
	volumes := map[string]any{}
	for _, v := range list(pod, "volumes") {
		volumes[str(v, "name")] = v
	}
	cfgMount := mounts[cfgPath]
	if cfgMount == nil || str(volumes[str(cfgMount, "name")], "configMap", "name") != "spillway-config" {
		t.Errorf("--config %q is not the mounted spillway-config ConfigMap", cfgPath)
	}
	// The policy: a whole-directory mount of spillway-policy at the --policy path.
	polMount := mounts[str(k.config, "policy")]
	switch {
	case polMount == nil:
		t.Errorf("policy %q is not mounted", str(k.config, "policy"))
	case str(volumes[str(polMount, "name")], "configMap", "name") != "spillway-policy":
		t.Errorf("policy mount %v is not the spillway-policy ConfigMap", polMount)
	case str(polMount, "subPath") != "":
		t.Error("policy is mounted with subPath: ConfigMap updates would never reach the pod (no hot reload)")
	}
	// Writable paths under a read-only root: /tmp and --data.
	for _, p := range []string{"/tmp", str(k.config, "data")} {
		if v := volumes[str(mounts[p], "name")]; at(v, "emptyDir") == nil {
			t.Errorf("%s is not an emptyDir mount", p)
		}
	}

	// Signing keys: the key file is a Secret mounted as a directory (a
	// subPath mount would never see a key rotated or retired).
	keyFile := str(k.config, "key-file")
	keyMount := mounts[path.Dir(keyFile)]
	switch {
	case keyFile == "" || keyMount == nil:
		t.Errorf("key-file %q is not in a mounted directory", keyFile)
	case str(volumes[str(keyMount, "name")], "secret", "secretName") != "spillway-signing-keys":
		t.Errorf("key-file mount %v is not the spillway-signing-keys Secret", keyMount)
	case str(keyMount, "subPath") != "":
		t.Error("signing keys are mounted with subPath: a retired key would stay valid until a restart")
	}
	for _, e := range list(c, "env") {
		if str(e, "name") == "SPILLWAY_SIGNING_KEYS" {
			t.Error("SPILLWAY_SIGNING_KEYS overrides the reloaded key file")
		}
	}

	// Something to route to it, and a disruption budget that keeps one up.
	labels := at(d, "spec", "template", "metadata", "labels")
	if !subset(at(d, "spec", "selector", "matchLabels"), labels) {
		t.Error("Deployment selector does not match its pod labels")
	}
	svc := k.get("Service", "spillway")
	if svc == nil || !subset(at(svc, "spec", "selector"), labels) {
		t.Fatal("Service spillway does not select the pods")
	}
	if tp := at(svc, "spec", "ports", 0, "targetPort"); tp != "http" {
		t.Errorf("Service targetPort %v", tp)
	}
	pdb := k.get("PodDisruptionBudget", "spillway")
	if pdb == nil || !subset(at(pdb, "spec", "selector", "matchLabels"), labels) {
		t.Fatal("no PodDisruptionBudget selecting the spillway pods")
	}
	if mu := num(pdb, "spec", "maxUnavailable"); mu < 1 || mu >= num(d, "spec", "replicas") {
		t.Errorf("PDB maxUnavailable %d with %d replicas", mu, num(d, "spec", "replicas"))
	}
}

// Every pod runs as non-root with the restricted profile's container settings,
// and every image is one the kustomization pins.
func TestPodSecurity(t *testing.T) {
	k := loadK8s(t)
	var images []string
	for _, im := range list(k.kust, "images") {
		images = append(images, str(im, "name"))
	}
	for _, kind := range []string{"Deployment", "StatefulSet"} {
		for _, w := range k.byKind[kind] {
			name := kind + "/" + str(w, "metadata", "name")
			pod := at(w, "spec", "template", "spec")
			if at(pod, "securityContext", "runAsNonRoot") != true {
				t.Errorf("%s: pod securityContext.runAsNonRoot is not true", name)
			}
			if uid := num(pod, "securityContext", "runAsUser"); uid == 0 {
				t.Errorf("%s: runAsUser %d", name, uid)
			}
			if str(pod, "securityContext", "seccompProfile", "type") != "RuntimeDefault" {
				t.Errorf("%s: no RuntimeDefault seccomp profile", name)
			}
			if at(pod, "automountServiceAccountToken") != false {
				t.Errorf("%s: mounts a service account token it does not need", name)
			}
			for _, c := range list(pod, "containers") {
				sc := at(c, "securityContext")
				if at(sc, "allowPrivilegeEscalation") != false || at(sc, "readOnlyRootFilesystem") != true ||
					!slices.Contains(list(sc, "capabilities", "drop"), any("ALL")) {
					t.Errorf("%s/%s: securityContext %v", name, str(c, "name"), sc)
				}
				if !slices.Contains(images, str(c, "image")) {
					t.Errorf("%s/%s: image %q is not pinned in kustomization.yaml images", name, str(c, "name"), str(c, "image"))
				}
				if str(c, "resources", "requests", "memory") == "" {
					t.Errorf("%s/%s: no memory request", name, str(c, "name"))
				}
			}
			if kind == "StatefulSet" || num(w, "spec", "replicas") > 1 {
				covered := slices.ContainsFunc(k.byKind["PodDisruptionBudget"], func(p obj) bool {
					return subset(at(p, "spec", "selector", "matchLabels"), at(w, "spec", "template", "metadata", "labels"))
				})
				if !covered {
					t.Errorf("%s: no PodDisruptionBudget", name)
				}
			}
		}
	}
}

var minioPool = regexp.MustCompile(`^http://([a-z0-9-]+)-\{0\.\.\.(\d+)\}\.([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local(/\S+)$`)

func TestMinIODistributed(t *testing.T) {
	k := loadK8s(t)
	ss := k.get("StatefulSet", "minio")
	if ss == nil {
		t.Skip("no MinIO StatefulSet: an external S3 endpoint is configured")
	}
	replicas := num(ss, "spec", "replicas")
	if replicas < 4 {
		t.Errorf("MinIO replicas %d: erasure coding needs at least 4 drives", replicas)
	}
	if str(ss, "spec", "podManagementPolicy") != "Parallel" {
		t.Error("MinIO pods must start in parallel to reach quorum")
	}
	var pool []string
	for _, a := range list(ss, "spec", "template", "spec", "containers", 0, "args") {
		if m := minioPool.FindStringSubmatch(fmt.Sprint(a)); m != nil {
			pool = m
		}
	}
	if pool == nil {
		t.Fatal("MinIO args name no http://minio-{0...N}.HEADLESS.NAMESPACE.svc.cluster.local/PATH pool")
	}
	if n, _ := strconv.Atoi(pool[2]); pool[1] != "minio" || n != replicas-1 {
		t.Errorf("pool %s-{0...%s} does not match StatefulSet minio with %d replicas", pool[1], pool[2], replicas)
	}
	if pool[3] != str(ss, "spec", "serviceName") || k.get("Service", pool[3]) == nil ||
		str(k.get("Service", pool[3]), "spec", "clusterIP") != "None" {
		t.Errorf("pool host uses service %q; the StatefulSet's headless service is %q", pool[3], str(ss, "spec", "serviceName"))
	}
	if pool[4] != str(k.kust, "namespace") {
		t.Errorf("pool names namespace %q, kustomization.yaml deploys to %q", pool[4], str(k.kust, "namespace"))
	}
	var dataMounted bool
	for _, m := range list(ss, "spec", "template", "spec", "containers", 0, "volumeMounts") {
		dataMounted = dataMounted || (str(m, "mountPath") == pool[5] && str(m, "name") == str(ss, "spec", "volumeClaimTemplates", 0, "metadata", "name"))
	}
	if !dataMounted {
		t.Errorf("%s is not the volumeClaimTemplate's mount", pool[5])
	}
}

// The config's URLs point at things the manifests define.
func TestKubernetesWiring(t *testing.T) {
	k := loadK8s(t)
	pub, err := url.Parse(str(k.config, "public-url"))
	if err != nil || pub.Scheme != "https" {
		t.Errorf("public-url %q: want https (links carry their token in the URL)", str(k.config, "public-url"))
	}
	var mcpHashed, rootRouted bool
	for _, ing := range k.byKind["Ingress"] {
		for _, r := range list(ing, "spec", "rules") {
			if str(r, "host") != pub.Host {
				t.Errorf("Ingress %s host %q, public-url host %q", str(ing, "metadata", "name"), str(r, "host"), pub.Host)
			}
			for _, p := range list(r, "http", "paths") {
				if svc := str(p, "backend", "service", "name"); k.get("Service", svc) == nil {
					t.Errorf("Ingress backend %q is not a Service", svc)
				}
				switch str(p, "path") {
				case "/mcp":
					mcpHashed = strings.Contains(str(ing, "metadata", "annotations", "nginx.ingress.kubernetes.io/upstream-hash-by"), "mcp_session_id")
				case "/":
					rootRouted = true
				}
			}
		}
	}
	if !mcpHashed || !rootRouted {
		t.Errorf("ingress: /mcp routed by Mcp-Session-Id %v, / routed %v", mcpHashed, rootRouted)
	}
	checkServiceURL(t, "store", str(k.config, "store"), func(host string) obj { return k.get("Service", host) })
	checkServiceURL(t, "upstream-url", str(k.config, "upstream-url"), func(host string) obj { return k.get("Service", host) })
}

// checkServiceURL checks that a URL's host:port (or its endpoint= for s3://)
// is a Service (or compose service) exposing that port.
func checkServiceURL(t *testing.T, key, raw string, service func(string) obj) {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Errorf("%s %q: %v", key, raw, err)
		return
	}
	hostport := u.Host
	if u.Scheme == "s3" {
		hostport = u.Query().Get("endpoint")
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		t.Errorf("%s %q: %v", key, raw, err)
		return
	}
	svc := service(host)
	if svc == nil {
		t.Errorf("%s %q: no service %q", key, raw, host)
		return
	}
	var ok bool
	for _, p := range list(svc, "spec", "ports") {
		ok = ok || strconv.Itoa(num(p, "port")) == port
	}
	for _, p := range list(svc, "ports") { // compose
		ok = ok || strings.HasSuffix(fmt.Sprint(p), ":"+port)
	}
	for _, p := range list(svc, "expose") { // compose
		ok = ok || fmt.Sprint(p) == port
	}
	if !ok {
		t.Errorf("%s %q: service %s has no port %s", key, raw, host, port)
	}
}

// The shipped policy compiles under the stock OPA CLI and passes its tests.
func TestPolicy(t *testing.T) {
	k := loadK8s(t)
	opa := tool(t, "SPILLWAY_OPA", "opa")
	var files []string
	for _, f := range k.polList {
		files = append(files, filepath.Join(k.polDir, f))
	}
	if out, err := exec.Command(opa, append([]string{"check", "--strict"}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("opa check: %v\n%s", err, out)
	}
	out, err := exec.Command(opa, "test", "--format", "json", k.polDir).CombinedOutput()
	if err != nil {
		t.Fatalf("opa test: %v\n%s", err, out)
	}
	if n := bytes.Count(out, []byte(`"name": "test_`)); n < 5 {
		t.Errorf("opa test ran %d tests, want the policy's tests", n)
	}
}

// ---------------------------------------------------------------------------
// Compose

func TestCompose(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "compose")
	docs := decodeAll(t, filepath.Join(dir, "compose.yaml"))
	if len(docs) != 1 {
		t.Fatalf("compose.yaml: %d documents", len(docs))
	}
	services, _ := at(docs[0], "services").(obj)
	for _, name := range []string{"minio", "spillway", "bigtool"} {
		if services[name] == nil {
			t.Errorf("no service %s", name)
		}
	}
	stages := dockerStages(t)
	for name, s := range services {
		if target := str(s, "build", "target"); !slices.Contains(stages, target) {
			t.Errorf("service %s builds target %q; deploy/Dockerfile has %v", name, target, stages)
		}
		if str(s, "build", "dockerfile") != "deploy/Dockerfile" || str(s, "build", "context") != "../.." {
			t.Errorf("service %s: build %v", name, at(s, "build"))
		}
		for _, p := range list(s, "ports") {
			if !strings.HasPrefix(fmt.Sprint(p), "127.0.0.1:") {
				t.Errorf("service %s publishes %v beyond loopback", name, p)
			}
		}
	}

	cfg, cfgPath := composeConfig(t)
	if cfgPath == "" {
		t.Fatal("spillway is not started with --config pointing at a mounted file")
	}
	if !strings.HasPrefix(str(cfg, "public-url"), "http://127.0.0.1:8080") {
		t.Errorf("public-url %q does not reach the published port", str(cfg, "public-url"))
	}
	if !strings.HasPrefix(str(cfg, "store"), "s3://") {
		t.Errorf("store %q is not the MinIO bucket", str(cfg, "store"))
	}
	// bigtool listens where upstream-url points.
	bt := services["bigtool"]
	args := list(bt, "command")
	if i := slices.Index(args, any("-http")); i < 0 || i+1 >= len(args) || !strings.HasSuffix(fmt.Sprint(args[i+1]), ":8081") {
		t.Errorf("bigtool command %v does not listen on :8081", args)
	}
	lookup := func(host string) obj { s, _ := services[host].(obj); return s }
	checkServiceURL(t, "store", str(cfg, "store"), lookup)
	checkServiceURL(t, "upstream-url", str(cfg, "upstream-url"), lookup)
	// Spillway's auth is required, not defaulted.
	if env := str(services["spillway"], "environment", "SPILLWAY_AUTH_TOKENS"); !strings.Contains(env, ":?") {
		t.Errorf("SPILLWAY_AUTH_TOKENS %q should be required (${VAR:?message}), not defaulted", env)
	}
}

// composeConfig returns the config file compose mounts for spillway and the
// path it is mounted at.
func composeConfig(t *testing.T) (obj, string) {
	t.Helper()
	dir := filepath.Join(root(t), "deploy", "compose")
	s := at(decodeAll(t, filepath.Join(dir, "compose.yaml"))[0], "services", "spillway")
	cmd := list(s, "command")
	i := slices.Index(cmd, any("--config"))
	if i < 0 || i+1 >= len(cmd) {
		return nil, ""
	}
	target := fmt.Sprint(cmd[i+1])
	for _, v := range list(s, "volumes") {
		parts := strings.Split(fmt.Sprint(v), ":")
		if len(parts) >= 2 && parts[1] == target && strings.HasPrefix(parts[0], "./") {
			docs := decodeAll(t, filepath.Join(dir, parts[0]))
			if len(docs) != 1 {
				t.Fatalf("%s: %d documents", parts[0], len(docs))
			}
			return docs[0], target
		}
	}
	return nil, ""
}

// ---------------------------------------------------------------------------
// Dockerfile

func readDockerfile(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(bytes.ReplaceAll(b, []byte("\\\n"), nil)))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

var fromLine = regexp.MustCompile(`^FROM\s+(\S+)(?:\s+AS\s+(\S+))?$`)

func dockerStages(t *testing.T) []string {
	var names []string
	for _, l := range readDockerfile(t) {
		if m := fromLine.FindStringSubmatch(l); m != nil {
			names = append(names, m[2])
		}
	}
	return names
}

func TestDockerfile(t *testing.T) {
	r := root(t)
	lines := readDockerfile(t)
	args := map[string]string{}
	base := map[string]string{} // stage → the image or stage it starts from
	users := map[string]string{}
	var stage, last string
	var buildPkgs []string
	for _, l := range lines {
		if m := fromLine.FindStringSubmatch(l); m != nil {
			stage, last = m[2], m[2]
			base[stage] = m[1]
			continue
		}
		f := strings.Fields(l)
		switch f[0] {
		case "ARG":
			if k, v, ok := strings.Cut(f[1], "="); ok {
				args[k] = v
			}
		case "USER":
			users[stage] = f[1]
		}
		for _, m := range regexp.MustCompile(`go build .*? -o \S+ (\./\S+)`).FindAllStringSubmatch(l, -1) {
			buildPkgs = append(buildPkgs, m[1])
		}
		if strings.Contains(l, "go build") || strings.Contains(l, "go install") {
			if !strings.Contains(l, "CGO_ENABLED=0") && !stageHasEnv(lines, stage, "CGO_ENABLED=0") {
				t.Errorf("stage %s builds without CGO_ENABLED=0: %s", stage, l)
			}
		}
	}
	if last != "spillway" {
		t.Errorf("the default (last) stage is %q, want spillway", last)
	}
	// Each runtime stage descends from scratch through stages that set a non-root USER.
	for _, s := range []string{"spillway", "bigtool", "minio"} {
		var user string
		chain := s
		for b := s; ; b = base[b] {
			if u, ok := users[b]; ok && user == "" {
				user = u
			}
			if _, isStage := base[base[b]]; !isStage {
				chain += " → " + base[b]
				if base[b] != "scratch" {
					t.Errorf("stage %s is not built on scratch: %s", s, chain)
				}
				break
			}
			chain += " → " + base[b]
		}
		uid, _, _ := strings.Cut(user, ":")
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("stage %s runs as user %q, want a numeric non-root uid", s, user)
		}
	}
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "ca-certificates.crt") }) {
		t.Error("no CA certificates copied into the runtime image")
	}
	// The pins agree with the rest of the repository.
	mk, err := os.ReadFile(filepath.Join(r, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^MINIO_VERSION\s*:=\s*(\S+)`).FindSubmatch(mk); m == nil || string(m[1]) != args["MINIO_VERSION"] {
		t.Errorf("Dockerfile MINIO_VERSION %q, Makefile %q", args["MINIO_VERSION"], m)
	}
	gomod, _ := os.ReadFile(filepath.Join(r, "go.mod"))
	m := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)`).FindSubmatch(gomod)
	img := strings.SplitN(args["GO_VERSION"], ".", 3)
	if m == nil || len(img) < 2 || cmpVersion(img[0], img[1], string(m[1]), string(m[2])) < 0 {
		t.Errorf("Dockerfile GO_VERSION %q is older than go.mod's go %s.%s", args["GO_VERSION"], m[1], m[2])
	}
	if !slices.Contains(buildPkgs, "./cmd/spillway") || !slices.Contains(buildPkgs, "./examples/bigtool/cmd/bigtool") {
		t.Errorf("built packages %v", buildPkgs)
	}
	for _, p := range buildPkgs {
		if !isMainPackage(filepath.Join(r, p)) {
			t.Errorf("%s is not a main package", p)
		}
	}
	ignore, err := os.ReadFile(filepath.Join(r, "deploy", "Dockerfile.dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git", ".tools", ".data", "bin"} {
		if !slices.Contains(strings.Fields(string(ignore)), p) {
			t.Errorf("Dockerfile.dockerignore does not exclude %s", p)
		}
	}
}

func stageHasEnv(lines []string, stage, kv string) bool {
	in := false
	for _, l := range lines {
		if m := fromLine.FindStringSubmatch(l); m != nil {
			in = m[2] == stage
			continue
		}
		if in && strings.HasPrefix(l, "ENV ") && slices.Contains(strings.Fields(l), kv) {
			return true
		}
	}
	return false
}

func cmpVersion(aMaj, aMin, bMaj, bMin string) int {
	a1, _ := strconv.Atoi(aMaj)
	a2, _ := strconv.Atoi(aMin)
	b1, _ := strconv.Atoi(bMaj)
	b2, _ := strconv.Atoi(bMin)
	if a1 != b1 {
		return a1 - b1
	}
	return a2 - b2
}

func isMainPackage(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err == nil && regexp.MustCompile(`(?m)^package main$`).Match(b) {
			return true
		}
	}
	return false
}

// ---------------------------------------------------------------------------
// Flags

// spillwayFlags builds ./cmd/spillway (or takes $SPILLWAY_BIN) and returns the
// flag names `spillway serve -h` lists. A tree where it does not build yet is
// a skip, and a failure when CI is set.
func spillwayFlags(t *testing.T) map[string]bool {
	t.Helper()
	bin := os.Getenv("SPILLWAY_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "spillway")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/spillway")
		cmd.Dir = root(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			msg := fmt.Sprintf("cannot build ./cmd/spillway, so flag names are unchecked: %v\n%s", err, out)
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  --?([a-z0-9][a-z0-9-]*)(?:[ \t]|$)`).FindAllSubmatch(out, -1) {
		flags[string(m[1])] = true
	}
	if !flags["listen"] || !flags["config"] {
		t.Fatalf("spillway serve -h lists no --listen/--config; output:\n%s", out)
	}
	return flags
}

// envFlag maps SPILLWAY_PUBLIC_URL to public-url; other variables to "".
func envFlag(name string) string {
	rest, ok := strings.CutPrefix(name, "SPILLWAY_")
	if !ok {
		return ""
	}
	return strings.ReplaceAll(strings.ToLower(rest), "_", "-")
}

// usedFlags lists every spillway flag the deployment files set, with where.
func usedFlags(t *testing.T) map[string][]string {
	used := map[string][]string{}
	add := func(flag, where string) { used[flag] = append(used[flag], where) }

	k := loadK8s(t)
	for key := range k.config {
		add(key, "kubernetes config/spillway.yaml")
	}
	c := at(k.get("Deployment", "spillway"), "spec", "template", "spec", "containers", 0)
	for _, e := range list(c, "env") {
		if f := envFlag(str(e, "name")); f != "" {
			add(f, "kubernetes Deployment env "+str(e, "name"))
		}
	}
	for _, a := range list(c, "args") {
		if f, ok := strings.CutPrefix(fmt.Sprint(a), "--"); ok {
			add(f, "kubernetes Deployment args")
		}
	}

	cfg, _ := composeConfig(t)
	for key := range cfg {
		add(key, "compose spillway.yaml")
	}
	s := at(decodeAll(t, filepath.Join(root(t), "deploy", "compose", "compose.yaml"))[0], "services", "spillway")
	for name := range at(s, "environment").(obj) {
		if f := envFlag(name); f != "" {
			add(f, "compose environment "+name)
		}
	}
	for _, a := range list(s, "command") {
		if f, ok := strings.CutPrefix(fmt.Sprint(a), "--"); ok {
			add(f, "compose command")
		}
	}
	return used
}

func TestConfigFlagsExist(t *testing.T) {
	used := usedFlags(t)
	for _, want := range []string{"config", "listen", "public-url", "store", "upstream-url", "key-file", "auth-tokens", "policy"} {
		if used[want] == nil {
			t.Errorf("no deployment file sets --%s", want)
		}
	}
	flags := spillwayFlags(t)
	for f, where := range used {
		if !flags[f] {
			t.Errorf("--%s (in %s) is not a flag of spillway serve", f, strings.Join(where, ", "))
		}
	}
}
