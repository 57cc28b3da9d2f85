package miniotest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
)

func TestStart(t *testing.T) {
	srv := miniotest.Start(t)
	health := "http://" + srv.Endpoint + "/minio/health/live"
	resp, err := http.Get(health)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("health: %s", resp.Status)
	}
	if srv.Startup <= 0 || srv.Startup > 30*time.Second {
		t.Errorf("Startup = %v", srv.Startup)
	}
	a, b := srv.Options(t), srv.Options(t)
	if a.Bucket == b.Bucket || a.Endpoint != srv.Endpoint || a.AccessKey != srv.AccessKey {
		t.Errorf("Options: %+v and %+v", a, b)
	}
	if err := srv.Store(t).Ping(t.Context()); err != nil {
		t.Fatalf("Ping: %v", err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if resp, err := http.Get(health); err == nil {
		resp.Body.Close()
		t.Errorf("MinIO still answers after Stop: %s", resp.Status)
	}
}

// TestTwo runs two servers side by side: each gets its own port and
// credentials.
func TestTwo(t *testing.T) {
	a, b := miniotest.Start(t), miniotest.Start(t)
	if a.Endpoint == b.Endpoint || a.SecretKey == b.SecretKey {
		t.Errorf("two servers share %s / credentials", a.Endpoint)
	}
}
