package token

// CreateSecretFile makes path hold b with mode 0600, complete and synced,
// or fails wrapping fs.ErrExist when path exists (of two processes
// creating it at once, one wins and the other reads what it wrote).
func CreateSecretFile(path string, b []byte) error { return createFile(path, b) }
