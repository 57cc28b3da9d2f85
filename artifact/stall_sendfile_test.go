package artifact

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// readFromCounter counts the ReadFrom calls a stallWriter makes.
type readFromCounter struct {
	http.ResponseWriter
	calls *atomic.Int64
}

func (c readFromCounter) ReadFrom(r io.Reader) (int64, error) {
	c.calls.Add(1)
	return c.ResponseWriter.(io.ReaderFrom).ReadFrom(r)
}

// TestSendFileOneCall: on Linux a file section goes to the client in one
// sendfile call whatever its size, its write deadline moved on by a watch
// of the file's offset; it went in one call per 64 KiB, each under its own
// deadline (128 calls for these 8 MiB), which cost a fifth of the
// throughput of http.FileServer. The bytes arrive whole.
func TestSendFileOneCall(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the file offset moves during sendfile only on Linux")
	}
	body := make([]byte, 8<<20+777)
	for i := range body {
		body[i] = byte(i * 7 / 5)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, append([]byte("header--"), body...), 0o600); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(path)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		s := &stallWriter{w: readFromCounter{w, &calls}, ctl: *http.NewResponseController(w), timeout: 10 * time.Second}
		if err := s.sendFile(f, 8, int64(len(body))); err != nil {
			t.Error(err)
		}
		s.done()
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("%d of %d bytes, equal %v, %v", len(got), len(body), bytes.Equal(got, body), err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d sendfile calls for %d bytes, want 1", n, len(body))
	}
}
