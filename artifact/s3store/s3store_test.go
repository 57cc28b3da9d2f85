package s3store_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/lifecycle"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
	"github.com/spillway-dev/spillway/artifact/s3store"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
	"github.com/spillway-dev/spillway/artifact/storetest"
)

func TestMain(m *testing.M) { os.Exit(miniotest.RunShared(m)) }

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) artifact.Store { return miniotest.Shared(t).Store(t) })
}

func TestRevocations(t *testing.T) {
	artifacttest.RunRevocations(t, func(t *testing.T) artifact.Store { return miniotest.Shared(t).Store(t) })
}

func BenchmarkPut(b *testing.B)  { storetest.BenchPut(b, miniotest.Shared(b).Store(b)) }
func BenchmarkOpen(b *testing.B) { storetest.BenchOpen(b, miniotest.Shared(b).Store(b)) }

func put(t *testing.T, s artifact.Store, meta artifact.Artifact, b []byte) artifact.Artifact {
	t.Helper()
	if meta.ID == "" {
		meta.ID = artifact.NewID()
	}
	a, err := s.Put(t.Context(), meta, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestPrefixes checks that stores on one bucket under different prefixes
// (and none) do not see each other's artifacts.
func TestPrefixes(t *testing.T) {
	srv := miniotest.Shared(t)
	o := srv.Options(t)
	root, err := s3store.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	o.Prefix = "a/b" // New adds the slash
	sub, err := s3store.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	past := artifact.Artifact{Expires: time.Now().Add(-time.Hour)}
	ra, sa := put(t, root, past, []byte("root")), put(t, sub, past, []byte("sub"))
	if k := s3store.Key(sub, sa.ID); k != "a/b/"+sa.ID {
		t.Errorf("key under prefix = %q", k)
	}
	if _, err := root.Stat(t.Context(), sa.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("root store sees the prefixed artifact: %v", err)
	}
	if _, err := sub.Stat(t.Context(), ra.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("prefixed store sees the root artifact: %v", err)
	}
	if got := storetest.ListExpired(t, root, time.Now()); !slices.Equal(got, []string{ra.ID}) {
		t.Errorf("root ListExpired = %v, want only %s", got, ra.ID)
	}
	if got := storetest.ListExpired(t, sub, time.Now()); !slices.Equal(got, []string{sa.ID}) {
		t.Errorf("prefixed ListExpired = %v, want only %s", got, sa.ID)
	}
}

// TestObjectLayout looks at what Put wrote: one object, metadata in
// x-amz-meta-*, the SHA-256 also as the object's verified checksum.
func TestObjectLayout(t *testing.T) {
	o := miniotest.Shared(t).Options(t)
	s, err := s3store.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	c, bucket := s3store.Client(s), o.Bucket
	data := []byte("<html>hello</html>")
	a := put(t, s, artifact.Artifact{Name: "page é.html", MimeType: "text/html", Tenant: "t1", Source: "put"}, data)
	info, err := c.StatObject(t.Context(), bucket, a.ID, minio.StatObjectOptions{Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if info.ChecksumSHA256 != base64.StdEncoding.EncodeToString(sum[:]) {
		t.Errorf("object checksum %q, want the SHA-256 %x", info.ChecksumSHA256, sum)
	}
	if info.ContentType != "text/html" || info.Size != int64(len(data)) {
		t.Errorf("object has type %q size %d", info.ContentType, info.Size)
	}
	if got := info.Metadata.Get("X-Amz-Meta-Spillway-Sha256"); got != hex.EncodeToString(sum[:]) {
		t.Errorf("x-amz-meta-spillway-sha256 = %q", got)
	}
	if got := info.Metadata.Get("X-Amz-Meta-Spillway-Name"); got != "page+%C3%A9.html" {
		t.Errorf("x-amz-meta-spillway-name = %q, want percent-encoded", got)
	}

	// Past one part: a multipart upload with a full-object CRC-64/NVME, its
	// pending mark replaced by the final metadata.
	const size = 40 << 20
	crc := minio.ChecksumCRC64NVME.Hasher()
	if _, err := io.Copy(crc, &storetest.Gen{Seed: 8, Size: size}); err != nil {
		t.Fatal(err)
	}
	big, err := s.Put(t.Context(), artifact.Artifact{ID: artifact.NewID(), MimeType: "application/x-big"}, &storetest.Gen{Seed: 8, Size: size})
	if err != nil {
		t.Fatal(err)
	}
	info, err = c.StatObject(t.Context(), bucket, big.ID, minio.StatObjectOptions{Checksum: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := base64.StdEncoding.EncodeToString(crc.Sum(nil)); info.ChecksumCRC64NVME != want || info.ChecksumMode != "FULL_OBJECT" {
		t.Errorf("multipart object checksum %q (%s), want full-object CRC-64/NVME %q", info.ChecksumCRC64NVME, info.ChecksumMode, want)
	}
	if info.Metadata.Get("X-Amz-Meta-Spillway-Pending") != "" || info.Metadata.Get("X-Amz-Meta-Spillway-Sha256") != big.SHA256 ||
		info.ContentType != "application/x-big" || info.Size != size {
		t.Errorf("multipart object: type %q size %d metadata %v", info.ContentType, info.Size, info.Metadata)
	}
}

// TestForeignAndPending plants objects under artifact ids that are not
// complete artifacts: one without our metadata, one still pending.
func TestForeignAndPending(t *testing.T) {
	srv := miniotest.Shared(t)
	o := srv.Options(t)
	s, err := s3store.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	c := s3store.Client(s)
	foreign, pending := artifact.NewID(), artifact.NewID()
	for id, md := range map[string]map[string]string{
		foreign: nil,
		pending: {"Spillway-Pending": "1", "Spillway-Expires": "2000-01-01T00:00:00Z"},
	} {
		if _, err := c.PutObject(t.Context(), o.Bucket, id, strings.NewReader("x"), 1, minio.PutObjectOptions{UserMetadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{foreign, pending} {
		if _, err := s.Stat(t.Context(), id); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("Stat(%s) = %v, want ErrNotFound", id, err)
		}
		if _, err := s.Open(t.Context(), id, 0, -1); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("Open(%s) = %v, want ErrNotFound", id, err)
		}
	}
	if got := storetest.ListExpired(t, s, time.Now()); len(got) != 0 {
		t.Errorf("ListExpired(now) = %v: a fresh pending object or a foreign one was listed", got)
	}
	later := time.Now().Add(s3store.PendingMaxAge + time.Minute)
	if got := storetest.ListExpired(t, s, later); !slices.Equal(got, []string{pending}) {
		t.Errorf("ListExpired(a day later) = %v, want the stale pending object %s", got, pending)
	}
	// The id is taken while pending.
	if _, err := s.Put(t.Context(), artifact.Artifact{ID: pending}, strings.NewReader("y")); !errors.Is(err, artifact.ErrExists) {
		t.Errorf("Put over a pending object: %v, want ErrExists", err)
	}
}

// TestNoLeftovers checks that failed multipart Puts abort their uploads.
func TestNoLeftovers(t *testing.T) {
	srv := miniotest.Shared(t)
	o := srv.Options(t)
	s, err := s3store.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	g := &storetest.Gen{Seed: 1, Size: 40 << 20}
	meta := artifact.Artifact{ID: artifact.NewID(), SHA256: strings.Repeat("0", 64)}
	if _, err := s.Put(t.Context(), meta, g); !errors.Is(err, artifact.ErrIntegrity) {
		t.Fatalf("Put: %v, want ErrIntegrity", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r := io.MultiReader(io.LimitReader(&storetest.Gen{Size: 40 << 20}, 20<<20), readerFunc(func([]byte) (int, error) {
		cancel()
		return 0, nil
	}), &storetest.Gen{Size: 1 << 20})
	if _, err := s.Put(ctx, artifact.Artifact{ID: artifact.NewID()}, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put: %v, want context.Canceled", err)
	}
	c := s3store.Client(s)
	for u := range c.ListIncompleteUploads(t.Context(), o.Bucket, "", true) {
		t.Errorf("incomplete upload left: %+v", u)
	}
	for obj := range c.ListObjects(t.Context(), o.Bucket, minio.ListObjectsOptions{Recursive: true}) {
		t.Errorf("object left: %+v", obj)
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// TestBoundedMemory streams 100 MiB of undeclared size and checks that the
// store allocated a bounded amount, not the object.
func TestBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 100 MiB")
	}
	s := miniotest.Shared(t).Store(t)
	const size = 100 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	a, err := s.Put(t.Context(), artifact.Artifact{ID: artifact.NewID()}, &storetest.Gen{Seed: 5, Size: size})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("Put of %d MiB allocated %d MiB in all", a.Size>>20, alloc>>20)
	// One 5 MiB part buffer grown by doubling (about 10 MiB), and what the
	// client allocates per request. With 16 MiB parts it was over 32 MiB,
	// and 24 uploads at once took 529 MiB.
	if alloc > 20<<20 {
		t.Errorf("Put of %d MiB allocated %d MiB", size>>20, alloc>>20)
	}
}

func TestPresign(t *testing.T) {
	s := miniotest.Shared(t).Store(t)
	data := []byte("<svg onload=alert(1)></svg>")
	a := put(t, s, artifact.Artifact{MimeType: "image/svg+xml"}, data)
	var _ artifact.Presigner = s
	u, err := s.PresignGet(t.Context(), a.ID, time.Minute, "text/plain; charset=utf-8", `attachment; filename="x.svg"`)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET presigned: %s, %q", resp.Status, body)
	}
	for k, want := range map[string]string{
		"Content-Type":        "text/plain; charset=utf-8",
		"Content-Disposition": `attachment; filename="x.svg"`,
		"Cache-Control":       "private, no-store",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	// Any change to the signed URL is refused.
	q := u.Query()
	q.Set("response-content-type", "text/html")
	tampered := *u
	tampered.RawQuery = q.Encode()
	if resp, err := http.Get(tampered.String()); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("tampered presigned URL: %v, %v; want 403", resp.Status, err)
	} else {
		resp.Body.Close()
	}

	if _, err := s.PresignGet(t.Context(), "../x", time.Minute, "", ""); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("PresignGet(bad id) = %v, want ErrNotFound", err)
	}
	for _, ttl := range []time.Duration{0, time.Millisecond, 8 * 24 * time.Hour} {
		if _, err := s.PresignGet(t.Context(), a.ID, ttl, "", ""); !errors.Is(err, artifact.ErrInvalid) {
			t.Errorf("PresignGet(ttl %v) = %v, want ErrInvalid", ttl, err)
		}
	}
	short, err := s.PresignGet(t.Context(), a.ID, time.Second, "", "")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond)
	if resp, err := http.Get(short.String()); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("expired presigned URL: %v, %v; want 403", resp.Status, err)
	} else {
		resp.Body.Close()
	}
}

func TestLifecycle(t *testing.T) {
	srv := miniotest.Shared(t)
	o := srv.Options(t)
	o.Prefix = "spill/"
	o.LifecycleDays = 3
	s, err := s3store.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	c := s3store.Client(s)
	// Someone else's rule must survive ours.
	cfg, err := c.GetBucketLifecycle(t.Context(), o.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Rules = append(cfg.Rules, lifecycle.Rule{ID: "other", Status: "Enabled",
		RuleFilter: lifecycle.Filter{Prefix: "logs/"}, Expiration: lifecycle.Expiration{Days: 30}})
	if err := c.SetBucketLifecycle(t.Context(), o.Bucket, cfg); err != nil {
		t.Fatal(err)
	}
	o.LifecycleDays = 5
	if _, err := s3store.New(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	cfg, err = c.GetBucketLifecycle(t.Context(), o.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]lifecycle.Rule{}
	for _, r := range cfg.Rules {
		rules[r.ID] = r
	}
	ours, ok := rules[s3store.LifecycleRuleID("spill/")]
	if len(rules) != 2 || !ok || rules["other"].Expiration.Days != 30 {
		t.Fatalf("rules = %+v, want ours and other", cfg.Rules)
	}
	// MinIO drops AbortIncompleteMultipartUpload (it expires stale uploads
	// itself); other services keep it.
	if ours.Expiration.Days != 5 || ours.RuleFilter.Prefix != "spill/" || ours.Status != "Enabled" {
		t.Errorf("our rule = %+v", ours)
	}
}

func TestNewErrors(t *testing.T) {
	srv := miniotest.Shared(t)
	o := srv.Options(t)
	o.CreateBucket = false
	if _, err := s3store.New(t.Context(), o); !misconfigured(err) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("New on a missing bucket: %v, want ErrMisconfigured", err)
	}
	for name, edit := range map[string]func(*s3store.Options){
		"a wrong secret":           func(o *s3store.Options) { o.SecretKey = "wrong-secret-key" },
		"an unknown access key":    func(o *s3store.Options) { o.AccessKey = "nobody" },
		"anonymous (AccessDenied)": func(o *s3store.Options) { o.AccessKey, o.SecretKey = "", "" },
	} {
		o = srv.Options(t)
		edit(&o)
		if _, err := s3store.New(t.Context(), o); !misconfigured(err) {
			t.Errorf("New with %s: %v, want ErrMisconfigured", name, err)
		}
	}
	for _, edit := range []func(*s3store.Options){
		func(o *s3store.Options) { o.PartSize = 1 << 20 },
		func(o *s3store.Options) { o.PartSize = 6 << 30 },
		func(o *s3store.Options) { o.Bucket = "A_" },
		func(o *s3store.Options) { o.Endpoint = "" },
		func(o *s3store.Options) { o.Endpoint = "http://" + o.Endpoint },
		func(o *s3store.Options) { o.Prefix = "../x" },
		func(o *s3store.Options) { o.LifecycleDays = -1 },
	} {
		o := srv.Options(t)
		edit(&o)
		if _, err := s3store.New(t.Context(), o); !errors.Is(err, artifact.ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", o, err)
		}
	}
	// Nothing listening.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o = srv.Options(t)
	o.Endpoint = l.Addr().String()
	l.Close()
	start := time.Now()
	if _, err := s3store.New(t.Context(), o); !errors.Is(err, artifact.ErrUnavailable) {
		t.Errorf("New with nothing listening: %v, want ErrUnavailable", err)
	}
	t.Logf("New failed after %v with nothing listening", time.Since(start).Round(time.Millisecond))
}

// TestUnavailable stops MinIO under a store: every method reports
// ErrUnavailable, promptly.
func TestUnavailable(t *testing.T) {
	srv := miniotest.Start(t)
	s := srv.Store(t)
	a := put(t, s, artifact.Artifact{}, []byte("x"))
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, f := range map[string]func() error{
		"Stat": func() error { _, err := s.Stat(ctx, a.ID); return err },
		"Open": func() error { _, err := s.Open(ctx, a.ID, 0, -1); return err },
		"Put": func() error {
			_, err := s.Put(ctx, artifact.Artifact{ID: artifact.NewID()}, strings.NewReader("y"))
			return err
		},
		"Delete":      func() error { return s.Delete(ctx, a.ID) },
		"Ping":        func() error { return s.Ping(ctx) },
		"ListExpired": func() error { return s.ListExpired(ctx, time.Now(), func(string) error { return nil }) },
	} {
		start := time.Now()
		err := f()
		d := time.Since(start)
		if !errors.Is(err, artifact.ErrUnavailable) {
			t.Errorf("%s with MinIO stopped: %v, want ErrUnavailable", name, err)
		}
		if d > 15*time.Second {
			t.Errorf("%s took %v to fail", name, d)
		}
		t.Logf("%s failed after %v", name, d.Round(time.Millisecond))
	}
}

// misconfigured reports err is ErrMisconfigured and not ErrUnavailable:
// a configuration error, not a passing one.
func misconfigured(err error) bool {
	return errors.Is(err, artifact.ErrMisconfigured) && !errors.Is(err, artifact.ErrUnavailable)
}

// A bucket that goes away under a running store is a configuration error
// on every call, answered 500 store_misconfigured without Retry-After, not
// 503 "unavailable, retry shortly"; Ping's error (what /readyz shows) names it.
func TestMisconfiguredStore(t *testing.T) {
	srv := miniotest.Shared(t)
	st := srv.Store(t)
	svc, _ := artifacttest.Serve(t, st, artifacttest.Options{})
	a, l, err := svc.Publish(t.Context(), artifact.Artifact{MimeType: "text/plain"}, strings.NewReader("x"), artifact.LinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := s3store.Client(st)
	if err := c.RemoveBucketWithOptions(t.Context(), s3store.Bucket(st), minio.RemoveBucketOptions{ForceDelete: true}); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"Ping": func() error { return st.Ping(ctx) },
		"Stat": func() error { _, err := st.Stat(ctx, a.ID); return err },
		"Put": func() error {
			_, err := st.Put(ctx, artifact.Artifact{ID: artifact.NewID()}, strings.NewReader("y"))
			return err
		},
		"Revocations": func() error {
			return st.Revocations(ctx, "", a.ID, time.Now(), func(artifact.Revocation) error { return nil })
		},
	} {
		err := call()
		if !misconfigured(err) {
			t.Errorf("%s on a removed bucket: %v, want ErrMisconfigured", name, err)
		}
		if name == "Ping" && !strings.Contains(err.Error(), "misconfigured") {
			t.Errorf("Ping's error does not name the cause: %v", err)
		}
	}
	resp, err := http.Get(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || resp.Header.Get("Retry-After") != "" || !strings.Contains(string(body), `"store_misconfigured"`) {
		t.Errorf("fetch on a removed bucket = %d %v %s, want 500 store_misconfigured without Retry-After", resp.StatusCode, resp.Header, body)
	}
}
