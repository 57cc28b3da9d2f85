package offload

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/artifact/preview"
)

// What an offloaded item's preview says of its bytes is package preview's
// (artifact/preview); this file has what the offloader adds to it.

// sentence says where the whole of what a preview shows is, and how to
// get it.
func sentence(size int64, mime, url string, expires time.Time, uri string) string {
	return fmt.Sprintf("The full content (%s, %s) is at %s until %s: fetch it with a plain HTTP GET (no MCP session needed), or read %s.",
		humanSize(size), mimeOr(mime, "application/octet-stream"), url, expires.UTC().Format(timeFormat), uri)
}

const timeFormat = time.RFC3339

// isDelimited guesses CSV/TSV from the mime type or the first lines.
func isDelimited(mime string, head []byte) bool {
	mime, _, _ = strings.Cut(mime, ";")
	if mime == "text/csv" || mime == "text/tab-separated-values" {
		return true
	}
	if mime != "" && mime != "text/plain" {
		return false
	}
	lines := bytes.SplitN(head, []byte("\n"), 3)
	if len(lines) < 3 { // two whole lines, the second ended
		return false
	}
	for _, sep := range []string{",", "\t"} {
		n := bytes.Count(lines[0], []byte(sep))
		if n >= 1 && bytes.Count(lines[1], []byte(sep)) == n {
			return true
		}
	}
	return false
}

var humanSize = preview.HumanSize

func mimeOr(m, def string) string {
	if m == "" {
		return def
	}
	return m
}
