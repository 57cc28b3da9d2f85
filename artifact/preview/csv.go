package preview

import (
	"fmt"
	"strconv"
	"strings"
)

// maxFields is the most fields of a record kept; later ones are counted.
const maxFields = 256

// csvAn is an incremental RFC 4180 reader (lenient: a stray quote inside
// a field is kept, CR is ignored outside quotes) that feeds per-column
// statistics. The first record is the header.
type csvAn struct {
	delim   byte
	inQ     bool
	afterQ  bool
	started bool // the current field has begun
	any     bool // the current record has a byte: it is not a blank line
	fld     []byte
	rec     []string
	extra   int // fields past maxFields in this record
	header  []string
	lastRec []string
	t       *table
	ragged  int64
}

func newCSV(d byte) *csvAn { return &csvAn{delim: d, t: newTable()} }

func (a *csvAn) write(p []byte) {
	for i := 0; i < len(p); i++ {
		c := p[i]
		if a.inQ {
			if c == '"' {
				a.inQ, a.afterQ = false, true
				continue
			}
			// Take the run up to the next quote at once.
			j := i + 1
			for j < len(p) && p[j] != '"' {
				j++
			}
			a.keepRun(p[i:j])
			i = j - 1
			continue
		}
		if a.afterQ {
			a.afterQ = false
			if c == '"' { // "" inside quotes
				a.inQ = true
				a.keep(c)
				continue
			}
		}
		switch c {
		case a.delim:
			a.any = true
			a.endField()
		case '\n':
			a.endField()
			a.endRecord()
		case '\r':
		case '"':
			if !a.started {
				a.inQ, a.started, a.any = true, true, true
				continue
			}
			a.keep(c)
		default:
			// Take the run up to the next byte that means something.
			j := i + 1
			for j < len(p) && p[j] != a.delim && p[j] != '\n' && p[j] != '\r' && p[j] != '"' {
				j++
			}
			a.keepRun(p[i:j])
			i = j - 1
		}
	}
}

// keepRun appends bytes of the current field, up to maxScalar in all.
func (a *csvAn) keepRun(b []byte) {
	a.started, a.any = true, true
	if room := maxScalar - len(a.fld); room > 0 {
		a.fld = append(a.fld, b[:min(room, len(b))]...)
	}
}

func (a *csvAn) keep(c byte) {
	a.started, a.any = true, true
	if len(a.fld) < maxScalar {
		a.fld = append(a.fld, c)
	}
}

func (a *csvAn) endField() {
	if len(a.rec) < maxFields {
		a.rec = append(a.rec, strings.ToValidUTF8(string(a.fld), "�"))
	} else {
		a.extra++
	}
	a.fld, a.started = a.fld[:0], false
}

func (a *csvAn) endRecord() {
	rec, blank := a.rec, !a.any
	a.rec, a.extra, a.any = a.rec[:0], 0, false
	if blank {
		return
	}
	a.record(rec)
}

// record takes one record: the header first, then the rows.
func (a *csvAn) record(rec []string) {
	if a.header == nil {
		a.header = make([]string, len(rec))
		seen := map[string]bool{}
		for i, h := range rec {
			h = strings.TrimSpace(h)
			if h == "" || seen[h] {
				h = fmt.Sprintf("column %d", i+1)
			}
			seen[h] = true
			a.header[i] = clip(h, maxValueLen)
			a.t.field(a.header[i])
		}
		return
	}
	if len(rec) != len(a.header) {
		a.ragged++
	}
	for i, v := range rec {
		if i >= len(a.header) {
			break
		}
		a.t.byName[a.header[i]].addText(v)
	}
	if a.t.count(tObject) {
		a.t.first = append(a.t.first, a.sample(rec))
	}
	a.lastRec = append(a.lastRec[:0], rec...)
}

// addText records a CSV value by what it looks like.
func (f *field) addText(v string) {
	if f == nil {
		return
	}
	f.add(cellType(v), v)
}

func cellType(v string) int {
	if v == "" || v == "NULL" || v == "null" {
		return tNull
	}
	if strings.EqualFold(v, "true") || strings.EqualFold(v, "false") { // no lower-cased copy of every cell
		return tBool
	}
	c := v[0]
	if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.') {
		return tString
	}
	digits := strings.TrimLeft(v, "+-")
	if len(digits) > 1 && digits[0] == '0' && isDigits(digits) {
		return tString // a code with leading zeros: 007, 01234
	}
	if isDigits(digits) && len(digits) <= 18 {
		return tInt
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil && !strings.ContainsAny(v, "xXpP_") {
		return tFloat
	}
	return tString
}

// sample renders a record as CSV text on one line.
func (a *csvAn) sample(rec []string) string {
	var b strings.Builder
	for i, v := range rec {
		if i > 0 {
			b.WriteByte(a.delim)
		}
		if strings.ContainsAny(v, "\"\n\r"+string(a.delim)) {
			v = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
		}
		b.WriteString(strings.ReplaceAll(v, "\n", `\n`))
		if b.Len() > 400 {
			break
		}
	}
	return clip(b.String(), 400)
}

func (a *csvAn) finish(pv *Preview) []section {
	if a.any {
		a.endField()
		a.endRecord()
	}
	if a.t.rows > 0 {
		a.t.last = a.sample(a.lastRec)
	}
	f := &pv.Facts
	f.Format = pv.Kind
	name := "CSV"
	if a.delim == '\t' {
		name = "TSV"
	} else if a.delim != ',' {
		name = fmt.Sprintf("Delimited text (%q)", a.delim)
	}
	head := fmt.Sprintf("%s table, %d rows × %d columns (%s), header: %s.\n", name, a.t.rows, len(a.header), humanSize(f.Size), clip(strings.Join(a.header, ", "), 300))
	if a.ragged > 0 {
		head += fmt.Sprintf("%d rows have a different number of fields.\n", a.ragged)
	}
	return tableSections(head, a.t, f, nil)
}
