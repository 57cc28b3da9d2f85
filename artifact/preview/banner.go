package preview

import (
	"bytes"
	"slices"
	"strings"
)

// maxBanner is how many lines of text before a table or a JSON value are
// taken for a banner ("Query returned 1200 rows:", "Result:"), and
// maxBannerLine how long each may be.
const (
	maxBanner     = 2
	maxBannerLine = 300
)

// sniffBehindBanner finds a table or a JSON value after the first
// lines of a text (a tool's one-line banner before its CSV or its
// pretty-printed JSON): the kind and an analyzer that drops those lines
// and shows them, or nil.
func sniffBehindBanner(text []byte, complete bool) (string, analyzer) {
	rest := text
	for n := 1; n <= maxBanner; n++ {
		line, after, ok := bytes.Cut(rest, []byte("\n"))
		if !ok || len(line) > maxBannerLine || len(bytes.TrimSpace(line)) == 0 {
			return "", nil
		}
		rest = after
		body := bytes.TrimLeft(rest, " \t\r\n")
		if len(body) > 0 && (body[0] == '{' || body[0] == '[') {
			probe := newJSON()
			probe.write(rest)
			if probe.err == "" {
				return KindJSON, &bannered{lines: n, inner: newJSON()}
			}
			continue
		}
		if d := sniffDelim(rest, complete, false); d != 0 {
			kind := KindCSV
			if d == '\t' {
				kind = KindTSV
			}
			return kind, &bannered{lines: n, inner: newCSV(d)}
		}
	}
	return "", nil
}

// bannered drops the first lines of its input (a banner) and gives the
// rest to its inner analyzer; its preview is the inner one's, the banner
// shown after its first line.
type bannered struct {
	lines  int // lines of banner still to drop
	banner []byte
	inner  analyzer
}

func (a *bannered) write(p []byte) {
	for a.lines > 0 && len(p) > 0 {
		line, rest, ok := bytes.Cut(p, []byte("\n"))
		if room := maxBanner*(maxBannerLine+1) - len(a.banner); room > 0 {
			a.banner = append(a.banner, line[:min(len(line), room)]...)
		}
		if !ok {
			return
		}
		a.banner = append(a.banner, '\n')
		a.lines--
		p = rest
	}
	if len(p) > 0 {
		a.inner.write(p)
	}
}

func (a *bannered) finish(pv *Preview) []section {
	secs := a.inner.finish(pv)
	banner := strings.TrimRight(validText(a.banner), "\r\n")
	line := section{prioFacts, "After a banner: " + strings.ReplaceAll(clip(banner, 2*maxBannerLine), "\n", " / ") + "\n"}
	return slices.Insert(secs, 1, line)
}
