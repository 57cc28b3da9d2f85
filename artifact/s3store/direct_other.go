//go:build !linux

package s3store

import (
	"errors"
	"net"
	"time"
)

// canWatch reports whether silence works on this system. It does not:
// silence needs Linux's TCP_INFO, so here Open always goes through
// minio-go (and the fetch endpoint could not splice anyway).
const canWatch = false

func silence(*net.TCPConn) (time.Duration, error) {
	return 0, errors.ErrUnsupported
}
