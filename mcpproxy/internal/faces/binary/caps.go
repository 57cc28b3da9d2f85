// Package binary is the binary transfer extension (rfc-binary-transfer.md):
// for a client that declared binaryTransfer.supported, the binary content
// items Spillway would send base64 (tools/call image and audio data, an
// embedded resource's blob, resources/read blobs, and the originals of
// the images and audio the offloader stored) travel as raw bytes instead:
// each item becomes transferMode "binary" with a binaryRef {streamId,
// size, checksum}, and its bytes follow the JSON-RPC message, as
// multipart/mixed parts on HTTP (Handler) or as frames after the line on
// stdio (Client).
//
// The extension is opt-in both ways: a client that declares nothing gets
// the face's bytes exactly (the wrappers hand its requests and messages
// on untouched), and Spillway declares binaryTransfer to the clients that
// declared theirs alone (Declare).
//
// Bytes stream: from the artifact store, or from the spill file where a
// long base64 string waits (spill.String.Base64 decodes as it reads); no
// part is ever held whole. The checksum (SHA-256 hex) is in the JSON
// message, which precedes the bytes: the store knows an artifact's; a
// string's is computed by a first streaming pass over its spill file
// (decoding, hashing, counting, holding nothing), and the second pass
// sends it.
package binary

import (
	"encoding/json"
	"strconv"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Transfer modes a client may prefer, and the ones Spillway serves:
// stream on stdio, multipart on HTTP. websocket-binary is not served:
// MCP has no WebSocket transport.
const (
	ModeStream    = "stream"
	ModeMultipart = "multipart"
)

// DefaultMaxSize is Options.MaxSize when none is given: the largest item
// Spillway sends as binary (larger ones stay as the face sends them).
const DefaultMaxSize = 1 << 30

// Capability is the name of the capability, client's and server's.
const Capability = "binaryTransfer"

// maxCaps bounds the capability object read (a few dozen bytes).
const maxCaps = 4 << 10

// ClientCaps is what a client declared of binaryTransfer.
type ClientCaps struct {
	// Mode is its preferredMode: ModeStream, ModeMultipart, another
	// string, or "" for none.
	Mode string
	// Max is its maxBinarySize; 0: no limit of its own.
	Max int64
}

// ParseClient reads binaryTransfer from a client's capabilities object;
// ok is false unless it declares supported: true. A maxBinarySize that is
// not a positive integer is no limit; a preferredMode that is not a
// string is none.
func ParseClient(caps []byte) (c ClientCaps, ok bool) {
	bt := jsonrpc.RawMember(caps, Capability)
	if len(bt) == 0 || len(bt) > maxCaps || bt[0] != '{' {
		return c, false
	}
	if string(jsonrpc.RawMember(bt, "supported")) != "true" {
		return c, false
	}
	c.Mode = jsonrpc.StringMember(bt, "preferredMode")
	if n, err := strconv.ParseInt(string(jsonrpc.RawMember(bt, "maxBinarySize")), 10, 64); err == nil && n > 0 {
		c.Max = n
	}
	return c, true
}

// limit is the largest item sent as binary to c under Spillway's max.
func (c ClientCaps) limit(max int64) int64 {
	if c.Max > 0 && c.Max < max {
		return c.Max
	}
	return max
}

// Declare returns the capability Spillway declares to a client that
// declared client (its capabilities object), nil to any other: the
// ownmethods.Options.Declare hook's shape.
func Declare(client []byte, max int64) (string, []byte) {
	if _, ok := ParseClient(client); !ok {
		return Capability, nil
	}
	if max <= 0 {
		max = DefaultMaxSize
	}
	b, _ := json.Marshal(map[string]any{"supported": true, "maxBinarySize": max, "supportedModes": []string{ModeStream, ModeMultipart}})
	return Capability, b
}
