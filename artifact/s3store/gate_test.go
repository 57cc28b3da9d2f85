package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/httpsafe"
	"github.com/spillway-dev/spillway/artifact/s3store"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
)

// Each Put holds a part buffer: at most MaxPuts of them run at once, and
// MaxPutsPerTenant of one tenant. Past either, a Put waits PutWait for a
// slot, then fails with ErrBusy without reading a byte. (Without the bound,
// 24 concurrent uploads held 529 MiB.)
func TestUploadsBounded(t *testing.T) {
	o := miniotest.Shared(t).Options(t)
	o.MaxPuts, o.MaxPutsPerTenant, o.PutWait = 3, 2, 20*time.Millisecond
	s, err := s3store.New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var reading atomic.Int32 // Puts whose reader was called: past the bound
	holder := func() io.Reader {
		first := true
		return readerFunc(func(p []byte) (int, error) {
			if first {
				first = false
				reading.Add(1)
				<-release
			}
			return copy(p, "held"), io.EOF
		})
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, tenant := range []string{"a", "a", "b"} {
		wg.Go(func() {
			_, err := s.Put(context.Background(), artifact.Artifact{ID: artifact.NewID(), Tenant: tenant}, holder())
			errs <- err
		})
	}
	for deadline := time.Now().Add(time.Minute); reading.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("only %d of 3 uploads started", reading.Load())
		}
	}
	// A reader that counts every Put that gets past the gate.
	counted := func() io.Reader {
		return readerFunc(func(p []byte) (int, error) {
			reading.Add(1)
			return copy(p, "x"), io.EOF
		})
	}
	for _, tc := range []struct{ tenant, why string }{
		{"a", "tenant a has 2 uploads in flight, its bound"},
		{"c", "3 uploads in flight, the process's bound"},
	} {
		_, err := s.Put(context.Background(), artifact.Artifact{ID: artifact.NewID(), Tenant: tc.tenant}, counted())
		if !errors.Is(err, artifact.ErrBusy) || !errors.Is(err, artifact.ErrUnavailable) {
			t.Errorf("Put for tenant %s while %s: %v, want ErrBusy", tc.tenant, tc.why, err)
			continue
		}
		rec := httptest.NewRecorder()
		if httpsafe.WriteError(rec, artifact.HTTPError(err)); rec.Code != 503 || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), `"busy"`) {
			t.Errorf("ErrBusy answered %d %v %s, want 503 busy with Retry-After", rec.Code, rec.Header(), rec.Body)
		}
	}
	if n := reading.Load(); n != 3 {
		t.Errorf("%d uploads read their bytes at once, bound 3", n)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("a held upload: %v", err)
		}
	}
	// The slots are free again.
	if _, err := s.Put(context.Background(), artifact.Artifact{ID: artifact.NewID(), Tenant: "a"}, bytes.NewReader([]byte("x"))); err != nil {
		t.Errorf("Put after the others ended: %v", err)
	}
}
