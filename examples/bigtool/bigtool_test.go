package bigtool_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"image/png"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/examples/bigtool"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func cents(f float64) int64 { return int64(math.Round(f * 100)) }

func TestWriteJSON(t *testing.T) {
	var a, b, c bytes.Buffer
	sa, err := bigtool.WriteJSON(&a, 7, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bigtool.WriteJSON(&b, 7, 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := bigtool.WriteJSON(&c, 8, 1000); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("same seed, different bytes")
	}
	if bytes.Equal(a.Bytes(), c.Bytes()) {
		t.Error("different seeds, same bytes")
	}
	var rows []map[string]any
	if err := json.Unmarshal(a.Bytes(), &rows); err != nil {
		t.Fatalf("not a JSON array: %v", err)
	}
	if len(rows) != 1000 || sa.Rows != 1000 {
		t.Fatalf("rows: parsed %d, summary %d, want 1000", len(rows), sa.Rows)
	}
	if sa.Bytes != int64(a.Len()) || sa.SHA256 != sha(a.Bytes()) {
		t.Errorf("summary says %d bytes sha %s; have %d bytes sha %s", sa.Bytes, sa.SHA256, a.Len(), sha(a.Bytes()))
	}
	var total int64
	byRegion := map[string]int64{}
	ids := map[string]bool{}
	for i, r := range rows {
		if got := slices.Sorted(mapKeys(r)); !slices.Equal(got, slices.Sorted(slices.Values(bigtool.OrderColumns))) {
			t.Fatalf("row %d columns %v", i, got)
		}
		amt, qty, unit := r["amount"].(float64), r["quantity"].(float64), r["unit_price"].(float64)
		if cents(amt) != cents(unit)*int64(qty) {
			t.Errorf("row %d: amount %v != %v × %v", i, amt, qty, unit)
		}
		total += cents(amt)
		byRegion[r["region"].(string)] += cents(amt)
		ids[r["id"].(string)] = true
	}
	if len(ids) != 1000 {
		t.Errorf("%d distinct ids, want 1000", len(ids))
	}
	if cents(sa.TotalAmount) != total {
		t.Errorf("summary total %v, rows sum to %v", sa.TotalAmount, float64(total)/100)
	}
	if len(byRegion) != 3 {
		t.Errorf("regions %v, want 3", byRegion)
	}
	for reg, v := range byRegion {
		if cents(sa.AmountByRegion[reg]) != v {
			t.Errorf("region %s: summary %v, rows %v", reg, sa.AmountByRegion[reg], float64(v)/100)
		}
	}
	if sa.FirstDate < "2025-01-01" || sa.LastDate > "2025-12-31" || sa.FirstDate >= sa.LastDate {
		t.Errorf("dates %s..%s", sa.FirstDate, sa.LastDate)
	}
}

func mapKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// The CSV export holds the same rows as the query for the same seed.
func TestWriteCSVMatchesJSON(t *testing.T) {
	var j, c bytes.Buffer
	sj, err := bigtool.WriteJSON(&j, 3, 500)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := bigtool.WriteCSV(&c, 3, 500)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(c.Bytes())).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v", err)
	}
	if !slices.Equal(recs[0], bigtool.OrderColumns) || len(recs) != 501 {
		t.Fatalf("header %v, %d records", recs[0], len(recs))
	}
	var rows []bigtool.Order
	if err := json.Unmarshal(j.Bytes(), &rows); err != nil {
		t.Fatal(err)
	}
	for i, o := range rows {
		r := recs[i+1]
		q, _ := strconv.Atoi(r[5])
		a, _ := strconv.ParseFloat(r[7], 64)
		if r[0] != o.ID || r[1] != o.Customer || r[2] != o.Region || r[4] != o.Product || q != o.Quantity ||
			cents(a) != cents(o.Amount) || r[8] != o.Date || r[9] != o.Status {
			t.Fatalf("row %d: CSV %v, JSON %+v", i, r, o)
		}
	}
	if sc.SHA256 != sha(c.Bytes()) || sc.TotalAmount != sj.TotalAmount || sc.Rows != sj.Rows {
		t.Errorf("CSV summary %+v vs JSON summary %+v", sc, sj)
	}
}

func TestChart(t *testing.T) {
	var a, b, c bytes.Buffer
	o := bigtool.ChartOptions{Seed: 1, Width: 400, Height: 300, Bars: 7}
	for _, buf := range []*bytes.Buffer{&a, &b} {
		if err := bigtool.Chart(buf, o); err != nil {
			t.Fatal(err)
		}
	}
	o.Seed = 2
	if err := bigtool.Chart(&c, o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) || bytes.Equal(a.Bytes(), c.Bytes()) {
		t.Error("chart is not a function of its seed")
	}
	img, err := png.Decode(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if img.Bounds().Dx() != 400 || img.Bounds().Dy() != 300 {
		t.Errorf("bounds %v", img.Bounds())
	}
	var flat bytes.Buffer
	if err := bigtool.Chart(&flat, bigtool.ChartOptions{Width: 400, Height: 300, Grain: -1}); err != nil {
		t.Fatal(err)
	}
	if flat.Len()*5 > a.Len() {
		t.Errorf("flat chart %d bytes, grainy %d: grain should dominate the size", flat.Len(), a.Len())
	}

	for _, tc := range []struct {
		o       bigtool.ChartOptions
		wantErr string
	}{
		{bigtool.ChartOptions{Width: 10}, "at least 64"},
		{bigtool.ChartOptions{Width: 10000, Height: 10000}, "at most"},
		{bigtool.ChartOptions{Bars: 1000, Width: 200}, "bars do not fit"},
		{bigtool.ChartOptions{Grain: 65}, "over 64"},
	} {
		if err := bigtool.Chart(&bytes.Buffer{}, tc.o); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: err %v, want %q", tc.o, err, tc.wantErr)
		}
	}
}

// TestDefaultSizes pins the documented default sizes: ~5 MB query, ~2 MB
// CSV, 1–2.5 MB chart.
func TestDefaultSizes(t *testing.T) {
	if testing.Short() {
		t.Skip("generates ~10 MB")
	}
	q, err := bigtool.WriteJSON(&bytes.Buffer{}, 1, bigtool.DefaultQueryRows)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bigtool.WriteCSV(&bytes.Buffer{}, 1, bigtool.DefaultCSVRows)
	if err != nil {
		t.Fatal(err)
	}
	var img bytes.Buffer
	if err := bigtool.Chart(&img, bigtool.ChartOptions{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	t.Logf("defaults: query %d bytes, csv %d bytes, chart %d bytes", q.Bytes, c.Bytes, img.Len())
	for _, tc := range []struct {
		name     string
		n        int64
		min, max int64
	}{
		{"query", q.Bytes, 4_500_000, 6_000_000},
		{"csv", c.Bytes, 1_700_000, 2_600_000},
		{"chart", int64(img.Len()), 1_000_000, 2_600_000},
	} {
		if tc.n < tc.min || tc.n > tc.max {
			t.Errorf("%s: %d bytes, want %d–%d", tc.name, tc.n, tc.min, tc.max)
		}
	}
}

// connect serves bigtool in-process over Streamable HTTP in era and returns
// a connected go-sdk client session asking for version (empty: latest).
func connect(t *testing.T, era bigtool.Era, version string, onProgress func(*mcp.ProgressNotificationParams)) *mcp.ClientSession {
	t.Helper()
	h, err := bigtool.NewHandler(bigtool.NewServer(nil), era)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := mcp.NewClient(&mcp.Implementation{Name: "bigtool-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			if onProgress != nil {
				onProgress(r.Params)
			}
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (era %s, version %q): %v", era, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// Each era negotiates what it should with the go-sdk client.
func TestHTTPEras(t *testing.T) {
	for _, tc := range []struct {
		era         bigtool.Era
		ask         string
		wantVersion string
		wantSession bool
	}{
		{bigtool.EraBoth, "", "2026-07-28", false},
		{bigtool.EraBoth, "2025-11-25", "2025-11-25", true},
		{bigtool.EraBoth, "2025-06-18", "2025-06-18", true},
		{bigtool.EraSession, "", "2025-11-25", true},
		{bigtool.EraStateless, "", "2026-07-28", false},
		{bigtool.EraStateless, "2025-11-25", "2025-11-25", false},
	} {
		t.Run(string(tc.era)+"/"+tc.ask, func(t *testing.T) {
			cs := connect(t, tc.era, tc.ask, nil)
			if got := cs.InitializeResult().ProtocolVersion; got != tc.wantVersion {
				t.Errorf("negotiated %s, want %s", got, tc.wantVersion)
			}
			if got := cs.ID() != ""; got != tc.wantSession {
				t.Errorf("session id %q, want one: %v", cs.ID(), tc.wantSession)
			}
			res := call(t, cs, "small", map[string]any{"echo": "hi"})
			if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "ok hi" {
				t.Errorf("small: %+v", res.Content)
			}
		})
	}
	if _, err := bigtool.NewHandler(bigtool.NewServer(nil), "nope"); err == nil {
		t.Error("NewHandler accepted era nope")
	}
}

func TestTools(t *testing.T) {
	var progress atomic.Int32
	var lastTotal atomic.Int64
	for _, era := range []bigtool.Era{bigtool.EraSession, bigtool.EraStateless} {
		t.Run(string(era), func(t *testing.T) {
			progress.Store(0)
			cs := connect(t, era, "", func(p *mcp.ProgressNotificationParams) {
				progress.Add(1)
				lastTotal.Store(int64(p.Total))
			})
			ctx := context.Background()
			tools, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range tools.Tools {
				names = append(names, tl.Name)
				if tl.Name == "query" && tl.OutputSchema == nil {
					t.Error("query has no outputSchema")
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, bigtool.ToolNames) {
				t.Errorf("tools %v, want %v", names, bigtool.ToolNames)
			}

			// query: rows as text, summary as structuredContent.
			var want bytes.Buffer
			wantSum, _ := bigtool.WriteJSON(&want, 11, 3000)
			res := call(t, cs, "query", map[string]any{"rows": 3000, "seed": 11})
			if res.IsError || len(res.Content) != 1 {
				t.Fatalf("query: error %v, %d items", res.IsError, len(res.Content))
			}
			if txt := res.Content[0].(*mcp.TextContent).Text; sha([]byte(txt)) != wantSum.SHA256 {
				t.Errorf("query text sha %s, want %s", sha([]byte(txt)), wantSum.SHA256)
			}
			var gotSum bigtool.Summary
			raw, _ := json.Marshal(res.StructuredContent)
			if err := json.Unmarshal(raw, &gotSum); err != nil || gotSum.SHA256 != wantSum.SHA256 ||
				gotSum.Rows != 3000 || gotSum.TotalAmount != wantSum.TotalAmount {
				t.Errorf("structuredContent %s (err %v), want %+v", raw, err, wantSum)
			}
			if res := call(t, cs, "query", map[string]any{"rows": bigtool.MaxRows + 1}); !res.IsError {
				t.Error("query accepted too many rows")
			}

			// chart: caption and a decodable PNG.
			res = call(t, cs, "chart", map[string]any{"width": 320, "height": 200, "seed": 4})
			img, ok := res.Content[len(res.Content)-1].(*mcp.ImageContent)
			if !ok || img.MIMEType != "image/png" {
				t.Fatalf("chart content %T", res.Content[len(res.Content)-1])
			}
			var wantPNG bytes.Buffer
			bigtool.Chart(&wantPNG, bigtool.ChartOptions{Seed: 4, Width: 320, Height: 200})
			if !bytes.Equal(img.Data, wantPNG.Bytes()) {
				t.Error("chart bytes differ from Chart with the same options")
			}
			if cfg, err := png.DecodeConfig(bytes.NewReader(img.Data)); err != nil || cfg.Width != 320 || cfg.Height != 200 {
				t.Errorf("chart PNG %+v, %v", cfg, err)
			}

			// export_csv in its three shapes.
			var wantCSV bytes.Buffer
			bigtool.WriteCSV(&wantCSV, 5, 800)
			for _, as := range []string{"resource", "blob", "text"} {
				res := call(t, cs, "export_csv", map[string]any{"rows": 800, "seed": 5, "as": as})
				var got []byte
				switch c := res.Content[0].(type) {
				case *mcp.EmbeddedResource:
					if c.Resource.MIMEType != "text/csv" || !strings.HasPrefix(c.Resource.URI, "bigtool://exports/") {
						t.Errorf("%s: resource %s %s", as, c.Resource.URI, c.Resource.MIMEType)
					}
					got = append([]byte(c.Resource.Text), c.Resource.Blob...)
					if (as == "blob") != (len(c.Resource.Blob) > 0) {
						t.Errorf("%s: text %d bytes, blob %d bytes", as, len(c.Resource.Text), len(c.Resource.Blob))
					}
				case *mcp.TextContent:
					got = []byte(c.Text)
					if as != "text" {
						t.Errorf("%s: got text content", as)
					}
				}
				if !bytes.Equal(got, wantCSV.Bytes()) {
					t.Errorf("%s: %d bytes differ from WriteCSV's %d", as, len(got), wantCSV.Len())
				}
			}
			if res := call(t, cs, "export_csv", map[string]any{"as": "xml"}); !res.IsError {
				t.Error("export_csv accepted as=xml")
			}

			// slow_report: progress while it runs, then exactly size bytes.
			params := &mcp.CallToolParams{Name: "slow_report", Arguments: map[string]any{"seconds": 0.4, "interval_ms": 50, "size": 200000, "seed": 2}}
			params.SetProgressToken("p-" + string(era))
			start := time.Now()
			res, err = cs.CallTool(ctx, params)
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < 350*time.Millisecond {
				t.Errorf("slow_report returned after %v, want ≥ 0.4s", d)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if len(text) != 200000 || !strings.HasPrefix(text, "# slow_report seed=2") {
				t.Errorf("report: %d bytes, starts %.40q", len(text), text)
			}
			again := call(t, cs, "slow_report", map[string]any{"seconds": 0.05, "interval_ms": 10, "size": 200000, "seed": 2})
			if again.Content[0].(*mcp.TextContent).Text != text {
				t.Error("slow_report is not deterministic")
			}
			// Notifications may trail the response slightly.
			deadline := time.Now().Add(2 * time.Second)
			for progress.Load() < 8 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := progress.Load(); n != 8 || lastTotal.Load() != 8 {
				t.Errorf("%d progress notifications (total %d), want 8 of 8", n, lastTotal.Load())
			}

			// small stays small.
			res = call(t, cs, "small", map[string]any{"echo": strings.Repeat("x", 5000)})
			if b, _ := json.Marshal(res); len(b) > 512 {
				t.Errorf("small result is %d bytes", len(b))
			}
		})
	}
}

func TestParseEra(t *testing.T) {
	for _, s := range []string{"both", "session", "stateless"} {
		if e, err := bigtool.ParseEra(s); err != nil || string(e) != s {
			t.Errorf("ParseEra(%q) = %q, %v", s, e, err)
		}
	}
	if _, err := bigtool.ParseEra("Both"); err == nil {
		t.Error("ParseEra accepted Both")
	}
}

// cutTransport drops the first SSE response of a slow_report call after a
// few bytes, as a flaky network would, and records the resuming GETs.
type cutTransport struct {
	cut     atomic.Bool
	resumes atomic.Int32
}

func (c *cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
		c.resumes.Add(1)
	}
	var isReport bool
	if r.Method == http.MethodPost && r.Body != nil {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		isReport = bytes.Contains(b, []byte(`"slow_report"`))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && isReport && c.cut.CompareAndSwap(false, true) {
		resp.Body = &cutBody{ReadCloser: resp.Body, left: 600}
	}
	return resp, err
}

type cutBody struct {
	io.ReadCloser
	left int
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.ReadCloser.Read(p[:min(len(p), b.left)])
	b.left -= n
	return n, err
}

// In the session era a dropped response stream is resumed with
// Last-Event-ID from bigtool's event store, and the result arrives whole.
func TestSessionResume(t *testing.T) {
	h, err := bigtool.NewHandler(bigtool.NewServer(nil), bigtool.EraSession)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ct := &cutTransport{}
	var progress atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "resume-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: ct}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	params := &mcp.CallToolParams{Name: "slow_report", Arguments: map[string]any{"seconds": 0.6, "interval_ms": 50, "size": 300000, "seed": 6}}
	params.SetProgressToken("resume")
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		t.Fatalf("call across a dropped stream: %v", err)
	}
	if !ct.cut.Load() || ct.resumes.Load() == 0 {
		t.Fatalf("stream cut %v, resumed %d times: the test did not exercise resumption", ct.cut.Load(), ct.resumes.Load())
	}
	want := call(t, cs, "slow_report", map[string]any{"seconds": 0.01, "interval_ms": 10, "size": 300000, "seed": 6})
	if got := res.Content[0].(*mcp.TextContent).Text; got != want.Content[0].(*mcp.TextContent).Text {
		t.Errorf("resumed result differs: %d bytes vs %d", len(got), len(want.Content[0].(*mcp.TextContent).Text))
	}
	if n := progress.Load(); n < 12 {
		t.Errorf("%d progress notifications across the drop, want 12", n)
	}
}
