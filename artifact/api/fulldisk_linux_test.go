package api

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/artifact/identity"
)

const fullDiskEnv = "SPILLWAY_TEST_FULL_DISK_DIR"

// Finding 10: a full disk answered 503 "unavailable". The test re-runs
// itself in a user and mount namespace of its own, where it may mount a
// real 1 MiB tmpfs, and uploads 2 MiB to a local store on it.
func TestUploadToFullDisk(t *testing.T) {
	dir := os.Getenv(fullDiskEnv)
	if dir == "" {
		dir = t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestUploadToFullDisk$", "-test.v")
		cmd.Env = append(os.Environ(), fullDiskEnv+"="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			t.Fatalf("in the namespace: %v\n%s", err, out)
		case err != nil:
			t.Skipf("this kernel gives no user namespace to mount a small file system in: %v", err)
		case !bytes.Contains(out, []byte("--- PASS: TestUploadToFullDisk")):
			t.Fatalf("the run in the namespace did not pass:\n%s", out)
		}
		return
	}
	// Inside the namespace: nothing mounted here reaches the host.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		t.Fatalf("make mounts private: %v", err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	store, err := fsstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	tenants, _ := identity.ParseTenants("alice-token-0123456789=alice")
	f := newStoreFixture(t, store, Options{Tenants: tenants})
	resp, b := call(t, "POST", f.url+"/v1/artifacts", "alice-token-0123456789", bytes.NewReader(make([]byte, 2<<20)),
		map[string]string{"Content-Type": "application/octet-stream"})
	if resp.StatusCode != 507 || errCode(t, b) != "insufficient_storage" {
		t.Fatalf("upload to a full disk = %d %s", resp.StatusCode, b)
	}
	// Nothing half-written stays behind to fill the disk further.
	if resp, b := call(t, "POST", f.url+"/v1/artifacts", "alice-token-0123456789", bytes.NewReader(make([]byte, 100<<10)),
		map[string]string{"Content-Type": "application/octet-stream"}); resp.StatusCode != 201 {
		t.Fatalf("small upload after the full one = %d %s", resp.StatusCode, b)
	}
}
