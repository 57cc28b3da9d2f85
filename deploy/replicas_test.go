package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
	"github.com/spillway-dev/spillway/sdk"
)

// metaTTL is the documented bound of a deletion going unseen on another
// replica (artifact.DefaultMetaTTL).
const metaTTL = artifact.DefaultMetaTTL

// Past one machine: two `spillway serve` replicas share one MinIO bucket
// and the signing keys. A link minted by one is fetched from the other,
// and an artifact deleted through one is gone from the other's fetches
// within the metadata cache's bound (2 s by default, artifact.DefaultMetaTTL).
func TestTwoReplicas(t *testing.T) {
	m := miniotest.Start(t)
	bin := filepath.Join(t.TempDir(), "spillway")
	build := exec.Command("go", "build", "-o", bin, "./cmd/spillway")
	build.Dir = root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	keys := "k1:" + base64.StdEncoding.EncodeToString(secret)
	const token = "replica-token-0123456789abcdef"
	store := "s3://shared?endpoint=" + m.Endpoint + "&secure=false&create=true"

	start := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(bin, "serve", "--listen", addr, "--data", t.TempDir(), "--store", store,
			"--signing-keys", keys, "--auth-tokens", token+"=team", "--log-level", "error")
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+m.AccessKey, "AWS_SECRET_ACCESS_KEY="+m.SecretKey)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return "http://" + addr
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %s never ready", addr)
			}
		}
	}
	a, b := start(), start()
	ca := &sdk.Client{BaseURL: a, Token: token}
	cb := &sdk.Client{BaseURL: b, Token: token}
	ctx := context.Background()
	data := make([]byte, 3<<20)
	rand.Read(data)

	link, err := ca.Upload(ctx, bytes.NewReader(data), sdk.UploadOptions{Name: "shared.bin"})
	if err != nil {
		t.Fatal(err)
	}
	onB := strings.Replace(link.HTTPURL, a, b, 1) // the same signed link, the other replica
	var got bytes.Buffer
	if _, err := sdk.Fetch(ctx, nil, onB, &got, sdk.FetchOptions{SHA256: link.SHA256}); err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("fetch from the other replica: %d bytes, %v", got.Len(), err)
	}
	fresh, err := cb.Mint(ctx, link.ID(), time.Minute) // minted by B, for A's upload
	if err != nil {
		t.Fatal(err)
	}
	// B has the artifact's metadata cached now. Delete through A.
	if err := ca.Delete(ctx, link.ID()); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	for {
		_, err := sdk.Fetch(ctx, nil, fresh.HTTPURL, &bytes.Buffer{}, sdk.FetchOptions{})
		if err != nil {
			if !strings.Contains(err.Error(), "404") && !strings.Contains(err.Error(), "410") {
				t.Fatalf("after delete: %v, want 404 or 410", err)
			}
			break
		}
		if time.Since(deleted) > metaTTL+2*time.Second {
			t.Fatalf("replica B still serves a deleted artifact %v after the delete (bound: %v)", time.Since(deleted), metaTTL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("deleted on A, gone on B after %v (bound %v)", time.Since(deleted).Round(time.Millisecond), metaTTL)
}
