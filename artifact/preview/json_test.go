package preview

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestJSONChunkingIndependent feeds the JSON analyzer itself (no 64 KiB
// head written whole) every JSON fixture and documents made of what its
// fast paths skip over (escapes, strings and numbers longer than a
// scalar's bound, literals, whitespace, errors), in writes of 1 to 64
// bytes and all at once: the sections and facts must be equal. A token
// whole in one write is read where it lies, one cut by a write's end
// byte by byte.
func TestJSONChunkingIndependent(t *testing.T) {
	for name, doc := range chunkDocs(t) {
		t.Run(name, func(t *testing.T) {
			data := []byte(doc)
			wantPV, wantSecs := jsonInWrites(data, len(data))
			for _, chunk := range []int{1, 2, 3, 5, 7, 13, 64} {
				pv, secs := jsonInWrites(data, chunk)
				if !reflect.DeepEqual(pv, wantPV) || !reflect.DeepEqual(secs, wantSecs) {
					t.Errorf("writes of %d bytes: %+v\n%v\nall at once: %+v\n%v", chunk, pv.Facts, secs, wantPV.Facts, wantSecs)
				}
			}
		})
	}
}

// chunkDocs are TestJSONChunkingIndependent's documents, by name, and
// FuzzJSONWrites's seeds.
func chunkDocs(t testing.TB) map[string]string {
	long := strings.Repeat("é", 200)
	docs := map[string]string{
		"escapes":  `[{"a\"b":"x\\y\n\u00e9\ud83d\ude00","name":"n\u0041me","path":"p"},{"a\"b":"` + long + `","name":"` + long + `"}]`,
		"numbers":  `{"n":[0,-0,-12.5,1e3,1E+2,-0.000001,123456789012345,1234567890123456,` + strings.Repeat("9", 300) + `,` + strings.Repeat("1", 250) + `.5e1]}`,
		"literals": "[true ,false\t,null\r\n,{\"a\":true,\"b\":false,\"c\":null}]",
		"space":    " \n[ { \"k\" : 1 , \"m\" : [ \"x\" , \"y\" ] } ,\n{\"k\":2,\"m\":[]} ] \n",
		"ndjson":   "{\"a\":1}\n{\"a\":2,\"b\":\"x\"}\n\"s\"\n3\n",
		"children": `{"name":"root","children":[{"name":"a","children":[{"path":"a/b"}]},{"path":"c","name":"C"}]}`,
		"badlit":   `[{"a":1},{"a":tru}]`,
		"badnum":   `[{"a":1},{"a":01}]`,
		"badkey":   `[{"a":1},{"a" 2}]`,
		"badesc":   `[{"a":"\x"}]`,
		"cut":      `[{"a":1},{"a":"unterminated`,
		// A row's keys are read at once where they are spelt as the
		// last row's were: here some are not.
		"rowkeys": `[{"id":1,"name":"a","q\"x":1,"a\\b":1,"sub":{"k":1,"k2":2}},` +
			`{"id":2,"name":"b","q\"x":2,"a\\b":2,"sub":{"k":3,"k2":4}},` +
			`{"idx":3,"n\u0061me":"c","q\"x":3,"a\b":3,"sub":{"k2":5,"k":6}},` +
			`{"id" :4,"name":"d","sub":{"k" :7,"k\u0032":8},"a\\b":4},` +
			`{"id":5,"nam":"e","sub":{"k":9,"k2":10,"k3":11}},{"id":6,"nume":"f","sub":{"k":12,"kk":13}}]`,
		"rowspace": `[{"id":1,"k":{"a":1}},{"id":2,"k":{"a":2}},{"id" :3,"k":{"a"` + "\t" + `:3}},{"id":4,"k":{"a":4}}]`,
		// And their values, of every kind, some read where they lie,
		// some not.
		"rowvalues": `[{"id":1,"name":"a","v":"x","n":1,"b":true,"z":null,"children":[]},` +
			`{"id":2,"name":"b\"q","v":"` + long + `","n":-0.5e3,"b":false,"z":null,"children":[{"name":"c"}]},` +
			`{"id":3,"name":7,"v":"y","n":` + strings.Repeat("9", 300) + `,"b":null,"z":"z","children":[]},` +
			`{"id":4,"path":"p","v":"","n":0,"b":true,"z":false},{"id":5,"name":"e","v":"w","n":1.5,"b":true,"z":[1]},` +
			`{"id":6,"name":"f","v":"w","n":2,"b":true,"z":{"a":1},"children":[{"name":"h"}]},{"id":7,"name":"g","v":"v","n":3}]`,
		"elems": `[{"t":[0]},{"t":[1,"a",true,null,false,-2.5e1,"b\"c","` + long + `",` + strings.Repeat("7", 300) + `,[1],{"x":1}]},` +
			`{"t":[]},{"t":[ 1 , "x" ,null]},{"name":"n","children":[1,2]},{"name":"m","children":[3]}]`,
		"elembad": `[{"t":[1]},{"t":[1,2,tru]}]`,
		"flatbad": `[{"t":[1]},{"t":[1"a"]}]`,
		"flat": `[{"t":[0],"u":1},{"t":[1,"a",true,null,-2.5],"u":2},{"t":[],"u":3},{"t":[1,[2]],"u":4},{"t":1,"u":5},` +
			`{"t":[1,` + strings.Repeat("8", 300) + `],"u":6},{"t":[1,2],"u":[3]},{"t":["x",{"y":1}],"u":7},{"t":[1,2`,
		"rowcut": `[{"a":1,"b":"x"},{"a":2,"b":"y"},{"a":12`,
		// Rows past the first maxColumns are opened and closed where
		// they lie (rowAt), their frame's slot kept from row to row:
		// here tree nodes among them, and rows the lexer must finish.
		"farrows": `[` + strings.Repeat(`{"id":0,"name":"r"},`, maxColumns) +
			`{"id":1,"name":"a","children":[{"name":"a1"}]},{"id":2,"name":"b","children":[]},` +
			`{"id":3,"name":"c","children":[{"name":"c1"},{"name":"c2"}]},{"id":4,"name":"d"},{"id":5,"name":"e","sub":{"k":1}},` +
			`{"id":6,"name":"f"},{"id" :7,"name":"g"},{ "id":8},{"id":9,"name":"h","t":[1,2]},{"id":10},{"id":11,"name":"i"` + "\n}," +
			`{"id":12,"name":"j"},[1],{"id":13,"name":"k"},{"id":14,"name":"l","x":1},` +
			`{"id":15,"name":"m","path":"p1"},{"id":16,"name":"n","path":"p2","children":[]},{"id":17,"path":"p3","children":[]},` +
			// Objects in rows, read by rowAt with the lexer's steps.
			`{"id":18,"name":"o","sub":{"name":"x","k":2},"z":1},{"id":19,"name":"p","sub":{"name":"y","k":3},"z":2},` +
			`{"id":20,"name":"q","sub":{"name":"in","k":4},"children":[]},{"id":21,"sub":{"k":5,"deep":{"x":1}},"z":3},` +
			`{"id":22,"name":"r","sub":{"k":6},"children":[]},{"id":23,"name":"s","sub":{"kk":7},"children":[]},{"id":24,"name":"t","sub":{"k":8}}]`,
		// A field's bools are counted where they lie among its distinct
		// values, exactly, and then by estimate past the bound.
		"boolpast": func() string {
			var sb strings.Builder
			sb.WriteString(`[{"b":true},{"b":false}`)
			for i := range distinctExact + 44 {
				fmt.Fprintf(&sb, `,{"b":"s%d"},{"b":true}`, i)
			}
			sb.WriteString(`,{"b":false}]`)
			return sb.String()
		}(),
	}
	for _, c := range corpus {
		if c.kind == KindJSON || c.kind == KindNDJSON {
			docs[c.file] = string(readFixture(t, c.file))
		}
	}
	return docs
}

// jsonInWrites previews data with the JSON analyzer, written in writes
// of chunk bytes. Writes shorter than data come from one buffer that is
// scrubbed after each write, as a writer reuses its buffer: what the
// analyzer keeps of a write must be a copy.
func jsonInWrites(data []byte, chunk int) (Preview, []section) {
	a := newJSON()
	buf := make([]byte, chunk)
	for p := data; len(p) > 0; {
		n := min(chunk, len(p))
		if n == len(data) {
			a.write(p)
			break
		}
		copy(buf, p[:n])
		a.write(buf[:n])
		for i := range buf {
			buf[i] = 'x'
		}
		p = p[n:]
	}
	var pv Preview
	secs := a.finish(&pv)
	return pv, secs
}

// TestPlainRun holds plainRun, eight bytes at a time, to a byte-by-byte
// search for '"' and '\\', with every byte value at every position among
// fillers next to them in value (a borrow between bytes must not flag a
// byte before the first stop).
func TestPlainRun(t *testing.T) {
	naive := func(b []byte, i int) int {
		for i < len(b) && b[i] != '"' && b[i] != '\\' {
			i++
		}
		return i
	}
	for _, fill := range []byte{'a', 0x00, 0x01, 0x21, 0x23, 0x5b, 0x5d, 0x80, 0xa2, 0xdc, 0xff} {
		for n := 0; n <= 19; n++ {
			for k := 0; k < n; k++ {
				for v := range 256 {
					b := bytes.Repeat([]byte{fill}, n)
					b[k] = byte(v)
					if k+1 < n {
						b[n-1] = '"' // a later stop must not hide an earlier one
					}
					for from := 0; from <= n; from += 3 {
						if got, want := plainRun(b, from), naive(b, from); got != want {
							t.Fatalf("plainRun(%q, %d) = %d, want %d", b, from, got, want)
						}
					}
				}
			}
		}
	}
}

// TestStringType holds stringType, which reads a date's digits as words,
// to a byte-by-byte reading of its shapes (YYYY-MM-DD, then "THH:MM" or
// " HH:MM") for every byte value at every position of a date, a
// date-time and their prefixes: a word's borrow or carry between bytes
// must not pass a byte that is not a digit, nor fail one that is.
func TestStringType(t *testing.T) {
	naive := func(s []byte) int {
		shape := func(pat string) bool {
			for i := range len(pat) {
				if pat[i] == 'd' && (s[i] < '0' || s[i] > '9') || pat[i] != 'd' && pat[i] != 'T' && s[i] != pat[i] {
					return false
				}
			}
			return true
		}
		switch {
		case len(s) == 10 && shape("dddd-dd-dd"):
			return tDate
		case len(s) >= 16 && shape("dddd-dd-ddTdd:dd") && (s[10] == 'T' || s[10] == ' '):
			return tDateTime
		}
		return tString
	}
	for _, base := range []string{"2026-11-26", "2026-11-26T10:00:00Z", "2026-11-26 09:59", "2026-11-26T1", "0000-00-00T00:00", "9999-99-99 99:99:99"} {
		for n := 0; n <= len(base); n++ {
			for k := range n {
				for v := range 256 {
					s := []byte(base[:n])
					s[k] = byte(v)
					if got, want := stringType(s), naive(s); got != want {
						t.Fatalf("stringType(%q) = %d, want %d", s, got, want)
					}
				}
			}
		}
	}
}
