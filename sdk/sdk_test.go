package sdk_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/sdk"
	"github.com/spillway-dev/spillway/sdk/internal/servetest"
)

func client(t *testing.T) *sdk.Client {
	return &sdk.Client{BaseURL: servetest.Start(t), Token: servetest.Token}
}

func TestUploadFetchMintDelete(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	data := make([]byte, 5<<20)
	rand.Read(data)
	sum := sha256.Sum256(data)
	var sent atomic.Int64
	l, err := c.Upload(ctx, bytes.NewReader(data), sdk.UploadOptions{Name: "d.bin", TTL: 10 * time.Minute,
		Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Progress: func(n int64) { sent.Store(n) }})
	if err != nil {
		t.Fatal(err)
	}
	if l.SHA256 != hex.EncodeToString(sum[:]) || l.Size != int64(len(data)) || l.HTTPURL == "" || l.ExpiresAt.IsZero() {
		t.Fatalf("link %+v", l)
	}
	if sent.Load() != int64(len(data)) {
		t.Errorf("progress reported %d of %d bytes", sent.Load(), len(data))
	}
	var got bytes.Buffer
	var last int64
	n, err := c.Fetch(ctx, l.HTTPURL, &got, sdk.FetchOptions{SHA256: l.SHA256, ExpiresAt: l.ExpiresAt, Progress: func(d, _ int64) { last = d }})
	if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) || last != n {
		t.Fatalf("fetch: %d bytes, %v", n, err)
	}

	fresh, err := c.Mint(ctx, l.ID(), time.Minute)
	if err != nil || fresh.HTTPURL == l.HTTPURL {
		t.Fatalf("mint: %+v %v", fresh, err)
	}
	if _, err := c.FetchBytes(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if _, err := sdk.Fetch(ctx, nil, l.HTTPURL, io.Discard, sdk.FetchOptions{SHA256: strings.Repeat("0", 64)}); !errors.Is(err, sdk.ErrIntegrity) {
		t.Errorf("wrong checksum: %v", err)
	}
	if _, err := sdk.Fetch(ctx, nil, l.HTTPURL, io.Discard, sdk.FetchOptions{ExpiresAt: time.Now().Add(-time.Second)}); !errors.Is(err, sdk.ErrExpired) {
		t.Errorf("expired link: %v", err)
	}
	tampered := l.HTTPURL[:len(l.HTTPURL)-1] + "A"
	if l.HTTPURL[len(l.HTTPURL)-1] == 'A' {
		tampered = l.HTTPURL[:len(l.HTTPURL)-1] + "B"
	}
	_, err = sdk.Fetch(ctx, nil, tampered, io.Discard, sdk.FetchOptions{})
	var se *sdk.Error
	if !errors.Is(err, sdk.ErrDenied) || !errors.As(err, &se) || se.Code != "forbidden" {
		t.Errorf("tampered link: %v", err)
	}
	if err := c.Delete(ctx, l.ID()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FetchBytes(ctx, fresh); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	bad := &sdk.Client{BaseURL: c.BaseURL, Token: "nope"}
	if _, err := bad.Upload(ctx, strings.NewReader("x"), sdk.UploadOptions{}); !errors.Is(err, sdk.ErrUnauthenticated) {
		t.Errorf("bad token: %v", err)
	}
}

// cutter is a loopback TCP proxy that cuts its first connections after
// `after` bytes of the response.
func cutter(t *testing.T, target string, after int64, cuts int32) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				if n.Add(1) <= cuts {
					io.CopyN(c, up, after) // then both close: a cut mid-body
					return
				}
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestFetchResumes(t *testing.T) {
	c := client(t)
	data := make([]byte, 16<<20)
	rand.Read(data)
	l, err := c.Upload(context.Background(), bytes.NewReader(data), sdk.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(c.BaseURL, "http://")
	via := cutter(t, host, 6<<20, 2)
	var got bytes.Buffer
	n, err := sdk.Fetch(context.Background(), nil, strings.Replace(l.HTTPURL, host, via, 1), &got, sdk.FetchOptions{SHA256: l.SHA256})
	if err != nil || n != int64(len(data)) || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("resumed fetch: %d bytes, %v", n, err)
	}
}

// The SDK is for everyone: it must not pull the server's dependencies.
func TestNoServerDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/spillway-dev/spillway/sdk").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"minio", "open-policy-agent", "gorilla", "spillway/artifact", "spillway/policy"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("sdk depends on %s", bad)
		}
	}
}
