package s3store_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/s3store"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
	"github.com/spillway-dev/spillway/artifact/token"
)

// within runs f and fails t unless it returns within bound.
func within[T any](t *testing.T, bound time.Duration, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	start := time.Now()
	go func() { done <- f() }()
	select {
	case v := <-done:
		t.Logf("%s returned after %v", what, time.Since(start).Round(10*time.Millisecond))
		return v
	case <-time.After(bound):
		t.Fatalf("%s still running after %v", what, bound)
		panic("unreachable")
	}
}

// proxied returns a store on a fresh bucket of the shared MinIO, reached
// through a FaultProxy.
func proxied(t *testing.T, tune func(*s3store.Options)) (*s3store.Store, *miniotest.FaultProxy) {
	t.Helper()
	srv := miniotest.Shared(t)
	p := miniotest.NewFaultProxy(t, srv.Endpoint)
	o := srv.Options(t)
	o.Endpoint = p.Addr
	if tune != nil {
		tune(&o)
	}
	st, err := s3store.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	return st, p
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, artifact.ErrUnavailable) {
		t.Errorf("%s on a hung store: %v, want ErrUnavailable", what, err)
	}
}

// A store that accepts connections and never answers costs each call
// Timeout (5 s by default), not minio-go's 60 s header timeout tried three
// times: New, Stat, Open, Delete, Ping, ListExpired (the sweeper), Revoke,
// Revocations and Put, small or multipart, all fail with ErrUnavailable
// within the bound.
func TestHungStore(t *testing.T) {
	const bound = s3store.DefaultTimeout + 3*time.Second

	t.Run("New", func(t *testing.T) {
		t.Parallel()
		o := miniotest.Shared(t).Options(t)
		o.Endpoint = miniotest.HungListener(t)
		err := within(t, bound, "New", func() error { _, err := s3store.New(context.Background(), o); return err })
		wantUnavailable(t, "New", err)
	})

	st, p := proxied(t, func(o *s3store.Options) { o.PartSize = s3store.MinPartSize })
	a := put(t, st, artifact.Artifact{MimeType: "application/octet-stream"}, randomBytes(1<<20))
	small, large := randomBytes(1<<10), randomBytes(3*s3store.MinPartSize)
	p.Set(miniotest.Hang)
	ctx := context.Background()
	for name, call := range map[string]func() error{
		"Stat":   func() error { _, err := st.Stat(ctx, a.ID); return err },
		"Open":   func() error { _, err := st.Open(ctx, a.ID, 0, -1); return err },
		"Delete": func() error { return st.Delete(ctx, a.ID) },
		"Ping":   func() error { return st.Ping(ctx) },
		"ListExpired": func() error {
			return st.ListExpired(ctx, time.Now().Add(time.Hour), func(string) error { return nil })
		},
		"Sweep": func() error {
			_, err := (&artifact.Service{Store: st}).Sweep(ctx)
			return err
		},
		"Revoke": func() error {
			return st.Revoke(ctx, artifact.Revocation{Artifact: a.ID, TokenID: token.NewID(), Expires: time.Now().Add(time.Hour)})
		},
		"Revocations": func() error {
			return st.Revocations(ctx, "", "", time.Now(), func(artifact.Revocation) error { return nil })
		},
		"SweepRevocations": func() error {
			_, err := st.SweepRevocations(ctx, time.Now())
			return err
		},
		"DeleteRevocations": func() error { return st.DeleteRevocations(ctx, "", a.ID) },
		"Put small": func() error {
			_, err := st.Put(ctx, artifact.Artifact{ID: artifact.NewID()}, bytes.NewReader(small))
			return err
		},
		"Put multipart": func() error {
			_, err := st.Put(ctx, artifact.Artifact{ID: artifact.NewID()}, bytes.NewReader(large))
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantUnavailable(t, name, within(t, bound, name, call))
		})
	}
}

// An upload whose body the service stops taking is cut after IdleTimeout
// without progress: with Timeout at 30 s, nothing else could end it within
// the bound.
func TestUploadStall(t *testing.T) {
	st, p := proxied(t, func(o *s3store.Options) {
		o.IdleTimeout = time.Second
		o.Timeout = 30 * time.Second
		o.PartSize = 32 << 20
	})
	// One PUT (the part size is larger) of 20 MiB: far more than loopback
	// socket buffers hold.
	data := randomBytes(20 << 20)
	p.Set(miniotest.Hang)
	err := within(t, 10*time.Second, "Put", func() error {
		_, err := st.Put(t.Context(), artifact.Artifact{ID: artifact.NewID()}, bytes.NewReader(data))
		return err
	})
	wantUnavailable(t, "Put", err)
}

// A download whose body stops in the middle fails with ErrUnavailable
// after IdleTimeout; one that keeps moving, however slowly, or whose reader
// pauses longer than IdleTimeout between reads, completes.
func TestBodyIdleTimeout(t *testing.T) {
	const idle = time.Second
	st, p := proxied(t, func(o *s3store.Options) { o.IdleTimeout = idle })
	data := randomBytes(3 << 20)
	a := put(t, st, artifact.Artifact{MimeType: "application/octet-stream"}, data)

	t.Run("stalled", func(t *testing.T) {
		p.StallAfter = 64 << 10
		p.Set(miniotest.StallBody)
		defer p.Set(miniotest.Pass)
		rc, err := st.Open(t.Context(), a.ID, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		var n int64
		err = within(t, idle+3*time.Second, "reading a stalled body", func() error {
			var err error
			n, err = io.Copy(io.Discard, rc)
			return err
		})
		wantUnavailable(t, "read", err)
		if n < 64<<10 || n >= int64(len(data)) {
			t.Errorf("read %d bytes before the stall, want at least 64 KiB and less than all", n)
		}
	})

	t.Run("slow but moving", func(t *testing.T) {
		p.SlowRate = 1 << 20 // 3 MiB in about 3 s: three times the idle timeout
		p.Set(miniotest.Slow)
		defer p.Set(miniotest.Pass)
		rc, err := st.Open(t.Context(), a.ID, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		start := time.Now()
		got, err := io.ReadAll(rc)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("slow download: %d bytes, %v", len(got), err)
		}
		if d := time.Since(start); d < 2*idle {
			t.Logf("slow download took only %v; the proxy was faster than asked", d)
		}
	})

	t.Run("slow reader", func(t *testing.T) {
		rc, err := st.Open(t.Context(), a.ID, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		buf := make([]byte, 1<<20)
		var got []byte
		for i := 0; ; i++ {
			n, err := rc.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("after %d bytes: %v", len(got), err)
			}
			if i < 2 {
				time.Sleep(idle + 500*time.Millisecond) // the consumer is slow, not the store
			}
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("slow reader got %d bytes", len(got))
		}
	})
}
