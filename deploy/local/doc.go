// Package local holds no code: it is the home of minio.sh, which builds the
// pinned MinIO for the tests and runs it on loopback for development, and of
// the test that runs the script for real.
package local
