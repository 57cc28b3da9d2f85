//go:build !linux

package child

import "os"

// growPipe leaves pipes as they are outside Linux.
func growPipe(*os.File) bool { return false }

func shrunk() {}
