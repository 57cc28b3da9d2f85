package s3store

import "github.com/minio/minio-go/v7"

// Hooks for the external tests, which cannot be internal: they import
// miniotest, which imports this package.

// Client returns the store's minio-go client, to look at what it wrote.
func Client(s *Store) *minio.Client { return s.c }

// Key returns the object key of id.
func Key(s *Store, id string) string { return s.key(id) }

// ParseURLEnv is ParseURL with the environment given.
var ParseURLEnv = parseURL

const PendingMaxAge = pendingMaxAge

// Bucket returns the store's bucket.
func Bucket(s *Store) string { return s.bucket }
