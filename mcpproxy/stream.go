package mcpproxy

import "github.com/spillway-dev/spillway/mcpproxy/internal/owned"

// How resources/stream (draft SEP-2532) delivers an artifact
// (Options.StreamMode); package owned serves it.
const (
	StreamDirect   = owned.StreamDirect   // the POST's response is the bytes
	StreamRedirect = owned.StreamRedirect // 302 to a storage URL presigned for seconds (S3 stores)
	StreamDownload = owned.StreamDownload // a JSON result with a short-lived downloadUrl
)
