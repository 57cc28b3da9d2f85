package artifact

import "testing"

// FuzzTypeAndDisposition holds typeAndDisposition's plain spelling to
// what the mime package makes of the same type and name, for any input
// (both come from a tool's output: untrusted).
func FuzzTypeAndDisposition(f *testing.F) {
	for _, s := range [][2]string{
		{"application/json", "result.json"},
		{"text/html", "page.html"},
		{"image/svg+xml", "x.svg"},
		{"text/plain; charset=utf-8", "notes.txt"},
		{"Application/JSON", "a"},
		{"text/plain", "a b.txt"},
		{"text/plain", "résumé.txt"},
		{"text/plain", `q"uote`},
		{"text", "x"},
		{"text/", "x"},
		{"/plain", "x"},
		{"text/plain/x", "x"},
		{"application/javascript", "app.js"},
		{"", ""},
		{"x/y", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, mimeType, name string) {
		ct, disp := typeAndDisposition(Artifact{ID: "id0", MimeType: mimeType, Name: name})
		if name == "" {
			name = "id0"
		}
		wantCT, wantDisp := formatTypeAndDisposition(mimeType, name)
		if ct != wantCT || disp != wantDisp {
			t.Fatalf("(%q, %q): got %q, %q; the mime package gives %q, %q", mimeType, name, ct, disp, wantCT, wantDisp)
		}
	})
}
