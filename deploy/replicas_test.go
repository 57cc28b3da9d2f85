package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
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
	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/sdk"
)

// The documented revocation bounds (artifact/README.md, "Revocation"), each the time
// from the call returning on replica A to replica B refusing the link.
const (
	deleteBound = artifact.DefaultMetaTTL   // metadata cached elsewhere
	revokeBound = artifact.RevocationMaxAge // revocation list read elsewhere
	keyBound    = token.DefaultKeyPoll      // key file re-read everywhere
	margin      = 2 * time.Second           // process scheduling and one store round trip
)

// Past one machine: two `spillway serve` replicas share one MinIO bucket
// and one signing key file, nothing else. A link minted by one is fetched
// from the other; a delete, a revoked link and a retired key made on one
// are refused by both within their documented bounds.
func TestTwoReplicas(t *testing.T) {
	m := miniotest.Start(t)
	bin := filepath.Join(t.TempDir(), "spillway")
	build := exec.Command("go", "build", "-o", bin, "./cmd/spillway")
	build.Dir = root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	shared := t.TempDir() // stands for a secret volume both replicas mount
	keyFile := filepath.Join(shared, "signing.keys")
	k1, k2 := newKey("k1"), newKey("k2")
	writeSecret(t, keyFile, k1+"\n")
	s3secret := filepath.Join(shared, "s3.secret")
	writeSecret(t, s3secret, m.SecretKey+"\n")
	const apiToken = "replica-token-0123456789abcdef"
	store := "s3://shared?endpoint=" + m.Endpoint + "&secure=false&create=true"

	start := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		cmd := exec.Command(bin, "serve", "--listen", addr, "--data", t.TempDir(), "--store", store,
			"--key-file", keyFile, "--store-secret-file", s3secret,
			"--auth-tokens", apiToken+"=team", "--log-level", "error")
		// The secret key comes from its file only.
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID="+m.AccessKey, "AWS_SECRET_ACCESS_KEY=")
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if resp, err := http.Get("http://" + addr + "/healthz"); err == nil {
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
	ca := &sdk.Client{BaseURL: a, Token: apiToken}
	cb := &sdk.Client{BaseURL: b, Token: apiToken}
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
	id := link.ID()

	t.Run("revoke", func(t *testing.T) {
		revoked := mint(t, a, apiToken, id)
		kept := mint(t, a, apiToken, id)
		for _, u := range []string{revoked.HTTPURL, on(revoked.HTTPURL, a, b)} {
			if s := status(t, u); s != 200 {
				t.Fatalf("before revoke: %d", s)
			}
		}
		req, _ := http.NewRequest(http.MethodDelete, a+"/v1/artifacts/"+id+"/links/"+revoked.Meta[artifact.MetaTokenID].(string), nil)
		req.Header.Set("Authorization", "Bearer "+apiToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 204 {
			t.Fatalf("revoke on A: %v %v", resp.Status, err)
		}
		resp.Body.Close()
		done := time.Now()
		if s := status(t, revoked.HTTPURL); s != 403 {
			t.Fatalf("revoked link on A right after: %d, want 403", s)
		}
		refusedWithin(t, "revoked link on B", on(revoked.HTTPURL, a, b), 403, done, revokeBound)
		if s := status(t, on(kept.HTTPURL, a, b)); s != 200 {
			t.Fatalf("another link on B: %d", s)
		}
	})

	t.Run("retire key", func(t *testing.T) {
		old := mint(t, b, apiToken, id) // signed by k1
		// Rotate: k2 signs, k1 still verifies; then retire k1.
		writeSecret(t, keyFile, k2+"\n"+k1+"\n")
		time.Sleep(keyBound + margin)
		fresh := mint(t, a, apiToken, id)
		if !strings.Contains(fresh.HTTPURL, "t=") || status(t, old.HTTPURL) != 200 || status(t, on(fresh.HTTPURL, a, b)) != 200 {
			t.Fatal("rotation broke a link")
		}
		writeSecret(t, keyFile, k2+"\n")
		retired := time.Now()
		refusedWithin(t, "k1 link on B", old.HTTPURL, 403, retired, keyBound)
		refusedWithin(t, "k1 link on A", on(old.HTTPURL, b, a), 403, retired, keyBound)
		if s := status(t, on(fresh.HTTPURL, a, b)); s != 200 {
			t.Fatalf("k2 link after k1 retired: %d", s)
		}
	})

	t.Run("delete", func(t *testing.T) {
		// Small enough for B's blob cache: B then serves it from memory
		// until its cached metadata expires.
		small, err := ca.Upload(ctx, bytes.NewReader(data[:4096]), sdk.UploadOptions{Name: "small.bin"})
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := cb.Mint(ctx, small.ID(), time.Minute) // minted by B, for A's upload
		if err != nil {
			t.Fatal(err)
		}
		if s := status(t, fresh.HTTPURL); s != 200 { // B has metadata and bytes cached now
			t.Fatalf("before delete: %d", s)
		}
		if err := ca.Delete(ctx, small.ID()); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		if s := status(t, on(fresh.HTTPURL, b, a)); s != 404 {
			t.Fatalf("on A right after its delete: %d, want 404", s)
		}
		refusedWithin(t, "deleted artifact on B", fresh.HTTPURL, 404, deleted, deleteBound)
	})
}

func newKey(id string) string {
	secret := make([]byte, 32)
	rand.Read(secret)
	return id + ":" + base64.StdEncoding.EncodeToString(secret)
}

// writeSecret replaces path atomically with mode 0600, as a secret volume does.
func writeSecret(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// on moves a link from one replica's address to the other's.
func on(u, from, to string) string { return strings.Replace(u, from, to, 1) }

func mint(t *testing.T, base, apiToken, id string) artifact.ResourceLink {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/artifacts/"+id+"/links", strings.NewReader(`{"ttl":"5m"}`))
	req.Header.Set("Authorization", "Bearer "+apiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l artifact.ResourceLink
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil || resp.StatusCode != 201 {
		t.Fatalf("mint on %s: %s %v", base, resp.Status, err)
	}
	return l
}

func status(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// refusedWithin polls u until it answers want, failing once bound+margin
// has passed since the change, or on any answer but 200 and want.
func refusedWithin(t *testing.T, what, u string, want int, since time.Time, bound time.Duration) {
	t.Helper()
	lastServed := time.Duration(-1)
	for {
		sent := time.Since(since)
		s := status(t, u)
		if s == want {
			served := "never served"
			if lastServed >= 0 {
				served = "last served " + lastServed.Round(time.Millisecond).String()
			}
			t.Logf("%s: %s after the change, refused from %v (bound %v)", what, served, time.Since(since).Round(time.Millisecond), bound)
			return
		}
		if s != 200 {
			t.Fatalf("%s: %d, want 200 then %d", what, s, want)
		}
		if lastServed = sent; sent > bound+margin {
			t.Fatalf("%s: still served %v after the change (bound %v)", what, sent, bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
