package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spillway-dev/spillway/artifact/s3store"
)

var (
	fetchOnly    = flag.Bool("fetch-only", false, "run only the fetch comparisons")
	fetchMiB     = flag.Int("fetch-mib", 100, "size of the big fetched artifact, MiB")
	fetchN       = flag.Int("fetch-n", 5, "runs of big fetches (each run reported; 0: none)")
	fetchPer     = flag.Int("fetch-per-run", 10, "big fetches of each side in one run (a 100 MiB fetch takes 30-60 ms here: fewer are noise)")
	smallKiB     = flag.Int("fetch-small-kib", 4, "size of the small cached artifact, KiB")
	smallConc    = flag.Int("fetch-c", 64, "concurrent clients of the small fetch")
	smallRound   = flag.Duration("fetch-round", 2*time.Second, "length of one small-fetch round per side")
	smallRoundN  = flag.Int("fetch-rounds", 6, "small-fetch rounds per side, interleaved")
	fetchLocalOn = flag.Bool("fetch-local", true, "run the local-directory store comparisons (false: only MinIO's)")
)

// fetches runs every fetch comparison: the local-directory store against
// http.FileServer, then (with MinIO) the S3 store against MinIO's own
// presigned GET.
func fetches() error {
	if *fetchLocalOn {
		if err := fetchLocal(); err != nil {
			return err
		}
	}
	if *minioBin == "" {
		return nil
	}
	return fetchVsMinIO()
}

// startSpillwayLogging is startSpillway at the default log level (one
// line per fetch, as deployed), its log thrown away by the kernel rather
// than copied through a pipe into this process.
func startSpillwayLogging(extra ...string) string {
	cmd := spillwayCommand("info", extra...)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		panic(err)
	}
	cmd.Stderr = null
	return launch(cmd)
}

// fetchLocal compares Spillway on its local-directory store with a bare
// http.FileServer (the anchor, its own process) serving the same bytes
// from a file: a small artifact (cached by Spillway after the first fetch)
// under concurrent load, then a big one fetched whole, one at a time.
func fetchLocal() error {
	const token = mcpToken
	dir, _ := os.MkdirTemp("", "spillway-load-fetch-")
	defer os.RemoveAll(dir)
	small, big, err := writeFetchFiles(dir)
	if err != nil {
		return err
	}
	sp := startSpillwayLogging("--auth-tokens", token+"=load")
	smallLink, err := upload(sp, token, small)
	if err != nil {
		return err
	}
	bigLink, err := upload(sp, token, big)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	an := start(self, "-anchor-dir", dir, "-anchor", addr())

	fmt.Printf("## small cached fetch (%d KiB, valid token, built-in policy, log level info), c=%d, %d interleaved rounds of %v per side\n\n",
		*smallKiB, *smallConc, *smallRoundN, *smallRound)
	sides := []*hammerSide{
		{name: "http.FileServer, same bytes (anchor)", url: "http://" + an + "/small.bin", pid: pid(an)},
		{name: "Spillway link, local-directory store", url: smallLink.HTTPURL, pid: pid(sp)},
	}
	if err := smallFetches(sides, len(small)); err != nil {
		return err
	}

	fmt.Printf("## %d MiB fetch from the local-directory store vs http.FileServer, %d runs, interleaved\n\n", *fetchMiB, *fetchN)
	return bigRuns(len(big), bigSide{"http.FileServer (anchor)", "http://" + an + "/big.bin", pid(an)}, bigSide{"Spillway link", bigLink.HTTPURL, pid(sp)})
}

// writeFetchFiles writes the small and the big artifact of the fetch
// comparison (random bytes, -fetch-small-kib and -fetch-mib) into dir as
// small.bin and big.bin, for the anchor to serve, and returns them.
func writeFetchFiles(dir string) (small, big []byte, err error) {
	small = make([]byte, *smallKiB<<10)
	big = make([]byte, *fetchMiB<<20)
	rand.Read(small)
	rand.Read(big)
	for name, b := range map[string][]byte{"small.bin": small, "big.bin": big} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, nil, err
		}
	}
	return small, big, nil
}

// smallFetches measures the small fetch on the anchor and Spillway: a
// warm-up round each (connections, Spillway's cache), then -fetch-rounds
// rounds with the two sides in alternating order, and prints each side's
// figures and the ratio of Spillway's requests per second to the
// anchor's.
func smallFetches(sides []*hammerSide, size int) error {
	load0 := loadAvg()
	for _, sd := range sides {
		if err := sd.round(*smallConc, *smallRound/2, size, false); err != nil {
			return err
		}
	}
	var ratios []float64
	for r := range *smallRoundN {
		ratio, err := hammerRound(sides, r, size)
		if err != nil {
			return err
		}
		ratios = append(ratios, ratio)
	}
	fmt.Printf("load average (1 min) before / after: %s / %s\n\n", load0, loadAvg())
	fmt.Printf("| path | requests/s | p50 | p99 | server CPU per request |\n|---|---|---|---|---|\n")
	for _, sd := range sides {
		fmt.Printf("| %s | %.0f | %v | %v | %v |\n", sd.name, sd.rps(), percentile(sd.lat, .5).Round(time.Microsecond),
			percentile(sd.lat, .99).Round(time.Microsecond), (sd.cpu / time.Duration(len(sd.lat))).Round(100*time.Nanosecond))
	}
	a, s := sides[0], sides[1]
	sort.Float64s(ratios)
	fmt.Printf("\nSpillway / FileServer: requests/s %.2f× (per round: min %.2f, median %.2f, max %.2f), p99 %.2f×\n\n",
		s.rps()/a.rps(), ratios[0], ratios[len(ratios)/2], ratios[len(ratios)-1],
		float64(percentile(s.lat, .99))/float64(percentile(a.lat, .99)))
	return nil
}

// hammerRound runs round r of the small fetch: each of the two sides
// once, the first to go alternating from round to round. It returns the
// round's ratio of the second side's requests per second to the first's.
func hammerRound(sides []*hammerSide, r, size int) (float64, error) {
	var rps [2]float64
	for i := range sides {
		sd := sides[(r+i)%2]
		t0, n0 := sd.elapsed, len(sd.lat)
		if err := sd.round(*smallConc, *smallRound, size, true); err != nil {
			return 0, err
		}
		rps[(r+i)%2] = float64(len(sd.lat)-n0) / (sd.elapsed - t0).Seconds()
	}
	return rps[1] / rps[0], nil
}

// hammerSide is one server of the small-fetch comparison: its latencies,
// the time measured and its process's CPU over all measured rounds.
type hammerSide struct {
	name, url string
	pid       int
	tr        *http.Transport
	lat       []time.Duration
	elapsed   time.Duration
	cpu       time.Duration
}

// rps is the side's requests per second over its measured rounds.
func (sd *hammerSide) rps() float64 { return float64(len(sd.lat)) / sd.elapsed.Seconds() }

// round runs c clients, each fetching sd.url over its own keep-alive
// connection back to back for d, and records (when keep) every latency.
func (sd *hammerSide) round(c int, d time.Duration, size int, keep bool) error {
	if sd.tr == nil {
		sd.tr = &http.Transport{MaxIdleConnsPerHost: c, MaxConnsPerHost: c}
	}
	client := &http.Client{Transport: sd.tr}
	var mu sync.Mutex
	var first error
	lats := make([][]time.Duration, c)
	cpu0 := cpuTime(sd.pid)
	t0 := time.Now()
	end := t0.Add(d)
	var wg sync.WaitGroup
	for i := range c {
		wg.Go(func() {
			buf := make([]byte, size+1)
			for time.Now().Before(end) {
				s := time.Now()
				resp, err := client.Get(sd.url)
				if err == nil {
					var n int
					n, err = io.ReadFull(resp.Body, buf)
					resp.Body.Close()
					if errors.Is(err, io.ErrUnexpectedEOF) && n == size && resp.StatusCode == http.StatusOK {
						err = nil
					} else {
						err = fmt.Errorf("%s: %s, %d bytes, %w", sd.name, resp.Status, n, err)
					}
				}
				if err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					return
				}
				lats[i] = append(lats[i], time.Since(s))
			}
		})
	}
	wg.Wait()
	if first != nil || !keep {
		return first
	}
	sd.elapsed += time.Since(t0)
	sd.cpu += cpuTime(sd.pid) - cpu0
	for _, l := range lats {
		sd.lat = append(sd.lat, l...)
	}
	return nil
}

// cmpOr returns a if it is not nil, else b: the first error kept.
func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// getAll fetches url whole through a 256 KiB buffer (io.Discard's own
// ReadFrom reads 8 KiB at a time, which would make the client the
// bottleneck) and returns how long it took.
func getAll(url string, size int) (time.Duration, error) {
	t0 := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	buf := make([]byte, 256<<10)
	var n int
	for {
		m, err := resp.Body.Read(buf)
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if n != size || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET: %s, %d bytes", resp.Status, n)
	}
	return time.Since(t0), nil
}

// bigSide is one URL of a big-fetch comparison; the first is the anchor.
// pid is the process serving it, whose CPU per fetch is reported (0: none).
type bigSide struct {
	name, url string
	pid       int
}

// bigRuns fetches each side's URL fetchN times (a run is fetchPer fetches
// of each, in an order rotating from run to run), and prints every run
// with each side's ratio to the first. A run of several fetches is less at
// the mercy of one scheduling hiccup on a shared machine than a single
// 50 ms fetch.
func bigRuns(size int, sides ...bigSide) error {
	if *fetchN <= 0 {
		return nil // -fetch-n 0: the small fetches only
	}
	per := max(*fetchPer, 1)
	for _, sd := range sides { // warm-up: page cache, connections
		if _, err := getAll(sd.url, size); err != nil {
			return fmt.Errorf("%s: %w", sd.name, err)
		}
	}
	fmt.Printf("%d fetches of each side per run, in rotating order\n\n| run | load avg |", per)
	for _, sd := range sides {
		fmt.Printf(" %s |", sd.name)
	}
	fmt.Printf("\n|---|---|%s\n", strings.Repeat("---|", len(sides)))
	ratios := make([][]float64, len(sides))
	cpu := make([]time.Duration, len(sides))
	for r := range *fetchN {
		took, err := bigRun(sides, r, per, size, cpu)
		if err != nil {
			return err
		}
		printBigRun(r, float64(per*size), took, ratios)
	}
	fmt.Println()
	printBigRatios(sides, ratios, cpu, per)
	return nil
}

// bigRun is run r of a big-fetch comparison: per fetches of each side,
// the sides taken in turn from a first that rotates from run to run. It
// returns each side's total time and adds each serving process's CPU
// time to cpu.
func bigRun(sides []bigSide, r, per, size int, cpu []time.Duration) ([]time.Duration, error) {
	took := make([]time.Duration, len(sides))
	for i := range per * len(sides) {
		k := (r + i) % len(sides)
		cpu0 := cpuTime(sides[k].pid)
		d, err := getAll(sides[k].url, size)
		cpu[k] += cpuTime(sides[k].pid) - cpu0
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sides[k].name, err)
		}
		took[k] += d
	}
	return took, nil
}

// printBigRun prints the table row of run r: each side's throughput over
// the bytes it fetched, and its ratio to the first side's, which it also
// appends to ratios.
func printBigRun(r int, bytes float64, took []time.Duration, ratios [][]float64) {
	mbps := func(d time.Duration) float64 { return bytes / 1e6 / d.Seconds() }
	fmt.Printf("| %d | %s |", r+1, loadAvg())
	for k := range took {
		ratio := mbps(took[k]) / mbps(took[0])
		ratios[k] = append(ratios[k], ratio)
		if k == 0 {
			fmt.Printf(" %.0f MB/s |", mbps(took[k]))
		} else {
			fmt.Printf(" %.0f MB/s (%.2f) |", mbps(took[k]), ratio)
		}
	}
	fmt.Println()
}

// printBigRatios prints, after the runs, the range of each side's ratio
// to the first and each serving process's CPU time per fetch.
func printBigRatios(sides []bigSide, ratios [][]float64, cpu []time.Duration, per int) {
	for k := 1; k < len(sides); k++ {
		rs := ratios[k]
		sort.Float64s(rs)
		fmt.Printf("ratio %s / %s: min %.2f, median %.2f, max %.2f\n", sides[k].name, sides[0].name, rs[0], rs[len(rs)/2], rs[len(rs)-1])
	}
	// CPU is the steadier figure on a shared machine: the wall times
	// swing with whatever else runs, the work per fetch does not.
	fmt.Printf("\nserver process CPU per fetch:")
	for k, sd := range sides {
		if sd.pid != 0 {
			fmt.Printf(" %s %v;", sd.name, (cpu[k] / time.Duration(*fetchN*per)).Round(100*time.Microsecond))
		}
	}
	fmt.Println()
	fmt.Println()
}

var (
	copyProxyTarget = flag.String("copy-proxy", "", "internal: run as a bare proxy of this one URL (GET, io.CopyBuffer)")
	copyProxyListen = flag.String("copy-proxy-listen", "", "internal: the bare copy proxy's listen address")
)

// copyProxy is the -copy-proxy mode: every GET is answered with the body of
// a GET of the target, copied through a 512 KiB buffer as Spillway copies a
// store's stream, with nothing else. It is the anchor for the extra hop
// itself. It exits when its stdin closes or on SIGINT or SIGTERM.
func copyProxy() int {
	exitWithParent()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		resp, err := http.Get(*copyProxyTarget)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
		w.WriteHeader(resp.StatusCode)
		io.CopyBuffer(struct{ io.Writer }{w}, resp.Body, make([]byte, 512<<10))
	})
	srv := &http.Server{Addr: *copyProxyListen, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, "spillway-load -copy-proxy:", srv.ListenAndServe())
	return 1
}

// fetchVsMinIO compares a link to an artifact on MinIO with a direct,
// presigned MinIO GET of the same object and with a bare Go proxy of
// that GET.
func fetchVsMinIO() error {
	if _, err := os.Stat(*minioBin); err != nil {
		fmt.Printf("(no MinIO at %s: fetch comparison skipped)\n", *minioBin)
		return nil
	}
	minio, maddr, err := startMinIO()
	if err != nil {
		return err
	}
	storeURL := "s3://load?endpoint=" + maddr + "&secure=false&create=true"
	const token = mcpToken
	sp := startSpillwayLogging("--store", storeURL, "--auth-tokens", token+"=load")

	body := make([]byte, *fetchMiB<<20)
	rand.Read(body)
	link, err := upload(sp, token, body)
	if err != nil {
		return err
	}
	direct, err := presignedGet(storeURL, link.URI)
	if err != nil {
		return err
	}
	fmt.Printf("## %d MiB fetch of an artifact on MinIO vs MinIO's presigned GET of the same object, %d runs, interleaved\n\n", *fetchMiB, *fetchN)
	bare, err := startSelf("-copy-proxy", direct, "-copy-proxy-listen", addr())
	if err != nil {
		return err
	}
	return bigRuns(len(body), bigSide{"presigned MinIO GET (anchor)", direct, minio.Process.Pid},
		bigSide{"bare Go proxy of it (anchor)", "http://" + bare + "/", pid(bare)},
		bigSide{"Spillway link (verify, policy, stream)", link.HTTPURL, pid(sp)})
}

// startMinIO runs MinIO on a fresh folder, waits until it reports itself
// ready, and sets the credentials the S3 store reads from the
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY). It returns the
// command and MinIO's address.
func startMinIO() (*exec.Cmd, string, error) {
	dir := tempDir("spillway-load-minio-")
	maddr := addr()
	user, pass := "loadtest", "loadtest-secret-0123"
	cmd := exec.Command(*minioBin, "server", "--quiet", "--address", maddr, "--console-address", addr(), dir)
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+user, "MINIO_ROOT_PASSWORD="+pass)
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	children = append(children, cmd)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + maddr + "/minio/health/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			return nil, "", fmt.Errorf("minio not ready")
		}
	}
	os.Setenv("AWS_ACCESS_KEY_ID", user)
	os.Setenv("AWS_SECRET_ACCESS_KEY", pass)
	return cmd, maddr, nil
}

// presignedGet is a presigned GET URL, straight from the S3 store at
// storeURL, of the object behind the artifact URI uri.
func presignedGet(storeURL, uri string) (string, error) {
	opts, err := s3store.ParseURL(storeURL)
	if err != nil {
		return "", err
	}
	store, err := s3store.New(context.Background(), opts)
	if err != nil {
		return "", err
	}
	u, _ := url.Parse(uri)
	id := u.Path[strings.LastIndexByte(u.Path, '/')+1:]
	direct, err := store.PresignGet(context.Background(), id, time.Hour, "application/octet-stream", "attachment")
	if err != nil {
		return "", err
	}
	return direct.String(), nil
}
