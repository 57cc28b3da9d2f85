package preview

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// want is a table computed from a fixture with encoding/json or
// encoding/csv, apart from the engine.
type want struct {
	rows    int
	columns []string
	types   map[string]string
	min     map[string]float64
	max     map[string]float64
	first   string // the first row as the preview should print it
}

// kindOf classifies a decoded value the way the preview names types,
// with the standard library's parsers.
func kindOf(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return "number"
		}
		return "int"
	case string:
		if _, err := time.Parse("2006-01-02", x); err == nil {
			return "date"
		}
		if _, err := time.Parse(time.RFC3339, x); err == nil {
			return "datetime"
		}
		if _, err := time.Parse("2006-01-02 15:04:05", x); err == nil {
			return "datetime"
		}
		return "string"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	panic(fmt.Sprintf("kind of %T", v))
}

// observe adds one value of a column to w.
func (w *want) observe(col, kind, text string) {
	if !slices.Contains(w.columns, col) {
		w.columns = append(w.columns, col)
	}
	if kind == "null" {
		return
	}
	prev := w.types[col]
	switch {
	case prev == "" || prev == kind:
		w.types[col] = kind
	case (prev == "int" || prev == "number") && (kind == "int" || kind == "number"):
		w.types[col] = "number"
	default:
		w.types[col] = "mixed"
	}
	if kind == "int" || kind == "number" {
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			panic(err)
		}
		if _, ok := w.min[col]; !ok {
			w.min[col], w.max[col] = v, v
		}
		w.min[col], w.max[col] = math.Min(w.min[col], v), math.Max(w.max[col], v)
	}
}

func newWant() *want {
	return &want{types: map[string]string{}, min: map[string]float64{}, max: map[string]float64{}}
}

// wantJSONRows computes the table of JSON objects, with nested objects
// one level down as "outer.inner".
func wantJSONRows(t *testing.T, raws []json.RawMessage) *want {
	w := newWant()
	w.rows = len(raws)
	for i, raw := range raws {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		// Member order matters for the expected column list: read keys
		// in document order.
		var row orderedObject
		if err := dec.Decode(&row); err != nil {
			t.Fatal(err)
		}
		for _, m := range row {
			w.observe(m.key, kindOf(m.val), fmt.Sprint(m.val))
			if obj, ok := m.raw(); ok {
				for _, n := range obj {
					w.observe(m.key+"."+n.key, kindOf(n.val), fmt.Sprint(n.val))
				}
			}
		}
		if i == 0 {
			var c bytes.Buffer
			if err := json.Compact(&c, raw); err != nil {
				t.Fatal(err)
			}
			w.first = c.String()
		}
	}
	return w
}

type member struct {
	key  string
	val  any
	rawv json.RawMessage
}

func (m member) raw() (orderedObject, bool) {
	var o orderedObject
	if _, ok := m.val.(map[string]any); !ok {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(m.rawv))
	dec.UseNumber()
	if err := dec.Decode(&o); err != nil {
		panic(err)
	}
	return o, true
}

// orderedObject decodes a JSON object keeping its members' order.
type orderedObject []member

func (o *orderedObject) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		vd := json.NewDecoder(bytes.NewReader(raw))
		vd.UseNumber()
		var v any
		if err := vd.Decode(&v); err != nil {
			return err
		}
		*o = append(*o, member{k.(string), v, raw})
	}
	return nil
}

func wantCSV(t *testing.T, data []byte, delim rune) *want {
	r := csv.NewReader(bytes.NewReader(data))
	r.Comma = delim
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	w := newWant()
	w.rows = len(recs) - 1
	for _, rec := range recs[1:] {
		for i, v := range rec {
			w.observe(recs[0][i], csvKind(v), v)
		}
	}
	for _, h := range recs[0] {
		if !slices.Contains(w.columns, h) {
			w.columns = append(w.columns, h)
		}
	}
	return w
}

// csvKind types a CSV cell with strconv and time.
func csvKind(v string) string {
	if v == "" {
		return "null"
	}
	if v == "true" || v == "false" {
		return "bool"
	}
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return "int"
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return "number"
	}
	return kindOf(v)
}

// checkTable holds a preview to an independently computed table: the
// text states the row count, every column with its type and the min and
// max of every numeric column; the facts agree.
func checkTable(t *testing.T, pv Preview, w *want) {
	t.Helper()
	f := pv.Facts
	if f.Rows != int64(w.rows) {
		t.Errorf("facts: %d rows, want %d", f.Rows, w.rows)
	}
	if !strings.Contains(pv.Text, strconv.Itoa(w.rows)+" ") {
		t.Errorf("the text does not state %d rows:\n%s", w.rows, pv.Text)
	}
	var names []string
	for _, c := range f.Columns {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, w.columns) {
		t.Errorf("facts: columns %q, want %q", names, w.columns)
	}
	lines := strings.Split(pv.Text, "\n")
	for _, c := range f.Columns {
		typ := w.types[c.Name]
		if typ == "" {
			typ = "null"
		}
		if c.Type != typ {
			t.Errorf("facts: column %s is %s, want %s", c.Name, c.Type, typ)
		}
		want := fmt.Sprintf("- %s: %s", c.Name, typ)
		if typ == "object" {
			continue // shown through its members
		}
		var line string
		for _, l := range lines {
			if strings.HasPrefix(l, want) {
				line = l
			}
		}
		if line == "" {
			t.Errorf("the text has no line %q", want)
			continue
		}
		if lo, ok := w.min[c.Name]; ok {
			hi := w.max[c.Name]
			if !c.HasNum || c.Min != lo || c.Max != hi {
				t.Errorf("facts: column %s range %v..%v, want %v..%v", c.Name, c.Min, c.Max, lo, hi)
			}
			r := strconv.FormatFloat(lo, 'f', -1, 64) + ".." + strconv.FormatFloat(hi, 'f', -1, 64)
			if !strings.Contains(line, r) {
				t.Errorf("line %q does not state the range %s", line, r)
			}
		}
	}
}

func decodeArray(t *testing.T, b []byte) []json.RawMessage {
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		t.Fatal(err)
	}
	return raws
}

func TestTabularFacts(t *testing.T) {
	fixture := func(name string) (Preview, []byte) {
		for _, c := range corpus {
			if c.file == name {
				data := readFixture(t, name)
				return previewChunks(fixtureOptions(c.file, c.mime), data, 4096), data
			}
		}
		t.Fatalf("no fixture %s", name)
		return Preview{}, nil
	}
	t.Run("api_list.json", func(t *testing.T) {
		pv, data := fixture("api_list.json")
		var env struct{ Data json.RawMessage }
		json.Unmarshal(data, &env)
		checkTable(t, pv, wantJSONRows(t, decodeArray(t, env.Data)))
	})
	t.Run("events.ndjson", func(t *testing.T) {
		pv, data := fixture("events.ndjson")
		var raws []json.RawMessage
		for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			raws = append(raws, line)
		}
		checkTable(t, pv, wantJSONRows(t, raws))
	})
	t.Run("orders.csv", func(t *testing.T) {
		pv, data := fixture("orders.csv")
		checkTable(t, pv, wantCSV(t, data, ','))
	})
	t.Run("metrics.tsv", func(t *testing.T) {
		pv, data := fixture("metrics.tsv")
		checkTable(t, pv, wantCSV(t, data, '\t'))
	})
}

// TestWrappedJSONFacts checks what a model needs of wrapped results:
// the scalar values, the count and columns of the array that holds the
// bytes, its first row.
func TestWrappedJSONFacts(t *testing.T) {
	prev := func(name string) (Preview, []byte) {
		data := readFixture(t, name)
		return previewChunks(fixtureOptions(name, "application/json"), data, 4096), data
	}
	scalarsStated := func(t *testing.T, pv Preview, prefix string, obj map[string]any) {
		t.Helper()
		for k, v := range obj {
			switch v.(type) {
			case map[string]any, []any:
				continue
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.Encode(v)
			text := strings.TrimSpace(buf.String())
			s := prefix + k + "=" + text
			if !strings.Contains(pv.Text, s) {
				t.Errorf("the text does not state %s:\n%s", s, pv.Text)
			}
			if !slices.Contains(pv.Facts.Scalars, Scalar{prefix + k, string(text)}) {
				t.Errorf("facts: no scalar %s", s)
			}
		}
	}
	bulk := func(t *testing.T, pv Preview, path string, raws []json.RawMessage) {
		t.Helper()
		if pv.Facts.Path != path {
			t.Errorf("bulk at %q, want %q", pv.Facts.Path, path)
		}
		w := wantJSONRows(t, raws)
		checkTable(t, pv, w)
		if !strings.Contains(pv.Text, path+": array of "+strconv.Itoa(len(raws))) {
			t.Errorf("the text does not give %s its count %d", path, len(raws))
		}
		if !strings.Contains(pv.Text, "First rows:\n"+w.first+"\n") {
			t.Errorf("the text does not show the first row %s", w.first)
		}
	}

	t.Run("db_envelope", func(t *testing.T) {
		pv, data := prev("db_envelope.json")
		var env struct {
			Data struct {
				Statements []struct {
					Rows json.RawMessage
				}
			}
			Meta map[string]any
		}
		json.Unmarshal(data, &env)
		var stmt struct {
			Data struct{ Statements []map[string]any }
		}
		json.Unmarshal(data, &stmt)
		scalarsStated(t, pv, "data.statements[0].", stmt.Data.Statements[0])
		scalarsStated(t, pv, "meta.", env.Meta)
		bulk(t, pv, "data.statements[0].rows", decodeArray(t, env.Data.Statements[0].Rows))
	})
	t.Run("compact_rows", func(t *testing.T) {
		pv, data := prev("compact_rows.json")
		var env struct {
			Meta       []struct{ Name string }
			Data       []json.RawMessage
			Statistics map[string]any
		}
		json.Unmarshal(data, &env)
		var top map[string]any
		json.Unmarshal(data, &top)
		scalarsStated(t, pv, "", top)
		scalarsStated(t, pv, "statistics.", env.Statistics)
		// Rows are arrays: their columns are named by "meta".
		w := newWant()
		w.rows = len(env.Data)
		for _, raw := range env.Data {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var row []any
			if err := dec.Decode(&row); err != nil {
				t.Fatal(err)
			}
			for i, v := range row {
				w.observe(env.Meta[i].Name, kindOf(v), fmt.Sprint(v))
			}
		}
		checkTable(t, pv, w)
		var c bytes.Buffer
		json.Compact(&c, env.Data[0])
		if pv.Facts.Path != "data" || !strings.Contains(pv.Text, "First rows:\n"+c.String()+"\n") {
			t.Errorf("bulk %q, first row %s not shown", pv.Facts.Path, c.String())
		}
	})
	t.Run("npm_ls", func(t *testing.T) {
		// A map of objects keyed by name: its values are the rows.
		pv, data := prev("npm_ls.json")
		var top map[string]any
		json.Unmarshal(data, &top)
		scalarsStated(t, pv, "", top)
		var deps orderedObject
		var env struct{ Dependencies json.RawMessage }
		json.Unmarshal(data, &env)
		if err := json.Unmarshal(env.Dependencies, &deps); err != nil {
			t.Fatal(err)
		}
		var raws []json.RawMessage
		for _, m := range deps {
			raws = append(raws, m.rawv)
		}
		w := wantJSONRows(t, raws)
		checkTable(t, pv, w)
		first := quoteJSON(deps[0].key) + ":" + w.first
		if pv.Facts.Path != "dependencies" || !strings.Contains(pv.Text, "First entries:\n"+first+"\n") {
			t.Errorf("bulk %q; first entry %s not shown:\n%s", pv.Facts.Path, first, pv.Text)
		}
	})
	t.Run("git_diff", func(t *testing.T) {
		pv, data := prev("git_diff.json")
		var top map[string]any
		json.Unmarshal(data, &top)
		scalarsStated(t, pv, "", top)
		var env struct{ Files json.RawMessage }
		json.Unmarshal(data, &env)
		bulk(t, pv, "files", decodeArray(t, env.Files))
	})
	t.Run("graph", func(t *testing.T) {
		pv, data := prev("graph.json")
		var env struct{ Entities, Relations json.RawMessage }
		json.Unmarshal(data, &env)
		bulk(t, pv, "relations", decodeArray(t, env.Relations))
		ents := decodeArray(t, env.Entities)
		if s := fmt.Sprintf("Also entities: array of %d objects", len(ents)); !strings.Contains(pv.Text, s) {
			t.Errorf("the text does not state %q", s)
		}
	})
	t.Run("tree", func(t *testing.T) {
		pv, data := prev("tree.json")
		var root map[string]any
		json.Unmarshal(data, &root)
		var nodes, leaves, depth int
		var walk func(n map[string]any, d int)
		walk = func(n map[string]any, d int) {
			nodes++
			depth = max(depth, d)
			kids, _ := n["children"].([]any)
			if len(kids) == 0 {
				leaves++
			}
			for _, k := range kids {
				walk(k.(map[string]any), d+1)
			}
		}
		walk(root, 0)
		var names, named []string
		var sizes []int64
		for _, k := range root["children"].([]any) {
			var size func(n map[string]any) int
			size = func(n map[string]any) int {
				c := 1
				kids, _ := n["children"].([]any)
				for _, k := range kids {
					c += size(k.(map[string]any))
				}
				return c
			}
			sub := size(k.(map[string]any))
			names = append(names, k.(map[string]any)["name"].(string))
			sizes = append(sizes, int64(sub))
			if sub > 1 {
				named = append(named, fmt.Sprintf("%s (%d nodes)", names[len(names)-1], sub))
			} else {
				named = append(named, names[len(names)-1])
			}
		}
		tr := pv.Facts.Tree
		if tr == nil || tr.Nodes != int64(nodes) || tr.Leaves != int64(leaves) || tr.Depth != depth || !slices.Equal(tr.TopNames, names) || !slices.Equal(tr.TopSizes, sizes) {
			t.Errorf("tree facts %+v, want %d nodes, %d leaves, depth %d, names %q of %d nodes", tr, nodes, leaves, depth, names, sizes)
		}
		s := fmt.Sprintf("%d nodes, %d leaves, depth %d. Top-level names: %s.", nodes, leaves, depth, strings.Join(named, ", "))
		if !strings.Contains(pv.Text, s) {
			t.Errorf("the text does not state %q:\n%s", s, pv.Text)
		}
		scalarsStated(t, pv, "", root)
	})
}

// TestScreenshotThumbnail: a 1920×1080 screenshot yields a thumbnail a
// client can decode, long side 512, the screenshot's aspect.
func TestScreenshotThumbnail(t *testing.T) {
	data := readFixture(t, "screenshot.png")
	pv := previewChunks(Options{MimeType: "image/png", Thumbnail: true}, data, 32<<10)
	if pv.Facts.Width != 1920 || pv.Facts.Height != 1080 {
		t.Fatalf("dimensions %d×%d, want 1920×1080", pv.Facts.Width, pv.Facts.Height)
	}
	th := pv.Thumbnail
	if th == nil {
		t.Fatal("no thumbnail")
	}
	img, format, err := image.Decode(bytes.NewReader(th.Data))
	if err != nil {
		t.Fatalf("the thumbnail does not decode: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 512 || b.Dy() != 288 || th.Width != 512 || th.Height != 288 || "image/"+format != th.MimeType {
		t.Errorf("thumbnail %s %d×%d (says %s %d×%d), want 512×288", format, b.Dx(), b.Dy(), th.MimeType, th.Width, th.Height)
	}
	if len(th.Data) > thumbSoftMax {
		t.Errorf("thumbnail of %d bytes, over %d", len(th.Data), thumbSoftMax)
	}
	// The top bar is dark navy, the page light grey: the downscale keeps
	// them apart.
	if r, _, _, _ := img.At(256, 2).RGBA(); r>>8 > 60 {
		t.Errorf("top bar pixel red %d, want dark", r>>8)
	}
	if r, _, _, _ := img.At(256, 280).RGBA(); r>>8 < 200 {
		t.Errorf("page pixel red %d, want light", r>>8)
	}
	// No thumbnail unless asked.
	if pv := previewChunks(Options{}, data, 1<<20); pv.Thumbnail != nil {
		t.Error("a thumbnail without Options.Thumbnail")
	}
}
