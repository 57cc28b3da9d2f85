package preview

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The corpus under testdata/corpus is written by this generator, from
// fixed seeds, so that it can be read, reviewed and regenerated:
//
//	go test -run TestGenerateCorpus -gen ./artifact/preview
var gen = flag.Bool("gen", false, "regenerate testdata/corpus")

func TestGenerateCorpus(t *testing.T) {
	if !*gen {
		t.Skip("run with -gen to regenerate the corpus")
	}
	dir := filepath.Join("testdata", "corpus")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, fn := range map[string]func(*rand.Rand) []byte{
		"api_list.json":     genAPIList,
		"db_envelope.json":  genDBEnvelope,
		"compact_rows.json": genCompactRows,
		"git_diff.json":     genGitDiff,
		"npm_ls.json":       genNpmLs,
		"graph.json":        genGraph,
		"tree.json":         genTree,
		"events.ndjson":     genNDJSON,
		"orders.csv":        genCSV,
		"metrics.tsv":       genTSV,
		"app.log":           genLog,
		"report.md":         genMarkdown,
		"page.html":         genHTML,
		"screenshot.png":    genScreenshot,
		"photo.jpg":         genPhoto,
		"tone.wav":          genWAV,
		"doc.pdf":           genPDF,
		"bundle.zip":        genZip,
		"export.csv.gz":     genGzip,
		"random.bin":        genRandom,
	} {
		r := rand.New(rand.NewPCG(uint64(len(name)), 23))
		if err := os.WriteFile(filepath.Join(dir, name), fn(r), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

var base = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func genAPIList(r *rand.Rand) []byte {
	type cust struct {
		ID    string `json:"id"`
		Email string `json:"email"`
	}
	type charge struct {
		ID          string            `json:"id"`
		Object      string            `json:"object"`
		Amount      int               `json:"amount"`
		Currency    string            `json:"currency"`
		Status      string            `json:"status"`
		Paid        bool              `json:"paid"`
		Created     string            `json:"created"`
		Customer    cust              `json:"customer"`
		Description *string           `json:"description"`
		Metadata    map[string]string `json:"metadata"`
	}
	var data []charge
	for i := range 300 {
		st := pick(r, "succeeded", "succeeded", "succeeded", "pending", "failed", "refunded")
		var desc *string
		if r.IntN(3) > 0 {
			d := pick(r, "Subscription renewal", "One-off order", "Invoice payment", "Top-up")
			desc = &d
		}
		data = append(data, charge{
			ID: fmt.Sprintf("ch_3Q%08x", r.Uint32()), Object: "charge",
			Amount: 50 + r.IntN(250000), Currency: pick(r, "usd", "usd", "eur", "gbp"), Status: st,
			Paid: st == "succeeded", Created: base.Add(time.Duration(i*27+r.IntN(20)) * time.Hour).Format(time.RFC3339),
			Customer:    cust{fmt.Sprintf("cus_%06d", r.IntN(900000)), fmt.Sprintf("user%d@example.com", r.IntN(5000))},
			Description: desc, Metadata: map[string]string{"order_id": fmt.Sprintf("ord_%d", 10000+i)},
		})
	}
	return mustJSON(map[string]any{"object": "list", "url": "/v1/charges", "has_more": true, "total_count": 4821, "data": data})
}

func genDBEnvelope(r *rand.Rand) []byte {
	var rows []map[string]any
	for i := range 1500 {
		var note any
		if r.IntN(10) == 0 {
			note = pick(r, "gift wrap", "leave at door", "call first")
		}
		rows = append(rows, map[string]any{
			"order_id": 100000 + i, "customer": fmt.Sprintf("C%05d", r.IntN(3000)),
			"status": pick(r, "paid", "paid", "pending", "failed", "refunded"),
			"amount": math.Round((4+r.Float64()*r.Float64()*86000)*100) / 100,
			"date":   base.AddDate(0, 0, r.IntN(365)).Format("2006-01-02"),
			"region": pick(r, "EU", "US", "APAC"), "note": note,
		})
	}
	return mustJSON(map[string]any{
		"data": map[string]any{"statements": []any{map[string]any{
			"query":   "SELECT order_id, customer, status, amount, date, region, note FROM orders WHERE date >= '2025-01-01'",
			"count":   len(rows),
			"columns": []string{"order_id", "customer", "status", "amount", "date", "region", "note"},
			"rows":    rows,
		}}},
		"meta": map[string]any{"duration_ms": 412, "database": "shop"},
	})
}

// genCompactRows is a result in ClickHouse's JSONCompact format: column
// descriptions in "meta", rows as arrays in "data".
func genCompactRows(r *rand.Rand) []byte {
	var rows [][]any
	for i := range 800 {
		rows = append(rows, []any{
			base.Add(time.Duration(i) * time.Hour).Format("2006-01-02 15:04:05"),
			pick(r, "/", "/pricing", "/docs", "/blog/launch"), 1 + r.IntN(5000), math.Round(r.Float64()*3000) / 1000,
		})
	}
	return mustJSON(map[string]any{
		"meta": []map[string]string{{"name": "hour", "type": "DateTime"}, {"name": "page", "type": "String"}, {"name": "visits", "type": "UInt32"}, {"name": "bounce_rate", "type": "Float64"}},
		"data": rows, "rows": len(rows), "rows_before_limit_at_least": 12000,
		"statistics": map[string]any{"elapsed": 0.0213, "rows_read": 1200000, "bytes_read": 48000000},
	})
}

// genNpmLs is `npm ls --json`: dependencies as a map of objects keyed by
// package name.
func genNpmLs(r *rand.Rand) []byte {
	deps := map[string]any{}
	for i := range 150 {
		name := fmt.Sprintf("%s-%s-%d", pick(r, "lodash", "react", "chalk", "debug", "ms", "semver"), pick(r, "core", "utils", "plugin"), i)
		d := map[string]any{
			"version":    fmt.Sprintf("%d.%d.%d", r.IntN(20), r.IntN(30), r.IntN(10)),
			"resolved":   fmt.Sprintf("https://registry.example.com/%s/-/%s.tgz", name, name),
			"overridden": r.IntN(20) == 0,
		}
		if r.IntN(4) == 0 {
			d["dependencies"] = map[string]any{"ms": map[string]any{"version": "2.1.3"}}
		}
		deps[name] = d
	}
	return mustJSON(map[string]any{"name": "shop-frontend", "version": "1.4.0", "dependencies": deps})
}

func genGitDiff(r *rand.Rand) []byte {
	type file struct {
		Path       string `json:"path"`
		Status     string `json:"status"`
		Insertions int    `json:"insertions"`
		Deletions  int    `json:"deletions"`
	}
	files := make([]file, 275)
	ins, del := 41655, 177
	for i := range files {
		dir := pick(r, "src/components", "src/lib", "docs", "test/fixtures", "packages/core/src")
		files[i] = file{Path: fmt.Sprintf("%s/file_%03d.%s", dir, i, pick(r, "ts", "tsx", "md", "json")), Status: pick(r, "added", "added", "modified", "renamed")}
	}
	// Spread the totals over the files so that they add up.
	for i := range files {
		if i == len(files)-1 {
			files[i].Insertions, files[i].Deletions = ins, del
			break
		}
		n := min(ins, r.IntN(2*41655/275))
		d := 0
		if r.IntN(4) == 0 {
			d = min(del, r.IntN(4))
		}
		files[i].Insertions, files[i].Deletions = n, d
		ins -= n
		del -= d
	}
	return mustJSON(map[string]any{"filesChanged": 275, "insertions": 41655, "deletions": 177, "base": "v2.3.0", "head": "main", "files": files})
}

func genGraph(r *rand.Rand) []byte {
	type entity struct {
		Name         string   `json:"name"`
		EntityType   string   `json:"entityType"`
		Observations []string `json:"observations"`
	}
	type relation struct {
		From         string `json:"from"`
		To           string `json:"to"`
		RelationType string `json:"relationType"`
	}
	var es []entity
	for i := range 400 {
		var obs []string
		for range 1 + r.IntN(3) {
			obs = append(obs, pick(r, "works on the billing service", "prefers Go", "joined in 2023", "owns the on-call rota", "based in Lyon"))
		}
		es = append(es, entity{fmt.Sprintf("entity_%03d", i), pick(r, "person", "service", "team", "project"), obs})
	}
	var rs []relation
	for range 900 {
		rs = append(rs, relation{es[r.IntN(len(es))].Name, es[r.IntN(len(es))].Name, pick(r, "works_with", "depends_on", "owns", "member_of")})
	}
	b, _ := json.Marshal(map[string]any{"entities": es, "relations": rs})
	return b
}

func genTree(r *rand.Rand) []byte {
	var node func(name string, depth int) map[string]any
	node = func(name string, depth int) map[string]any {
		if depth >= 4 || depth > 0 && r.IntN(3) == 0 {
			return map[string]any{"name": name, "type": "file", "size": r.IntN(40000)}
		}
		var kids []any
		for i := range 2 + r.IntN(5) {
			kids = append(kids, node(fmt.Sprintf("%s_%d", pick(r, "lib", "src", "dist", "index.js", "README.md", "package.json"), i), depth+1))
		}
		return map[string]any{"name": name, "type": "directory", "children": kids}
	}
	root := node("node_modules", 0)
	kids := root["children"].([]any)
	for i, n := range []string{"react", "lodash", "express", "typescript"} {
		if i < len(kids) {
			kids[i].(map[string]any)["name"] = n
		}
	}
	return mustJSON(root)
}

func genNDJSON(r *rand.Rand) []byte {
	var b bytes.Buffer
	for i := range 1000 {
		ev := map[string]any{
			"ts":    base.Add(time.Duration(i*61) * time.Second).Format("2006-01-02T15:04:05Z"),
			"level": pick(r, "info", "info", "info", "warn", "error"), "user_id": r.IntN(800),
			"event": pick(r, "login", "logout", "purchase", "view"), "duration_ms": r.IntN(900) + 3,
			"ok": r.IntN(10) > 0,
		}
		if r.IntN(5) == 0 {
			ev["error"] = pick(r, "timeout", "bad token")
		}
		line, _ := json.Marshal(ev)
		b.Write(append(line, '\n'))
	}
	return b.Bytes()
}

func genCSV(r *rand.Rand) []byte {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"order_id", "customer", "product", "quantity", "unit_price", "ordered_at", "shipped", "notes"})
	for i := range 1200 {
		notes := ""
		switch r.IntN(8) {
		case 0:
			notes = `Customer said "urgent", ship today`
		case 1:
			notes = "Line one\nline two"
		case 2:
			notes = "fragile, handle with care"
		}
		w.Write([]string{
			fmt.Sprint(5000 + i), pick(r, "Smith, John", "Doe, Jane", "O'Brien, Pat", "Müller, Anna", "Li, Wei"),
			pick(r, "Widget", "Gadget \"Pro\"", "Gizmo, large", "Doohickey"), fmt.Sprint(1 + r.IntN(20)),
			fmt.Sprintf("%.2f", 1+r.Float64()*499), base.Add(time.Duration(i*7) * time.Hour).Format("2006-01-02 15:04:05"),
			pick(r, "true", "false"), notes,
		})
	}
	w.Flush()
	return b.Bytes()
}

func genTSV(r *rand.Rand) []byte {
	var b strings.Builder
	b.WriteString("host\tmetric\tvalue\tunit\tsampled_at\n")
	for i := range 800 {
		m := pick(r, "cpu", "mem", "disk")
		unit := map[string]string{"cpu": "%", "mem": "MiB", "disk": "GiB"}[m]
		fmt.Fprintf(&b, "web-%02d\t%s\t%.1f\t%s\t%s\n", r.IntN(12), m, r.Float64()*100, unit, base.Add(time.Duration(i)*time.Minute).Format(time.RFC3339))
	}
	return []byte(b.String())
}

func genLog(r *rand.Rand) []byte {
	var b strings.Builder
	t := base.Add(9 * time.Hour)
	for i := range 2500 {
		t = t.Add(time.Duration(r.IntN(900)) * time.Millisecond)
		ts := t.Format("2006-01-02T15:04:05.000Z")
		switch x := r.IntN(100); {
		case x < 70:
			fmt.Fprintf(&b, "%s INFO  http: %s /api/v1/orders/%d status=200 duration=%dms req_id=%08x\n", ts, pick(r, "GET", "GET", "POST"), r.IntN(90000), r.IntN(300), r.Uint32())
		case x < 85:
			fmt.Fprintf(&b, "%s DEBUG cache: hit key=order:%d ttl=%ds\n", ts, r.IntN(90000), r.IntN(600))
		case x < 95:
			fmt.Fprintf(&b, "%s WARN  db: slow query took %dms (threshold 500ms)\n", ts, 500+r.IntN(3000))
		default:
			fmt.Fprintf(&b, "%s ERROR payment: charge %d failed: %s\n", ts, r.IntN(90000), pick(r, "card_declined", "upstream timeout after 30s", "insufficient_funds"))
		}
		if i == 1700 {
			fmt.Fprintf(&b, "%s ERROR worker: panic: runtime error: index out of range [3] with length 3\n", ts)
			b.WriteString("goroutine 41 [running]:\nmain.(*Worker).run(0xc000123000)\n\t/app/worker.go:88 +0x1d4\n")
		}
	}
	return []byte(b.String())
}

func genMarkdown(r *rand.Rand) []byte {
	var b strings.Builder
	b.WriteString("# Quarterly infrastructure report, Q3 2025\n\nThis report covers availability, cost and incidents of the production platform between July and September 2025. Availability met the 99.95% objective in every month.\n\n")
	for _, sec := range []string{"Availability", "Cost", "Incidents", "Next quarter"} {
		fmt.Fprintf(&b, "## %s\n\n", sec)
		for _, sub := range []string{"Summary", "Details"} {
			fmt.Fprintf(&b, "### %s: %s\n\n", sec, sub)
			for range 3 {
				fmt.Fprintf(&b, "The %s figures for the %s cluster were %d%% %s than planned. ", strings.ToLower(sec), pick(r, "eu-west", "us-east", "ap-south"), r.IntN(20), pick(r, "better", "worse"))
			}
			b.WriteString("\n\n| month | value |\n|---|---|\n| July | 1 |\n| August | 2 |\n\n```sh\nkubectl get pods -A\n```\n\n")
		}
	}
	return []byte(b.String())
}

func genHTML(r *rand.Rand) []byte {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Release notes &ndash; Acme Cloud 4.2</title>\n<style>body{font-family:sans-serif}</style>\n<script>window.dataLayer=[];</script>\n</head>\n<body>\n<nav><a href=\"/\">Home</a> <a href=\"/docs\">Docs</a></nav>\n<h1>Acme Cloud 4.2 release notes</h1>\n<p>Version 4.2 brings regional failover, a faster dashboard and 37 bug fixes. Upgrade with <code>acme upgrade --to 4.2</code>.</p>\n")
	for _, h := range []string{"New features", "Improvements", "Bug fixes", "Deprecations"} {
		fmt.Fprintf(&b, "<h2>%s</h2>\n<ul>\n", h)
		for i := range 12 {
			fmt.Fprintf(&b, "<li>Item %d: %s &amp; %s</li>\n", i, pick(r, "storage", "network", "billing"), pick(r, "API", "CLI", "console"))
		}
		b.WriteString("</ul>\n<!-- <h2>hidden</h2> -->\n")
	}
	b.WriteString("<footer>&copy; 2025 Acme</footer>\n</body>\n</html>\n")
	return []byte(b.String())
}

// genScreenshot draws a 1920×1080 dashboard: a top bar, a sidebar, cards
// with lines of "text" and a chart.
func genScreenshot(r *rand.Rand) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1920, 1080))
	fill := func(x0, y0, x1, y1 int, c color.RGBA) {
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				img.SetRGBA(x, y, c)
			}
		}
	}
	fill(0, 0, 1920, 1080, color.RGBA{245, 246, 248, 255})
	fill(0, 0, 1920, 64, color.RGBA{32, 41, 64, 255})
	fill(0, 64, 260, 1080, color.RGBA{255, 255, 255, 255})
	for i := range 12 {
		fill(24, 100+i*48, 24+80+r.IntN(120), 112+i*48, color.RGBA{90, 98, 112, 255})
	}
	for c := range 3 {
		x := 300 + c*540
		fill(x, 100, x+500, 500, color.RGBA{255, 255, 255, 255})
		for i := range 10 {
			fill(x+24, 130+i*32, x+24+100+r.IntN(340), 142+i*32, color.RGBA{60, 64, 72, 255})
		}
	}
	fill(300, 540, 1880, 1040, color.RGBA{255, 255, 255, 255})
	for i := range 60 {
		h := 40 + r.IntN(400)
		fill(330+i*25, 1020-h, 330+i*25+16, 1020, color.RGBA{66, 133, 244, 255})
	}
	var b bytes.Buffer
	png.Encode(&b, img)
	return b.Bytes()
}

// genPhoto paints a smooth landscape-like field with grain, as a camera
// would, 1600×1200.
func genPhoto(r *rand.Rand) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1600, 1200))
	for y := range 1200 {
		for x := range 1600 {
			fx, fy := float64(x)/1600, float64(y)/1200
			sky := fy < 0.45+0.08*math.Sin(fx*9)
			var c [3]float64
			if sky {
				c = [3]float64{120 + 60*fy, 170 + 40*fy, 235}
			} else {
				c = [3]float64{60 + 50*math.Sin(fx*20+fy*7), 110 + 40*fy, 50}
			}
			n := float64(r.IntN(17)) - 8
			img.SetRGBA(x, y, color.RGBA{uint8(c[0] + n), uint8(c[1] + n), uint8(min(255, c[2]+n)), 255})
		}
	}
	var b bytes.Buffer
	jpeg.Encode(&b, img, &jpeg.Options{Quality: 70})
	return b.Bytes()
}

// genWAV writes 1.5 s of a 440 Hz tone, 16-bit mono at 8 kHz.
func genWAV(*rand.Rand) []byte {
	const rate, n = 8000, 12000
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + 2*n))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1))
	le(uint16(1))
	le(uint32(rate))
	le(uint32(rate * 2))
	le(uint16(2))
	le(uint16(16))
	b.WriteString("data")
	le(uint32(2 * n))
	for i := range n {
		le(int16(8000 * math.Sin(2*math.Pi*440*float64(i)/rate)))
	}
	return b.Bytes()
}

// genPDF writes a one-page PDF with a line of text and a correct xref.
func genPDF(*rand.Rand) []byte {
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		"", // the content stream, below
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	content := "BT /F1 24 Tf 72 720 Td (Invoice 2025-0042) Tj ET"
	objs[3] = fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content), content)
	var b strings.Builder
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return []byte(b.String())
}

func genZip(r *rand.Rand) []byte {
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, name := range []string{"README.md", "src/main.go", "src/util.go", "data/orders.csv", "data/customers.csv", "docs/guide.md"} {
		f, _ := w.Create(name)
		for range 20 + r.IntN(50) {
			fmt.Fprintf(f, "line %d of %s\n", r.IntN(1000), name)
		}
	}
	w.Close()
	return b.Bytes()
}

func genGzip(r *rand.Rand) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Name = "export.csv"
	w.ModTime = base
	w.Write(genCSV(r))
	w.Close()
	return b.Bytes()
}

func genRandom(r *rand.Rand) []byte {
	b := make([]byte, 4096)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[0] = 0x9c // not a known magic
	return b
}
