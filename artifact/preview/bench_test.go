package preview

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// synth writes total bytes (about) of one kind of generated content to
// fn in chunks of 32 KiB: "json" (an array of objects with unique ids and
// strings, so that distinct counts overflow to estimates), "csv", "log".
// checkpoint is called after each chunk with the bytes so far.
func synth(kind string, total int64, fn func([]byte)) {
	var buf bytes.Buffer
	var n int64
	flush := func(force bool) {
		if buf.Len() >= 32<<10 || force && buf.Len() > 0 {
			n += int64(buf.Len())
			fn(buf.Bytes())
			buf.Reset()
		}
	}
	statuses := []string{"paid", "pending", "failed", "refunded"}
	switch kind {
	case "json":
		buf.WriteString("[")
	case "csv":
		buf.WriteString("id,user,status,amount,date,comment\n")
	}
	for i := 0; n+int64(buf.Len()) < total; i++ {
		switch kind {
		case "json":
			if i > 0 {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, `{"id":%d,"user":"user-%d","status":%q,"amount":%d.%02d,"date":"2025-%02d-%02d","tags":["a","b"],"addr":{"city":"c%d","zip":"%05d"}}`,
				i, i*7919, statuses[i%4], i%86000, i%100, 1+i%12, 1+i%28, i%1000, i%99999)
			buf.WriteByte('\n')
		case "csv":
			fmt.Fprintf(&buf, "%d,user-%d,%s,%d.%02d,2025-%02d-%02d,\"said \"\"hi\"\", left\"\n", i, i*7919, statuses[i%4], i%86000, i%100, 1+i%12, 1+i%28)
		case "log":
			lv := []string{"INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG"}[i%6]
			fmt.Fprintf(&buf, "2025-01-01T10:%02d:%02d.%03dZ %-5s http: GET /api/orders/%d status=200 took=%dms req=%08x\n", i/60%60, i%60, i%1000, lv, i*31, i%700, i*2654435761)
		}
		flush(false)
	}
	if kind == "json" {
		buf.WriteString("]")
	}
	flush(true)
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemoryDoesNotGrow streams 24 MiB of each kind (6 MiB under the
// race detector) and measures the live heap (after a GC) with the
// Builder alive, at a quarter, half and all of it: it must not grow with
// the input.
func TestMemoryDoesNotGrow(t *testing.T) {
	quarter := int64(6 << 20)
	if raceEnabled {
		quarter = 1.5 * (1 << 20)
	}
	for _, kind := range []string{"json", "csv", "log"} {
		t.Run(kind, func(t *testing.T) {
			b := New(Options{})
			var fed int64
			var marks []uint64
			next := quarter
			synth(kind, 4*quarter, func(p []byte) {
				b.Write(p)
				fed += int64(len(p))
				if fed >= next {
					marks = append(marks, liveHeap())
					next *= 2
				}
			})
			pv := b.Preview()
			if len(marks) != 3 {
				t.Fatalf("%d marks", len(marks))
			}
			lo, hi := min(marks[0], marks[1], marks[2]), max(marks[0], marks[1], marks[2])
			t.Logf("%s: live heap at %.1f/%.1f/%.1f MiB of input: %.2f / %.2f / %.2f MiB", kind,
				mib(uint64(quarter)), mib(uint64(2*quarter)), mib(uint64(4*quarter)), mib(marks[0]), mib(marks[1]), mib(marks[2]))
			if hi-lo > 1<<20 {
				t.Errorf("the live heap grew by %.2f MiB while the input grew by %.1f MiB", mib(hi-lo), mib(uint64(3*quarter)))
			}
			if pv.Facts.Rows == 0 && pv.Facts.Lines == 0 {
				t.Errorf("nothing counted:\n%s", pv.Text)
			}
		})
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// BenchmarkStream100MB streams 100 MB of JSON rows and reports the
// highest live heap seen (sampled every 10 MB) besides the throughput.
func BenchmarkStream100MB(b *testing.B) {
	total := int64(100 << 20)
	if raceEnabled {
		total = 10 << 20 // make test runs benchmarks once, with -race
	}
	b.SetBytes(total)
	var peak uint64
	for range b.N {
		base := liveHeap()
		bl := New(Options{})
		var fed, next int64 = 0, 10 << 20
		synth("json", total, func(p []byte) {
			bl.Write(p)
			if fed += int64(len(p)); fed >= next {
				b.StopTimer()
				peak = max(peak, liveHeap()-min(base, liveHeap()))
				next += 10 << 20
				b.StartTimer()
			}
		})
		if pv := bl.Preview(); !strings.Contains(pv.Text, "JSON array of") {
			b.Fatalf("unexpected preview:\n%s", pv.Text)
		}
	}
	b.ReportMetric(mib(peak), "live-MiB")
}

func benchKind(b *testing.B, kind string) {
	var data bytes.Buffer
	synth(kind, 8<<20, func(p []byte) { data.Write(p) })
	in := data.Bytes()
	b.SetBytes(int64(len(in)))
	b.ResetTimer()
	for range b.N {
		bl := New(Options{})
		for p := in; len(p) > 0; {
			n := min(len(p), 32<<10)
			bl.Write(p[:n])
			p = p[n:]
		}
		bl.Preview()
	}
}

func BenchmarkJSONRows(b *testing.B) { benchKind(b, "json") }
func BenchmarkCSV(b *testing.B)      { benchKind(b, "csv") }
func BenchmarkLog(b *testing.B)      { benchKind(b, "log") }

// TestMemoryWorstCase fills every bound an input can reach: four arrays
// (the tables tracked), each of rows with 64 fields (the columns
// tracked) holding 300 distinct long values (past the exact bound), and
// more rows after. The live heap stays under the stated bound.
func TestMemoryWorstCase(t *testing.T) {
	base := liveHeap()
	b := New(Options{})
	b.Write([]byte("{"))
	for tab := range maxTables + 1 {
		if tab > 0 {
			b.Write([]byte(","))
		}
		fmt.Fprintf(b, `"t%d":[`, tab)
		for r := range 300 {
			if r > 0 {
				b.Write([]byte(","))
			}
			var row bytes.Buffer
			row.WriteString("{")
			for c := range maxColumns + 4 {
				if c > 0 {
					row.WriteString(",")
				}
				fmt.Fprintf(&row, `"field_%02d":"%d-%d-%d-%s"`, c, tab, r, c, strings.Repeat("v", 80))
			}
			row.WriteString("}")
			b.Write(row.Bytes())
		}
		b.Write([]byte("]"))
	}
	b.Write([]byte("}"))
	live := liveHeap() - min(base, liveHeap())
	pv := b.Preview()
	t.Logf("live heap with every bound reached: %.2f MiB", mib(live))
	if live > 24<<20 {
		t.Errorf("live heap %.2f MiB, over 24 MiB", mib(live))
	}
	if pv.Facts.Path == "" || pv.Facts.Rows != 300 || len(pv.Facts.Columns) != maxColumns {
		t.Errorf("bulk %q: %d rows, %d columns\n%s", pv.Facts.Path, pv.Facts.Rows, len(pv.Facts.Columns), pv.Text)
	}
}

// BenchmarkJSONOffloadRows previews 8 MB of the rows an offloaded tool
// output is made of (an array of ~100-byte objects with a number, a
// float, a bool, a short array, a null and a timestamp), written in
// 64 KiB chunks as the offloader writes them.
func BenchmarkJSONOffloadRows(b *testing.B) {
	var data bytes.Buffer
	data.WriteString("[")
	for i := 0; data.Len() < 8<<20; i++ {
		if i > 0 {
			data.WriteString(",\n")
		}
		fmt.Fprintf(&data, `{"id":%d,"name":"row-%d","score":%d.%d,"ok":%t,"tags":["a","b"],"note":null,"ts":"2026-11-26T%02d:%02d:00Z"}`,
			i, i, i%200-100, i%10, i%3 == 0, i/60%24, i%60)
	}
	data.WriteString("]")
	benchJSONChunks(b, data.Bytes())
}

// benchJSONChunks previews the JSON array in, written in 64 KiB chunks
// (as the offloader writes).
func benchJSONChunks(b *testing.B, in []byte) {
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		bl := New(Options{})
		for p := in; len(p) > 0; {
			n := min(len(p), 64<<10)
			bl.Write(p[:n])
			p = p[n:]
		}
		if pv := bl.Preview(); !strings.Contains(pv.Text, "JSON array of") {
			b.Fatalf("unexpected preview:\n%s", pv.Text)
		}
	}
}

// BenchmarkJSONOffloadNotes previews 8 MB of rows of the shape a profile
// of the proxy offloading a big tool output showed the preview's cost
// on: an id, one of four regions, an amount and a note of 48 random
// characters (distinct, so the estimator hashes every one), written in
// 64 KiB chunks.
func BenchmarkJSONOffloadNotes(b *testing.B) {
	var data bytes.Buffer
	data.WriteString("[")
	regions := []string{"emea", "amer", "apac", "latam"}
	x := uint64(1)
	note := make([]byte, 48)
	for i := 0; data.Len() < 8<<20; i++ {
		if i > 0 {
			data.WriteString(",\n")
		}
		for j := range note {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			note[j] = "abcdefghijklmnopqrstuvwxyz0123456789"[x%36]
		}
		fmt.Fprintf(&data, `{"id":%d,"region":%q,"amount":%d,"note":%q}`, i, regions[i%4], x%100000, note)
	}
	data.WriteString("]")
	benchJSONChunks(b, data.Bytes())
}
