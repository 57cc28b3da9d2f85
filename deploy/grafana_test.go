package deploy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID    string  `json:"uid"`
	Title  string  `json:"title"`
	Panels []panel `json:"panels"`
}

type panel struct {
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource datasource `json:"datasource"`
	Targets    []struct {
		Expr       string     `json:"expr"`
		Datasource datasource `json:"datasource"`
	} `json:"targets"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// Issue 42: the Grafana dashboard. Its structure holds (a uid, panels,
// each with queries on the provisioned datasource), and every metric its
// queries name is one a real Spillway exports on /metrics once a session
// ran (an offloaded call, a fetch of its link).
func TestGrafanaDashboard(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "grafana")
	d := loadDashboard(t, filepath.Join(dir, "dashboards", "spillway.json"))
	dsUID := provisionedDatasource(t, filepath.Join(dir, "provisioning", "datasources", "prometheus.yaml"))
	queries := dashboardQueries(t, d, dsUID)
	exported := sampleNames(spillwayMetrics(t))
	if missing := missingMetrics(t, queries, exported); len(missing) > 0 {
		t.Errorf("the dashboard names metrics Spillway does not export: %v", missing)
	}
	// The check fails on a panel that names a metric that does not exist.
	if missing := missingMetrics(t, map[string][]string{"made up": {`sum(rate(spillway_no_such_metric_total[5m]))`}}, exported); !slices.Equal(missing, []string{"spillway_no_such_metric_total (made up)"}) {
		t.Errorf("a made-up metric: missing = %v", missing)
	}
}

func loadDashboard(t *testing.T, path string) dashboard {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: uid %q, title %q, %d panels", path, d.UID, d.Title, len(d.Panels))
	}
	return d
}

// provisionedDatasource returns the uid of the one Prometheus datasource
// Grafana is provisioned with.
func provisionedDatasource(t *testing.T, path string) string {
	t.Helper()
	ds := list(decodeAll(t, path)[0], "datasources")
	if len(ds) != 1 || str(ds[0], "type") != "prometheus" || str(ds[0], "uid") == "" {
		t.Fatalf("%s: want one prometheus datasource with a uid, have %v", path, ds)
	}
	if u := str(ds[0], "url"); u != "http://prometheus:9090" {
		t.Errorf("%s: datasource url %q, want the compose service prometheus:9090", path, u)
	}
	return str(ds[0], "uid")
}

// dashboardQueries checks each panel's queries and returns them by panel
// title: every panel but a row has at least one, each with an expr, on
// the datasource uid.
func dashboardQueries(t *testing.T, d dashboard, uid string) map[string][]string {
	t.Helper()
	queries := map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != uid || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %+v, %d targets; want datasource %q and targets", p.Title, p.Datasource, len(p.Targets), uid)
		}
		if queries[p.Title] != nil {
			t.Errorf("two panels titled %q", p.Title)
		}
		for _, q := range p.Targets {
			if strings.TrimSpace(q.Expr) == "" || q.Datasource.UID != uid {
				t.Errorf("panel %q: a target with expr %q on datasource %+v", p.Title, q.Expr, q.Datasource)
			}
			queries[p.Title] = append(queries[p.Title], q.Expr)
		}
	}
	return queries
}

// missingMetrics returns the metrics the queries name that are not among
// exported, each with its panel's title, sorted.
func missingMetrics(t *testing.T, queries map[string][]string, exported map[string]bool) []string {
	t.Helper()
	var missing []string
	for title, exprs := range queries {
		for _, e := range exprs {
			names, err := promqlMetrics(e)
			if err != nil || len(names) == 0 {
				t.Errorf("panel %q: query %q names no metric (%v)", title, e, err)
			}
			for _, n := range names {
				if !exported[n] {
					missing = append(missing, n+" ("+title+")")
				}
			}
		}
	}
	slices.Sort(missing)
	return missing
}

// sampleNames are the names a query may select of the families: a
// counter's or gauge's own, a histogram's _bucket, _sum and _count.
func sampleNames(mfs map[string]*dto.MetricFamily) map[string]bool {
	names := map[string]bool{}
	for name, mf := range mfs {
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names
}

var httpURL = regexp.MustCompile(`"httpUrl":"([^"]+)"`)

// spillwayMetrics runs a real `spillway serve` in front of bigtool, calls
// bigtool's query for about 400 kB (offloaded), fetches the link, and
// returns what /metrics then exports, parsed by the Prometheus text
// parser.
func spillwayMetrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	bin, bigtool := buildBinary(t, "./cmd/spillway"), buildBinary(t, "./examples/bigtool/cmd/bigtool")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const token = "dashboard-token-0123456789"
	cmd := exec.Command(bin, "serve", "--listen", addr, "--data", t.TempDir(), "--upstream-cmd", bigtool, "--log-level", "error")
	cmd.Env = append(os.Environ(), "SPILLWAY_AUTH_TOKENS="+token+"=team") // not on the command line, where the child could read it
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); <-exited })
	base := "http://" + addr
	waitHealthy(t, base, exited)

	post := func(session, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, body := post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"query","arguments":{"rows":2000}}}`)
	m := httpURL.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("tools/call query: no httpUrl in %.300s", body)
	}
	if resp, err := http.Get(m[1]); err != nil || resp.StatusCode != 200 {
		t.Fatalf("fetch of the link: %v %v", resp, err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	mresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	if mresp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d", mresp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(mresp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	return mfs
}

// buildBinary builds the main package pkg of the module into a temporary
// folder.
func buildBinary(t *testing.T, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-o", bin, pkg)
	build.Dir = root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// waitHealthy waits for base/healthz to answer 200 until the server
// exits.
func waitHealthy(t *testing.T, base string, exited <-chan struct{}) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-exited:
			t.Fatalf("spillway exited before %s was healthy", base)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never healthy", base)
		}
	}
}

// The Compose file provisions Prometheus and Grafana (monitoring.yaml,
// which compose.yaml includes): images pinned, every mounted file there,
// Prometheus scraping Spillway's listener with a bearer token from a
// secret, Grafana given the provisioning and the dashboards where the
// provider reads them.
func TestComposeMonitoring(t *testing.T) {
	dir := filepath.Join(root(t), "deploy", "compose")
	main := decodeAll(t, filepath.Join(dir, "compose.yaml"))[0]
	if inc := list(main, "include"); !slices.Contains(inc, any("monitoring.yaml")) {
		t.Fatalf("compose.yaml includes %v, want monitoring.yaml", inc)
	}
	mon := decodeAll(t, filepath.Join(dir, "monitoring.yaml"))[0]
	services, _ := at(mon, "services").(obj)
	for _, name := range []string{"prometheus", "grafana"} {
		s := services[name]
		image := str(s, "image")
		if i := strings.LastIndex(image, ":"); i < 0 || image[i+1:] == "latest" || !regexp.MustCompile(`^v?\d+\.\d+\.\d+$`).MatchString(image[i+1:]) {
			t.Errorf("service %s: image %q is not pinned to a version", name, image)
		}
		for _, p := range list(s, "ports") {
			if !strings.HasPrefix(fmt.Sprint(p), "127.0.0.1:") {
				t.Errorf("service %s publishes %v beyond loopback", name, p)
			}
		}
	}
	mounts := func(service string) map[string]string { // container path → host path
		m := map[string]string{}
		for _, v := range list(services[service], "volumes") {
			parts := strings.Split(fmt.Sprint(v), ":")
			if len(parts) < 2 || !strings.HasPrefix(parts[0], ".") {
				continue // a named volume
			}
			host := filepath.Join(dir, parts[0])
			if _, err := os.Stat(host); err != nil {
				t.Errorf("service %s mounts %s, which does not exist", service, parts[0])
			}
			m[parts[1]] = host
		}
		return m
	}

	// Prometheus: its config is mounted, scrapes spillway's listener with
	// the token of a secret the service gets.
	pm := mounts("prometheus")
	cfgPath := pm["/etc/prometheus/prometheus.yaml"]
	if cfgPath == "" || !slices.Contains(list(services["prometheus"], "command"), any("--config.file=/etc/prometheus/prometheus.yaml")) {
		t.Fatalf("prometheus: config not mounted and used (%v)", pm)
	}
	scrapes := list(decodeAll(t, cfgPath)[0], "scrape_configs")
	if len(scrapes) != 1 {
		t.Fatalf("prometheus.yaml: %d scrape configs", len(scrapes))
	}
	sc := scrapes[0]
	if targets := list(list(sc, "static_configs")[0], "targets"); !slices.Equal(targets, []any{"spillway:8080"}) || str(sc, "metrics_path") != "/metrics" {
		t.Errorf("prometheus scrapes %v%s, want spillway:8080/metrics", targets, str(sc, "metrics_path"))
	}
	if listen := str(composeConfigOrFail(t), "listen"); !strings.HasSuffix(listen, ":8080") {
		t.Errorf("spillway listens on %q, prometheus scrapes :8080", listen)
	}
	secretFile := str(sc, "authorization", "credentials_file")
	var secretOK bool
	for _, s := range list(services["prometheus"], "secrets") {
		secretOK = secretOK || str(s, "target") == secretFile && at(mon, "secrets", str(s, "source"), "environment") == "SPILLWAY_METRICS_TOKEN"
	}
	if str(sc, "authorization", "type") != "Bearer" || !secretOK {
		t.Errorf("prometheus does not send SPILLWAY_METRICS_TOKEN as its bearer token (%v)", at(sc, "authorization"))
	}

	// Grafana: provisioning and dashboards mounted where it and the
	// provider read them.
	gm := mounts("grafana")
	prov, dash := gm["/etc/grafana/provisioning"], ""
	if prov == "" {
		t.Fatalf("grafana: no provisioning mounted at /etc/grafana/provisioning (%v)", gm)
	}
	for _, sub := range []string{"datasources", "dashboards"} {
		if files, _ := filepath.Glob(filepath.Join(prov, sub, "*.yaml")); len(files) == 0 {
			t.Errorf("grafana provisioning has no %s", sub)
		}
	}
	providers := list(decodeAll(t, filepath.Join(prov, "dashboards", "spillway.yaml"))[0], "providers")
	if len(providers) != 1 {
		t.Fatalf("dashboard providers: %v", providers)
	}
	if dash = gm[str(providers[0], "options", "path")]; dash == "" {
		t.Fatalf("the dashboard provider reads %s, which grafana does not mount", str(providers[0], "options", "path"))
	}
	if _, err := os.Stat(filepath.Join(dash, "spillway.json")); err != nil {
		t.Errorf("the provider's folder lacks the dashboard: %v", err)
	}
}

func composeConfigOrFail(t *testing.T) obj {
	t.Helper()
	cfg, _ := composeConfig(t)
	if cfg == nil {
		t.Fatal("spillway has no mounted --config")
	}
	return cfg
}
