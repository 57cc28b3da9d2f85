package resumable

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// params are a stream method's parameters, as a client sent them.
type params struct {
	StreamID    string
	LastEventID uint64
	HasLast     bool
}

// parseParams reads the params of stream/poll, stream/resume (streamId,
// and lastEventId on resume) and stream/poll/all (none needed). A
// malformed one is an error the client is told (invalid params).
func parseParams(method string, raw []byte) (params, error) {
	var p params
	if method == "stream/poll/all" {
		if len(raw) > 0 && !bytes.Equal(raw, []byte("null")) && raw[0] != '{' {
			return p, errors.New("params must be an object")
		}
		return p, nil
	}
	var in struct {
		StreamID    *string         `json:"streamId"`
		LastEventID json.RawMessage `json:"lastEventId"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &in) != nil {
		return p, errors.New("params must be an object with a streamId string")
	}
	if in.StreamID == nil {
		return p, errors.New("params.streamId is required")
	}
	p.StreamID = *in.StreamID
	if method != "stream/resume" || len(in.LastEventID) == 0 || bytes.Equal(in.LastEventID, []byte("null")) {
		return p, nil
	}
	// An SSE id is a string; a number is taken too.
	s := string(in.LastEventID)
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return p, errors.New("params.lastEventId is not an event id of a stream")
	}
	p.LastEventID, p.HasLast = n, true
	return p, nil
}
