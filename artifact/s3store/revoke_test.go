package s3store_test

import (
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/s3store"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
)

// Recording a revocation already recorded (two replicas revoking one link
// at once, or a retry) writes nothing: in a versioned bucket the record
// keeps its one version.
func TestRevokeRecordedWritesNothing(t *testing.T) {
	st := miniotest.Shared(t).Store(t)
	c, bucket := s3store.Client(st), s3store.Bucket(st)
	if err := c.EnableVersioning(t.Context(), bucket); err != nil {
		t.Skipf("versioning: %v", err)
	}
	r := artifact.Revocation{Tenant: "acme", Artifact: strings.Repeat("a", 32), TokenID: "tok", Expires: time.Now().Add(time.Hour).Truncate(time.Second)}
	for range 3 {
		if err := st.Revoke(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	versions := 0
	for obj := range c.ListObjects(t.Context(), bucket, minio.ListObjectsOptions{Recursive: true, WithVersions: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if strings.Contains(obj.Key, "revoked/") {
			versions++
		}
	}
	if versions != 1 {
		t.Errorf("three revokes of one record left %d versions of it, want 1", versions)
	}
}
