package artifact_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
	"github.com/spillway-dev/spillway/artifact/fsstore"
)

// readCounter is the local-directory store with its readers' Read calls
// counted: bytes the fetch endpoint reads through a buffer of its own.
type readCounter struct {
	artifact.Store
	read atomic.Int64
}

func (s *readCounter) Open(ctx context.Context, id string, off, n int64) (io.ReadCloser, error) {
	rc, err := s.Store.Open(ctx, id, off, n)
	if err != nil {
		return nil, err
	}
	return &countedSection{ReadCloser: rc, read: &s.read}, nil
}

type countedSection struct {
	io.ReadCloser
	read *atomic.Int64
}

func (c *countedSection) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *countedSection) FileSection() (*os.File, int64, int64) {
	return c.ReadCloser.(artifact.FileSection).FileSection()
}

// TestFetchLocalFileBySendfile: an artifact in the local-directory store
// leaves by sendfile (the kernel copies it from the file to the socket),
// whole or as a range, byte for byte; the endpoint reads none of it
// through a buffer of its own, which cost a fifth of the throughput of
// http.FileServer on a 100 MiB fetch.
func TestFetchLocalFileBySendfile(t *testing.T) {
	fs, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := &readCounter{Store: fs}
	svc, _ := artifacttest.Serve(t, store, artifacttest.Options{})
	body := make([]byte, 3<<20+12345) // past any cache, not a multiple of a chunk
	r := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	_, l, err := svc.Publish(context.Background(), artifact.Artifact{MimeType: "application/octet-stream"}, bytes.NewReader(body), artifact.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	artifacttest.CheckRanges(t, l.URL, body, []artifacttest.Range{
		{Header: "", Status: http.StatusOK, Start: 0, End: len(body)},
		{Header: "bytes=70000-2100000", Status: http.StatusPartialContent, Start: 70000, End: 2100001},
		{Header: fmt.Sprintf("bytes=-%d", 100), Status: http.StatusPartialContent, Start: len(body) - 100, End: len(body)},
	})
	if n := store.read.Load(); n != 0 {
		t.Errorf("the endpoint read %d bytes of local files through its own buffer, want 0 (sendfile)", n)
	}
}
