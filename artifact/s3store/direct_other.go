//go:build !linux

package s3store

import (
	"errors"
	"net"
	"time"
)

// canWatch: silence needs Linux's TCP_INFO; elsewhere Open always goes
// through minio-go (and the fetch endpoint could not splice anyway).
const canWatch = false

func silence(*net.TCPConn) (time.Duration, error) {
	return 0, errors.ErrUnsupported
}
